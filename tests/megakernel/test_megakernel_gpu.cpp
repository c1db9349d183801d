// The megakernel against the reference, bit for bit (issue 8): forward output and every gradient, over
// shapes with and without a shared expert, uniform / Zipf / adversarial routing, with and without the SwiGLU
// clamp; run-to-run and across SM splits and combine granularities; a lost signal gives an error naming the
// wait, not a hang. Skips without a GPU.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <string>

#include <fmt/format.h>

#include "calico/core.h"
#include "calico/harness.h"
#include "calico/megakernel.h"
#include "calico/megakernel_moe.h"
#include "calico/numerics.h"
#include "calico/reference.h"

namespace calico {
namespace {

class MegakernelGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu::device_count() == 0) GTEST_SKIP() << "no GPU: " << gpu::device_description();
  }
};

LayerSpec shape(const char* name, int H, int I, int E, int K, int Is) {
  LayerSpec s;
  s.name = name;
  s.hidden = H, s.intermediate = I, s.experts = E, s.top_k = K, s.shared_intermediate = Is;
  return s;
}

RunRequest request(const LayerSpec& spec, int tokens, const std::string& routing, uint64_t seed = 7) {
  RunRequest q;
  q.spec = spec;
  q.config.ranks = 1;
  q.config.tokens_per_rank = tokens;
  q.config.seed = seed;
  q.routing = make_routing(spec, tokens, RoutingSource::parse(routing), seed);
  return q;
}

// The layer's inputs as the reference run drew them (pointers into `in`, which must outlive the result).
gpu::MoeInputs moe_inputs(const TensorSet& in) {
  auto bf = [&](const char* n) { return in.find(n)->data<uint16_t>(); };
  gpu::MoeInputs mi;
  mi.x = bf("x"), mi.d_out = bf("d_out"), mi.w_gate = bf("w_gate"), mi.w_up = bf("w_up"), mi.w_down = bf("w_down");
  mi.ws_gate = bf("ws_gate"), mi.ws_up = bf("ws_up"), mi.ws_down = bf("ws_down");
  mi.topk_experts = in.find("topk_experts")->data<int32_t>();
  mi.router_weights = in.find("router_weights")->data<float>();
  return mi;
}

// Every tensor of `want` present in `got` with the same bytes; names the first differing element.
std::string bitwise_mismatches(const RunResult& want, const RunResult& got) {
  std::string report;
  for (const auto& t : want.ranks[0].tensors) {
    const Tensor* g = got.ranks[0].find(t.name);
    if (!g) {
      report += fmt::format("{}: missing; ", t.name);
      continue;
    }
    if (g->bytes.size() != t.bytes.size()) {
      report += fmt::format("{}: {} bytes, want {}; ", t.name, g->bytes.size(), t.bytes.size());
      continue;
    }
    const size_t es = elem_size(t.type), n = t.bytes.size() / es;
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; ++i)
      if (std::memcmp(&t.bytes[i * es], &g->bytes[i * es], es) != 0 && bad++ == 0) first = i;
    if (bad == 0) continue;
    uint32_t a = 0, b = 0;
    std::memcpy(&a, &t.bytes[first * es], std::min<size_t>(es, 4));
    std::memcpy(&b, &g->bytes[first * es], std::min<size_t>(es, 4));
    report += fmt::format("{}: {} of {} differ, first at flat index {} (want 0x{:x}, got 0x{:x}); ", t.name, bad, n,
                          first, a, b);
  }
  return report;
}

// Both dispatch paths: push (data-movement CTAs write expert-major rows first) and pull (the compute CTAs
// gather the rows straight into shared memory, gemm/gather.cuh).
void expect_matches_reference(RunRequest q) {
  const RunResult want = ref::run_reference(q, ref::ReferenceMode::contract);
  auto mk = harness::make_backend("megakernel");
  for (Direction d : {Direction::push, Direction::pull}) {
    q.config.dispatch_forward = q.config.dispatch_backward = d;
    const RunResult got = mk->run(q);
    EXPECT_EQ(bitwise_mismatches(want, got), "")
        << q.spec.describe() << " T=" << q.config.tokens_per_rank << " dispatch " << to_string(d);
  }
}

TEST_F(MegakernelGpu, ComparatorSeesOneFlippedBit) {  // negative control for every test below
  RunRequest q = request(shape("tiny", 64, 96, 16, 4, 32), 64, "uniform");
  auto mk = harness::make_backend("megakernel");
  const RunResult a = mk->run(q);
  RunResult b = a;
  for (auto& t : b.ranks[0].tensors)
    if (t.name == "d_w_down") t.bytes[4 * 77] ^= 1;
  EXPECT_NE(bitwise_mismatches(a, b).find("d_w_down: 1 of"), std::string::npos);
  EXPECT_EQ(bitwise_mismatches(a, a), "");
}

TEST_F(MegakernelGpu, TinyMatchesReference) {
  for (const char* routing : {"uniform", "zipf:1.2", "adversarial"})
    for (bool clamp : {false, true}) {
      RunRequest q = request(shape("tiny", 64, 96, 16, 4, 32), 300, routing);
      if (clamp) q.spec.swiglu_limit = 0.25f;  // small enough that the clamp masks bite
      SCOPED_TRACE(fmt::format("routing {}, clamp {}", routing, clamp));
      expect_matches_reference(q);
    }
}

TEST_F(MegakernelGpu, NoSharedExpertAndRaggedShapes) {
  // I not a multiple of the 128-column tile, H not a multiple of 256, T not a multiple of 128.
  expect_matches_reference(request(shape("ragged", 200, 144, 8, 2, 0), 333, "zipf:1.0"));
  expect_matches_reference(request(shape("ragged-shared", 136, 80, 4, 3, 48), 129, "uniform"));
}

TEST_F(MegakernelGpu, Qwen3ShapeFewExpertsMatchesReference) {  // qwen3-30b-a3b's H, I, K with 16 experts
  RunRequest q = request(shape("qwen3-16e", 2048, 768, 16, 8, 0), 512, "zipf:1.2");
  expect_matches_reference(q);
}

TEST_F(MegakernelGpu, DeepseekShapeFewExpertsMatchesReference) {  // deepseek-v3's H, I, K, I_s with 16 experts
  RunRequest q = request(shape("deepseek-16e", 7168, 2048, 16, 8, 2048), 160, "uniform");
  q.spec.swiglu_limit = 1.0f;
  expect_matches_reference(q);
}

TEST_F(MegakernelGpu, IdenticalAcrossRunsSmSplitsAndCombineGranularity) {
  const LayerSpec spec = shape("mid", 512, 256, 32, 6, 128);
  RunRequest q = request(spec, 1000, "zipf:1.5");
  auto mk = harness::make_backend("megakernel");
  const RunResult first = mk->run(q);
  for (auto [comm, minibatch] : {std::pair{16, 0}, {1, 7}, {40, 200}, {2, 1}}) {
    q.config.comm_sms_forward = q.config.comm_sms_backward = comm;
    q.config.minibatch = minibatch;
    EXPECT_EQ(bitwise_mismatches(first, mk->run(q)), "") << "comm " << comm << " minibatch " << minibatch;
  }
  q.config.dispatch_forward = q.config.dispatch_backward = Direction::pull;
  for (int minibatch : {0, 5, 300}) {
    q.config.minibatch = minibatch;
    for (int run = 0; run < 3; ++run)
      EXPECT_EQ(bitwise_mismatches(first, mk->run(q)), "") << "pull, minibatch " << minibatch << " run " << run;
  }
  for (auto [fwd, bwd] : {std::pair{Direction::pull, Direction::push}, {Direction::push, Direction::pull}}) {
    q.config.dispatch_forward = fwd, q.config.dispatch_backward = bwd;
    EXPECT_EQ(bitwise_mismatches(first, mk->run(q)), "") << "dispatch " << to_string(fwd) << "/" << to_string(bwd);
  }
}

// Every output of the layer as one byte string, after `backward_passes` forward + backward passes with the
// options given (the weight gradients accumulate across passes unless told to overwrite).
std::string layer_output_bytes(const LayerSpec& spec, int T, uint64_t seed, const gpu::MoeOptions& o,
                               int backward_passes = 1, std::vector<gpu::TimelineEvent>* timeline = nullptr) {
  RunRequest q = request(spec, T, "zipf:1.5", seed);
  const auto inputs = ref::run_reference(q, ref::ReferenceMode::contract);  // only for its input tensors
  const gpu::MoeInputs mi = moe_inputs(inputs.ranks[0]);
  gpu::MoeLayer layer(spec, T, o);
  layer.set_inputs(mi);
  if (timeline) layer.record_timeline(true);
  for (int i = 0; i < backward_passes; ++i) {
    layer.forward();
    layer.backward();
  }
  layer.synchronize();
  const size_t H = spec.hidden, I = spec.intermediate, E = spec.experts, K = spec.top_k, Is = spec.shared_intermediate;
  std::vector<uint16_t> out(T * H), dx(T * H);
  std::vector<float> drw(T * K), dwg(E * I * H), dwu(E * I * H), dwd(E * H * I), dwsg(Is * H), dwsu(Is * H), dwsd(H * Is);
  gpu::MoeOutputs mo;
  mo.out = out.data(), mo.d_x = dx.data(), mo.d_router_weights = drw.data();
  mo.d_w_gate = dwg.data(), mo.d_w_up = dwu.data(), mo.d_w_down = dwd.data();
  mo.d_ws_gate = dwsg.data(), mo.d_ws_up = dwsu.data(), mo.d_ws_down = dwsd.data();
  layer.get_outputs(mo);
  if (timeline) *timeline = layer.timeline();
  std::string bytes;
  auto add = [&](const auto& v) { bytes.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(v[0])); };
  add(out), add(dx), add(drw), add(dwg), add(dwu), add(dwd), add(dwsg), add(dwsu), add(dwsd);
  return bytes;
}

// The task walk decides only which CTA runs a task: the dynamic walk (a ticket counter) and the static one
// give the same bytes in every output, with either dispatch and with few CTAs. The negative control: a
// different seed of the same shape differs (the comparison sees a change).
TEST_F(MegakernelGpu, StaticAndDynamicTaskWalksGiveTheSameBits) {
  const LayerSpec spec = shape("mid", 512, 256, 32, 6, 128);
  const int T = 700;
  auto outputs_of = [&](uint64_t seed, bool dynamic, bool pull, int ctas) {
    gpu::MoeOptions o;
    o.dynamic_walk = dynamic;
    o.pull_forward = o.pull_backward = pull;
    o.comm_ctas_forward = o.comm_ctas_backward = pull ? 0 : 3;
    o.ctas = ctas;
    return layer_output_bytes(spec, T, seed, o);
  };
  const std::string first = outputs_of(7, true, true, 0);
  EXPECT_TRUE(first == outputs_of(7, false, true, 0)) << "static walk, pull";
  EXPECT_TRUE(first == outputs_of(7, true, false, 0)) << "dynamic walk, push";
  EXPECT_TRUE(first == outputs_of(7, false, false, 7)) << "static walk, push, 7 CTAs";
  EXPECT_TRUE(first == outputs_of(7, true, true, 5)) << "dynamic walk, pull, 5 CTAs";
  // One compute CTA: every task waits on the CTA's own earlier tiles, so a counter release it still held
  // (DeferredRelease, gemm/tma_store.cuh) would time out here instead of finishing.
  EXPECT_TRUE(first == outputs_of(7, true, true, 1)) << "dynamic walk, pull, 1 CTA";
  EXPECT_TRUE(first == outputs_of(7, false, true, 1)) << "static walk, pull, 1 CTA";
  EXPECT_TRUE(first == outputs_of(7, false, false, 4)) << "static walk, push, 3 data-movement CTAs + 1 compute CTA";
  EXPECT_FALSE(first == outputs_of(8, true, true, 0)) << "negative control: another seed must differ";
}

// The per-task timeline (MoeLayer::record_timeline) changes no bit, and holds each task of both walks once,
// with the tile counts derived here from the routing (128-row m-tiles per expert, the layer's column tiles),
// one dispatch record per data-movement CTA and one combine-tail record per CTA; a CTA's records never overlap.
TEST_F(MegakernelGpu, TimelineRecordsEveryTaskOnceAndChangesNoBit) {
  const LayerSpec spec = shape("mid", 512, 256, 32, 6, 128);
  const int T = 700, comm = 3;
  gpu::MoeOptions o;
  o.comm_ctas_forward = o.comm_ctas_backward = comm;
  std::vector<gpu::TimelineEvent> events;
  EXPECT_TRUE(layer_output_bytes(spec, T, 7, o) == layer_output_bytes(spec, T, 7, o, 1, &events));
  ASSERT_FALSE(events.empty());

  const Routing routing = make_routing(spec, T, RoutingSource::parse("zipf:1.5"), 7);
  std::vector<int> rows(spec.experts, 0);
  for (int e : routing.topk_experts) ++rows[e];
  int mt = 0, experts_with_rows = 0;
  for (int r : rows) mt += (r + 127) / 128, experts_with_rows += r > 0;
  const int mts = (T + 127) / 128;  // shared expert: every token
  // Columns: gate/up 128 of I per tile, down / d_x_k 256 of H, d_h 256 of I; weight gradients 128 x 256 tiles.
  const int H = spec.hidden, I = spec.intermediate, Is = spec.shared_intermediate;
  const std::map<std::string, int> want[2] = {
      {{"dispatch", comm}, {"gate_up", mt * I / 128}, {"shared_gate_up", mts * Is / 128}, {"down", mt * H / 256},
       {"shared_down", mts * H / 256}},
      {{"dispatch", comm}, {"d_h", mt * I / 256}, {"shared_d_h", mts * ((Is + 255) / 256)}, {"d_x_k", mt * H / 256},
       {"shared_d_x_k", mts * H / 256}, {"dw_down", experts_with_rows * (H / 128) * ((I + 255) / 256)},
       {"dw_gate", experts_with_rows * (I / 128) * (H / 256)}, {"dw_up", experts_with_rows * (I / 128) * (H / 256)},
       {"shared_dw_down", (H / 128) * ((Is + 255) / 256)}, {"shared_dw_gate", (Is / 128) * (H / 256)},
       {"shared_dw_up", (Is / 128) * (H / 256)}, {"d_x_combine", (T + o.combine_tokens - 1) / o.combine_tokens}}};
  std::map<std::string, int> got[2];
  std::set<int> tasks[2], ctas;
  std::map<std::pair<int, int>, std::vector<std::pair<int64_t, int64_t>>> spans;  // (pass, CTA) -> records
  int tails = 0;
  for (const auto& e : events) {
    ++got[e.pass][e.stage];
    EXPECT_LE(e.start_ns, e.end_ns) << e.stage;
    if (e.task >= 0) {
      EXPECT_TRUE(tasks[e.pass].insert(e.task).second) << "task " << e.task << " recorded twice";
    }
    if (e.stage == "dispatch") {
      EXPECT_LT(e.cta, comm);
    }
    if (e.pass == 0) ctas.insert(e.cta);
    tails += e.stage == "combine";
    spans[{e.pass, e.cta}].push_back({e.start_ns, e.end_ns});
  }
  for (int pass = 0; pass < 2; ++pass)
    for (const auto& [stage, n] : want[pass]) EXPECT_EQ(got[pass][stage], n) << (pass ? "backward " : "forward ") << stage;
  EXPECT_GT(got[1]["router_grad"], 0);
  EXPECT_EQ(tails, static_cast<int>(ctas.size())) << "one combine-tail record per CTA";
  // The forward walk has no task without stages: its indices are exactly 0 .. n-1.
  EXPECT_EQ(static_cast<int>(tasks[0].size()), *tasks[0].rbegin() + 1);
  for (auto& [key, v] : spans) {
    std::sort(v.begin(), v.end());
    for (size_t i = 1; i < v.size(); ++i) EXPECT_GE(v[i].first, v[i - 1].second) << "CTA " << key.second << " overlaps";
  }
}

// Overwrite mode (MoeOptions::accumulate_weight_grads = false) starts every weight-gradient chain at +0, not
// at the carried-in accumulator: after two passes it holds exactly what accumulate mode holds after one (the
// chains from zeroed buffers, which the reference comparisons check), with both dispatch paths. Negative
// control: accumulate mode after two passes differs (the second pass really carried the first one in).
TEST_F(MegakernelGpu, OverwriteWeightGradsEqualsAccumulatingIntoZeros) {
  const LayerSpec spec = shape("mid", 512, 256, 32, 6, 128);
  const int T = 700;
  for (bool pull : {true, false}) {
    gpu::MoeOptions o;
    o.pull_forward = o.pull_backward = pull;
    o.comm_ctas_forward = o.comm_ctas_backward = pull ? 0 : 3;
    const std::string once = layer_output_bytes(spec, T, 7, o, 1);
    EXPECT_FALSE(once == layer_output_bytes(spec, T, 7, o, 2)) << "negative control: accumulate mode, pull " << pull;
    o.accumulate_weight_grads = false;
    EXPECT_TRUE(once == layer_output_bytes(spec, T, 7, o, 2)) << "overwrite mode, two passes, pull " << pull;
  }
}

// The epilogues look SiLU up instead of computing it (gemm/epilogue.cuh): the tables built on the device must
// hold numerics.h's host results for every bf16 input, and silu(L) for limits that are and are not bf16
// values. Negative control: the count sees one changed entry.
TEST_F(MegakernelGpu, SiluTablesEqualNumericsForEveryBf16) {
  auto mismatches = [](const std::vector<float>& silu, const std::vector<float>& grad, float limit) {
    int bad = 0;
    for (uint32_t i = 0; i < 65536; ++i) {
      const float g = bf16_to_f32(static_cast<uint16_t>(i));
      bad += f32_bits(silu[i]) != f32_bits(calico_silu(g));
      bad += f32_bits(grad[i]) != f32_bits(calico_silu_grad(g));
    }
    bad += f32_bits(silu[65536]) != f32_bits(calico_silu(limit));
    return bad;
  };
  for (float limit : {7.0f, 7.3f, 0.0f}) {
    std::vector<float> silu, silu_of_pairs, grad;  // the forward's table; the backward's pairs
    gpu::silu_tables_for_test(limit, silu, silu_of_pairs, grad);
    ASSERT_EQ(silu.size(), 65537u);
    ASSERT_EQ(silu_of_pairs.size(), 65537u);
    EXPECT_EQ(mismatches(silu, grad, limit), 0) << "limit " << limit;
    EXPECT_EQ(mismatches(silu_of_pairs, grad, limit), 0) << "limit " << limit;
    silu[0x3F80] = std::nextafter(silu[0x3F80], 10.0f);  // silu(1.0), one ulp up
    EXPECT_EQ(mismatches(silu, grad, limit), 1) << "negative control";
  }
}

// The tiny layer on 256 tokens run with `o` (forward, then backward if asked): the error message ("" if none)
// and the seconds it took.
struct TimedRun {
  std::string message;
  double seconds = 0;
};
TimedRun run_tiny_layer(const gpu::MoeOptions& o, bool backward) {
  const LayerSpec spec = shape("tiny", 64, 96, 16, 4, 32);
  RunRequest q = request(spec, 256, "uniform");
  const auto inputs = ref::run_reference(q, ref::ReferenceMode::contract);  // only for its input tensors
  gpu::MoeLayer layer(spec, 256, o);
  layer.set_inputs(moe_inputs(inputs.ranks[0]));
  const auto t0 = std::chrono::steady_clock::now();
  TimedRun r;
  try {
    layer.forward();
    if (backward) layer.backward();
    layer.synchronize();
  } catch (const Error& e) {
    r.message = e.what();
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

// A lost signal (a debug option skips one task's release) ends in an error naming the wait, within 10 s.
TEST_F(MegakernelGpu, LostSignalIsAnErrorNotAHang) {
  for (int pass = 0; pass < 4; ++pass) {  // forward, backward; with pull, then with push dispatch
    gpu::MoeOptions o;
    o.pull_forward = o.pull_backward = pass < 2;
    o.comm_ctas_forward = o.comm_ctas_backward = pass < 2 ? 0 : 8;
    o.wait_timeout_s = 1.0;
    SCOPED_TRACE(fmt::format("pass {}, {}", pass % 2 == 0 ? "forward" : "backward", pass < 2 ? "pull" : "push"));
    (pass % 2 == 0 ? o.lose_signal_forward : o.lose_signal_backward) = 0;  // task 0: the shared expert's first tile
    const TimedRun r = run_tiny_layer(o, pass % 2 == 1);
    EXPECT_LT(r.seconds, 10.0);
    EXPECT_NE(r.message.find("timed out"), std::string::npos) << r.message;
    EXPECT_NE(r.message.find(pass % 2 == 0 ? "stage 'down GEMM'" : "d_h done"), std::string::npos) << r.message;
  }
}

// The staggered weight-gradient tiles' go (overwrite mode): a lost go is a named error within the bound, not
// a hang. Negative control: the same layer without the debug option runs to the end.
TEST_F(MegakernelGpu, LostWeightGradientGoIsAnErrorNotAHang) {
  for (bool lose : {false, true}) {
    gpu::MoeOptions o;
    o.accumulate_weight_grads = false;
    o.wait_timeout_s = 1.0;
    o.lose_wgrad_go = lose;
    SCOPED_TRACE(lose ? "go lost" : "negative control");
    const TimedRun r = run_tiny_layer(o, true);
    EXPECT_LT(r.seconds, 10.0);
    if (!lose) {
      EXPECT_EQ(r.message, "");
      continue;
    }
    EXPECT_NE(r.message.find("timed out"), std::string::npos) << r.message;
    EXPECT_NE(r.message.find("weight-gradient go"), std::string::npos) << r.message;
  }
}

}  // namespace
}  // namespace calico
