// Configuration sweeps. The forward and backward passes are independent given the pass barrier, so a point
// (sms, minibatch, fwd dirs, bwd dirs) is the sum of two pass simulations, each computed once and reused;
// pass simulations run in parallel (OpenMP) and are each deterministic, so the table does not depend on the
// thread count.
#include <exception>
#include <fstream>
#include <map>

#include <omp.h>

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
  for (int mb : space.minibatches) {
    RunConfig c = base;
    c.minibatch = mb;
    validate_run(topo, spec, c);
    for (int sms : space.comm_sms) {  // every bad value is an error here, before the parallel loop
      c.comm_sms_forward = c.comm_sms_backward = sms;
      validate_run(topo, spec, c);
    }
    traffic.emplace(mb, traffic_uniform(spec, base.ranks, base.tokens_per_rank, c.minibatch_tokens(), routing_seed));
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

}  // namespace calico::sim
