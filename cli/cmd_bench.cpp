// `calico bench`: the megakernel's forward and forward + backward on one GPU, CUDA events around each
// iteration (L2 flushed before each), medians after warm-up, TFLOP/s by the layer's FLOP count. Inputs are
// drawn on the device (values do not matter for speed; bit-exactness is `calico gate`'s job). The PyTorch
// baseline and the dense-GEMM ceiling run beside it in scripts/bench_megakernel.sh.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "calico/core.h"
#include "calico/files.h"
#include "calico/megakernel.h"
#include "command.h"

namespace calico::cli {
namespace {

struct BenchOptions {
  std::string preset = "qwen3-30b-a3b";
  int tokens = 16384;
  std::string routing = "uniform";
  uint64_t seed = 1;
  int iters = 20, warmup = 3;
  std::string dispatch = "push";
  std::string dispatch_backward;  // empty: as --dispatch
  std::string task_walk = "dynamic";
  std::string weight_grads = "accumulate";
  std::optional<int> comm_sms;           // unset: 0 with pull, 16 with push
  std::optional<int> comm_sms_backward;  // unset: as --comm-sms
  int ctas = 0;
  int combine_tokens = 16;
  bool profile = false;
  std::string json, timeline, timeline_records;
};

int bench_command(const BenchOptions& o) {
  require(o.iters >= 1 && o.iters <= 10000, "--iters must be in [1, 10000], got {}", o.iters);
  require(o.warmup >= 0 && o.warmup <= 1000, "--warmup must be in [0, 1000], got {}", o.warmup);
  require(o.tokens >= 1 && o.tokens <= (1 << 20), "--tokens must be in [1, {}], got {}", 1 << 20, o.tokens);
  require(o.ctas >= 0 && o.ctas <= 4096, "--ctas must be in [0, 4096] (0 = every SM), got {}", o.ctas);
  require(o.combine_tokens >= 1 && o.combine_tokens <= 4096, "--combine-tokens must be in [1, 4096], got {}",
          o.combine_tokens);
  if (!o.json.empty()) check_output_path(o.json, "--json");  // before the work, not after it
  if (!o.timeline.empty()) check_output_path(o.timeline, "--timeline");
  if (!o.timeline_records.empty()) check_output_path(o.timeline_records, "--timeline-records");
  const LayerSpec spec = load_preset(o.preset);
  const Routing routing = make_routing(spec, o.tokens, RoutingSource::parse(o.routing), o.seed);
  gpu::MoeOptions mo;
  const std::string dispatch_bwd = o.dispatch_backward.empty() ? o.dispatch : o.dispatch_backward;
  require(o.dispatch == "pull" || o.dispatch == "push", "--dispatch must be pull or push, got '{}'", o.dispatch);
  require(dispatch_bwd == "pull" || dispatch_bwd == "push", "--dispatch-backward must be pull or push, got '{}'",
          dispatch_bwd);
  require(o.task_walk == "dynamic" || o.task_walk == "static", "--task-walk must be dynamic or static, got '{}'",
          o.task_walk);
  mo.dynamic_walk = o.task_walk == "dynamic";
  require(o.weight_grads == "accumulate" || o.weight_grads == "overwrite",
          "--weight-grads must be accumulate or overwrite, got '{}'", o.weight_grads);
  mo.accumulate_weight_grads = o.weight_grads == "accumulate";
  mo.pull_forward = o.dispatch == "pull";
  mo.pull_backward = dispatch_bwd == "pull";
  const int lo = mo.pull_forward ? 0 : 1, lo_b = mo.pull_backward ? 0 : 1;
  const int comm = o.comm_sms.value_or(mo.pull_forward ? 0 : 16);
  // Each pass's default: 0 with pull, 16 with push; --comm-sms also sets the backward when both passes agree.
  const int comm_bwd = o.comm_sms_backward.value_or(
      o.comm_sms && mo.pull_forward == mo.pull_backward ? comm : (mo.pull_backward ? 0 : 16));
  require(comm >= lo && comm <= 1024, "--comm-sms must be in [{}, 1024] with --dispatch {}, got {}", lo, o.dispatch, comm);
  require(comm_bwd >= lo_b && comm_bwd <= 1024,
          "--comm-sms-backward must be in [{}, 1024] with backward dispatch {}, got {}", lo_b, dispatch_bwd, comm_bwd);
  mo.comm_ctas_forward = comm;
  mo.comm_ctas_backward = comm_bwd;
  mo.ctas = o.ctas;
  mo.combine_tokens = o.combine_tokens;
  mo.profile = o.profile;
  gpu::MoeLayer layer(spec, o.tokens, mo);
  layer.set_random_inputs(routing.topk_experts.data(), routing.router_weights.data(), o.seed);
  std::fprintf(stderr, "%s\n", layer.describe().c_str());
  for (int i = 0; i < o.warmup; ++i) {
    layer.forward();
    layer.backward();
  }
  layer.synchronize();
  // Every iteration too: a median hides drift within a run (clocks under sustained load).
  const float fwd = layer.forward_ms(o.iters);
  const std::vector<float> fwd_each = layer.last_times_ms(), fwd_mhz = layer.last_clocks_mhz();
  const float fwd_bwd = layer.forward_backward_ms(o.iters);
  const std::vector<float> fwd_bwd_each = layer.last_times_ms(), fwd_bwd_mhz = layer.last_clocks_mhz();
  const double T = o.tokens, H = spec.hidden, I = spec.intermediate, K = spec.top_k, Is = spec.shared_intermediate;
  const double flops_fwd = 6 * T * K * H * I + 6 * T * H * Is;
  const double tf_fwd = flops_fwd / (fwd * 1e-3) / 1e12, tf_all = 3 * flops_fwd / (fwd_bwd * 1e-3) / 1e12;
  if (o.profile) std::printf("%s", layer.profile_report().c_str());
  if (!o.timeline.empty() || !o.timeline_records.empty()) {
    // One more forward + backward, recorded: the timed iterations above ran without the timeline.
    // The forward timed as the iterations were (events, L2 flushed): what its records do not cover is spent
    // outside the persistent kernel (the schedule kernels, memsets, the launch).
    layer.record_timeline(true);
    const float recorded_fwd_ms = layer.forward_ms(1);
    layer.backward();
    const std::vector<gpu::TimelineEvent> events = layer.timeline();
    layer.record_timeline(false);
    std::printf("%s", gpu::timeline_summary(events).c_str());
    const double span_us = gpu::timeline_span_us(events, 0);
    std::printf("forward: %.1f us between the launch's events, %.1f us of it in the kernel's records, %.1f us "
                "outside them (the schedule kernels, memsets, the launch)\n",
                recorded_fwd_ms * 1e3, span_us, recorded_fwd_ms * 1e3 - span_us);
    if (!o.timeline.empty()) {
      const size_t n = gpu::write_timeline_trace(o.timeline, events, spec.name + " T=" + std::to_string(o.tokens));
      std::printf("timeline: %zu records in %s (ui.perfetto.dev)\n", n, o.timeline.c_str());
    }
    if (!o.timeline_records.empty()) {
      const size_t n = gpu::write_timeline_records(o.timeline_records, events);
      std::printf("timeline records: %zu in %s (calico simulate --compare-timeline)\n", n, o.timeline_records.c_str());
    }
  }
  std::printf("%-20s T=%-6d forward %8.3f ms (%6.1f TFLOP/s)   forward+backward %8.3f ms (%6.1f TFLOP/s)   %.2f GB\n",
              spec.name.c_str(), o.tokens, fwd, tf_fwd, fwd_bwd, tf_all, layer.device_bytes() / 1e9);
  auto median = [](std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0f : v[v.size() / 2];
  };
  std::printf("  SM clock (CTA 0, median of the iterations): forward %.0f MHz, forward+backward %.0f MHz\n", median(fwd_mhz),
              median(fwd_bwd_mhz));
  if (!o.json.empty()) {  // strings escaped by the JSON library; the file appears only when complete
    nlohmann::ordered_json j;
    j["backend"] = "megakernel";
    j["preset"] = spec.name;
    j["tokens"] = o.tokens;
    j["routing"] = o.routing;
    j["dispatch"] = o.dispatch == dispatch_bwd ? o.dispatch : o.dispatch + "/" + dispatch_bwd;
    j["task_walk"] = o.task_walk;
    j["weight_grads"] = o.weight_grads;
    j["comm_sms"] = mo.comm_ctas_forward;
    j["comm_sms_backward"] = mo.comm_ctas_backward;
    j["combine_tokens"] = mo.combine_tokens;
    j["iters"] = o.iters;
    j["forward_ms"] = fwd;
    j["forward_backward_ms"] = fwd_bwd;
    j["forward_ms_each"] = fwd_each;
    j["forward_backward_ms_each"] = fwd_bwd_each;
    j["forward_mhz_each"] = fwd_mhz;  // the SM clock of each iteration (the H200 lowers it at its power cap)
    j["forward_backward_mhz_each"] = fwd_bwd_mhz;
    j["forward_tflops"] = tf_fwd;
    j["forward_backward_tflops"] = tf_all;
    j["device_bytes"] = layer.device_bytes();
    j["device"] = gpu::device_description();
    write_text_file(o.json, j.dump() + "\n", "--json");
  }
  return 0;
}

Registrar bench("bench", "Time the megakernel layer (forward, forward + backward) on this GPU", [](CLI::App& sub) {
  auto o = std::make_shared<BenchOptions>();
  sub.add_option("--preset", o->preset, "Model preset (deepseek-v3-routed: without the shared expert)")
      ->capture_default_str();
  sub.add_option("--tokens", o->tokens, "Tokens T")->capture_default_str();
  sub.add_option("--routing", o->routing, "uniform | zipf:S | adversarial")->capture_default_str();
  sub.add_option("--seed", o->seed, "Seed of routing and inputs")->check(unsigned_value())->capture_default_str();
  sub.add_option("--iters", o->iters, "Timed iterations (the median is reported)")->capture_default_str();
  sub.add_option("--warmup", o->warmup, "Untimed forward + backward iterations first")->capture_default_str();
  sub.add_option("--dispatch", o->dispatch,
                 "pull: the compute CTAs gather token rows straight into shared memory (no data-movement CTAs "
                 "needed); push: data-movement CTAs dispatch rows into expert-major buffers first")
      ->capture_default_str();
  sub.add_option("--dispatch-backward", o->dispatch_backward,
                 "pull | push for the backward's d_y rows (default: as --dispatch; push / push is the fastest "
                 "pair measured on the H200)");
  sub.add_option("--comm-sms", o->comm_sms,
                 "Data-movement CTAs of the forward (and backward) launch: [1, 1024] with push (default 16), "
                 "[0, 1024] with pull (default 0); with the dynamic task walk they join the compute walk once "
                 "their rows are dispatched");
  sub.add_option("--comm-sms-backward", o->comm_sms_backward,
                 "Data-movement CTAs of the backward launch (default: as --comm-sms)");
  sub.add_option("--ctas", o->ctas, "CTAs per launch (0 = every SM)")->capture_default_str();
  sub.add_option("--weight-grads", o->weight_grads,
                 "accumulate: every weight-gradient chain starts from the carried-in fp32 accumulator (the "
                 "contract; reads and writes them); overwrite: from +0 (writes only; the same bits as accumulating "
                 "into zeroed buffers, and what kernels that return fresh gradients do)")
      ->capture_default_str();
  sub.add_option("--task-walk", o->task_walk,
                 "dynamic: each CTA takes the next task from a counter when ready; static: CTA c takes tasks c, "
                 "c + n, ... (the results are the same bits either way)")
      ->capture_default_str();
  sub.add_option("--combine-tokens", o->combine_tokens,
                 "Tokens per combine task (forward tail, backward d_x combine; results never depend on it)")
      ->capture_default_str();
  sub.add_option("--json", o->json, "Also write the result as JSON here");
  sub.add_option("--timeline", o->timeline,
                 "After the timed iterations, record one forward + backward task by task and write it here as a "
                 "Perfetto trace (a process per pass, a track per CTA; ui.perfetto.dev), with a summary per stage");
  sub.add_option("--timeline-records", o->timeline_records,
                 "Write that recorded forward + backward here in the simulator's calico-timeline-v1 format "
                 "(calico simulate --compare-timeline; simulator/TRACE_FORMAT.md)");
  sub.add_flag("--profile", o->profile, "Also print where the SM cycles went (waits per stage, main loops, epilogues)");
  sub.footer("Example: calico bench --preset deepseek-v3-routed --tokens 8192 --json mk.json");
  return [o] { return bench_command(*o); };
});

}  // namespace
}  // namespace calico::cli
