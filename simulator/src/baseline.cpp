// The non-overlapped reference schedule (the speedup baseline of the design-exploration report): per pass an
// NCCL all_to_all (all GPUs), then the expert GEMMs and SwiGLU on all SMs as separate kernels, then the
// all_to_all back; one minibatch; the network is the same fluid model.
#include <algorithm>
#include <cmath>

#include "calico/error.h"
#include "network.h"
#include "work.h"

namespace calico::sim {

namespace {

Traffic merged(const Traffic& t) {
  Traffic m = t;
  m.minibatches = 1;
  m.minibatch_tokens = t.tokens_per_rank;
  const size_t rr = size_t(t.ranks) * t.ranks;
  m.dispatch_tokens.assign(rr, 0);
  m.combine_rows.assign(rr, 0);
  m.expert_rows.assign(t.experts, 0);
  m.home_tokens.assign(t.ranks, 0);
  for (int mb = 0; mb < t.minibatches; ++mb) {
    for (size_t i = 0; i < rr; ++i) {
      m.dispatch_tokens[i] += t.dispatch_tokens[mb * rr + i];
      m.combine_rows[i] += t.combine_rows[mb * rr + i];
    }
    for (int e = 0; e < t.experts; ++e) m.expert_rows[e] += t.rows(mb, e);
    for (int r = 0; r < t.ranks; ++r) m.home_tokens[r] += t.home_tokens[size_t(mb) * t.ranks + r];
  }
  return m;
}

}  // namespace

// NCCL all_to_all on the fluid network: every GPU pushes its row of `rows` (bytes per row `row`) with an
// effective channel count sqrt(bytes / nccl_channel_bytes) (MODEL.md), after one launch. Returns the end.
Time nccl_all_to_all(const Topology& topo, double link_scale, int ranks, const std::vector<int64_t>& rows, double row,
                     Time t0, std::vector<double>* egress, double* remote_bytes, double* local_bytes) {
  Network net(ranks, topo.link_bytes_per_ps() * link_scale, topo.reverse_overhead);
  const Time start = t0 + static_cast<Time>(std::llround(topo.nccl_launch_ns * kPsPerNs));
  net.advance(start);  // the network clock starts at the launch
  Time end = start;
  for (int g = 0; g < ranks; ++g) {
    std::vector<double> w(ranks, 0.0);
    double remote = 0, local = 0;
    for (int p = 0; p < ranks; ++p) {
      const double b = double(rows[size_t(g) * ranks + p]) * row;
      (p == g ? local : remote) += b;
      if (p != g) w[p] = b;
    }
    if (remote_bytes) *remote_bytes += remote;
    if (local_bytes) *local_bytes += local;
    end = std::max(end, start + static_cast<Time>(std::llround(2.0 * local / (topo.local_copy_gbps * 1e-3))));
    if (remote <= 0) continue;
    for (double& x : w) x /= remote;
    const double channels = std::clamp(std::sqrt(remote / topo.nccl_channel_bytes), 1.0, double(topo.sms));
    net.add(FlowSpec{g, false, remote, push_cap(topo, channels, link_scale, topo.nccl_channel_gbps), std::move(w)}, start);
  }
  for (Time t = net.next_completion(); t != kNever; t = net.next_completion()) {
    net.advance(t);
    end = std::max(end, t);
  }
  if (egress)
    for (int g = 0; g < ranks; ++g) (*egress)[g] += net.egress_bytes(g);
  const Time signal = static_cast<Time>(std::llround(topo.one_way_signal_ns() * kPsPerNs));
  return end + (ranks > 1 ? signal : 0);
}

SimResult simulate_baseline(const Topology& topo, const LayerSpec& spec, const RunConfig& config,
                            const Traffic& traffic, const SimOptions& options) {
  validate_run(topo, spec, config);
  const Traffic tr = merged(traffic);
  const int R = tr.ranks;
  SimResult r;
  std::vector<double> egress(R, 0.0);
  const Time launch = static_cast<Time>(std::llround(topo.kernel_launch_ns * kPsPerNs));
  Time t = 0;
  for (Pass p : {Pass::forward, Pass::backward}) {
    if ((p == Pass::forward && !options.forward) || (p == Pass::backward && !options.backward)) continue;
    const bool fwd = p == Pass::forward;
    const Time t0 = t;
    const double drow = fwd ? row_bytes(spec.dtype, spec.hidden) : 2.0 * spec.hidden;
    const Time t1 = nccl_all_to_all(topo, options.link_scale, R, tr.dispatch_tokens, drow, t0, &egress,
                                    &r.remote_bytes, &r.local_bytes);
    Time compute = 0;
    std::vector<Stage> stages = fwd ? std::vector<Stage>{Stage::gate_up, Stage::swiglu, Stage::down}
                                    : std::vector<Stage>{Stage::down, Stage::swiglu, Stage::gate_up};
    if (spec.shared_intermediate > 0) stages.push_back(Stage::shared);
    std::vector<Time> per_stage(stages.size(), 0);
    for (int g = 0; g < R; ++g) {
      Time c = 0;
      for (size_t i = 0; i < stages.size(); ++i) {
        const Time d = task_duration(topo, spec, tr, p, stages[i], g, 0, topo.sms) + launch;
        c += d;
        per_stage[i] = std::max(per_stage[i], d);
      }
      compute = std::max(compute, c);
    }
    const Time t2 = t1 + compute;
    const Time t3 = nccl_all_to_all(topo, options.link_scale, R, tr.combine_rows, 2.0 * spec.hidden, t2, &egress,
                                    &r.remote_bytes, &r.local_bytes);
    (fwd ? r.forward_ps : r.backward_ps) = t3 - t0;
    r.exposed_comm_ps += (t1 - t0) + (t3 - t2);
    r.stages.push_back({p, Stage::dispatch, double(t1 - t0), double(t1 - t0)});
    for (size_t i = 0; i < stages.size(); ++i)
      r.stages.push_back({p, stages[i], double(per_stage[i]), double(per_stage[i])});
    r.stages.push_back({p, Stage::combine, double(t3 - t2), double(t3 - t2)});
    if (options.trace)
      for (int g = 0; g < R; ++g) {
        r.slices.push_back({g, "comm dispatch", p, Stage::dispatch, 0, t0, t1});
        r.slices.push_back({g, "compute", p, stages[0], 0, t1, t2});
        r.slices.push_back({g, "comm combine", p, Stage::combine, 0, t2, t3});
      }
    t = t3;
  }
  r.layer_ps = r.forward_ps + r.backward_ps;
  const double cap = topo.link_bytes_per_ps() * options.link_scale * double(std::max<Time>(1, r.layer_ps));
  for (double e : egress) {
    r.link_util_mean += e / cap / R;
    r.link_util_max = std::max(r.link_util_max, e / cap);
  }
  return r;
}

std::string format_result(const SimResult& r, const Topology& topo) {
  std::string s;
  s += fmt::format("{:<9} {:<9} {:>12} {:>12}\n", "pass", "stage", "mean us/GPU", "max us/GPU");
  for (const auto& st : r.stages)
    s += fmt::format("{:<9} {:<9} {:>12.2f} {:>12.2f}\n", to_string(st.pass), to_string(st.stage), st.mean_ps / 1e6,
                     st.max_ps / 1e6);
  s += fmt::format("forward {:.2f} us, backward {:.2f} us, layer {:.2f} us\n", r.forward_ps / 1e6,
                   r.backward_ps / 1e6, r.layer_ps / 1e6);
  s += fmt::format("exposed communication {:.2f} us ({:.1f}% of the layer)\n", r.exposed_comm_ps / 1e6,
                   r.layer_ps ? 100.0 * r.exposed_comm_ps / r.layer_ps : 0.0);
  s += fmt::format("bytes over links {:.3f} GB, local {:.3f} GB; link utilisation mean {:.1f}% max {:.1f}% of {:.0f} GB/s\n",
                   r.remote_bytes / 1e9, r.local_bytes / 1e9, 100 * r.link_util_mean, 100 * r.link_util_max,
                   topo.link_gbps * topo.link_efficiency);
  return s;
}

}  // namespace calico::sim
