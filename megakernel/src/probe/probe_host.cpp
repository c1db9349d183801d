// Host side of the tensor-core probe (`calico probe-mma`, issue 5; megakernel/PROBE.md): generates inputs
// per family, runs the instruction through the launchers of probe_kernels.h, evaluates the numerics.h model
// for every output element on the host (OpenMP), and reports each mismatch with its inputs. On mismatches it
// searches the model's parameters (alignment width F, output fraction bits, zero-term exponent, how the K
// products are grouped) for variants that explain all the data: the starting point of a model fix.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>

#include <nlohmann/json.hpp>

#include "calico/error.h"
#include "calico/megakernel.h"
#include "calico/numerics.h"
#include "probe_kernels.h"
#include "probe_model.h"

namespace calico::gpu {
namespace {

using probe::ProbeKernel;
using probe::OperandFormat;
using probe::Rng;
using probe::TargetedVector;

struct InstrSpec {
  const char* name;
  const char* description;
  int required_sm;
  ProbeKernel kernel;
  int m, n, k;
  bool fp8;
  Fp8Kind kind;
  MmaModel model;
  bool chain;  // has the 64 x 256 chained-tile kernel
};

const InstrSpec kInstrs[] = {
    {"mma.sync.bf16", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 (warp, sm_80+)", 90,
     ProbeKernel::mma_sync_bf16, 16, 8, 16, false, Fp8Kind::e4m3, MmaModel::hopper_bf16, false},
    {"wgmma.bf16", "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 (warpgroup, sm_90a; chain m64n256k16)", 90,
     ProbeKernel::wgmma_bf16, 64, 8, 16, false, Fp8Kind::e4m3, MmaModel::hopper_bf16, true},
    {"wgmma.e4m3", "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 (warpgroup, sm_90a; chain m64n256k32)", 90,
     ProbeKernel::wgmma_e4m3, 64, 8, 32, true, Fp8Kind::e4m3, MmaModel::hopper_fp8, true},
    {"wgmma.e5m2", "wgmma.mma_async.sync.aligned.m64n8k32.f32.e5m2.e5m2 (warpgroup, sm_90a; chain m64n256k32)", 90,
     ProbeKernel::wgmma_e5m2, 64, 8, 32, true, Fp8Kind::e5m2, MmaModel::hopper_fp8, true},
    {"tcgen05.bf16",
     "tcgen05.mma.cta_group::1.kind::f16 bf16, f32 accumulate, M128 N16 K16 (sm_100a/sm_103a; compiled, not yet run)",
     100, ProbeKernel::tcgen05_f16, 128, 16, 16, false, Fp8Kind::e4m3, MmaModel::blackwell_bf16, false},
    {"tcgen05.mxf8.e4m3",
     "tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X e4m3, E8M0 scales, M128 N16 K32 "
     "(sm_100a/sm_103a; compiled, not yet run)",
     100, ProbeKernel::tcgen05_mxf8_e4m3, 128, 16, 32, true, Fp8Kind::e4m3, MmaModel::blackwell_mxfp8, false},
    {"tcgen05.mxf8.e5m2",
     "tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X e5m2, E8M0 scales, M128 N16 K32 "
     "(sm_100a/sm_103a; compiled, not yet run)",
     100, ProbeKernel::tcgen05_mxf8_e5m2, 128, 16, 32, true, Fp8Kind::e5m2, MmaModel::blackwell_mxfp8, false},
};

const InstrSpec& find_instr(const std::string& name_in) {
  // "tcgen05.f16" was the slot's name before the kernels existed (earlier PROBE.md commands).
  const std::string name = name_in == "tcgen05.f16" ? "tcgen05.bf16" : name_in;
  for (const auto& s : kInstrs)
    if (name == s.name) return s;
  std::string names;
  for (const auto& s : kInstrs) names += std::string(names.empty() ? "" : ", ") + s.name;
  throw Error(fmt::format("--instr: unknown instruction '{}'; known: {}", name, names));
}

OperandFormat format_of(const InstrSpec& s) { return s.fp8 ? OperandFormat::fp8_of(s.kind) : OperandFormat::bf16(); }

// One batch of single-instruction cases, laid out as probe_kernels.h describes.
struct Batch {
  int64_t cases = 0;
  std::vector<uint8_t> a, b, sa, sb;  // sa/sb: E8M0 scales per row of A / column of B (Blackwell MX only)
  std::vector<uint32_t> c, d;
  std::vector<int> family;            // per case
  std::vector<int> targeted_first;    // per case: index of the first targeted vector on its diagonal, or -1
};

void resize(Batch& bt, const InstrSpec& s, int64_t cases) {
  const int eb = s.fp8 ? 1 : 2;
  bt.cases = cases;
  bt.a.assign(static_cast<size_t>(cases) * s.m * s.k * eb, 0);
  bt.b.assign(static_cast<size_t>(cases) * s.n * s.k * eb, 0);
  bt.sa.assign(static_cast<size_t>(cases) * s.m, 127);
  bt.sb.assign(static_cast<size_t>(cases) * s.n, 127);
  bt.c.assign(static_cast<size_t>(cases) * s.m * s.n, 0);
  bt.family.assign(cases, 0);
  bt.targeted_first.assign(cases, -1);
}

void put(std::vector<uint8_t>& bytes, size_t index, uint32_t bits, int eb) {
  if (eb == 1) bytes[index] = static_cast<uint8_t>(bits);
  else {
    bytes[2 * index] = static_cast<uint8_t>(bits);
    bytes[2 * index + 1] = static_cast<uint8_t>(bits >> 8);
  }
}

uint32_t get(const std::vector<uint8_t>& bytes, size_t index, int eb) {
  if (eb == 1) return bytes[index];
  return static_cast<uint32_t>(bytes[2 * index]) | (static_cast<uint32_t>(bytes[2 * index + 1]) << 8);
}

uint32_t model_step(const InstrSpec& s, const uint32_t* a, const uint32_t* b, uint32_t c, uint8_t sa, uint8_t sb);

void run_batch_on_device(const InstrSpec& s, Batch& bt, bool model_as_device) {
  if (model_as_device) {  // host dry run: the model's own outputs stand in for the GPU's
    const int eb = s.fp8 ? 1 : 2;
    bt.d.assign(bt.c.size(), 0);
#pragma omp parallel for schedule(dynamic, 64)
    for (int64_t cs = 0; cs < bt.cases; ++cs) {
      uint32_t a[32], b[32];
      for (int m = 0; m < s.m; ++m) {
        for (int kk = 0; kk < s.k; ++kk) a[kk] = get(bt.a, (static_cast<size_t>(cs) * s.m + m) * s.k + kk, eb);
        for (int n = 0; n < s.n; ++n) {
          for (int kk = 0; kk < s.k; ++kk) b[kk] = get(bt.b, (static_cast<size_t>(cs) * s.n + n) * s.k + kk, eb);
          const size_t o = (static_cast<size_t>(cs) * s.m + m) * s.n + n;
          bt.d[o] = model_step(s, a, b, bt.c[o], bt.sa[cs * s.m + m], bt.sb[cs * s.n + n]);
        }
      }
    }
    return;
  }
  switch (s.kernel) {
    case ProbeKernel::mma_sync_bf16: bt.d = probe::launch_mma_sync_bf16_tiles(bt.a, bt.b, bt.c, bt.cases); break;
    case ProbeKernel::wgmma_bf16:
    case ProbeKernel::wgmma_e4m3:
    case ProbeKernel::wgmma_e5m2: bt.d = probe::launch_wgmma_tiles(s.kernel, bt.a, bt.b, bt.c, bt.cases); break;
    case ProbeKernel::tcgen05_f16:
    case ProbeKernel::tcgen05_mxf8_e4m3:
    case ProbeKernel::tcgen05_mxf8_e5m2:
      bt.d = probe::launch_tcgen05_tiles(s.kernel, bt.a, bt.b, bt.c, bt.sa, bt.sb, bt.cases);
      break;
  }
}

// The model for output (m, n) of case cs: the operands' bit patterns for one step, and the model's result.
struct OutputInputs {
  std::vector<uint32_t> a, b;
  uint32_t c = 0;
  uint8_t sa = 127, sb = 127;
};

OutputInputs inputs_of(const InstrSpec& s, const Batch& bt, int64_t cs, int m, int n) {
  const int eb = s.fp8 ? 1 : 2;
  OutputInputs in;
  in.a.resize(s.k);
  in.b.resize(s.k);
  for (int kk = 0; kk < s.k; ++kk) {
    in.a[kk] = get(bt.a, (static_cast<size_t>(cs) * s.m + m) * s.k + kk, eb);
    in.b[kk] = get(bt.b, (static_cast<size_t>(cs) * s.n + n) * s.k + kk, eb);
  }
  in.c = bt.c[(static_cast<size_t>(cs) * s.m + m) * s.n + n];
  in.sa = bt.sa[static_cast<size_t>(cs) * s.m + m];
  in.sb = bt.sb[static_cast<size_t>(cs) * s.n + n];
  return in;
}

uint32_t model_step(const InstrSpec& s, const uint32_t* a, const uint32_t* b, uint32_t c, uint8_t sa, uint8_t sb) {
  return probe::model_step_with(format_of(s), mma_model_params(s.model), a, b, c, sa, sb);
}

// The compare model (--compare-model): the same step with other parameters. Two models that differ only in
// their zero rule agree on every step without a zero term, so only those are evaluated twice.
struct CompareModel {
  bool on = false;
  MmaModelParams p{};
  uint32_t step(const InstrSpec& s, const uint32_t* a, const uint32_t* b, uint32_t c, uint8_t sa, uint8_t sb,
                uint32_t main_model) const {
    const OperandFormat f = format_of(s);
    if (!probe::has_zero_term(f, a, b, c, s.k)) return main_model;
    return probe::model_step_with(f, p, a, b, c, sa, sb);
  }
};

// ---------------------------------------------------------------------------------------------------------
// Families of random cases
// ---------------------------------------------------------------------------------------------------------
const char* const kFamilies[] = {"random_bits",  "random_finite",  "wide_spread", "cancellation", "c_zero",
                                 "near_underflow", "overflow",    "carry",        "zero_rows"};
constexpr int kFamilyCount = 9;

// E8M0 scales of one block-scaled case (drawn after everything else, so the operands and C of a case do not
// depend on whether its instruction is block scaled): half 2^0, then near 2^0, anywhere in [2^-127, 2^127],
// the extremes, and (random_bits only) the NaN code 0xFF.
void draw_scales(const InstrSpec& s, int family, Rng& rng, Batch& bt, int64_t cs) {
  auto one = [&]() -> uint8_t {
    const int mode = rng.uniform(0, 15);
    if (mode < 8) return 127;
    if (mode < 12) return static_cast<uint8_t>(rng.uniform(119, 135));
    if (mode < 14) return static_cast<uint8_t>(rng.uniform(0, 254));
    if (mode == 14) {
      const uint8_t extremes[] = {0, 1, 253, 254};
      return extremes[rng.uniform(0, 3)];
    }
    return family == 0 ? uint8_t{0xFF} : static_cast<uint8_t>(rng.uniform(100, 154));
  };
  for (int m = 0; m < s.m; ++m) bt.sa[static_cast<size_t>(cs) * s.m + m] = one();
  for (int n = 0; n < s.n; ++n) bt.sb[static_cast<size_t>(cs) * s.n + n] = one();
}

void generate_case(const InstrSpec& s, int family, Rng& rng, Batch& bt, int64_t cs) {
  const OperandFormat f = format_of(s);
  const int eb = f.bytes;
  auto A = [&](int m, int kk, uint32_t v) { put(bt.a, (static_cast<size_t>(cs) * s.m + m) * s.k + kk, v, eb); };
  auto B = [&](int n, int kk, uint32_t v) { put(bt.b, (static_cast<size_t>(cs) * s.n + n) * s.k + kk, v, eb); };
  auto C = [&](int m, int n, uint32_t v) { bt.c[(static_cast<size_t>(cs) * s.m + m) * s.n + n] = v; };
  const int span = f.emax - f.emin;
  // Exponent window for the operands and the product exponent the accumulators are drawn around.
  int lo = f.emin, hi = f.emax;
  switch (family) {
    case 2: {  // wide_spread: a random window of random width
      const int w = rng.uniform(0, span);
      lo = rng.uniform(f.emin, f.emax - w);
      hi = lo + w;
      break;
    }
    case 3:
    case 4:
    case 7: {  // narrow windows
      lo = rng.uniform(f.emin, f.emax - 3);
      hi = lo + rng.uniform(0, 3);
      break;
    }
    case 5: {  // near_underflow: the lowest exponents (bf16 products reach the fp32 subnormal range)
      lo = f.emin - f.frac_bits;
      hi = f.fp8 ? f.emin + 2 : -60;
      if (!f.fp8) lo = -90;
      break;
    }
    case 6: {  // overflow: the highest exponents
      lo = f.emax - 3;
      hi = f.emax;
      break;
    }
    default: break;
  }
  auto operand = [&](void) -> uint32_t {
    switch (family) {
      case 0: return rng.bits(f.bytes * 8);
      case 1: return f.random_finite(rng);
      case 5:
        if (rng.uniform(0, 3) == 0) return f.random_subnormal(rng);
        return f.random_normal(rng, lo, hi);
      case 7: return f.make(rng.coin(), rng.uniform(lo, hi), f.frac_mask() - (rng.bits(2) & f.frac_mask()));
      default: return f.random_normal(rng, lo, hi);
    }
  };
  for (int m = 0; m < s.m; ++m)
    for (int kk = 0; kk < s.k; ++kk) A(m, kk, operand());
  for (int n = 0; n < s.n; ++n)
    for (int kk = 0; kk < s.k; ++kk) B(n, kk, operand());
  if (family == 7) {  // carry: one sign per row of A and column of B, so every product of an output agrees
    for (int m = 0; m < s.m; ++m) {
      const bool neg = rng.coin();
      for (int kk = 0; kk < s.k; ++kk) {
        const size_t i = (static_cast<size_t>(cs) * s.m + m) * s.k + kk;
        put(bt.a, i, (get(bt.a, i, eb) & ~f.sign_bit()) | (neg ? f.sign_bit() : 0), eb);
      }
    }
    for (int n = 0; n < s.n; ++n)
      for (int kk = 0; kk < s.k; ++kk) {
        const size_t i = (static_cast<size_t>(cs) * s.n + n) * s.k + kk;
        put(bt.b, i, get(bt.b, i, eb) & ~f.sign_bit(), eb);
      }
  }
  if (family == 8) {  // zero_rows (issue 10): a third of A's rows and an eighth of B's columns all +-0
    for (int m = 0; m < s.m; ++m) {
      if (rng.uniform(0, 2) != 0) continue;
      const int signs = rng.uniform(0, 2);
      for (int kk = 0; kk < s.k; ++kk) {
        const uint32_t z = signs == 0 ? 0u : signs == 1 ? f.sign_bit() : (rng.coin() ? f.sign_bit() : 0u);
        put(bt.a, (static_cast<size_t>(cs) * s.m + m) * s.k + kk, z, eb);
      }
    }
    for (int n = 0; n < s.n; ++n) {
      if (rng.uniform(0, 7) != 0) continue;
      for (int kk = 0; kk < s.k; ++kk)
        put(bt.b, (static_cast<size_t>(cs) * s.n + n) * s.k + kk, rng.coin() ? f.sign_bit() : 0u, eb);
    }
  }
  if (family == 3) {  // cancellation: a[2i+1] = a[2i], b[2i+1] = -b[2i] with its last bit(s) perturbed
    for (int m = 0; m < s.m; ++m)
      for (int kk = 0; kk + 1 < s.k; kk += 2) {
        const size_t i = (static_cast<size_t>(cs) * s.m + m) * s.k + kk;
        put(bt.a, i + 1, get(bt.a, i, eb), eb);
      }
    for (int n = 0; n < s.n; ++n)
      for (int kk = 0; kk + 1 < s.k; kk += 2) {
        const size_t i = (static_cast<size_t>(cs) * s.n + n) * s.k + kk;
        uint32_t v = get(bt.b, i, eb) ^ f.sign_bit();
        if (rng.coin()) v ^= rng.bits(2) & f.frac_mask();
        if (f.is_nan(v) || f.is_inf(v)) v = get(bt.b, i, eb) ^ f.sign_bit();
        put(bt.b, i + 1, v, eb);
      }
  }
  // Accumulators: a mix per element, drawn around the products' exponent 2 * window.
  for (int m = 0; m < s.m; ++m)
    for (int n = 0; n < s.n; ++n) {
      uint32_t c = 0;
      const int pe = rng.uniform(2 * lo, 2 * hi);
      const int mode = family == 4 ? 0 : rng.uniform(0, 7);
      if (family == 8) {  // zero_rows: three quarters of C below 2^-95 (normal tiny or subnormal), the rest mixed
        const int z = rng.uniform(0, 7);
        if (z < 3) c = probe::random_f32(rng, -126, -95);
        else if (z < 6) c = (rng.bits(23) | 1u) | (rng.coin() ? 0x80000000u : 0u);
        else c = z == 6 ? (rng.coin() ? 0x80000000u : 0u) : probe::random_f32(rng, -149, 127);
        C(m, n, c);
        continue;
      }
      switch (mode) {
        case 0: c = rng.coin() ? 0x80000000u : 0u; break;
        case 1:
          c = family == 0 ? rng.bits(32) : probe::random_f32(rng, -149, 127);
          break;
        case 2: c = probe::random_f32(rng, pe - 40, pe - 20); break;
        case 3: c = probe::random_f32(rng, pe + 8, pe + 30); break;
        case 4:
          if (family == 5) {
            c = rng.bits(23) | (rng.coin() ? 0x80000000u : 0u);  // fp32 subnormal
            break;
          }
          if (family == 6) {
            c = (rng.coin() ? 0x80000000u : 0u) | (0x7F7FFFFFu - rng.bits(4));
            break;
          }
          [[fallthrough]];
        default: c = probe::random_f32(rng, pe - 4, pe + 4); break;
      }
      C(m, n, c);
    }
  if (s.model == MmaModel::blackwell_mxfp8) draw_scales(s, family, rng, bt, cs);
}

// Puts targeted vectors t0 .. t0 + N - 1 on the diagonal of case cs (row m carries vector m % N).
void place_targeted(const InstrSpec& s, const std::vector<TargetedVector>& tv, size_t t0, Batch& bt, int64_t cs) {
  const int eb = s.fp8 ? 1 : 2;
  for (int m = 0; m < s.m; ++m) {
    const TargetedVector& v = tv[std::min(t0 + m % s.n, tv.size() - 1)];
    for (int kk = 0; kk < s.k; ++kk) put(bt.a, (static_cast<size_t>(cs) * s.m + m) * s.k + kk, v.a[kk], eb);
    for (int n = 0; n < s.n; ++n) {
      const TargetedVector& vn = tv[std::min(t0 + n, tv.size() - 1)];
      bt.c[(static_cast<size_t>(cs) * s.m + m) * s.n + n] = (m % s.n == n) ? vn.c : v.c;
    }
  }
  for (int n = 0; n < s.n; ++n) {
    const TargetedVector& v = tv[std::min(t0 + n, tv.size() - 1)];
    for (int kk = 0; kk < s.k; ++kk) put(bt.b, (static_cast<size_t>(cs) * s.n + n) * s.k + kk, v.b[kk], eb);
  }
  if (s.model == MmaModel::blackwell_mxfp8) {  // E8M0 scales: row m's vector for A, column n's for B
    for (int m = 0; m < s.m; ++m) bt.sa[static_cast<size_t>(cs) * s.m + m] = tv[std::min(t0 + m % s.n, tv.size() - 1)].sa;
    for (int n = 0; n < s.n; ++n) bt.sb[static_cast<size_t>(cs) * s.n + n] = tv[std::min(t0 + n, tv.size() - 1)].sb;
  }
  bt.targeted_first[cs] = static_cast<int>(t0);
}

// ---------------------------------------------------------------------------------------------------------
// Comparison
// ---------------------------------------------------------------------------------------------------------
struct Tally {
  std::map<std::string, ProbeFamilyResult> families;
  std::map<std::string, std::vector<ProbeMismatch>> records;
  std::vector<OutputInputs> diag_bad, diag_good;  // samples for the model-variant search
  std::vector<uint32_t> diag_bad_gpu, diag_good_gpu;
};

constexpr size_t kDiagSamples = 4000;

void compare_batch(const InstrSpec& s, const Batch& bt, int64_t first_case, const std::vector<TargetedVector>* tv,
                   int max_records, const CompareModel& cmp, Tally& tally) {
  const int64_t outputs_per_case = static_cast<int64_t>(s.m) * s.n;
  // bit 0: the model differs from the GPU; bit 1: the compare model does
  std::vector<uint8_t> bad(static_cast<size_t>(bt.cases) * outputs_per_case, 0);
#pragma omp parallel for schedule(dynamic, 64)
  for (int64_t cs = 0; cs < bt.cases; ++cs) {
    const int eb = s.fp8 ? 1 : 2;
    uint32_t a[32], b[32];
    for (int m = 0; m < s.m; ++m) {
      for (int kk = 0; kk < s.k; ++kk) a[kk] = get(bt.a, (static_cast<size_t>(cs) * s.m + m) * s.k + kk, eb);
      for (int n = 0; n < s.n; ++n) {
        for (int kk = 0; kk < s.k; ++kk) b[kk] = get(bt.b, (static_cast<size_t>(cs) * s.n + n) * s.k + kk, eb);
        const size_t o = (static_cast<size_t>(cs) * s.m + m) * s.n + n;
        const uint8_t sa = bt.sa[cs * s.m + m], sb = bt.sb[cs * s.n + n];
        const uint32_t want = model_step(s, a, b, bt.c[o], sa, sb);
        uint8_t flags = want != bt.d[o] ? 1 : 0;
        if (cmp.on && cmp.step(s, a, b, bt.c[o], sa, sb, want) != bt.d[o]) flags |= 2;
        bad[o] = flags;
      }
    }
  }
  // Serial bookkeeping in case order: deterministic records whatever the thread count.
  for (int64_t cs = 0; cs < bt.cases; ++cs) {
    const bool targeted = bt.targeted_first[cs] >= 0;
    for (int m = 0; m < s.m; ++m)
      for (int n = 0; n < s.n; ++n) {
        std::string fam = targeted ? "targeted" : kFamilies[bt.family[cs]];
        if (targeted && m % s.n == n) fam = "targeted:" + (*tv)[std::min<size_t>(bt.targeted_first[cs] + n, tv->size() - 1)].name;
        else if (targeted) fam = "targeted:cross";
        ProbeFamilyResult& r = tally.families[fam];
        r.family = fam;
        if (m == 0 && n == 0) r.cases += 1;
        r.outputs += 1;
        const size_t o = (static_cast<size_t>(cs) * s.m + m) * s.n + n;
        const bool is_bad = (bad[o] & 1) != 0;
        if (is_bad) r.mismatches += 1;
        if (bad[o] & 2) r.compare_mismatches += 1;
        if (is_bad || (tally.diag_good.size() < kDiagSamples && (o % 97) == 0)) {
          OutputInputs in = inputs_of(s, bt, cs, m, n);
          if (is_bad && static_cast<int>(tally.records[fam].size()) < max_records) {
            ProbeMismatch mm;
            mm.family = fam;
            mm.case_index = first_case + cs;
            mm.row = m;
            mm.col = n;
            mm.a = in.a;
            mm.b = in.b;
            mm.c = in.c;
            mm.scale_a = in.sa;
            mm.scale_b = in.sb;
            mm.gpu = bt.d[o];
            mm.model = model_step(s, in.a.data(), in.b.data(), in.c, in.sa, in.sb);
            tally.records[fam].push_back(std::move(mm));
          }
          // The variant models take no block scales: only unit-scale outputs are evidence for them.
          const bool unit_scales = in.sa == 127 && in.sb == 127;
          if (unit_scales && is_bad && tally.diag_bad.size() < kDiagSamples) {
            tally.diag_bad.push_back(std::move(in));
            tally.diag_bad_gpu.push_back(bt.d[o]);
          } else if (unit_scales && !is_bad) {
            tally.diag_good.push_back(std::move(in));
            tally.diag_good_gpu.push_back(bt.d[o]);
          }
        }
      }
  }
}

// Which variants of the model explain every sampled output (bad and good)?
std::vector<std::string> diagnose(const InstrSpec& s, const Tally& tally) {
  std::vector<std::string> lines;
  if (tally.diag_bad.empty()) return lines;
  const OperandFormat f = format_of(s);
  const probe::VariantParams base = probe::VariantParams::of(s.model, s.k);
  struct Scored {
    probe::VariantParams p;
    int64_t wrong;
  };
  std::vector<Scored> scored;
  const auto variants = probe::variant_grid(base);
  scored.resize(variants.size());
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t v = 0; v < variants.size(); ++v) {
    int64_t wrong = 0;
    auto count = [&](const std::vector<OutputInputs>& ins, const std::vector<uint32_t>& gpu) {
      for (size_t i = 0; i < ins.size(); ++i)
        if (probe::variant_step(f, variants[v], ins[i].a.data(), ins[i].b.data(), ins[i].c, s.k) != gpu[i]) ++wrong;
    };
    count(tally.diag_bad, tally.diag_bad_gpu);
    count(tally.diag_good, tally.diag_good_gpu);
    scored[v] = {variants[v], wrong};
  }
  std::stable_sort(scored.begin(), scored.end(), [](const Scored& x, const Scored& y) { return x.wrong < y.wrong; });
  const size_t total = tally.diag_bad.size() + tally.diag_good.size();
  lines.push_back(fmt::format("model variants over {} sampled outputs ({} mismatching, {} matching); published: {}",
                              total, tally.diag_bad.size(), tally.diag_good.size(), base.describe()));
  for (size_t i = 0; i < std::min<size_t>(8, scored.size()); ++i)
    lines.push_back(fmt::format("  {} wrong: {}", scored[i].wrong, scored[i].p.describe()));
  return lines;
}

// ---------------------------------------------------------------------------------------------------------
// Chained tiles (64 x 256 over K)
// ---------------------------------------------------------------------------------------------------------
const char* const kChainFamilies[] = {"normal", "wide_spread", "cancellation", "normal_first_step_scale_d0"};

void run_chain(const InstrSpec& s, const ProbeMmaOptions& o, const CompareModel& cmp, Tally& tally) {
  const OperandFormat f = format_of(s);
  const int eb = f.bytes, M = 64, N = 256, K = o.chain_k;
  const int steps = K / s.k;
  for (int t = 0; t < o.chain_tiles; ++t) {
    const int fam = t % 4;
    std::vector<uint8_t> a(static_cast<size_t>(M) * K * eb), b(static_cast<size_t>(N) * K * eb);
    auto fill = [&](std::vector<uint8_t>& v, int rows, uint64_t stream) {
#pragma omp parallel for schedule(static)
      for (int r = 0; r < rows; ++r) {
        Rng rng(o.seed, (static_cast<uint64_t>(t) << 40) ^ (stream << 32) ^ static_cast<uint64_t>(r), 0xC4A1);
        for (int kk = 0; kk < K; ++kk) {
          uint32_t x;
          if (fam == 1) x = f.random_normal(rng, std::max(f.emin, -20), std::min(f.emax, 20));
          else x = f.random_normal(rng, f.fp8 ? -4 : -6, f.fp8 ? 2 : 1);
          if (fam == 2 && stream == 1 && (kk % 2) == 1) x = get(v, static_cast<size_t>(r) * K + kk - 1, eb) ^ f.sign_bit();
          if (fam == 2 && stream == 0 && (kk % 2) == 1) x = get(v, static_cast<size_t>(r) * K + kk - 1, eb);
          put(v, static_cast<size_t>(r) * K + kk, x, eb);
        }
      }
    };
    fill(a, M, 0);
    fill(b, N, 1);
    const bool scale_d0 = fam == 3;
    std::vector<uint32_t> d;
    if (!o.model_as_device) d = probe::launch_wgmma_chain(s.kernel, a, b, 1, K, scale_d0);
    std::vector<uint32_t> want(static_cast<size_t>(M) * N), want_cmp(static_cast<size_t>(M) * N);
#pragma omp parallel for schedule(dynamic, 4)
    for (int mn = 0; mn < M * N; ++mn) {
      const int m = mn / N, n = mn % N;
      uint32_t acc = 0, acc_cmp = 0, av[32], bv[32];
      for (int st = 0; st < steps; ++st) {
        for (int kk = 0; kk < s.k; ++kk) {
          av[kk] = get(a, static_cast<size_t>(m) * K + st * s.k + kk, eb);
          bv[kk] = get(b, static_cast<size_t>(n) * K + st * s.k + kk, eb);
        }
        acc = model_step(s, av, bv, acc, 127, 127);
        if (cmp.on) acc_cmp = cmp.step(s, av, bv, acc_cmp, 127, 127, model_step(s, av, bv, acc_cmp, 127, 127));
      }
      want[mn] = acc;
      want_cmp[mn] = acc_cmp;
    }
    if (o.model_as_device) d = want;
    const std::string fam_name = std::string("chain:") + kChainFamilies[fam];
    ProbeFamilyResult& r = tally.families[fam_name];
    r.family = fam_name;
    r.cases += 1;
    for (int mn = 0; mn < M * N; ++mn) {
      r.outputs += 1;
      if (cmp.on && want_cmp[mn] != d[mn]) r.compare_mismatches += 1;
      if (want[mn] == d[mn]) continue;
      r.mismatches += 1;
      if (static_cast<int>(tally.records[fam_name].size()) < o.max_records) {
        ProbeMismatch mm;
        mm.family = fam_name;
        mm.case_index = t;
        mm.row = mn / N;
        mm.col = mn % N;
        mm.step = steps;
        mm.gpu = d[mn];
        mm.model = want[mn];
        tally.records[fam_name].push_back(std::move(mm));
      }
    }
  }
}

std::string today() {
  const std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&now));
  return buf;
}

std::string hex(uint32_t v, int digits) { return fmt::format("0x{:0{}X}", v, digits); }

}  // namespace

namespace probe {

bool tcgen05_capability_ok(int major, int minor) { return major == 10 && (minor == 0 || minor == 3); }

std::string tcgen05_requirement(ProbeKernel kernel, const std::string& found) {
  const char* name = "tcgen05";
  for (const auto& s : kInstrs)
    if (s.kernel == kernel) name = s.name;
  return fmt::format(
      "probe: {} needs sm_100a/sm_103a, found {} (tcgen05 runs on Blackwell B200/GB200, compute capability 10.0, "
      "or B300/GB300, 10.3, with a build whose CMAKE_CUDA_ARCHITECTURES has 100a or 103a)",
      name, found);
}

}  // namespace probe

void ProbeMmaOptions::validate() const {
  find_instr(instr);
  require(cases >= 0 && cases <= (int64_t{1} << 34), "--cases: {} not in [0, 2^34]", cases);
  require(chain_tiles >= 0 && chain_tiles <= 64, "--chain-tiles: {} not in [0, 64]", chain_tiles);
  require(chain_k > 0 && chain_k % 128 == 0 && chain_k <= (1 << 20), "--chain-k: {} must be a multiple of 128 in [128, 2^20]",
          chain_k);
  require(max_records >= 0, "--max-records: {} must be >= 0", max_records);
  MmaModelParams unused{};
  probe::compare_model_params(MmaModel::hopper_bf16, compare_model, unused);  // throws on an unknown name
}

std::vector<ProbeInstruction> probe_instructions() {
  std::vector<ProbeInstruction> out;
  for (const auto& s : kInstrs) out.push_back({s.name, s.description, s.required_sm});
  return out;
}

int64_t ProbeMmaReport::total_outputs() const {
  int64_t t = 0;
  for (const auto& f : families) t += f.outputs;
  return t;
}

int64_t ProbeMmaReport::total_mismatches() const {
  int64_t t = 0;
  for (const auto& f : families) t += f.mismatches;
  return t;
}

int64_t ProbeMmaReport::total_compare_mismatches() const {
  int64_t t = 0;
  for (const auto& f : families) t += f.compare_mismatches;
  return t;
}

std::string ProbeMmaReport::summary() const {
  std::string s = fmt::format("probe-mma {}: {}\n  device: {}\n  driver: {}\n  date: {}  seed: {}  tile {}x{}x{}\n",
                              instr, description, device, driver, date, seed, tile_m, tile_n, tile_k);
  const bool cmp = compare_model != "none";
  if (cmp)
    s += fmt::format("  compare model ({}): {}; its column counts the outputs where it differs from the GPU "
                     "(negative control: nonzero shows the probe can tell that model from the GPU)\n",
                     compare_model, compare_description);
  const std::string cmp_head = cmp ? fmt::format(" {:>16}", compare_model) : "";
  s += fmt::format("  {:<44} {:>10} {:>14} {:>10}{}\n", "family", "cases", "outputs", "mismatches", cmp_head);
  auto cmp_col = [&](int64_t v) { return cmp ? fmt::format(" {:>16}", v) : std::string(); };
  for (const auto& f : families)
    s += fmt::format("  {:<44} {:>10} {:>14} {:>10}{}\n", f.family, f.cases, f.outputs, f.mismatches,
                     cmp_col(f.compare_mismatches));
  s += fmt::format("  {:<44} {:>10} {:>14} {:>10}{}\n", "TOTAL", "", total_outputs(), total_mismatches(),
                   cmp_col(total_compare_mismatches()));
  for (const auto& r : records) {
    s += fmt::format("  MISMATCH {} case {} ({}, {}){}: gpu {} model {} c {}\n", r.family, r.case_index, r.row, r.col,
                     r.step >= 0 ? fmt::format(" after {} chained steps", r.step) : "", hex(r.gpu, 8), hex(r.model, 8),
                     hex(r.c, 8));
    if (!r.a.empty()) {
      std::string a, b;
      for (auto v : r.a) a += fmt::format(" {:x}", v);
      for (auto v : r.b) b += fmt::format(" {:x}", v);
      s += fmt::format("    a:{}\n    b:{}\n", a, b);
      if (r.scale_a != 127 || r.scale_b != 127)
        s += fmt::format("    E8M0 scale_a 0x{:02X} scale_b 0x{:02X}\n", r.scale_a, r.scale_b);
    }
  }
  for (const auto& l : diagnosis) s += "  " + l + "\n";
  s += fmt::format("  time: {:.1f} s\n", seconds);
  return s;
}

std::string ProbeMmaReport::to_json() const {
  nlohmann::json j;
  j["instr"] = instr;
  j["description"] = description;
  j["device"] = device;
  j["driver"] = driver;
  j["date"] = date;
  j["seed"] = seed;
  j["tile"] = {tile_m, tile_n, tile_k};
  j["total_outputs"] = total_outputs();
  j["total_mismatches"] = total_mismatches();
  j["seconds"] = seconds;
  j["compare_model"] = compare_model;
  j["compare_description"] = compare_description;
  if (compare_model != "none") j["total_compare_mismatches"] = total_compare_mismatches();
  for (const auto& f : families) {
    nlohmann::json fj{{"family", f.family}, {"cases", f.cases}, {"outputs", f.outputs}, {"mismatches", f.mismatches}};
    if (compare_model != "none") fj["compare_mismatches"] = f.compare_mismatches;
    j["families"].push_back(fj);
  }
  j["mismatches"] = nlohmann::json::array();
  for (const auto& r : records) {
    nlohmann::json m{{"family", r.family}, {"case", r.case_index}, {"row", r.row},     {"col", r.col},
                     {"step", r.step},     {"c", hex(r.c, 8)},     {"gpu", hex(r.gpu, 8)}, {"model", hex(r.model, 8)}};
    m["scale_a"] = hex(r.scale_a, 2);
    m["scale_b"] = hex(r.scale_b, 2);
    for (auto v : r.a) m["a"].push_back(hex(v, 4));
    for (auto v : r.b) m["b"].push_back(hex(v, 4));
    j["mismatches"].push_back(m);
  }
  j["diagnosis"] = diagnosis;
  return j.dump(1);
}

ProbeMmaReport probe_mma(const ProbeMmaOptions& o) {
  o.validate();
  const InstrSpec& s = find_instr(o.instr);
  require(s.chain || o.chain_tiles == 0, "--chain-tiles: instruction {} has no chained-tile kernel (wgmma.* have)",
          s.name);
  if (s.required_sm >= 100 && !o.model_as_device) {  // before generating any input: a clear error on a machine that cannot run it
    if (device_count() == 0)
      throw Error(probe::tcgen05_requirement(s.kernel, "no usable CUDA device (" + device_description() + ")"));
    probe::require_device_for(s.kernel);
  }
  const auto t0 = std::chrono::steady_clock::now();
  ProbeMmaReport rep;
  rep.instr = s.name;
  rep.description = s.description;
  rep.device = o.model_as_device ? "none: --model-as-device (the numerics.h model stands in for the GPU; a host "
                                   "dry run of the generator and the comparison, not a hardware result)"
                                 : device_description();
  CompareModel cmp;
  cmp.on = probe::compare_model_params(s.model, o.compare_model, cmp.p);
  rep.compare_model = cmp.on ? o.compare_model : "none";
  if (cmp.on) rep.compare_description = probe::compare_model_description(o.compare_model);
  rep.driver = driver_description();
  rep.date = today();
  rep.seed = o.seed;
  rep.tile_m = s.m;
  rep.tile_n = s.n;
  rep.tile_k = s.k;
  Tally tally;
  const OperandFormat f = format_of(s);
  // Random families, in batches; case cs belongs to family cs % 9 and draws from its own stream.
  const int64_t batch_cases = std::max<int64_t>(1, (int64_t{1} << 22) / (s.m * s.n));
  for (int64_t first = 0; first < o.cases; first += batch_cases) {
    Batch bt;
    resize(bt, s, std::min(batch_cases, o.cases - first));
#pragma omp parallel for schedule(dynamic, 64)
    for (int64_t cs = 0; cs < bt.cases; ++cs) {
      const int64_t global = first + cs;
      const int fam = static_cast<int>(global % kFamilyCount);
      Rng rng(o.seed, static_cast<uint64_t>(global), 0x5EED);
      bt.family[cs] = fam;
      generate_case(s, fam, rng, bt, cs);
    }
    run_batch_on_device(s, bt, o.model_as_device);
    compare_batch(s, bt, first, nullptr, o.max_records, cmp, tally);
  }
  // Targeted vectors, N per case on the diagonal.
  if (o.targeted) {
    const std::vector<TargetedVector> tv = probe::targeted_vectors(f, s.k, s.model, o.seed);
    const int64_t tcases = static_cast<int64_t>((tv.size() + s.n - 1) / s.n);
    for (int64_t first = 0; first < tcases; first += batch_cases) {
      Batch bt;
      resize(bt, s, std::min(batch_cases, tcases - first));
      for (int64_t cs = 0; cs < bt.cases; ++cs) place_targeted(s, tv, static_cast<size_t>(first + cs) * s.n, bt, cs);
      run_batch_on_device(s, bt, o.model_as_device);
      compare_batch(s, bt, first, &tv, o.max_records, cmp, tally);
    }
  }
  if (o.chain_tiles > 0) run_chain(s, o, cmp, tally);
  // Targeted families are many; fold them into one summary row per name prefix up to ':' + name.
  for (auto& [name, r] : tally.families) rep.families.push_back(r);
  for (auto& [name, recs] : tally.records)
    for (auto& r : recs) rep.records.push_back(r);
  if (o.diagnose) rep.diagnosis = diagnose(s, tally);
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

}  // namespace calico::gpu
