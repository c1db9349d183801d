// model_gemm_bf16 (vectorised, blocked, threaded) must equal model_gemm_bf16_scalar (one mma_step_bf16 per
// K-step, the specification) bit for bit: odd shapes, K tails, wide exponents, subnormals, NaN/inf, signed
// zeros, cancellation, C != 0, and 1 vs 2 threads; every vector kernel of the build (AVX-512 and the AVX2
// one built beside it, or AVX2 alone) through GemmKernel.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "model_gemm.h"

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace calico::ref {
namespace {

enum class Mix { typical, wide, bits, zeros, subnormal, cancel };

// The vector kernels of this build (model_gemm_kernels() without the scalar specification).
std::vector<GemmKernel> kernels() {
  std::vector<GemmKernel> k = model_gemm_kernels();
  k.pop_back();
  return k;
}

// Every vector kernel of this build equals the scalar specification, bit for bit, on C0 + A * B^T
// (row-major A [M, K], B [N, K]); `where` names the case in a failure.
void expect_kernels_match_scalar(int64_t M, int64_t N, int64_t K, const std::vector<uint16_t>& A,
                                 const std::vector<uint16_t>& B, const std::vector<float>& C0, const std::string& where,
                                 MmaModel model = MmaModel::hopper_bf16) {
  std::vector<float> want = C0;
  model_gemm_bf16_scalar(model, M, N, K, A.data(), K, B.data(), K, want.data(), N);
  for (GemmKernel kernel : kernels()) {
    std::vector<float> got = C0;
    model_gemm_bf16(model, M, N, K, A.data(), K, B.data(), K, got.data(), N, kernel);
    for (int64_t i = 0; i < M * N; ++i)
      ASSERT_EQ(f32_bits(got[i]), f32_bits(want[i])) << where << " element " << i << " kernel " << to_string(kernel);
  }
}

uint16_t bf16_from(int exp_field, uint32_t frac, bool neg) {
  return static_cast<uint16_t>((neg ? 0x8000u : 0u) | (static_cast<uint32_t>(exp_field) << 7) | (frac & 0x7F));
}

// One bf16 element drawn from the given mix; `partner` supports exact cancellation (x then -x).
uint16_t draw(Mix mix, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> u(0, 1 << 30);
  const bool neg = u(rng) & 1;
  const uint32_t frac = u(rng) & 0x7F;
  switch (mix) {
    case Mix::typical: return bf16_from(127 - 12 + u(rng) % 14, frac, neg);
    case Mix::wide: return bf16_from(1 + u(rng) % 254, frac, neg);
    case Mix::bits: return static_cast<uint16_t>(u(rng));
    case Mix::zeros: {
      const int r = u(rng) % 4;
      if (r == 0) return bf16_from(0, 0, neg);
      return bf16_from(127 - 8 + u(rng) % 8, frac, neg);
    }
    case Mix::subnormal: {
      const int r = u(rng) % 3;
      if (r == 0) return bf16_from(0, frac, neg);
      if (r == 1) return bf16_from(1 + u(rng) % 8, frac, neg);
      return bf16_from(127 + 40 + u(rng) % 60, frac, neg);
    }
    case Mix::cancel: return bf16_from(127 - 4 + u(rng) % 4, frac, neg);
  }
  return 0;
}

float draw_c(Mix mix, std::mt19937_64& rng) {
  std::uniform_int_distribution<uint32_t> u;
  const uint32_t r = u(rng);
  switch (r % 8) {
    case 0: return 0.0f;
    case 1: return mix == Mix::bits || mix == Mix::zeros ? -0.0f : 0.0f;
    case 2: return bits_f32(u(rng));  // any bit pattern (NaN, inf, subnormal included)
    case 3: return bits_f32((u(rng) & 0x807FFFFFu) | ((1u + u(rng) % 20) << 23));  // tiny / subnormal-adjacent
    default: return bits_f32((u(rng) & 0x807FFFFFu) | ((127u - 20 + u(rng) % 24) << 23));
  }
}

struct Case {
  int64_t M, N, K;
  Mix mix;
};

void run_case(const Case& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t lda = c.K + 3, ldb = c.K + 1, ldc = c.N + 2;
  std::vector<uint16_t> A(c.M * lda), B(c.N * ldb);
  for (auto& v : A) v = draw(c.mix, rng);
  for (auto& v : B) v = draw(c.mix, rng);
  if (c.mix == Mix::cancel) {  // B rows whose halves cancel exactly against A's pattern
    for (int64_t n = 0; n + 1 < c.N; n += 2)
      for (int64_t k = 0; k < c.K; ++k) B[(n + 1) * ldb + k] = B[n * ldb + k] ^ (k % 2 ? 0x8000 : 0);
  }
  if (c.mix == Mix::zeros && c.M > 2) {  // whole zero rows, like expert padding
    for (int64_t k = 0; k < c.K; ++k) A[1 * lda + k] = 0;
  }
  std::vector<float> C0(c.M * ldc);
  for (auto& v : C0) v = draw_c(c.mix, rng);

  std::vector<float> want = C0;
  model_gemm_bf16_scalar(MmaModel::hopper_bf16, c.M, c.N, c.K, A.data(), lda, B.data(), ldb, want.data(), ldc);
  for (GemmKernel kernel : kernels())
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    std::vector<float> got = C0;
    model_gemm_bf16(MmaModel::hopper_bf16, c.M, c.N, c.K, A.data(), lda, B.data(), ldb, got.data(), ldc, kernel);
    for (int64_t i = 0; i < c.M * ldc; ++i) {
      if (f32_bits(got[i]) != f32_bits(want[i])) {
        FAIL() << "M=" << c.M << " N=" << c.N << " K=" << c.K << " mix=" << static_cast<int>(c.mix)
               << " kernel=" << to_string(kernel) << " threads=" << threads << ": first mismatch at (m=" << i / ldc << ", n=" << i % ldc
               << "): fast 0x" << std::hex << f32_bits(got[i]) << " scalar 0x" << f32_bits(want[i])
               << " C0 0x" << f32_bits(C0[i]);
      }
    }
  }
  omp_set_num_threads(2);
}

TEST(ModelGemm, FastEqualsScalarAllMixes) {
  const Case shapes[] = {{1, 1, 1, Mix::typical}, {5, 37, 17, Mix::typical}, {13, 33, 100, Mix::typical},
                         {67, 65, 47, Mix::typical}, {4, 32, 16, Mix::typical}, {70, 40, 300, Mix::typical},
                         {130, 70, 33, Mix::typical}, {3, 5, 530, Mix::typical}};
  const Mix mixes[] = {Mix::typical, Mix::wide, Mix::bits, Mix::zeros, Mix::subnormal, Mix::cancel};
  uint64_t seed = 1;
  for (Mix mix : mixes) {
    for (Case c : shapes) {
      c.mix = mix;
      run_case(c, seed++);
      if (HasFatalFailure() || HasFailure()) return;
    }
  }
}

TEST(ModelGemm, ManySmallRandomShapes) {
  std::mt19937_64 rng(42);
  for (int t = 0; t < 60; ++t) {
    const Case c{1 + static_cast<int64_t>(rng() % 20), 1 + static_cast<int64_t>(rng() % 50),
                 1 + static_cast<int64_t>(rng() % 90), static_cast<Mix>(rng() % 6)};
    run_case(c, 1000 + t);
    if (HasFailure()) return;
  }
}

TEST(ModelGemm, SafeWindowEdges) {
  // Per-element Emax right at the edges of the fast path's safe window (-101..121, see model_gemm.cpp):
  // product exponents target-2..target with full fractions, mixed signs (one sign above 121), C = 0 or
  // near 2^target. Just below the window the vector rounding would differ (a subnormal unscale); above it,
  // same-sign products push the sums toward overflow. Fast == scalar on both sides of each edge.
  std::mt19937_64 rng(11);
  for (int target : {-105, -104, -103, -102, -101, -100, -99, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126}) {
    const int64_t M = 6, N = 19, K = 40;
    const int ea = target / 2, eb = target - ea;
    const bool same_sign = target > 121;
    std::vector<uint16_t> A(M * K), B(N * K);
    for (auto& v : A)
      v = bf16_from(127 + ea - static_cast<int>(rng() % 3), static_cast<uint32_t>(rng()), !same_sign && (rng() & 1));
    for (auto& v : B) v = bf16_from(127 + eb, static_cast<uint32_t>(rng()), !same_sign && (rng() & 1));
    std::vector<float> C0(M * N);
    for (auto& v : C0)
      v = rng() % 2 ? 0.0f : bits_f32((static_cast<uint32_t>(rng()) & 0x807FFFFFu) |
                                      (static_cast<uint32_t>(127 + target - 1 + static_cast<int>(rng() % 3)) << 23));
    expect_kernels_match_scalar(M, N, K, A, B, C0, "target Emax " + std::to_string(target));
  }
}

TEST(ModelGemm, WindowEdgesWithoutZeros) {
  // The window edges again on whole micro-tiles (M, N, K multiples of 8, 64, 16) without zero operands, so
  // the steps take the 8-bit exponent pass and its int16 window test (scales_pack_order): Emax around -101,
  // 24 (the AVX-512 fast window top) and 121 (AVX2's), C = +-0 or near 2^target. Up to 121 some operands
  // subnormal or far smaller (subnormal, zero or inexact fp32 products, as in FastWindowTopEdge); above,
  // same-sign products of 1.75 x 1.75 whose step sums fit int32 but overflow fp32 at Emax 123.
  std::mt19937_64 rng(13);
  for (int target : {-104, -102, -101, -100, 22, 23, 24, 25, 26, 27, 119, 120, 121, 122, 123, 124}) {
    const int64_t M = 8, N = 64, K = 48;
    const int ea = target / 2, eb = target - ea;
    auto operand = [&](int e) -> uint16_t {
      if (target > 121) return bf16_from(127 + e, 0x60, false);
      const int r = static_cast<int>(rng() % 8);
      if (r == 0) return bf16_from(0, static_cast<uint32_t>(rng()) | 1, rng() & 1);  // subnormal
      const int drop = r <= 2 ? 100 + static_cast<int>(rng() % 60) : static_cast<int>(rng() % 3);
      return bf16_from(std::max(1, 127 + e - drop), static_cast<uint32_t>(rng()), rng() & 1);
    };
    std::vector<uint16_t> A(M * K), B(N * K);
    for (auto& v : A) v = operand(ea);
    for (auto& v : B) v = operand(eb);
    std::vector<float> C0(M * N);
    for (auto& v : C0) {
      const int r = static_cast<int>(rng() % 4);
      v = r == 0 ? 0.0f : (r == 1 ? -0.0f : bits_f32((static_cast<uint32_t>(rng()) & 0x807FFFFFu) |
                                                      (static_cast<uint32_t>(127 + target - 1 + static_cast<int>(rng() % 3)) << 23)));
    }
    expect_kernels_match_scalar(M, N, K, A, B, C0, "target Emax " + std::to_string(target));
  }
}

TEST(ModelGemm, FastWindowTopEdge) {
  // The AVX-512 micro_step_fast scales products by an integer add to their exponent field, valid for
  // Emax <= 24 (kFastHigh, model_gemm_kernel.inc); above it the step takes micro_step_exact. Per-element Emax
  // around 24 with products spread far below it (down to subnormal and inexact fp32 products), zero and
  // subnormal operands, mixed signs, C = 0, tiny, or near 2^target: fast == scalar on both sides.
  std::mt19937_64 rng(12);
  for (int target : {-101, -100, 0, 20, 22, 23, 24, 25, 26, 28}) {
    const int64_t M = 9, N = 37, K = 64;
    const int ea = target / 2, eb = target - ea;
    std::vector<uint16_t> A(M * K), B(N * K);
    auto operand = [&](int e) -> uint16_t {
      const int r = static_cast<int>(rng() % 8);
      const bool neg = rng() & 1;
      if (r == 0) return bf16_from(0, 0, neg);                                    // zero
      if (r == 1) return bf16_from(0, static_cast<uint32_t>(rng()) | 1, neg);     // subnormal
      const int field = std::clamp(127 + e - (r == 2 ? static_cast<int>(rng() % 160) : static_cast<int>(rng() % 4)), 1, 254);
      return bf16_from(field, static_cast<uint32_t>(rng()), neg);
    };
    for (auto& v : A) v = operand(ea);
    for (auto& v : B) v = operand(eb);
    std::vector<float> C0(M * N);
    for (auto& v : C0) {
      const int r = static_cast<int>(rng() % 3);
      v = r == 0 ? 0.0f
                 : bits_f32((static_cast<uint32_t>(rng()) & 0x807FFFFFu) |
                            (static_cast<uint32_t>(std::clamp(127 + target - (r == 1 ? 40 : static_cast<int>(rng() % 3)), 1, 254)) << 23));
    }
    expect_kernels_match_scalar(M, N, K, A, B, C0, "target Emax " + std::to_string(target));
  }
}

TEST(ModelGemm, ExponentCodes8Saturation) {
  // Steps without zero or non-finite operands take the 8-bit exponent pass (product_emax8,
  // model_gemm_kernel.inc): code sums saturate to [-128, 127]. Operands at the extreme codes -126 (field 1
  // or subnormal) and 127 (field 254) beside moderate ones give product exponents far above (254, saturated),
  // inside (127 - 126 = 1) and far below (-252, saturated) the window, alone or mixed in a step, with C = 0,
  // tiny or inside the window: fast == scalar. A wrapping add (254 -> -2) or a wrong fold fails here.
  std::mt19937_64 rng(21);
  const int64_t M = 9, N = 37, K = 96;
  for (int family = 0; family < 4; ++family) {
    auto operand = [&](bool row_a) -> uint16_t {
      const int r = static_cast<int>(rng() % 8);
      const bool neg = rng() & 1;
      const uint32_t frac = static_cast<uint32_t>(rng());
      const bool big = family == 0 ? row_a : (family == 1 ? !row_a : (rng() & 1));
      if (family == 3) return bf16_from(r < 4 ? 254 : 1, frac, neg);             // every product extreme
      if (r == 0) return bf16_from(0, frac | 1, neg);                               // subnormal, code -126
      if (r <= 3) return bf16_from(big ? 254 - static_cast<int>(rng() % 3) : 1 + static_cast<int>(rng() % 3), frac, neg);
      return bf16_from(127 - 20 + static_cast<int>(rng() % 40), frac, neg);       // moderate
    };
    std::vector<uint16_t> A(M * K), B(N * K);
    for (auto& v : A) v = operand(true);
    for (auto& v : B) v = operand(false);
    std::vector<float> C0(M * N);
    for (auto& v : C0) {
      const int r = static_cast<int>(rng() % 3);
      v = r == 0 ? 0.0f : bits_f32((static_cast<uint32_t>(rng()) & 0x807FFFFFu) |
                                   (static_cast<uint32_t>(r == 1 ? 1 + rng() % 20 : 127 - 30 + rng() % 50) << 23));
    }
    expect_kernels_match_scalar(M, N, K, A, B, C0, "family " + std::to_string(family));
  }
}

TEST(ModelGemm, SpecialOperandStepsUseInt16Codes) {
  // A step with one zero or non-finite operand must not take the 8-bit exponent pass (its saturated code
  // would pair with an extreme partner into the window): every product tiny (far below the window) except
  // one per row and step, a zero (or inf / NaN) against a partner at code 127 (or -126), C inside the window.
  // Fast == scalar; ignoring the step's special flag fails here.
  std::mt19937_64 rng(22);
  const int64_t M = 8, N = 33, K = 64;
  for (int kind = 0; kind < 4; ++kind) {
    std::vector<uint16_t> A(M * K), B(N * K);
    for (auto& v : A) v = bf16_from(127 - 55 + static_cast<int>(rng() % 4), static_cast<uint32_t>(rng()), rng() & 1);
    for (auto& v : B) v = bf16_from(127 - 55 + static_cast<int>(rng() % 4), static_cast<uint32_t>(rng()), rng() & 1);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k0 = 0; k0 < K; k0 += 16) {
        const int64_t k = k0 + static_cast<int64_t>(rng() % 16);
        const uint16_t special = kind == 0 ? 0x0000 : (kind == 1 ? 0x8000 : (kind == 2 ? 0x7F80 : 0x7FC1));
        A[m * K + k] = special;
        for (int64_t n = 0; n < N; ++n)
          B[n * K + k] = bf16_from(kind < 2 ? 254 : (n % 2 ? 1 : 0), static_cast<uint32_t>(rng()) | 1, rng() & 1);
      }
    std::vector<float> C0(M * N);
    for (auto& v : C0)
      v = bits_f32((static_cast<uint32_t>(rng()) & 0x807FFFFFu) | (static_cast<uint32_t>(127 - 50 + rng() % 10) << 23));
    expect_kernels_match_scalar(M, N, K, A, B, C0, "kind " + std::to_string(kind));
  }
}

TEST(ModelGemm, StepSumBeyondInt32) {
  // The largest step sums: 16 same-sign products with full fractions at E = Emax (each term 255^2 * 2^11)
  // plus an accumulator with e_c = Emax and a full fraction of the same sign, 2.198e9 units > 2^31 - 1;
  // and neighbours just below (shorter fractions, opposite signs). A vector path summing in int32 must not
  // take these steps. Emax 0 and 120 (near the top of the safe window), K = 16 (the first step only) and 48.
  std::mt19937_64 rng(12);
  for (int e : {0, 120}) {
    for (int64_t K : {16, 48}) {
      const int64_t M = 5, N = 35;
      const int ea = e / 2, eb = e - ea;
      std::vector<uint16_t> A(M * K), B(N * K);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t k = 0; k < K; ++k) A[m * K + k] = bf16_from(127 + ea, m == 3 ? 0x7E : 0x7F, m == 1);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k) B[n * K + k] = bf16_from(127 + eb, n % 5 == 4 ? 0x70 : 0x7F, n % 7 == 6);
      std::vector<float> C0(M * N);
      for (int64_t i = 0; i < M * N; ++i) {
        const bool neg = (i / N == 1) != (i % N % 7 == 6);  // the products' sign, except every 4th
        const uint32_t frac = i % 3 == 2 ? static_cast<uint32_t>(rng()) & 0x7FFFFFu : 0x7FFFFFu;
        C0[i] = bits_f32(((neg != (i % 4 == 3)) ? 0x80000000u : 0u) | (static_cast<uint32_t>(127 + e) << 23) | frac);
      }
      expect_kernels_match_scalar(M, N, K, A, B, C0, "Emax " + std::to_string(e) + " K " + std::to_string(K));
    }
  }
}

TEST(ModelGemm, RoundTowardZeroAtBinadeTop) {
  // Step sums just below a power of two, where round-to-nearest goes up to the next binade and
  // round-toward-zero must not (the AVX2 fast step relies on MXCSR's rounding control for it): one
  // product 2^Emax (times 1 + f) and C = (2^24 - j) 2^(Emax-24), so the sum is 2^26 - 2j units (f = 0); signs
  // mixed. The other k hold zeros (the int16 exponent pass) or tiny operands (the 8-bit one). Fast == scalar.
  std::mt19937_64 rng(23);
  const int64_t M = 4, N = 16, K = 32;
  for (int e : {-90, -30, 0, 20, 24, 60, 110}) {
    for (bool tiny_filler : {false, true}) {
      const int ea = e / 2, eb = e - ea;
      std::vector<uint16_t> A(M * K), B(N * K);
      const uint16_t filler = tiny_filler ? bf16_from(std::max(1, 127 + ea - 70), 0x15, false) : 0;
      for (auto& v : A) v = filler;
      for (auto& v : B) v = filler;
      for (int64_t m = 0; m < M; ++m) A[m * K] = A[m * K + 16] = bf16_from(127 + ea, m < 2 ? 0 : 1, m == 1);
      for (int64_t n = 0; n < N; ++n) B[n * K] = B[n * K + 16] = bf16_from(127 + eb, n % 4 == 3 ? 2 : 0, n % 5 == 4);
      std::vector<float> C0(M * N);
      for (int64_t i = 0; i < M * N; ++i) {
        const uint32_t j = 1 + static_cast<uint32_t>(i % 8);
        const float c = std::ldexp(static_cast<float>((1u << 24) - j), e - 24);
        C0[i] = (rng() & 1) ? -c : c;
      }
      expect_kernels_match_scalar(M, N, K, A, B, C0, "Emax " + std::to_string(e) + (tiny_filler ? " tiny" : " zeros"));
    }
  }
}

#if defined(__SSE__)
TEST(ModelGemm, CallerRoundingModeKeptAndIrrelevant) {
  // The AVX2 kernel sets MXCSR to round toward zero around its loops (KernelRounding): the caller's MXCSR
  // comes back unchanged, and a caller's non-default rounding mode changes no bit (every kernel, 1 and 2
  // threads; the mode is the calling thread's).
  std::mt19937_64 rng(24);
  const int64_t M = 12, N = 40, K = 80;
  std::vector<uint16_t> A(M * K), B(N * K);
  for (auto& v : A) v = draw(Mix::typical, rng);
  for (auto& v : B) v = draw(Mix::typical, rng);
  std::vector<float> want(M * N, 0.25f);
  model_gemm_bf16_scalar(MmaModel::hopper_bf16, M, N, K, A.data(), K, B.data(), K, want.data(), N);
  const unsigned saved = _mm_getcsr();
  for (unsigned mode : {_MM_ROUND_NEAREST, _MM_ROUND_UP, _MM_ROUND_DOWN, _MM_ROUND_TOWARD_ZERO})
    for (GemmKernel kernel : kernels())
      for (int threads : {1, 2}) {
        omp_set_num_threads(threads);
        const unsigned csr = (saved & ~_MM_ROUND_MASK) | mode;
        _mm_setcsr(csr);
        std::vector<float> got(M * N, 0.25f);
        model_gemm_bf16(MmaModel::hopper_bf16, M, N, K, A.data(), K, B.data(), K, got.data(), N, kernel);
        const unsigned after = _mm_getcsr();
        _mm_setcsr(saved);
        EXPECT_EQ(after & ~0x3Fu, csr & ~0x3Fu) << "MXCSR control bits changed, kernel " << to_string(kernel);
        for (int64_t i = 0; i < M * N; ++i)
          ASSERT_EQ(f32_bits(got[i]), f32_bits(want[i])) << "mode " << mode << " kernel " << to_string(kernel)
                                                         << " threads " << threads << " element " << i;
      }
  omp_set_num_threads(2);
}
#endif

TEST(ModelGemm, SignedZeroChains) {
  // Every exact zero result is +0, even when all terms are -0 (C = -0 and all products -0), as on the
  // H200. Rows of -0/+0 against columns of +0/-0, C = +-0, K with and without a tail.
  for (int64_t K : {16, 32, 20}) {
    const int64_t M = 4, N = 4;
    std::vector<uint16_t> A(M * K), B(N * K);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < K; ++k) A[m * K + k] = (m & 1) ? 0x8000 : 0x0000;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) B[n * K + k] = (n & 1) ? 0x8000 : (n == 2 && k == 3 ? 0x3F80 : 0x0000);
    std::vector<float> C0(M * N);
    for (int64_t i = 0; i < M * N; ++i) C0[i] = (i % 3) ? -0.0f : 0.0f;
    std::vector<float> want = C0;
    model_gemm_bf16_scalar(MmaModel::hopper_bf16, M, N, K, A.data(), K, B.data(), K, want.data(), N);
    int negative_zeros = 0;
    for (int64_t i = 0; i < M * N; ++i) negative_zeros += f32_bits(want[i]) == 0x80000000u;
    for (GemmKernel kernel : kernels()) {
      std::vector<float> got = C0;
      model_gemm_bf16(MmaModel::hopper_bf16, M, N, K, A.data(), K, B.data(), K, got.data(), N, kernel);
      for (int64_t i = 0; i < M * N; ++i)
        ASSERT_EQ(f32_bits(got[i]), f32_bits(want[i])) << "K=" << K << " element " << i << " " << to_string(kernel);
    }
    EXPECT_EQ(negative_zeros, 0) << "an exact zero result is +0";
  }
}

TEST(ModelGemm, BlackwellBf16SameChain) {
  // The Blackwell kind::f16 row shares the BF16 parameters; the fast path must follow it too.
  std::mt19937_64 rng(7);
  const int64_t M = 9, N = 35, K = 70;
  std::vector<uint16_t> A(M * K), B(N * K);
  for (auto& v : A) v = draw(Mix::wide, rng);
  for (auto& v : B) v = draw(Mix::typical, rng);
  expect_kernels_match_scalar(M, N, K, A, B, std::vector<float>(M * N, 0.5f), "blackwell", MmaModel::blackwell_bf16);
}

TEST(ModelGemm, KernelsOfThisBuild) {
  const std::vector<GemmKernel> k = model_gemm_kernels();
  ASSERT_FALSE(k.empty());
  EXPECT_EQ(k.back(), GemmKernel::scalar);
#if defined(__AVX512F__) && defined(__AVX512DQ__)
  // An AVX-512 build carries the AVX2 kernel beside it: both are measured and tested in one binary.
  EXPECT_EQ(k, (std::vector<GemmKernel>{GemmKernel::avx512, GemmKernel::avx2, GemmKernel::scalar}));
#elif defined(__AVX2__)
  EXPECT_EQ(k, (std::vector<GemmKernel>{GemmKernel::avx2, GemmKernel::scalar}));
#endif
  EXPECT_EQ(model_gemm_default_kernel(), k.front());  // CALICO_MODEL_GEMM_KERNEL is not set by ctest
}

// model_gemm_bf16_batch (the reference's expert stages): several jobs in one batch, operands row-major,
// transposed and read in place (row_stride 1), and K-concatenations of two transposed matrices (the d_x
// GEMM's [Wg^T | Wu^T], split at K multiples of 16 and not), shared operands (packed once), an empty job,
// few rows (B packed per K block inside each item) and many (B pre-packed);
// each job equal to the scalar specification on the materialised operands, at 1 and 2 threads.
TEST(ModelGemm, BatchStridedOperandsEqualScalar) {
  std::mt19937_64 rng(77);
  struct Owned {
    std::vector<uint16_t> a, a2;  // storage
    GemmOperand op;
  };
  // An operand of `rows` x K in one of three layouts, values from `mix`.
  auto make = [&](int64_t rows, int64_t K, int layout, Mix mix) {
    Owned o;
    if (layout == 0) {  // row-major, padded stride
      const int64_t ld = K + 5;
      o.a.resize(rows * ld);
      for (auto& v : o.a) v = draw(mix, rng);
      o.op = {o.a.data(), ld, 1};
    } else if (layout == 1 || K < 2) {  // transposed: [K, rows] with stride rows + 3
      const int64_t ld = rows + 3;
      o.a.resize(K * ld);
      for (auto& v : o.a) v = draw(mix, rng);
      o.op = {o.a.data(), 1, ld};
    } else {  // K-concatenation of two transposed matrices, split at s
      const int64_t split = std::max<int64_t>(1, K / 2 - static_cast<int64_t>(rng() % 3)), ld = rows + 1;
      o.a.resize(split * ld), o.a2.resize((K - split) * ld + 1);
      for (auto& v : o.a) v = draw(mix, rng);
      for (auto& v : o.a2) v = draw(mix, rng);
      o.op = {o.a.data(), 1, ld, o.a2.data(), split};
    }
    return o;
  };
  for (int round = 0; round < 12; ++round) {
    const Mix mix = static_cast<Mix>(round % 6);
    std::vector<Owned> ops;
    std::vector<GemmJob> jobs;
    std::vector<std::vector<float>> c0;
    ops.reserve(64);
    const int count = 2 + round % 5;
    for (int j = 0; j < count; ++j) {
      GemmJob g;
      g.M = 1 + rng() % 80, g.N = 1 + rng() % 70, g.K = (j == 0 && round == 3) ? 0 : 1 + rng() % 300;
      if (round % 4 == 1) g.K = 64;  // split at 32: a K multiple of 16
      if (round % 3 == 2 && j == 1) g.M = 257 + rng() % 60;  // above the streamed-B row limit: B pre-packed
      ops.push_back(make(g.M, g.K, static_cast<int>(rng() % 3), mix));
      g.A = ops.back().op;
      if (j > 0 && rng() % 3 == 0 && jobs[j - 1].N == g.N && jobs[j - 1].K == g.K) g.B = jobs[j - 1].B;
      else ops.push_back(make(g.N, g.K, static_cast<int>(rng() % 3), mix)), g.B = ops.back().op;
      g.ldc = g.N + 1;
      c0.emplace_back(g.M * g.ldc);
      for (auto& v : c0.back()) v = draw_c(mix, rng);
      jobs.push_back(g);
    }
    std::vector<std::vector<float>> want = c0;
    for (size_t j = 0; j < jobs.size(); ++j) {
      const GemmJob& g = jobs[j];
      std::vector<uint16_t> a(g.M * g.K), b(g.N * g.K);
      for (int64_t m = 0; m < g.M; ++m)
        for (int64_t k = 0; k < g.K; ++k) a[m * g.K + k] = g.A.at(m, k);
      for (int64_t n = 0; n < g.N; ++n)
        for (int64_t k = 0; k < g.K; ++k) b[n * g.K + k] = g.B.at(n, k);
      model_gemm_bf16_scalar(MmaModel::hopper_bf16, g.M, g.N, g.K, a.data(), g.K, b.data(), g.K, want[j].data(), g.ldc);
    }
    for (GemmKernel kernel : kernels())
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      std::vector<std::vector<float>> got = c0;
      for (size_t j = 0; j < jobs.size(); ++j) jobs[j].C = got[j].data();
      model_gemm_bf16_batch(MmaModel::hopper_bf16, jobs, kernel);
      for (size_t j = 0; j < jobs.size(); ++j)
        for (size_t i = 0; i < got[j].size(); ++i)
          ASSERT_EQ(f32_bits(got[j][i]), f32_bits(want[j][i]))
              << "round " << round << " job " << j << " (M=" << jobs[j].M << " N=" << jobs[j].N << " K=" << jobs[j].K
              << ") element " << i << " kernel " << to_string(kernel) << " threads " << threads;
    }
    omp_set_num_threads(2);
  }
}

// The backward's job shapes on both kernels: d_x-like (few rows, B = [Wg^T | Wu^T] streamed per K block,
// the split inside, at and beyond the first 256-k block, at multiples of 16 and not), d_h-like (B = Wd^T
// streamed), and weight-gradient-like (K = the expert's rows, both operands transposed, many row tiles, C
// prefetched ahead). Each equal to the scalar specification, at 1 and 2 threads.
TEST(ModelGemm, BackwardShapedJobsEqualScalar) {
  std::mt19937_64 rng(2026);
  for (int64_t split : {int64_t{100}, int64_t{256}, int64_t{320}, int64_t{513}}) {
    const int64_t M = 37, N = 131, K = 700;  // N: 4 full AVX-512 panels and a partial one
    const int64_t ldw = N + 7;
    std::vector<uint16_t> a(M * K), w1(split * ldw), w2((K - split) * ldw), wd(K * ldw);
    for (auto& v : a) v = draw(Mix::typical, rng);
    for (auto& v : w1) v = draw(split == 320 ? Mix::wide : Mix::typical, rng);
    for (auto& v : w2) v = draw(Mix::typical, rng);
    for (auto& v : wd) v = draw(Mix::subnormal, rng);
    // Operands as ffn.cpp passes them: A row-major, B (n, k) = w[k * ldw + n] read in place.
    const GemmOperand A{a.data(), K, 1}, Bx{w1.data(), 1, ldw, w2.data(), split}, Bh{wd.data(), 1, ldw};
    for (const GemmOperand& B : {Bx, Bh}) {
      std::vector<uint16_t> am(M * K), bm(N * K);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t k = 0; k < K; ++k) am[m * K + k] = A.at(m, k);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k) bm[n * K + k] = B.at(n, k);
      std::vector<float> c0(M * N);
      for (auto& v : c0) v = draw_c(Mix::typical, rng);
      std::vector<float> want = c0;
      model_gemm_bf16_scalar(MmaModel::hopper_bf16, M, N, K, am.data(), K, bm.data(), K, want.data(), N);
      for (GemmKernel kernel : kernels())
        for (int threads : {1, 2}) {
          omp_set_num_threads(threads);
          std::vector<float> got = c0;
          GemmJob j;
          j.M = M, j.N = N, j.K = K, j.A = A, j.B = B, j.C = got.data(), j.ldc = N;
          model_gemm_bf16_batch(MmaModel::hopper_bf16, {j}, kernel);
          for (int64_t i = 0; i < M * N; ++i)
            ASSERT_EQ(f32_bits(got[i]), f32_bits(want[i])) << "split " << split << " element " << i << " "
                                                           << to_string(kernel) << " threads " << threads;
        }
    }
  }
  // Weight gradient: C [H', I'] += gemm(d_y^T, h^T) with K = 48 rows (and 40: a zero-padded tail step).
  for (int64_t rows : {int64_t{48}, int64_t{40}}) {
    const int64_t M = 301, N = 75;
    std::vector<uint16_t> dy(rows * M), h(rows * N);
    for (auto& v : dy) v = draw(Mix::typical, rng);
    for (auto& v : h) v = draw(Mix::zeros, rng);
    std::vector<uint16_t> am(M * rows), bm(N * rows);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < rows; ++k) am[m * rows + k] = dy[k * M + m];
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < rows; ++k) bm[n * rows + k] = h[k * N + n];
    std::vector<float> c0(M * N);
    for (auto& v : c0) v = draw_c(Mix::typical, rng);
    std::vector<float> want = c0;
    model_gemm_bf16_scalar(MmaModel::hopper_bf16, M, N, rows, am.data(), rows, bm.data(), rows, want.data(), N);
    for (GemmKernel kernel : kernels())
      for (int threads : {1, 2}) {
        omp_set_num_threads(threads);
        std::vector<float> got = c0;
        GemmJob j;
        j.M = M, j.N = N, j.K = rows, j.A = {dy.data(), 1, M}, j.B = {h.data(), 1, N}, j.C = got.data(), j.ldc = N;
        model_gemm_bf16_batch(MmaModel::hopper_bf16, {j}, kernel);
        for (int64_t i = 0; i < M * N; ++i)
          ASSERT_EQ(f32_bits(got[i]), f32_bits(want[i])) << "rows " << rows << " element " << i << " "
                                                         << to_string(kernel) << " threads " << threads;
      }
  }
  omp_set_num_threads(2);
}

// ---- Blackwell MXFP8 (model_gemm_mxfp8_blackwell vs its scalar specification) ----------------------------
// e4m3 elements of every kind (zeros of both signs, subnormals, normals, the NaN code), E8M0 scales near 2^0,
// anywhere, at the extremes and NaN, whole zero rows (issue 10's case), C of every kind; odd shapes, 1 vs 2
// threads.
TEST(ModelGemmMxfp8, FastEqualsScalarSpecification) {
  std::mt19937_64 rng(1010);
  std::uniform_int_distribution<uint32_t> u;
  struct Shape { int64_t M, N, blocks; };
  int64_t checked = 0, nan_out = 0;
  for (const Shape sh : {Shape{1, 1, 1}, Shape{7, 5, 3}, Shape{17, 33, 2}, Shape{9, 16, 8}, Shape{24, 20, 5}}) {
    for (int mix = 0; mix < 4; ++mix) {
      const int64_t K = sh.blocks * 32;
      std::vector<uint8_t> A(sh.M * K), B(sh.N * K), SA(sh.M * sh.blocks), SB(sh.N * sh.blocks);
      auto elem = [&]() -> uint8_t {
        const uint32_t r = u(rng);
        switch (mix) {
          case 0: return static_cast<uint8_t>(0x30 + r % 0x18) | ((r >> 8) & 0x80);  // near 1
          case 1: return static_cast<uint8_t>(r);                                    // any code (NaN too)
          case 2: return (r % 3 == 0) ? static_cast<uint8_t>(r & 0x80) : static_cast<uint8_t>(r % 0x7F);  // zeros
          default: return static_cast<uint8_t>(((r >> 8) & 0x80) | (r % 16));        // subnormal / tiny
        }
      };
      auto scale = [&]() -> uint8_t {
        const uint32_t r = u(rng) % 16;
        if (r < 8) return static_cast<uint8_t>(120 + u(rng) % 16);
        if (r < 13) return static_cast<uint8_t>(u(rng) % 255);
        if (r < 15) return static_cast<uint8_t>(r == 13 ? 0 : 254);
        return mix == 1 ? uint8_t{0xFF} : uint8_t{127};
      };
      for (auto& v : A) v = elem();
      for (auto& v : B) v = elem();
      for (auto& v : SA) v = scale();
      for (auto& v : SB) v = scale();
      if (sh.M > 2)
        for (int64_t k = 0; k < K; ++k) A[1 * K + k] = (k % 3) ? 0x00 : 0x80;  // a whole +-0 row
      const int64_t ldc = sh.N + 1;
      std::vector<float> C0(sh.M * ldc);
      for (auto& v : C0) {
        const uint32_t r = u(rng);
        switch (r % 6) {
          case 0: v = (r & 8) ? -0.0f : 0.0f; break;
          case 1: v = bits_f32(u(rng)); break;                                            // any pattern
          case 2: v = bits_f32((u(rng) & 0x807FFFFFu) | ((u(rng) % 8) << 23)); break;     // tiny / subnormal
          default: v = bits_f32((u(rng) & 0x807FFFFFu) | ((110u + u(rng) % 30) << 23)); break;
        }
      }
      std::vector<float> want = C0;
      model_gemm_mxfp8_blackwell_scalar(sh.M, sh.N, sh.blocks, A.data(), SA.data(), B.data(), SB.data(),
                                        want.data(), ldc);
      for (int threads : {1, 2}) {
        omp_set_num_threads(threads);
        std::vector<float> got = C0;
        model_gemm_mxfp8_blackwell(sh.M, sh.N, sh.blocks, A.data(), SA.data(), B.data(), SB.data(), got.data(), ldc);
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_EQ(f32_bits(got[i]), f32_bits(want[i]))
              << "M " << sh.M << " N " << sh.N << " blocks " << sh.blocks << " mix " << mix << " index " << i;
      }
      for (float w : want) {
        ++checked;
        nan_out += std::isnan(w);
      }
    }
  }
  EXPECT_GT(checked, 3000);
  EXPECT_GT(nan_out, 10);  // the NaN rules were exercised
}

}  // namespace
}  // namespace calico::ref
