// The reference layer: float64 gradients against central finite differences, the contract against float64
// within a derived bf16 bound, and the headline property: bitwise identical results for one global batch
// across EP sizes, thread counts and runs, in bf16 and mxfp8, with and without shared expert and clamp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "calico/core.h"
#include "calico/reference.h"

using namespace calico;

namespace {

LayerSpec tiny(DType dtype = DType::bf16, bool shared = true, float clamp = 0.0f,
               MmaModel mma = MmaModel::hopper_bf16) {
  LayerSpec s = load_preset("tiny");
  s.dtype = dtype;
  s.mma = mma;
  if (!shared) s.shared_intermediate = 0;
  if (clamp > 0) s.swiglu_limit = clamp;
  return s;
}

RunRequest request(const LayerSpec& spec, int ranks, int64_t global_tokens, uint64_t seed, int threads = 1,
                   const char* routing = "uniform") {
  RunRequest r;
  r.spec = spec;
  r.config.ranks = ranks;
  r.config.tokens_per_rank = static_cast<int>(global_tokens / ranks);
  r.config.seed = seed;
  r.routing = make_routing(spec, global_tokens, RoutingSource::parse(routing), seed);
  r.threads = threads;
  return r;
}

// The global (rank-concatenated) bytes of a tensor.
std::vector<uint8_t> global_bytes(const RunResult& res, const std::string& name) {
  std::vector<uint8_t> b;
  for (const auto& set : res.ranks) {
    const Tensor* t = set.find(name);
    EXPECT_NE(t, nullptr) << name;
    if (t) b.insert(b.end(), t->bytes.begin(), t->bytes.end());
  }
  return b;
}

// Global values of a tensor as double (bf16, f32 or f64).
std::vector<double> global_values(const RunResult& res, const std::string& name) {
  std::vector<double> v;
  for (const auto& set : res.ranks) {
    const Tensor* t = set.find(name);
    for (int64_t i = 0; i < t->numel(); ++i) {
      if (t->type == ElemType::bf16) v.push_back(bf16_to_f32(t->data<uint16_t>()[i]));
      else if (t->type == ElemType::f32) v.push_back(t->data<float>()[i]);
      else v.push_back(t->data<double>()[i]);
    }
  }
  return v;
}

// First differing element as "index: bits a vs bits b" (DeepGEMM-style mismatch report).
std::string first_mismatch(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return "sizes differ";
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return "first differing byte at " + std::to_string(i);
  return "equal";
}

const char* kInvariant[] = {"out", "d_x", "d_router_weights", "d_w_gate", "d_w_up", "d_w_down"};

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// float64 mode vs central finite differences of the scalar loss L = sum(out * d_out).
// Tolerance: with step h = 1e-5 the truncation error is h^2/6 |f'''| ~ 2e-10 (|f'''| = O(10) here) and the
// cancellation error is ~ 1e-16 |L| / h ~ 1e-10 (|L| = O(10)); 1e-6 (absolute + relative) leaves >1000x room.
// ---------------------------------------------------------------------------------------------------------
class FiniteDifferences : public ::testing::TestWithParam<bool> {};

TEST_P(FiniteDifferences, Float64GradientsMatch) {
  const bool clamp = GetParam();
  ref::F64Layer L;
  L.spec.hidden = 8;
  L.spec.intermediate = 6;
  L.spec.experts = 4;
  L.spec.top_k = 2;
  L.spec.shared_intermediate = 4;
  if (clamp) L.spec.swiglu_limit = 0.4f;  // small enough that some g and u really are clamped
  const int64_t N = 6, H = 8, I = 6, E = 4, K = 2, Is = 4;
  L.tokens = N;
  uint64_t idx = 0;
  auto rnd = [&](size_t n, double scale) {
    std::vector<double> v(n);
    for (auto& x : v) x = normal_at(77, 5, idx++) * scale;
    return v;
  };
  L.x = rnd(N * H, 1.0);
  L.d_out = rnd(N * H, 1.0);
  L.w_gate = rnd(E * I * H, 0.5);
  L.w_up = rnd(E * I * H, 0.5);
  L.w_down = rnd(E * H * I, 0.5);
  L.ws_gate = rnd(Is * H, 0.5);
  L.ws_up = rnd(Is * H, 0.5);
  L.ws_down = rnd(H * Is, 0.5);
  L.topk_experts = {0, 1, 2, 3, 1, 3, 0, 2, 3, 0, 2, 1};
  L.router_weights = rnd(N * K, 0.5);
  const ref::F64Grads grad = ref::layer_f64(L, N);
  auto loss = [&](const ref::F64Layer& l) {
    const ref::F64Grads f = ref::layer_f64(l, N, false);
    double s = 0;
    for (int64_t i = 0; i < N * H; ++i) s += f.out[i] * l.d_out[i];
    return s;
  };
  const double h = 1e-5;
  int checked = 0;
  auto check = [&](std::vector<double> ref::F64Layer::*field, const std::vector<double>& analytic, const char* what) {
    for (size_t i = 0; i < analytic.size(); ++i) {
      ref::F64Layer p = L, m = L;
      (p.*field)[i] += h;
      (m.*field)[i] -= h;
      const double fd = (loss(p) - loss(m)) / (2 * h);
      ASSERT_NEAR(analytic[i], fd, 1e-6 * (1 + std::abs(fd))) << what << "[" << i << "]";
      ++checked;
    }
  };
  check(&ref::F64Layer::x, grad.d_x, "d_x");
  check(&ref::F64Layer::router_weights, grad.d_router_weights, "d_router_weights");
  check(&ref::F64Layer::w_gate, grad.d_w_gate, "d_w_gate");
  check(&ref::F64Layer::w_up, grad.d_w_up, "d_w_up");
  check(&ref::F64Layer::w_down, grad.d_w_down, "d_w_down");
  check(&ref::F64Layer::ws_gate, grad.d_ws_gate, "d_ws_gate");
  check(&ref::F64Layer::ws_up, grad.d_ws_up, "d_ws_up");
  check(&ref::F64Layer::ws_down, grad.d_ws_down, "d_ws_down");
  EXPECT_EQ(checked, N * H + N * K + 3 * E * I * H + 3 * Is * H);
}

INSTANTIATE_TEST_SUITE_P(Reference, FiniteDifferences, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "clamp" : "no_clamp"; });

// ---------------------------------------------------------------------------------------------------------
// Contract mode vs float64 mode, normwise relative error ||c - f|| / ||f|| per tensor, bf16 unit roundoff
// u = 2^-8. Both modes see the same bf16 inputs; the MMA model's truncation (2^-23 per step) is negligible,
// so the error is the bf16 roundings of the contract, propagated (elementwise worst case, each rounding
// <= u relative, random-matrix GEMMs preserving norms):
//   g,u: u;  h = silu(g)u: 1.3u (silu's log-derivative <= 1.3) + u + u (round h) = 3.3u;  y: 3.3u + u;
//   out: 4.3u + u (round out) = 5.3u.   d_y: u;  d_h: 2u;  d_g, d_u: 2u + u + ~2u (silu_grad) + u = 6u;
//   d_x_k: 7u;  d_x: 8u.   d_w_down: u + 3.3u;  d_w_gate/up: 6u;  d_router_weights: 4.3u.
// The test allows twice the largest of these, 16u = 0.0625, for every tensor (rounding errors are random,
// so the measured ratios sit near 1u; the bound still catches any structural error, which is O(1)).
// With a clamp L the gradient masks (g > L, |u| > L) are discontinuous: when bf16 rounding (<= 2^-8 |g|)
// moves g or u across L, the mask flips and that d_g / d_u element differs by its whole size. With g, u
// ~ N(0,1) (unit-variance x, weights N(0,1/H)) and L = 1 the flip probability per element is about
// density phi(1) = 0.242 times the window 2 * 2^-8, for g and for each side of u: p = 3 * 0.0019 = 0.0057,
// a normwise contribution of sqrt(p) = 0.075 to d_g/d_u and all that follows from them (d_x, d_w_gate,
// d_w_up, d_ws_gate, d_ws_up). Those tensors get 16u + 2 sqrt(p) = 0.21 in the clamp case (measured ~14u).
// ---------------------------------------------------------------------------------------------------------
TEST(Reference, ContractMatchesFloat64WithinTheBf16Bound) {
  for (bool clamp : {false, true}) {
    const LayerSpec spec = tiny(DType::bf16, true, clamp ? 1.0f : 0.0f);
    const RunRequest req = request(spec, 2, 96, 3);
    const RunResult c = ref::run_reference(req, ref::ReferenceMode::contract);
    const RunResult f = ref::run_reference(req, ref::ReferenceMode::float64);
    const double u = std::ldexp(1.0, -8);
    for (const char* name : {"out", "d_x", "d_router_weights", "d_w_gate", "d_w_up", "d_w_down", "d_ws_gate",
                             "d_ws_up", "d_ws_down"}) {
      const auto a = global_values(c, name), b = global_values(f, name);
      ASSERT_EQ(a.size(), b.size()) << name;
      double num = 0, den = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
      }
      ASSERT_GT(den, 0) << name;
      const double rel = std::sqrt(num / den);
      const std::string n = name;
      const bool masked = n == "d_x" || n == "d_w_gate" || n == "d_w_up" || n == "d_ws_gate" || n == "d_ws_up";
      const double bound = 16 * u + (clamp && masked ? 2 * std::sqrt(3 * 0.242 * 2 * std::ldexp(1.0, -8)) : 0.0);
      EXPECT_LT(rel, bound) << name << (clamp ? " (clamp)" : "");
      RecordProperty(std::string(name) + (clamp ? "_clamp" : "") + "_rel_err_in_u", std::to_string(rel / u));
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// MXFP8 (Hopper and Blackwell paths) vs float64 mode. float64 sees the unquantised bf16 operands, so the
// error is dominated by the e4m3 quantisation of every GEMM operand: RNE to 3 fraction bits has relative
// error <= u8 = 2^-4 per element (elements far below their block's amax lose more in absolute terms, but
// at most 2^-10 of amax: negligible normwise), so a GEMM with both operands quantised is off by <= 2 u8
// normwise (random-matrix GEMMs preserving norms). Propagated as in the bf16 bound above, with u8 in place
// of u for the GEMM operands (the bf16 roundings add <= 5.3u = 0.33 u8 on top):
//   g,u: 2u8;  h: 1.3 * 2u8 + 2u8 = 4.6u8;  y: 4.6u8 + 2u8 = 6.6u8;  out: ~7u8.
//   d_h: 2u8;  d_g, d_u: 2u8 + 2u8 (silu_grad of g) + 2u8 (h/u terms) = 6u8;  d_x_k: 8u8;  d_x: 8u8;
//   d_w_*: the gradient (6u8) and the activation (4.6u8) quantised again along the token dimension: 8.6u8.
// Worst case 9u8 = 0.56; rounding errors are random, so the measured ratios sit well below it (about
// 0.5-1.5 u8). The test asks for 4 u8 = 0.25: loose enough for every seed, tight enough that a structural
// error (a wrong scale, operand, K order or block) which is O(1) fails it.
// ---------------------------------------------------------------------------------------------------------
TEST(Reference, Mxfp8MatchesFloat64WithinTheMxfp8Bound) {
  for (MmaModel mma : {MmaModel::hopper_bf16, MmaModel::blackwell_mxfp8}) {
    const LayerSpec spec = tiny(DType::mxfp8, true, 0.0f, mma);
    const RunRequest req = request(spec, 2, 96, 3);
    const RunResult c = ref::run_reference(req, ref::ReferenceMode::contract);
    const RunResult f = ref::run_reference(req, ref::ReferenceMode::float64);
    const double u8 = std::ldexp(1.0, -4);
    for (const char* name : {"out", "d_x", "d_router_weights", "d_w_gate", "d_w_up", "d_w_down", "d_ws_gate",
                             "d_ws_up", "d_ws_down"}) {
      const auto a = global_values(c, name), b = global_values(f, name);
      ASSERT_EQ(a.size(), b.size()) << name;
      double num = 0, den = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
      }
      ASSERT_GT(den, 0) << name;
      const double rel = std::sqrt(num / den);
      EXPECT_LT(rel, 4 * u8) << name << " (" << to_string(mma) << ")";
      std::printf("mxfp8 %-15s %-18s rel err %.4f = %.2f u8\n", to_string(mma), name, rel, rel / u8);
      RecordProperty(std::string(name) + "_" + to_string(mma) + "_rel_err_in_u8", std::to_string(rel / u8));
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// The headline property (DESIGN 2.3).
// ---------------------------------------------------------------------------------------------------------
struct Variant {
  DType dtype;
  bool shared;
  float clamp;
  MmaModel mma = MmaModel::hopper_bf16;
};

void PrintTo(const Variant& v, std::ostream* os) {
  *os << to_string(v.dtype) << (v.shared ? " shared" : "") << (v.clamp > 0 ? " clamp" : "") << " " << to_string(v.mma);
}

class PartitionInvariance : public ::testing::TestWithParam<Variant> {};

TEST_P(PartitionInvariance, BitwiseIdenticalAcrossRanksAndRuns) {
  const Variant v = GetParam();
  const LayerSpec spec = tiny(v.dtype, v.shared, v.clamp, v.mma);
  const int64_t N = 64;
  const RunResult base = ref::run_reference(request(spec, 1, N, 21, 1), ref::ReferenceMode::contract);
  for (const char* name : kInvariant) {
    const auto vals = global_values(base, name);
    bool any_nonzero = false;
    for (double x : vals) {
      ASSERT_TRUE(std::isfinite(x)) << name;
      any_nonzero |= x != 0;
    }
    EXPECT_TRUE(any_nonzero) << name;
  }
  for (int R : {2, 4, 8}) {
    const RunResult r = ref::run_reference(request(spec, R, N, 21, 1), ref::ReferenceMode::contract);
    for (const char* name : kInvariant)
      EXPECT_TRUE(global_bytes(r, name) == global_bytes(base, name))
          << name << " differs at R=" << R << ": " << first_mismatch(global_bytes(r, name), global_bytes(base, name));
  }
  // A second run: every tensor, the shared expert's per-rank partials included.
  const RunResult again = ref::run_reference(request(spec, 8, N, 21, 1), ref::ReferenceMode::contract);
  const RunResult r8 = ref::run_reference(request(spec, 8, N, 21, 1), ref::ReferenceMode::contract);
  for (const auto& t : r8.ranks[0].tensors)
    EXPECT_TRUE(global_bytes(r8, t.name) == global_bytes(again, t.name)) << t.name << " differs between two runs";
}

INSTANTIATE_TEST_SUITE_P(Reference, PartitionInvariance,
                         ::testing::Values(Variant{DType::bf16, true, 0}, Variant{DType::bf16, false, 0},
                                           Variant{DType::bf16, true, 1.0f}, Variant{DType::bf16, false, 1.0f},
                                           Variant{DType::mxfp8, true, 0}, Variant{DType::mxfp8, false, 0},
                                           Variant{DType::mxfp8, true, 1.0f}, Variant{DType::mxfp8, false, 1.0f},
                                           Variant{DType::mxfp8, true, 0, MmaModel::blackwell_mxfp8},
                                           Variant{DType::mxfp8, false, 1.0f, MmaModel::blackwell_mxfp8}),
                         [](const auto& info) {
                           return std::string(to_string(info.param.dtype)) + (info.param.shared ? "_shared" : "") +
                                  (info.param.clamp > 0 ? "_clamp" : "") +
                                  (info.param.mma == MmaModel::blackwell_mxfp8 ? "_blackwell" : "");
                         });

TEST(Reference, DtypeAndClampReallyChangeTheResult) {
  const RunResult bf = ref::run_reference(request(tiny(DType::bf16), 2, 32, 4), ref::ReferenceMode::contract);
  const RunResult mx = ref::run_reference(request(tiny(DType::mxfp8), 2, 32, 4), ref::ReferenceMode::contract);
  const RunResult cl = ref::run_reference(request(tiny(DType::bf16, true, 0.5f), 2, 32, 4), ref::ReferenceMode::contract);
  EXPECT_FALSE(global_bytes(bf, "out") == global_bytes(mx, "out"));
  EXPECT_FALSE(global_bytes(bf, "out") == global_bytes(cl, "out"));
  EXPECT_FALSE(global_bytes(bf, "d_w_gate") == global_bytes(mx, "d_w_gate"));
  // The Blackwell MXFP8 path (block-scaled MMA model, 32 per step) differs from the Hopper one (dequantise,
  // BF16 model, 16 per step) in the fp32 weight gradients; the bf16 outputs may round to the same bits.
  // (128 tokens: experts get > 32 rows, so the wgrad chains have more than one step in both paths.)
  const RunResult mx128 = ref::run_reference(request(tiny(DType::mxfp8), 2, 128, 4), ref::ReferenceMode::contract);
  const RunResult bw = ref::run_reference(request(tiny(DType::mxfp8, true, 0, MmaModel::blackwell_mxfp8), 2, 128, 4),
                                          ref::ReferenceMode::contract);
  for (const char* name : {"d_w_gate", "d_w_up", "d_w_down"})
    EXPECT_FALSE(global_bytes(bw, name) == global_bytes(mx128, name)) << name;
}

TEST(Reference, StageBuffersHaveTheScheduledSizes) {
  const LayerSpec spec = tiny();
  const RunRequest req = request(spec, 4, 64, 8);
  const Schedule s = build_schedule(spec, req.config, req.routing);
  std::vector<uint16_t> x(static_cast<size_t>(16 * spec.hidden), 0);
  for (int src = 0; src < 4; ++src) {
    const auto send = ref::dispatch_pack(s, src, spec.hidden, x.data());
    for (int dst = 0; dst < 4; ++dst) {
      EXPECT_EQ(static_cast<int64_t>(send[dst].size()), s.dispatch_tokens[src * 4 + dst] * spec.hidden);
      EXPECT_EQ(static_cast<int64_t>(ref::combine_list(s, src, dst).size()), s.combine_rows[src * 4 + dst]);
    }
  }
  // The backend interface lists the tensors of calico/backend.h with their shapes.
  const RunResult r = ref::make_reference_backend(ref::ReferenceMode::contract)->run(req);
  ASSERT_EQ(r.ranks.size(), 4u);
  const Tensor* w = r.ranks[1].find("d_w_down");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{4, spec.hidden, spec.intermediate}));
  for (const char* name : {"x", "topk_experts", "router_weights", "d_out", "w_gate", "w_up", "w_down", "ws_gate",
                           "ws_up", "ws_down", "out", "d_x", "d_router_weights", "d_w_gate", "d_w_up", "d_ws_gate",
                           "d_ws_up", "d_ws_down"})
    EXPECT_NE(r.ranks[3].find(name), nullptr) << name;
}

// Threads 1 vs 2 on a batch large enough that the element-wise loops (not only the GEMMs) run in parallel;
// the shared+clamp variants in bf16 and mxfp8 (the others are covered at one thread above, time budget).
TEST(Reference, BitwiseIdenticalForOneAndTwoThreads) {
  for (const Variant v : {Variant{DType::bf16, true, 1.0f}, Variant{DType::mxfp8, true, 1.0f},
                          Variant{DType::mxfp8, true, 1.0f, MmaModel::blackwell_mxfp8}}) {
    const LayerSpec spec = tiny(v.dtype, v.shared, v.clamp, v.mma);
    const RunResult t1 = ref::run_reference(request(spec, 2, 512, 5, 1), ref::ReferenceMode::contract);
    const RunResult t2 = ref::run_reference(request(spec, 2, 512, 5, 2), ref::ReferenceMode::contract);
    for (const auto& t : t1.ranks[0].tensors)
      EXPECT_TRUE(global_bytes(t1, t.name) == global_bytes(t2, t.name))
          << t.name << " (" << to_string(v.dtype) << ") differs between 1 and 2 threads";
  }
}
