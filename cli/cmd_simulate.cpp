// `calico simulate`: one MoE layer (forward + backward) on the NVLink simulator; prints per-stage times,
// exposed communication, link utilisation and the layer time; optionally a Perfetto trace, the
// non-overlapped baseline, and a comparison with a measured megakernel timeline.
#include <cmath>
#include <cstdio>

#include "calico/files.h"
#include "command.h"
#include "sim_cli.h"

namespace {

struct Options {
  calico::cli::SimProblem problem;
  int minibatch = 0, comm_sms = 16, comm_sms_bwd = 0;
  std::string dispatch = "push", combine = "push", dispatch_bwd, combine_bwd;
  std::string trace, timeline;
  bool baseline = false, forward_only = false;
  double link_scale = 1.0;
  calico::cli::TransferOptions transfer;
  int macrobatch = 0;
};

int run(const Options& o) {
  using namespace calico;
  const sim::Topology topo = sim::load_topology(o.problem.topology);
  const LayerSpec spec = o.problem.spec();
  RunConfig cfg;
  cfg.ranks = o.problem.ranks;
  cfg.tokens_per_rank = o.problem.tokens;
  cfg.minibatch = o.minibatch;
  cfg.comm_sms_forward = o.comm_sms;
  cfg.comm_sms_backward = o.comm_sms_bwd > 0 ? o.comm_sms_bwd : o.comm_sms;
  cfg.dispatch_forward = cli::direction_option(o.dispatch, "--dispatch");
  cfg.combine_forward = cli::direction_option(o.combine, "--combine");
  cfg.dispatch_backward = o.dispatch_bwd.empty() ? cfg.dispatch_forward : cli::direction_option(o.dispatch_bwd, "--dispatch-bwd");
  cfg.combine_backward = o.combine_bwd.empty() ? cfg.combine_forward : cli::direction_option(o.combine_bwd, "--combine-bwd");
  cfg.seed = o.problem.seed;
  require(o.macrobatch >= 0 && o.macrobatch <= 4096, "--macrobatch must be in [0, 4096], got {}", o.macrobatch);
  cfg.macrobatch = o.macrobatch;
  require(std::isfinite(o.link_scale) && o.link_scale >= 1e-3 && o.link_scale <= 1e3,
          "--link-scale must be in [0.001, 1000], got {}", o.link_scale);
  sim::validate_run(topo, spec, cfg);
  if (!o.trace.empty()) check_output_path(o.trace, "--trace");  // before the work, not after it
  // The measured timeline is read first: a bad file fails before anything is written (issue 9).
  const auto measured = o.timeline.empty() ? std::vector<sim::TimelineRecord>{} : sim::read_timeline(o.timeline);
  const sim::Traffic traffic = o.problem.traffic(spec, cfg);
  sim::SimOptions opt;
  opt.trace = !o.trace.empty() || !o.timeline.empty();
  opt.backward = !o.forward_only;
  opt.link_scale = o.link_scale;
  opt.set_transfer(o.transfer.get());
  std::printf("topology %s (%s, %d SMs, %.0f GB/s/dir links); %s\n%s\n", topo.name.c_str(), topo.gpu.c_str(), topo.sms,
              topo.link_gbps, spec.describe().c_str(), cfg.describe().c_str());
  const sim::SimResult r = sim::simulate(topo, spec, cfg, traffic, opt);
  std::printf("%s", sim::format_result(r, topo).c_str());
  if (!o.trace.empty()) {
    sim::write_perfetto_trace(o.trace, r, topo);
    std::printf("trace: %s (%zu slices)\n", o.trace.c_str(), r.slices.size());
  }
  if (o.baseline) {
    sim::SimOptions bopt = opt;
    bopt.trace = false;
    const sim::SimResult b = sim::simulate_baseline(topo, spec, cfg, traffic, bopt);
    std::printf("non-overlapped all_to_all + GEMM baseline: layer %.2f us (forward %.2f, backward %.2f); "
                "speedup %.3fx\n", b.layer_ps / 1e6, b.forward_ps / 1e6, b.backward_ps / 1e6,
                double(b.layer_ps) / double(r.layer_ps));
  }
  if (!o.timeline.empty()) {
    std::printf("predicted vs measured (%s):\n%s", o.timeline.c_str(),
                sim::format_comparison(sim::compare_timeline(r, measured)).c_str());
  }
  return 0;
}

calico::cli::Registrar simulate(
    "simulate", "Simulate one MoE layer on an NVLink topology (times, exposed comm, links, trace)",
    [](CLI::App& sub) {
      auto o = std::make_shared<Options>();
      sub.footer(
          "Example: calico simulate --topology gb300-nvl72 --preset deepseek-v3 --ranks 72 --tokens 4096 \\\n"
          "           --minibatch 512 --comm-sms 24 --dispatch push --combine pull --trace layer.json\n"
          "Model and units: simulator/MODEL.md; trace and timeline formats: simulator/TRACE_FORMAT.md.");
      o->problem.add(sub);
      sub.add_option("--minibatch", o->minibatch, "Tokens per rank per minibatch in [0, T] (0 = all; at most 4096 minibatches)");
      sub.add_option("--comm-sms", o->comm_sms, "Communication SMs per GPU in [1, SMs-1] (forward, and backward unless set)");
      sub.add_option("--comm-sms-bwd", o->comm_sms_bwd, "Communication SMs per GPU in the backward pass");
      sub.add_option("--dispatch", o->dispatch, "push or pull (forward, and backward unless set)");
      sub.add_option("--combine", o->combine, "push or pull (forward, and backward unless set)");
      sub.add_option("--dispatch-bwd", o->dispatch_bwd, "push or pull, backward pass");
      sub.add_option("--combine-bwd", o->combine_bwd, "push or pull, backward pass");
      sub.add_option("--link-scale", o->link_scale, "Multiply link bandwidth (what-if), in [0.001, 1000]");
      o->transfer.add(sub);
      sub.add_option("--macrobatch", o->macrobatch, "Ring-buffer slots in minibatches (back-pressure; 0 = unbounded), in [0, 4096]");
      sub.add_flag("--forward-only", o->forward_only, "Simulate the forward pass only");
      sub.add_flag("--baseline", o->baseline, "Also simulate the non-overlapped all_to_all + GEMM schedule");
      sub.add_option("--trace", o->trace, "Write a Chrome/Perfetto trace JSON here");
      sub.add_option("--compare-timeline", o->timeline,
                     "Measured megakernel timeline (JSON or CSV, TRACE_FORMAT.md): print predicted vs measured");
      return [o] { return run(*o); };
    });

}  // namespace
