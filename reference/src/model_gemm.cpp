// Bit-exact model GEMM (DESIGN 2.2/2.5): model_gemm_bf16_scalar is the specification (one mma_step_bf16 per
// K-step); model_gemm_bf16 is a cache-blocked AVX-512 kernel (or, without AVX-512, the same algorithm on 8-lane
// AVX2 vectors; without AVX2 the specification itself) that produces the same bits for every input. The
// vector kernels live in model_gemm_kernel.inc; an AVX-512 build also carries the AVX2 one
// (model_gemm_avx2.cpp), selectable at run time (GemmKernel), so both are measured and tested in one binary.
//
// Why the fast path is exact (BF16 rows: L = 16, F = 25, RZ to fp32, zero terms at E = -133):
//  - Per output element and K-step, Emax = max(e_a + e_b over the nonzero products, e_c). When
//    -101 <= Emax <= 121 ("the safe window"), every product a*b with E >= -135 is exact in fp32 (at most 16
//    significant bits, no overflow), and p * 2^(25-Emax) is an exact power-of-two scaling with |.| < 2^27,
//    so cvttps2dq yields exactly the model's term trunc(p / 2^(Emax-25)). Products with E < -135 (possibly
//    inexact in fp32) scale below 2^-8 and truncate to 0, as in the model. Zero terms sit below Emax in the
//    model too (-133 < -101), so they never change it inside the window.
//  - The 16 product terms fit an int32 sum (each < 2^27, 16 * 255^2 * 2^11 < 2^31); the accumulator term
//    (< 2^26) is added in int32 modulo 2^32 with a range check (fast steps: sum_in_range) or exactly in
//    int64 / double.
//  - The sum converts to float with round-toward-zero (vcvtdq2ps / vcvtqq2ps {rz}), exact truncation to 24
//    bits, and the multiply by 2^(Emax-25) >= 2^-126 is exact (results stay normal and below 2^128).
//  - Every other case takes the scalar step for that lane: Emax outside the window (tiny or huge values,
//    NaN/inf operands are coded with huge exponents, so inf*0 too). A step whose terms are all zero gives +0
//    in both; an accumulator equal to -0 is a zero term like +0 (the specification never returns -0).
//  - Per micro-tile and K-step the kernels first try micro_step_fast (every lane in the window or all-zero,
//    no int32 overflow; one branch per step); a step it declines runs again from the same inputs through
//    micro_step_exact, the per-lane version above (kernel file, model_gemm_kernel.inc).
//    The AVX-512 micro_step_fast scales each product by adding k << 23 (k = 25 - Emax) to its bits instead of
//    a second multiply; that is exact for every product only when Emax <= 24 (kFastHigh), so it declines
//    steps with Emax in (24, 121], which micro_step_exact then runs.
//  - Steps without zero or non-finite operands (a flag per packed block and K step) take the exponent pass on
//    8-bit codes, two k per vector, with saturating adds: exact on [-128, 127], which holds the whole window,
//    and a saturated sum stays on its side of it (model_gemm_kernel.inc, product_emax8).
// The AVX2 path differs only in the last rounding (no int32 -> float {rz} conversion). Its fast step sums the
// accumulator's term and the products' in int32 modulo 2^32 and declines a step with |sum| >= 2^31 - 2^26
// (every wrapped sum lands there) and converts it with MXCSR set to round toward zero around the kernel's
// loops (KernelRounding; all their other floating-point operations are exact in any mode). Its exact step
// adds the two int32 parts exactly in double (|sum| < 2^32), clears the low 29 of the 52 fraction bits (in sign-magnitude that is truncation to 24
// significant bits, i.e. round-toward-zero) and converts to float, which is then exact.
// Threads split output tiles only; each element's chain runs in one thread in K order, so the bits do not
// depend on the thread count. model_gemm_bf16_batch runs many GEMMs (the experts of a rank) as one parallel
// loop over (job, row tile, column panel) items; packing only changes where the same operand values are read
// from (pre-packed once per batch, or per K block inside an item for the forward weights).
#include "model_gemm.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "calico/error.h"

#define CALICO_GEMM_NS native_kernel
#include "model_gemm_kernel.inc"
#undef CALICO_GEMM_NS

#if defined(CALICO_MODEL_GEMM_AVX2_VARIANT)
namespace calico::ref::avx2_kernel {
const char* kernel_name();
void run_batch(MmaModel model, const std::vector<GemmJob>& jobs);
}  // namespace calico::ref::avx2_kernel
#endif

namespace calico::ref {

namespace {

// One K-step of the scalar chain for element (m, n): the K tail is zero-padded as in the specification.
float scalar_step(MmaModel model, int64_t K, const uint16_t* a_row, const uint16_t* b_row, int64_t k0, float acc) {
  uint16_t a[16] = {}, b[16] = {};
  const int64_t len = std::min<int64_t>(16, K - k0);
  std::copy_n(a_row + k0, len, a);
  std::copy_n(b_row + k0, len, b);
  return mma_step_bf16(a, b, acc, model);
}

}  // namespace

void model_gemm_bf16_scalar(MmaModel model, int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
                            const uint16_t* B, int64_t ldb, float* C, int64_t ldc) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      float acc = C[m * ldc + n];
      for (int64_t k0 = 0; k0 < K; k0 += 16) acc = scalar_step(model, K, A + m * lda, B + n * ldb, k0, acc);
      C[m * ldc + n] = acc;
    }
  }
}


namespace {

// A job through the specification: its operands copied to row-major [M,K] and [N,K] first.
void scalar_job(MmaModel model, const GemmJob& j) {
  std::vector<uint16_t> a(static_cast<size_t>(j.M * j.K)), b(static_cast<size_t>(j.N * j.K));
  for (int64_t m = 0; m < j.M; ++m)
    for (int64_t k = 0; k < j.K; ++k) a[m * j.K + k] = j.A.at(m, k);
  for (int64_t n = 0; n < j.N; ++n)
    for (int64_t k = 0; k < j.K; ++k) b[n * j.K + k] = j.B.at(n, k);
  model_gemm_bf16_scalar(model, j.M, j.N, j.K, a.data(), j.K, b.data(), j.K, j.C, j.ldc);
}

GemmKernel native_vector_kernel() {
#if defined(CALICO_MODEL_GEMM_AVX512)
  return GemmKernel::avx512;
#elif defined(CALICO_MODEL_GEMM_AVX2)
  return GemmKernel::avx2;
#else
  return GemmKernel::scalar;
#endif
}

// `best`: CALICO_MODEL_GEMM_KERNEL (avx512, avx2 or scalar) when set, else the fastest kernel here.
GemmKernel resolve(GemmKernel k) {
  if (k != GemmKernel::best) return k;
  static const GemmKernel chosen = [] {
    const std::vector<GemmKernel> have = model_gemm_kernels();
    const char* v = std::getenv("CALICO_MODEL_GEMM_KERNEL");
    if (!v || !*v) return have.front();
    for (GemmKernel h : have)
      if (std::string(v) == to_string(h)) return h;
    std::string names;
    for (GemmKernel h : have) names += std::string(names.empty() ? "" : ", ") + to_string(h);
    throw Error(fmt::format("CALICO_MODEL_GEMM_KERNEL must name a kernel of this build ({}), got '{}'", names, v));
  }();
  return chosen;
}

}  // namespace

const char* to_string(GemmKernel k) {
  switch (k) {
    case GemmKernel::best: return "best";
    case GemmKernel::avx512: return "avx512";
    case GemmKernel::avx2: return "avx2";
    case GemmKernel::scalar: return "scalar";
  }
  return "?";
}

std::vector<GemmKernel> model_gemm_kernels() {
  std::vector<GemmKernel> k;
  if (native_vector_kernel() != GemmKernel::scalar) k.push_back(native_vector_kernel());
#if defined(CALICO_MODEL_GEMM_AVX2_VARIANT)
  k.push_back(GemmKernel::avx2);  // built beside AVX-512, so this CPU has AVX2
#endif
  k.push_back(GemmKernel::scalar);
  return k;
}

GemmKernel model_gemm_default_kernel() { return resolve(GemmKernel::best); }

void model_gemm_bf16_batch(MmaModel model, const std::vector<GemmJob>& all, GemmKernel kernel) {
  std::vector<GemmJob> jobs;
  for (const GemmJob& j : all)
    if (j.M > 0 && j.N > 0 && j.K > 0) jobs.push_back(j);  // an empty chain leaves C as it is
  if (jobs.empty()) return;
  kernel = resolve(kernel);
  const MmaModelParams p = mma_model_params(model);
  const bool vector_rows = p.L == 16 && p.F == 25 && p.out_fraction_bits == 23;
#if defined(CALICO_MODEL_GEMM_AVX512) || defined(CALICO_MODEL_GEMM_AVX2)
  if (vector_rows && kernel == native_vector_kernel()) return native_kernel::run_batch(model, jobs);
#endif
#if defined(CALICO_MODEL_GEMM_AVX2_VARIANT)
  if (vector_rows && kernel == GemmKernel::avx2) return avx2_kernel::run_batch(model, jobs);
#endif
  if (vector_rows && kernel != GemmKernel::scalar)
    throw Error(fmt::format("model GEMM kernel {} is not in this build", to_string(kernel)));
  for (const GemmJob& j : jobs) scalar_job(model, j);
}

void model_gemm_bf16(MmaModel model, int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
                     const uint16_t* B, int64_t ldb, float* C, int64_t ldc, GemmKernel kernel) {
  GemmJob j;
  j.M = M, j.N = N, j.K = K, j.A = {A, lda, 1}, j.B = {B, ldb, 1}, j.C = C, j.ldc = ldc;
  model_gemm_bf16_batch(model, {j}, kernel);
}

// Blackwell MXFP8. model_gemm_mxfp8_blackwell_scalar is the specification (one mma_step_blackwell_mxfp8 per
// K block); model_gemm_mxfp8_blackwell computes the same step from operands decoded once. Why it is exact:
// an e4m3 element is (-1)^s m 2^(e-3) with m = 8 + frac (normal, e = field - 7) or m = frac (subnormal,
// e = -6), m in [0, 15]; numerics.h's term of a nonzero product is M = m_a m_b (< 2^8, P = 6) at
// E = e_a + e_b + s_a + s_b, a zero product the term at E = -133; C's term is its fp32 significand (P = 23)
// at floor(log2|c|) clamped at -126, a zero C at -133. E_max is the maximum of all 33 exponents; each
// aligned term is trunc(M 2^(E - P - E_max + F)) with F = 25, i.e. M << (E - E_max + 19) (< 2^27) or
// M >> (E_max - E - 19) for products; the sum is exact in int64 and rounded once by mma_round_toward_zero.
// NaN rules: e4m3 has no inf, so the result is NaN iff an element of either block is NaN, either scale is
// the E8M0 NaN, or C is NaN; otherwise an infinite C is the result (no finite product is infinite).
namespace {

struct MxDecoded {
  std::vector<int16_t> ms;     // signed significand (-1)^s m per element, 0 for +-0
  std::vector<int16_t> e;      // nominal exponent e per element
  std::vector<int16_t> scale;  // E8M0 exponent per block
  std::vector<uint8_t> nan;    // per block: a NaN element or a NaN scale
};

MxDecoded decode_mx(const uint8_t* X, const uint8_t* SX, int64_t rows, int64_t blocks) {
  const int64_t K = blocks * kMxBlock;
  MxDecoded d;
  d.ms.resize(static_cast<size_t>(rows * K));
  d.e.resize(static_cast<size_t>(rows * K));
  d.scale.resize(static_cast<size_t>(rows * blocks));
  d.nan.assign(static_cast<size_t>(rows * blocks), 0);
#pragma omp parallel for schedule(static) if (rows * K >= (1 << 14))
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t sc = SX[r * blocks + b];
      bool nan = e8m0_is_nan(sc);
      d.scale[r * blocks + b] = static_cast<int16_t>(e8m0_exponent(sc));
      for (int i = 0; i < kMxBlock; ++i) {
        const int64_t k = r * K + b * kMxBlock + i;
        const uint8_t v = X[k];
        if (fp8_is_nan(v, Fp8Kind::e4m3)) nan = true;
        const MmaOperand op = decode_fp8_operand(v, Fp8Kind::e4m3);
        const int m = op.zero ? 0 : static_cast<int>(op.m);
        d.ms[k] = static_cast<int16_t>(op.negative ? -m : m);
        d.e[k] = static_cast<int16_t>(op.e);
      }
      d.nan[r * blocks + b] = nan ? 1 : 0;
    }
  return d;
}

// One block step from decoded operands (a, b: 32 signed significands and exponents; s = s_a + s_b).
inline float mx_step_decoded(const int16_t* ams, const int16_t* ae, const int16_t* bms, const int16_t* be, int s,
                             float c) {
  const uint32_t cu = f32_bits(c);
  const int c_field = static_cast<int>((cu >> 23) & 0xFF);
  if (c_field == 0xFF) return (cu & 0x7FFFFFu) ? bits_f32(kF32CanonicalNaN) : c;
  const uint32_t c_frac = cu & 0x7FFFFFu;
  const bool c_zero = c_field == 0 && c_frac == 0;
  const int64_t c_mag = c_field == 0 ? c_frac : (c_frac | 0x800000u);
  const int e_c = c_zero ? kMmaZeroTermExponent : (c_field == 0 ? -126 : c_field - 127);
  int E[kMxBlock], M[kMxBlock];
  int emax = e_c;
  for (int i = 0; i < kMxBlock; ++i) {
    M[i] = ams[i] * bms[i];
    E[i] = M[i] != 0 ? ae[i] + be[i] + s : kMmaZeroTermExponent;
    emax = E[i] > emax ? E[i] : emax;
  }
  int64_t sum = 0;
  for (int i = 0; i < kMxBlock; ++i) {
    const int shift = E[i] - emax + 19;  // <= 19
    const int mag = M[i] < 0 ? -M[i] : M[i];
    const int r = -shift > 31 ? 31 : -shift;
    const int64_t v = shift >= 0 ? static_cast<int64_t>(mag) << shift : static_cast<int64_t>(mag >> r);
    sum += M[i] < 0 ? -v : v;
  }
  if (!c_zero) {
    const int shift = e_c - emax + 2;  // c: P = 23, F = 25
    const int64_t v = shift >= 0 ? c_mag << shift : (-shift >= 63 ? 0 : c_mag >> -shift);
    sum += (cu >> 31) ? -v : v;
  }
  return mma_round_toward_zero(sum, emax - 25, 23);
}

}  // namespace

void model_gemm_mxfp8_blackwell_scalar(int64_t M, int64_t N, int64_t blocks, const uint8_t* A, const uint8_t* SA,
                                       const uint8_t* B, const uint8_t* SB, float* C, int64_t ldc) {
  if (M == 0 || N == 0 || blocks == 0) return;
  const int64_t K = blocks * kMxBlock;
#pragma omp parallel for collapse(2) schedule(static) if (M * N * blocks >= 4096)
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      float acc = C[m * ldc + n];
      for (int64_t kb = 0; kb < blocks; ++kb)
        acc = mma_step_blackwell_mxfp8(A + m * K + kb * kMxBlock, Fp8Kind::e4m3, SA[m * blocks + kb],
                                       B + n * K + kb * kMxBlock, Fp8Kind::e4m3, SB[n * blocks + kb], acc);
      C[m * ldc + n] = acc;
    }
  }
}

void model_gemm_mxfp8_blackwell(int64_t M, int64_t N, int64_t blocks, const uint8_t* A, const uint8_t* SA,
                                const uint8_t* B, const uint8_t* SB, float* C, int64_t ldc) {
  if (M == 0 || N == 0 || blocks == 0) return;
  const int64_t K = blocks * kMxBlock;
  const MxDecoded da = decode_mx(A, SA, M, blocks), db = decode_mx(B, SB, N, blocks);
  constexpr int64_t kTm = 8, kTn = 16;  // output tile: an A tile and a B tile stay in cache over K
  const int64_t tm = (M + kTm - 1) / kTm, tn = (N + kTn - 1) / kTn;
#pragma omp parallel for collapse(2) schedule(static) if (M * N * blocks >= 4096)
  for (int64_t im = 0; im < tm; ++im)
    for (int64_t in = 0; in < tn; ++in)
      for (int64_t m = im * kTm; m < std::min(M, (im + 1) * kTm); ++m)
        for (int64_t n = in * kTn; n < std::min(N, (in + 1) * kTn); ++n) {
          float acc = C[m * ldc + n];
          for (int64_t kb = 0; kb < blocks; ++kb) {
            if (da.nan[m * blocks + kb] | db.nan[n * blocks + kb]) {
              acc = bits_f32(kF32CanonicalNaN);
              continue;
            }
            const int64_t ka = m * K + kb * kMxBlock, kbb = n * K + kb * kMxBlock;
            acc = mx_step_decoded(da.ms.data() + ka, da.e.data() + ka, db.ms.data() + kbb, db.e.data() + kbb,
                                  da.scale[m * blocks + kb] + db.scale[n * blocks + kb], acc);
          }
          C[m * ldc + n] = acc;
        }
}

}  // namespace calico::ref
