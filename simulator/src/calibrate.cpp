// Calibration (DESIGN 4): the H200 microbenchmarks are re-run as scenarios on the same network model (one
// flow per copy kernel, the NCCL model for all_to_all, the signal path for the flag ping-pong), then the free
// parameters are fitted by a deterministic pattern search on log-parameters.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "calico/error.h"
#include "calico/json_fields.h"
#include "network.h"

namespace calico::sim {

namespace {

constexpr double kCopyBytes = 1073741824.0;  // the probe copies 1 GiB per kernel (p2p_bandwidth.cu)

// Runs flows to completion on a 2-GPU network and returns the last completion time (ps).
Time run_flows(const Topology& topo, std::vector<FlowSpec> flows) {
  Network net(2, topo.link_bytes_per_ps(), topo.reverse_overhead);
  for (auto& f : flows) net.add(std::move(f), 0);
  Time end = 0;
  for (Time t = net.next_completion(); t != kNever; t = net.next_completion()) {
    net.advance(t);
    end = t;
  }
  return end;
}

FlowSpec copy_flow(const Topology& topo, int driver, bool pull, double sms) {
  std::vector<double> w(2, 0.0);
  w[1 - driver] = 1.0;
  return FlowSpec{driver, pull, kCopyBytes, pull ? pull_cap(topo, sms) : push_cap(topo, sms, 1.0), w};
}

double gbps(double bytes, Time ps) { return bytes / double(ps) * 1e3; }

struct Free {
  const char* name;
  double Topology::*field;
  double lo, hi;
};
// The 2-GPU LSU probes (data/calibration/h200x2.json).
constexpr Free kFreeProbes[] = {
    {"link_efficiency", &Topology::link_efficiency, 0.3, 1.0},
    {"push_store_gbps_per_sm", &Topology::push_store_gbps_per_sm, 1.0, 2000.0},
    {"remote_mem_latency_ns", &Topology::remote_mem_latency_ns, 1.0, 10000.0},
    {"reverse_overhead", &Topology::reverse_overhead, 1e-4, 0.5},
    {"hop_latency_ns", &Topology::hop_latency_ns, 1.0, 5000.0},
    {"nccl_launch_ns", &Topology::nccl_launch_ns, 100.0, 1e6},
    {"nccl_channel_bytes", &Topology::nccl_channel_bytes, 1024.0, 1e12},
    {"nccl_channel_gbps", &Topology::nccl_channel_gbps, 1.0, 2000.0},
};
// HybridEP's TMA kernels on R GPUs (data/calibration/gb200-hybridep.json): the NVLink-level parameters.
// stage_fixed_ns is not separable from the rates with these points (all move hundreds of MB) and stays fixed.
constexpr Free kFreeHybridEP[] = {
    {"link_efficiency", &Topology::link_efficiency, 0.3, 1.0},
    {"tma_push_gbps_per_sm", &Topology::tma_push_gbps_per_sm, 10.0, 600.0},
    {"tma_pull_bytes_in_flight_per_sm", &Topology::tma_pull_bytes_in_flight_per_sm, 4096.0, 262144.0},
    {"sm_peer_overhead", &Topology::sm_peer_overhead, 1e-5, 1.0},
    {"port_peer_overhead", &Topology::port_peer_overhead, 1e-5, 1.0},
};

constexpr int kHybridTokens = 4096, kHybridHidden = 7168;
constexpr double kHybridRow = 2.0 * kHybridHidden;  // bf16 row, 14336 B

// HybridEP's problem at EP R: 4096 tokens per rank, 8 experts per rank, top-8, uniform routing (one
// minibatch); the dispatch matrix, cached per R (the calibration evaluates it thousands of times).
const Traffic& hybrid_traffic(int R) {
  static std::mutex mu;
  static std::map<int, Traffic> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(R);
  if (it == cache.end()) {
    LayerSpec spec;
    spec.name = "hybridep";
    spec.hidden = kHybridHidden;
    spec.intermediate = 2048;
    spec.experts = 8 * R;
    spec.top_k = 8;
    it = cache.emplace(R, traffic_uniform(spec, R, kHybridTokens, kHybridTokens, 1)).first;
  }
  return it->second;
}

// One HybridEP kernel (MODEL.md "HybridEP scenarios"): every GPU drives one TMA flow with all `sms` SMs;
// dispatch pushes its row of the matrix (per-block counters, receivers wait for every source), combine
// pulls the same rows back (after the owners' ready flags). Returns GB/s as HybridEP reports it: rows
// received per rank including the local share x 14336 B / kernel time.
double hybridep(const Topology& topo, bool combine, int R, double sms) {
  require(R >= 2 && R <= topo.max_gpus, "hybridep scenario: ranks must be in [2, {}], got {}", topo.max_gpus, R);
  const Traffic& tr = hybrid_traffic(R);
  Network net(R, topo.link_bytes_per_ps(), topo.reverse_overhead);
  struct G { Time start, local; int peers; int64_t rows; };
  std::vector<G> gs(R);
  std::vector<FlowSpec> flows(R);
  const double ready = combine ? topo.one_way_signal_ns() + fan_in_ns(topo, R - 1) : 0.0;
  double received = 0;
  for (int g = 0; g < R; ++g) {
    std::vector<double> w(R, 0.0);
    double remote = 0;
    int peers = 0;
    int64_t rows = 0;
    for (int p = 0; p < R; ++p) {
      received += double(tr.dispatch(0, p, g)) / R;
      if (p == g) continue;
      const int64_t n = tr.dispatch(0, g, p);  // dispatch: g -> p; combine: g pulls them back from p
      w[p] = double(n) * kHybridRow;
      remote += w[p];
      rows += n;
      peers += n > 0;
    }
    for (double& x : w) x /= remote;
    const double setup = ready + setup_ns(topo, Engine::tma, peers, sms);
    gs[g] = {static_cast<Time>(std::llround(setup * kPsPerNs)),
             static_cast<Time>(std::llround(2.0 * tr.dispatch(0, g, g) * kHybridRow / (topo.local_copy_gbps * 1e-3))),
             peers, rows};
    flows[g] = FlowSpec{g, combine, remote, engine_cap(topo, Engine::tma, combine, sms, peers, 1.0), std::move(w),
                        port_overhead(topo, peers)};
  }
  std::vector<int> order(R);
  for (int g = 0; g < R; ++g) order[g] = g;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return gs[a].start < gs[b].start; });
  std::vector<Time> done(R, 0);
  std::vector<int> driver;  // flow id -> GPU
  size_t next = 0;
  while (true) {
    const Time tn = net.next_completion();
    const Time ts = next < order.size() ? gs[order[next]].start : kNever;
    if (tn == kNever && ts == kNever) break;
    if (ts <= tn) {
      net.advance(ts);
      const int g = order[next++];
      net.add(std::move(flows[g]), ts);
      driver.push_back(g);
    } else {
      for (int id : net.advance(tn)) done[driver[id]] = tn;
    }
  }
  Time kernel = 0, last = 0;
  const Time tail = combine ? static_cast<Time>(std::llround(topo.pull_rtt_ns() * kPsPerNs)) : 0;
  for (int g = 0; g < R; ++g) {
    const double sig = sender_signal_ns(topo, Engine::tma, Signal::per_block, gs[g].rows, gs[g].peers, sms);
    done[g] = std::max(done[g] + tail, gs[g].start + gs[g].local) + static_cast<Time>(std::llround(sig * kPsPerNs));
    last = std::max(last, done[g]);
  }
  // Dispatch: a receiver is done when every source's counters have arrived; combine: its own pulls are done.
  kernel = combine ? last
                   : last + static_cast<Time>(std::llround(
                                (topo.hops * topo.hop_latency_ns + topo.poll_ns + fan_in_ns(topo, R - 1)) * kPsPerNs));
  return received * kHybridRow / double(kernel) * 1e3;
}

}  // namespace

double simulate_measurement(const Topology& topo, const Measurement& m) {
  if (m.scenario == "push_copy") return gbps(kCopyBytes, run_flows(topo, {copy_flow(topo, 0, false, m.x)}));
  if (m.scenario == "pull_copy") {
    const Time rtt = static_cast<Time>(std::llround(topo.pull_rtt_ns() * kPsPerNs));
    return gbps(kCopyBytes, run_flows(topo, {copy_flow(topo, 1, true, m.x)}) + rtt);
  }
  if (m.scenario == "bidir_push")
    return gbps(kCopyBytes, run_flows(topo, {copy_flow(topo, 0, false, m.x), copy_flow(topo, 1, false, m.x)}));
  if (m.scenario == "flag_round_trip") return 2.0 * topo.one_way_signal_ns() / 1e3;  // ping + pong, in us
  if (m.scenario == "hybridep_dispatch") return hybridep(topo, false, m.ranks, m.x);
  if (m.scenario == "hybridep_combine") return hybridep(topo, true, m.ranks, m.x);
  if (m.scenario == "all_to_all") {
    // x MiB per rank, half to the peer, half to itself; value = bytes over the link per rank per second.
    const int64_t half = static_cast<int64_t>(m.x * 1048576.0 / 2);
    const std::vector<int64_t> rows{half, half, half, half};
    const Time t = nccl_all_to_all(topo, 1.0, 2, rows, 1.0, 0, nullptr, nullptr, nullptr);
    return gbps(double(half), t);
  }
  throw Error(fmt::format(
      "calibration scenario must be push_copy, pull_copy, bidir_push, flag_round_trip, all_to_all, "
      "hybridep_dispatch or hybridep_combine, got '{}'",
      m.scenario));
}

CalibrationData load_calibration(const std::string& name_or_path) {
  std::filesystem::path p = name_or_path;
  if (!std::filesystem::exists(p)) p = std::filesystem::path(data_dir()) / "calibration" / (name_or_path + ".json");
  std::ifstream in(p);
  require(bool(in), "--calibration: no calibration file '{}' (looked for {})", name_or_path, p.string());
  std::stringstream ss;
  ss << in.rdbuf();
  // Checked fields (issue 9): finite numbers in documented ranges, unknown keys an error.
  CalibrationData d;
  const std::string origin = p.string();
  const nlohmann::json j = parse_json_text(ss.str(), origin);
  JsonFields top(j, origin);
  d.topology = top.string("topology");
  top.string("description", "");
  const auto& ms = top.array("measurements");
  top.finish();
  for (size_t i = 0; i < ms.size(); ++i) {
    JsonFields m(ms[i], fmt::format("{}: measurements[{}]", origin, i));
    Measurement c{m.string("scenario"), m.number("x", 0.0, 65536.0, 0.0), m.number("value", 1e-6, 1e9),
                  m.string("unit", ""), m.string("source", ""),
                  static_cast<int>(m.integer("ranks", 1, 1 << 16, 2))};
    m.finish();
    d.measurements.push_back(std::move(c));
  }
  require(!d.measurements.empty(), "{}: calibration file has no measurements", p.string());
  return d;
}

static double objective(const Topology& t, const CalibrationData& d) {
  double s = 0;
  for (const auto& m : d.measurements) {
    // Squares plus an 8th-power term: least squares overall, but the worst scenario is pulled in hard
    // (the acceptance bound is on the worst relative error).
    const double e = simulate_measurement(t, m) / m.value - 1.0, e2 = e * e;
    s += e2 + 1e4 * e2 * e2 * e2 * e2;
  }
  return s;
}

static std::vector<Free> free_parameters(const CalibrationData& d) {
  bool hybrid = false;
  for (const auto& m : d.measurements) hybrid |= m.scenario.rfind("hybridep", 0) == 0;
  if (hybrid) return {std::begin(kFreeHybridEP), std::end(kFreeHybridEP)};
  return {std::begin(kFreeProbes), std::end(kFreeProbes)};
}

CalibrationResult calibrate(const Topology& start, const CalibrationData& data) {
  const std::vector<Free> kFree = free_parameters(data);
  // Sets the free parameters from log-space coordinates, clamped to their ranges.
  auto with = [&](const Topology& base, const std::vector<double>& x) {
    Topology t = base;
    for (size_t i = 0; i < x.size(); ++i) t.*kFree[i].field = std::clamp(std::exp(x[i]), kFree[i].lo, kFree[i].hi);
    return t;
  };
  const size_t n = kFree.size();
  auto f = [&](const std::vector<double>& x) { return objective(with(start, x), data); };
  // Nelder-Mead in log space (deterministic: fixed initial simplex, fixed tie order), restarted from the best
  // vertex until it stops improving, then a coordinate pattern search to polish.
  std::vector<double> best(n);
  for (size_t i = 0; i < n; ++i) best[i] = std::log(start.*kFree[i].field);
  double fbest = f(best);
  for (int restart = 0; restart < 8; ++restart) {
    std::vector<std::vector<double>> s(n + 1, best);
    for (size_t i = 0; i < n; ++i) s[i + 1][i] += 0.3;
    std::vector<double> fs(n + 1);
    for (size_t i = 0; i <= n; ++i) fs[i] = f(s[i]);
    for (int it = 0; it < 400 * int(n); ++it) {
      std::vector<size_t> o(n + 1);
      for (size_t i = 0; i <= n; ++i) o[i] = i;
      std::stable_sort(o.begin(), o.end(), [&](size_t a, size_t b) { return fs[a] < fs[b]; });
      const size_t hi = o[n], lo = o[0];
      if (fs[hi] - fs[lo] < 1e-14) break;
      std::vector<double> c(n, 0.0);
      for (size_t i = 0; i < n; ++i)
        for (size_t k = 0; k < n; ++k) c[k] += s[o[i]][k] / n;
      auto along = [&](double a) {
        std::vector<double> p(n);
        for (size_t k = 0; k < n; ++k) p[k] = c[k] + a * (s[hi][k] - c[k]);
        return p;
      };
      const auto r = along(-1.0);
      const double fr = f(r);
      if (fr < fs[lo]) {
        const auto e = along(-2.0);
        const double fe = f(e);
        if (fe < fr) { s[hi] = e; fs[hi] = fe; } else { s[hi] = r; fs[hi] = fr; }
      } else if (fr < fs[o[n - 1]]) {
        s[hi] = r; fs[hi] = fr;
      } else {
        const auto k = along(0.5);
        const double fk = f(k);
        if (fk < fs[hi]) {
          s[hi] = k; fs[hi] = fk;
        } else {
          for (size_t i = 1; i <= n; ++i) {
            for (size_t d = 0; d < n; ++d) s[o[i]][d] = s[lo][d] + 0.5 * (s[o[i]][d] - s[lo][d]);
            fs[o[i]] = f(s[o[i]]);
          }
        }
      }
    }
    const size_t b = std::min_element(fs.begin(), fs.end()) - fs.begin();
    if (fs[b] >= fbest * (1 - 1e-9)) break;
    best = s[b];
    fbest = fs[b];
  }
  Topology t = with(start, best);
  for (size_t i = 0; i < n; ++i) best[i] = std::log(t.*kFree[i].field);  // the clamped point
  fbest = f(best);
  for (double step = 0.1; step > 1e-6;) {
    bool improved = false;
    for (size_t i = 0; i < n; ++i)
      for (double dir : {1.0, -1.0}) {
        auto trial = best;
        trial[i] += dir * step;
        const double v = f(trial);
        if (v < fbest) { fbest = v; best = trial; improved = true; }
      }
    if (!improved) step /= 2;
  }
  t = with(start, best);
  CalibrationResult r;
  r.fitted = t;
  double ss = 0;
  for (const auto& m : data.measurements) {
    const double p = simulate_measurement(t, m);
    r.predicted.push_back(p);
    const double e = std::abs(p / m.value - 1.0);
    r.max_rel_error = std::max(r.max_rel_error, e);
    ss += e * e;
  }
  r.rms_rel_error = std::sqrt(ss / data.measurements.size());
  for (const auto& f : kFree) {
    r.free_parameters.push_back(f.name);
    r.fitted.sources[f.name] = fmt::format(
        "fitted by `calico calibrate` to data/calibration/{}.json (max error {:.2f}%)", data.topology,
        100 * r.max_rel_error);
  }
  return r;
}

}  // namespace calico::sim
