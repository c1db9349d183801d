// Configuration sweeps. The forward and backward passes are independent given the pass barrier, so a point
// (sms, minibatch, fwd dirs, bwd dirs) is the sum of two pass simulations, each computed once and reused;
// pass simulations run in parallel (OpenMP) and are each deterministic, so the table does not depend on the
// thread count.
#include <array>
#include <cstring>
#include <exception>
#include <fstream>
#include <map>

#include <omp.h>

#include <hdf5.h>

#include "calico/data.h"
#include "calico/error.h"
#include "calico/files.h"
#include "calico/simulator.h"

namespace calico::sim {

std::vector<SweepPoint> run_sweep(const Topology& topo, const LayerSpec& spec, const RunConfig& base,
                                  const SweepSpace& space, uint64_t routing_seed,
                                  const std::function<void(size_t, size_t)>& progress, size_t limit) {
  require(!space.comm_sms.empty() && !space.minibatches.empty() && !space.dispatch_dirs.empty() &&
              !space.combine_dirs.empty(),
          "sweep: every dimension needs at least one value");
  std::vector<SweepPoint> points;
  for (int mb : space.minibatches)
    for (int sms : space.comm_sms)
      for (Direction df : space.dispatch_dirs)
        for (Direction cf : space.combine_dirs)
          for (Direction db : space.dispatch_dirs)
            for (Direction cb : space.combine_dirs) points.push_back({sms, mb, df, cf, db, cb, 0, 0, 0, 0, 0});
  if (limit > 0 && points.size() > limit) points.resize(limit);
  // Distinct pass simulations: (pass, minibatch, sms, dispatch dir, combine dir).
  using Key = std::tuple<int, int, int, int, int>;
  std::map<Key, size_t> index;
  std::vector<Key> keys;
  for (const auto& p : points)
    for (int pass = 0; pass < 2; ++pass) {
      Key k{pass, p.minibatch, p.comm_sms, int(pass ? p.dispatch_bwd : p.dispatch_fwd),
            int(pass ? p.combine_bwd : p.combine_fwd)};
      if (index.emplace(k, keys.size()).second) keys.push_back(k);
    }
  std::map<int, Traffic> traffic;
  const bool uniform = space.routing.empty() || space.routing == "uniform";
  Routing routing;
  if (!uniform) routing = make_routing(spec, base.total_tokens(), RoutingSource::parse(space.routing), routing_seed);
  for (int mb : space.minibatches) {
    RunConfig c = base;
    c.minibatch = mb;
    validate_run(topo, spec, c);
    for (int sms : space.comm_sms) {  // every bad value is an error here, before the parallel loop
      c.comm_sms_forward = c.comm_sms_backward = sms;
      validate_run(topo, spec, c);
    }
    traffic.emplace(mb, uniform ? traffic_uniform(spec, base.ranks, base.tokens_per_rank, c.minibatch_tokens(),
                                                  routing_seed)
                                : traffic_from_routing(spec, routing, base.ranks, base.tokens_per_rank,
                                                       c.minibatch_tokens()));
  }
  std::vector<SimResult> results(keys.size());
  size_t done = 0;
  // No exception may leave an OpenMP region (it would end in std::terminate): the first is kept and rethrown.
  std::exception_ptr first_error;
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t i = 0; i < keys.size(); ++i) {
    const auto [pass, mb, sms, d, c] = keys[i];
    RunConfig cfg = base;
    cfg.minibatch = mb;
    cfg.comm_sms_forward = cfg.comm_sms_backward = sms;
    cfg.dispatch_forward = cfg.dispatch_backward = Direction(d);
    cfg.combine_forward = cfg.combine_backward = Direction(c);
    SimOptions opt;
    opt.set_transfer(space.transfer);
    opt.forward = pass == 0;
    opt.backward = pass == 1;
    try {
      results[i] = simulate(topo, spec, cfg, traffic.at(mb), opt);
    } catch (...) {
#pragma omp critical(calico_sweep_error)
      if (!first_error) first_error = std::current_exception();
    }
#pragma omp critical
    {
      ++done;
      if (progress && omp_get_thread_num() == 0) progress(done, keys.size());
    }
  }
  if (first_error) std::rethrow_exception(first_error);
  if (progress) progress(keys.size(), keys.size());
  for (auto& p : points) {
    const auto& f = results[index.at({0, p.minibatch, p.comm_sms, int(p.dispatch_fwd), int(p.combine_fwd)})];
    const auto& b = results[index.at({1, p.minibatch, p.comm_sms, int(p.dispatch_bwd), int(p.combine_bwd)})];
    p.forward_ps = f.forward_ps;
    p.backward_ps = b.backward_ps;
    p.layer_ps = p.forward_ps + p.backward_ps;
    p.exposed_comm_ps = f.exposed_comm_ps + b.exposed_comm_ps;
    // Utilisation over the whole layer from each pass's own (time-weighted) utilisation.
    p.link_util_mean = (f.link_util_mean * f.layer_ps + b.link_util_mean * b.layer_ps) / double(p.layer_ps);
  }
  return points;
}

void write_sweep_csv(const std::string& path, const std::vector<SweepPoint>& points) {
  TextOutputFile file(path, "--out");  // appears only when complete
  std::ofstream& out = file.stream();
  out << "comm_sms,minibatch,dispatch_fwd,combine_fwd,dispatch_bwd,combine_bwd,layer_us,forward_us,backward_us,"
         "exposed_comm_us,link_util_mean\n";
  for (const auto& p : points)
    out << fmt::format("{},{},{},{},{},{},{:.3f},{:.3f},{:.3f},{:.3f},{:.4f}\n", p.comm_sms, p.minibatch,
                       to_string(p.dispatch_fwd), to_string(p.combine_fwd), to_string(p.dispatch_bwd),
                       to_string(p.combine_bwd), p.layer_ps / 1e6, p.forward_ps / 1e6, p.backward_ps / 1e6,
                       p.exposed_comm_ps / 1e6, p.link_util_mean);
  file.commit();
}

namespace {

// Closes an HDF5 handle at scope exit (H5Fclose / H5Dclose / ...); a negative id is an error from the call.
struct H5Handle {
  hid_t id;
  herr_t (*close)(hid_t);
  H5Handle(hid_t i, herr_t (*c)(hid_t), const char* what, const std::string& path) : id(i), close(c) {
    require(id >= 0, "--hdf5: {} failed for {}", what, path);
  }
  ~H5Handle() {
    if (id >= 0) close(id);
  }
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;
};

template <class T>
void column(hid_t file, const std::string& path, const char* name, hid_t type, const std::vector<T>& v) {
  const hsize_t n = v.size();
  H5Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose, "H5Screate_simple", path);
  H5Handle set(H5Dcreate2(file, name, type, space.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose, name, path);
  require(v.empty() || H5Dwrite(set.id, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0, "--hdf5: writing {} to {}",
          name, path);
}

}  // namespace

void write_sweep_hdf5(const std::string& path, const std::vector<SweepPoint>& points) {
  H5Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose, "H5Fcreate", path);
  std::vector<int32_t> sms, mb;
  std::vector<double> layer, fwd, bwd, exposed, util;
  std::vector<std::array<char, 4>> dir[4];  // "push" / "pull", fixed length 4, no terminator
  auto put = [](std::vector<std::array<char, 4>>& v, Direction d) {
    std::array<char, 4> a{};
    std::memcpy(a.data(), to_string(d), 4);
    v.push_back(a);
  };
  for (const auto& p : points) {
    sms.push_back(p.comm_sms);
    mb.push_back(p.minibatch);
    put(dir[0], p.dispatch_fwd);
    put(dir[1], p.combine_fwd);
    put(dir[2], p.dispatch_bwd);
    put(dir[3], p.combine_bwd);
    // The CSV's values, rounded as the CSV prints them, so both files hold the same table.
    auto r = [](double x, int digits) { return std::stod(fmt::format("{:.{}f}", x, digits)); };
    layer.push_back(r(p.layer_ps / 1e6, 3));
    fwd.push_back(r(p.forward_ps / 1e6, 3));
    bwd.push_back(r(p.backward_ps / 1e6, 3));
    exposed.push_back(r(p.exposed_comm_ps / 1e6, 3));
    util.push_back(r(p.link_util_mean, 4));
  }
  column(file.id, path, "comm_sms", H5T_NATIVE_INT32, sms);
  column(file.id, path, "minibatch", H5T_NATIVE_INT32, mb);
  H5Handle str(H5Tcopy(H5T_C_S1), H5Tclose, "H5Tcopy", path);
  require(H5Tset_size(str.id, 4) >= 0 && H5Tset_strpad(str.id, H5T_STR_NULLPAD) >= 0, "--hdf5: string type for {}", path);
  const char* names[4] = {"dispatch_fwd", "combine_fwd", "dispatch_bwd", "combine_bwd"};
  for (int i = 0; i < 4; ++i) column(file.id, path, names[i], str.id, dir[i]);
  column(file.id, path, "layer_us", H5T_NATIVE_DOUBLE, layer);
  column(file.id, path, "forward_us", H5T_NATIVE_DOUBLE, fwd);
  column(file.id, path, "backward_us", H5T_NATIVE_DOUBLE, bwd);
  column(file.id, path, "exposed_comm_us", H5T_NATIVE_DOUBLE, exposed);
  column(file.id, path, "link_util_mean", H5T_NATIVE_DOUBLE, util);
}

}  // namespace calico::sim
