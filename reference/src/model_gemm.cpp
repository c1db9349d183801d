// Bit-exact model GEMM (DESIGN 2.2/2.5): model_gemm_bf16_scalar is the specification (one mma_step_bf16 per
// K-step); model_gemm_bf16 is a cache-blocked AVX-512 kernel (or, without AVX-512, the same algorithm on 8-lane
// AVX2 vectors; without AVX2 the specification itself) that produces the same bits for every input.
//
// Why the fast path is exact (BF16 rows: L = 16, F = 25, RZ to fp32, zero terms at E = -133):
//  - Per output element and K-step, Emax = max(e_a + e_b over the nonzero products, e_c). When
//    -101 <= Emax <= 121 ("the safe window"), every product a*b with E >= -135 is exact in fp32 (at most 16
//    significant bits, no overflow), and p * 2^(25-Emax) is an exact power-of-two scaling with |.| < 2^27,
//    so cvttps2dq yields exactly the model's term trunc(p / 2^(Emax-25)). Products with E < -135 (possibly
//    inexact in fp32) scale below 2^-8 and truncate to 0, as in the model. Zero terms sit below Emax in the
//    model too (-133 < -101), so they never change it inside the window.
//  - The 16 product terms fit an int32 sum (each < 2^27); the accumulator term (< 2^26) is added in int64.
//  - The sum converts to float with round-toward-zero (vcvtqq2ps {rz}), exact truncation to 24 bits, and
//    the multiply by 2^(Emax-25) >= 2^-126 is exact (results stay normal and below 2^128).
//  - Every other case takes the scalar step for that lane: Emax outside the window (tiny or huge values,
//    NaN/inf operands are coded with huge exponents, so inf*0 too), and an accumulator equal to -0 (the only
//    way a step can return -0). A step whose terms are all zero gives +0 in both.
// The AVX2 path differs only in the last rounding (no int64 -> float {rz} conversion): it adds the two int32
// parts exactly in double (|sum| < 2^32), clears the low 29 of the 52 fraction bits (in sign-magnitude that
// is truncation to 24 significant bits, i.e. round-toward-zero) and converts to float, which is then exact.
// Threads split output tiles only; each element's chain runs in one thread in K order, so the bits do not
// depend on the thread count. model_gemm_bf16_batch runs many GEMMs (the experts of a rank) as one parallel
// loop over (job, row tile, column panel) items; packing only changes where the same operand values are read
// from (pre-packed once per batch, or per K block inside an item for the forward weights).
#include "model_gemm.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "profile.h"

#if defined(__AVX512F__) && defined(__AVX512DQ__)
// NOTE: GCC 12 warns "__Y may be used uninitialized" inside its own AVX-512 headers (_mm512_undefined_*);
// it is a known false positive, silenced for this file only.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#define CALICO_MODEL_GEMM_AVX512 1
#elif defined(__AVX2__)
#include <immintrin.h>
#define CALICO_MODEL_GEMM_AVX2 1
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

#if defined(CALICO_MODEL_GEMM_AVX512) || defined(CALICO_MODEL_GEMM_AVX2)

// Shared by the AVX-512 and AVX2 kernels: blocking, exponent codes, packing.
namespace {

constexpr int kKc = 256;           // K per cache block (multiple of 16)
constexpr int kMc = 64;            // rows per parallel tile (multiple of kMr)
constexpr int32_t kZeroCode = -4000;     // exponent code of a zero operand: zero products stay far below -101
constexpr int32_t kNonFiniteCode = 8000; // NaN/inf operand: any product involving it lands above 121
constexpr int kSafeLow = -101, kSafeHigh = 121;

// A packed per micro-tile as [m_block][k][kMr] (value as fp32, exponent code), zero-padded in m and k.
// B packed per panel as [panel][k][kNr], zero-padded in n and k. Storage is not initialised: pack_block
// writes every entry of its block (padding included), so no serial zero-fill precedes the parallel pack.
struct Packed {
  float* val = nullptr;
  int16_t* exp = nullptr;  // int16 so the exponent pass works on 32 lanes at once
};

inline float pack_value(uint16_t v) { return bf16_to_f32(v); }
// Exponent code of an operand (zero -> kZeroCode, NaN/inf -> kNonFiniteCode, subnormal -> -126), written
// as selects so the pack loops vectorise.
inline int16_t pack_code(uint16_t v) {
  const int field = (v >> 7) & 0xFF;
  const int sub = (v & 0x7F) == 0 ? kZeroCode : -126;
  return static_cast<int16_t>(field == 0xFF ? kNonFiniteCode : (field == 0 ? sub : field - 127));
}

#if defined(__AVX2__)
// 8 bf16 operands -> 8 fp32 values and 8 exponent codes (pack_value, pack_code on each lane).
inline void convert8(__m128i v, __m256* val, __m128i* code) {
  *val = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
  const __m128i field = _mm_and_si128(_mm_srli_epi16(v, 7), _mm_set1_epi16(0xFF));
  const __m128i frac_zero = _mm_cmpeq_epi16(_mm_and_si128(v, _mm_set1_epi16(0x7F)), _mm_setzero_si128());
  const __m128i sub = _mm_blendv_epi8(_mm_set1_epi16(-126), _mm_set1_epi16(static_cast<int16_t>(kZeroCode)), frac_zero);
  __m128i c = _mm_sub_epi16(field, _mm_set1_epi16(127));
  c = _mm_blendv_epi8(c, sub, _mm_cmpeq_epi16(field, _mm_setzero_si128()));
  *code = _mm_blendv_epi8(c, _mm_set1_epi16(static_cast<int16_t>(kNonFiniteCode)), _mm_cmpeq_epi16(field, _mm_set1_epi16(0xFF)));
}

// Stores the 8 converted rows R0..R0+7 at k into their blocks (part of one block for widths 8, 16 and 32,
// two blocks for width 4).
inline void store8(Packed p, int64_t Kp, int width, int64_t R0, int64_t k, __m256 val, __m128i code) {
  if (width != 4) {
    const int64_t idx = ((R0 / width) * Kp + k) * width + R0 % width;
    _mm256_storeu_ps(p.val + idx, val);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p.exp + idx), code);
  } else {  // width 4
    const int64_t i0 = ((R0 / 4) * Kp + k) * 4, i1 = ((R0 / 4 + 1) * Kp + k) * 4;
    _mm_storeu_ps(p.val + i0, _mm256_castps256_ps128(val));
    _mm_storeu_ps(p.val + i1, _mm256_extractf128_ps(val, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p.exp + i0), code);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p.exp + i1), _mm_unpackhi_epi64(code, code));
  }
}

// Row-contiguous operand, rows R0..R0+7 (rows >= `rows` read as +0, i.e. padding), k in [k0, k0 + 8n):
// an 8 x 8 transpose of the bf16 values per 8 k, then convert8 / store8.
void pack_rows8(const GemmOperand& X, int64_t rows, int64_t Kp, int width, int64_t R0, int64_t k0, int64_t k1, Packed p) {
  const uint16_t* src[8];
  for (int r = 0; r < 8; ++r) src[r] = R0 + r < rows ? X.p + (R0 + r) * X.row_stride : nullptr;
  for (int64_t k = k0; k + 8 <= k1; k += 8) {
    __m128i x[8];
    for (int r = 0; r < 8; ++r)
      x[r] = src[r] ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(src[r] + k)) : _mm_setzero_si128();
    const __m128i t0 = _mm_unpacklo_epi16(x[0], x[1]), t1 = _mm_unpackhi_epi16(x[0], x[1]);
    const __m128i t2 = _mm_unpacklo_epi16(x[2], x[3]), t3 = _mm_unpackhi_epi16(x[2], x[3]);
    const __m128i t4 = _mm_unpacklo_epi16(x[4], x[5]), t5 = _mm_unpackhi_epi16(x[4], x[5]);
    const __m128i t6 = _mm_unpacklo_epi16(x[6], x[7]), t7 = _mm_unpackhi_epi16(x[6], x[7]);
    const __m128i u0 = _mm_unpacklo_epi32(t0, t2), u1 = _mm_unpackhi_epi32(t0, t2);
    const __m128i u2 = _mm_unpacklo_epi32(t1, t3), u3 = _mm_unpackhi_epi32(t1, t3);
    const __m128i u4 = _mm_unpacklo_epi32(t4, t6), u5 = _mm_unpackhi_epi32(t4, t6);
    const __m128i u6 = _mm_unpacklo_epi32(t5, t7), u7 = _mm_unpackhi_epi32(t5, t7);
    const __m128i c[8] = {_mm_unpacklo_epi64(u0, u4), _mm_unpackhi_epi64(u0, u4), _mm_unpacklo_epi64(u1, u5),
                          _mm_unpackhi_epi64(u1, u5), _mm_unpacklo_epi64(u2, u6), _mm_unpackhi_epi64(u2, u6),
                          _mm_unpacklo_epi64(u3, u7), _mm_unpackhi_epi64(u3, u7)};
    for (int j = 0; j < 8; ++j) {
      __m256 val;
      __m128i code;
      convert8(c[j], &val, &code);
      store8(p, Kp, width, R0, k + j, val, code);
    }
  }
}
#endif

// Blocks [b0, b1) (rows blk*width ..) of operand X [rows, K], k in [k0, k1) of the padding to Kp: every entry
// written, padding (rows >= rows, k >= K) as a zero operand. Row-contiguous operands are read along k;
// transposed ones (row_stride 1) along the rows of all blocks of the range at once, one k at a time.
void pack_range(const GemmOperand& X, int64_t rows, int64_t K, int64_t Kp, int width, int64_t b0, int64_t b1,
                int64_t k0, int64_t k1, Packed p) {
  const int64_t kend = std::min(k1, K);
  if (X.row_stride == 1 && X.k_stride != 1) {
    for (int64_t k = k0; k < kend; ++k) {
      const uint16_t* src = k < X.k_split ? X.p + k * X.k_stride : X.p2 + (k - X.k_split) * X.k_stride;
      for (int64_t blk = b0; blk < b1; ++blk) {
        const int live = static_cast<int>(std::clamp<int64_t>(rows - blk * width, 0, width));
        float* val = p.val + (blk * Kp + k) * width;
        int16_t* exp = p.exp + (blk * Kp + k) * width;
        const uint16_t* s = src + blk * width;
        int r = 0;
#if defined(__AVX2__)
        for (; r + 8 <= live; r += 8) {
          __m256 v;
          __m128i c;
          convert8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + r)), &v, &c);
          _mm256_storeu_ps(val + r, v);
          _mm_storeu_si128(reinterpret_cast<__m128i*>(exp + r), c);
        }
#endif
        for (; r < live; ++r) val[r] = pack_value(s[r]), exp[r] = pack_code(s[r]);
      }
    }
  } else {
    int64_t kdone = k0;  // k below this already packed by the vector path (all rows of the range)
#if defined(__AVX2__)
    if (X.k_stride == 1 && X.k_split >= kend && (width == 4 || width % 8 == 0) && ((b1 - b0) * width) % 8 == 0) {
      kdone = k0 + (kend - k0) / 8 * 8;
      for (int64_t R0 = b0 * width; R0 < b1 * width && R0 < rows; R0 += 8) pack_rows8(X, rows, Kp, width, R0, k0, kdone, p);
    }
#endif
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int live = static_cast<int>(std::clamp<int64_t>(rows - blk * width, 0, width));
      float* val = p.val + blk * Kp * width;
      int16_t* exp = p.exp + blk * Kp * width;
      for (int r = 0; r < live; ++r) {
        const int64_t row = blk * width + r;
        if (X.k_stride == 1 && X.k_split >= kend) {
          const uint16_t* src = X.p + row * X.row_stride;
          for (int64_t k = kdone; k < kend; ++k) val[k * width + r] = pack_value(src[k]), exp[k * width + r] = pack_code(src[k]);
        } else {
          for (int64_t k = k0; k < kend; ++k) {
            const uint16_t v = X.at(row, k);
            val[k * width + r] = pack_value(v), exp[k * width + r] = pack_code(v);
          }
        }
      }
    }
  }
  for (int64_t blk = b0; blk < b1; ++blk) {  // padding
    const int live = static_cast<int>(std::clamp<int64_t>(rows - blk * width, 0, width));
    for (int64_t k = k0; k < k1; ++k) {
      float* val = p.val + (blk * Kp + k) * width;
      int16_t* exp = p.exp + (blk * Kp + k) * width;
      for (int r = k < K ? live : 0; r < width; ++r) val[r] = 0.0f, exp[r] = static_cast<int16_t>(kZeroCode);
    }
  }
}

struct GemmArgs {
  MmaModel model;
  int64_t M, N, K;
  GemmOperand A, B;
};

// The scalar step of element (m, n) at k0 from the operands (the redo path of the vector kernels).
float scalar_step_at(const GemmArgs& g, int64_t m, int64_t n, int64_t k0, float acc) {
  uint16_t a[16] = {}, b[16] = {};
  const int64_t len = std::min<int64_t>(16, g.K - k0);
  for (int64_t i = 0; i < len; ++i) a[i] = g.A.at(m, k0 + i), b[i] = g.B.at(n, k0 + i);
  return mma_step_bf16(a, b, acc, g.model);
}

}  // namespace

#endif

#if defined(CALICO_MODEL_GEMM_AVX512)

namespace {

constexpr int kMr = 4;             // rows of A per micro-tile
constexpr int kNr = 32;            // columns per micro-tile (two 16-lane vectors)

// Exponent code of the accumulator: floor(log2|c|) clamped at -126, zero -> kZeroCode, NaN/inf -> 128.
inline __m512i acc_exponent_code(__m512 acc) {
  const __m512i bits = _mm512_castps_si512(acc);
  const __m512i field = _mm512_and_si512(_mm512_srli_epi32(bits, 23), _mm512_set1_epi32(0xFF));
  const __m512i mag = _mm512_and_si512(bits, _mm512_set1_epi32(0x7FFFFFFF));
  __m512i e = _mm512_sub_epi32(_mm512_max_epi32(field, _mm512_set1_epi32(1)), _mm512_set1_epi32(127));
  const __mmask16 zero = _mm512_cmpeq_epi32_mask(mag, _mm512_setzero_si512());
  return _mm512_mask_mov_epi32(e, zero, _mm512_set1_epi32(kZeroCode));
}

// One K-step (16 products) for a kMr x kNr micro-tile. acc holds the chain's values in/out.
inline void micro_step(const GemmArgs& g, const float* ap, const int16_t* ae, const float* bp, const int16_t* be,
                       int64_t m0, int64_t n0, int64_t k0, __m512 acc[kMr][2]) {
  // Exponent pass on int16 lanes (all 32 columns in one vector); product codes stay within +-16000.
  __m512i emax16[kMr];
  for (int r = 0; r < kMr; ++r) emax16[r] = _mm512_set1_epi16(2 * kZeroCode);
  for (int kk = 0; kk < 16; ++kk) {
    const __m512i eb = _mm512_loadu_si512(be + kk * kNr);
    for (int r = 0; r < kMr; ++r)
      emax16[r] = _mm512_max_epi16(emax16[r], _mm512_add_epi16(_mm512_set1_epi16(ae[kk * kMr + r]), eb));
  }
  // Lanes inside the safe window use the vector path; all-zero lanes (emax at a zero code) give +0 with
  // any scale; the rest (and accumulators equal to -0) are redone with the scalar step.
  __m512 scale[kMr][2];
  __m512i emax[kMr][2];
  __mmask16 redo[kMr][2];
  const __m512i lo = _mm512_set1_epi32(kSafeLow), hi = _mm512_set1_epi32(kSafeHigh);
  const __m512i neg_zero = _mm512_set1_epi32(static_cast<int32_t>(0x80000000u));
  for (int r = 0; r < kMr; ++r) {
    for (int v = 0; v < 2; ++v) {
      const __m256i half = v == 0 ? _mm512_castsi512_si256(emax16[r]) : _mm512_extracti64x4_epi64(emax16[r], 1);
      const __m512i em = _mm512_max_epi32(_mm512_cvtepi16_epi32(half), acc_exponent_code(acc[r][v]));
      const __mmask16 inside = _mm512_cmpge_epi32_mask(em, lo) & _mm512_cmple_epi32_mask(em, hi);
      const __mmask16 all_zero = _mm512_cmplt_epi32_mask(em, _mm512_set1_epi32(-3000));
      const __mmask16 acc_neg_zero = _mm512_cmpeq_epi32_mask(_mm512_castps_si512(acc[r][v]), neg_zero);
      redo[r][v] = static_cast<__mmask16>((~(inside | all_zero)) | acc_neg_zero);
      emax[r][v] = _mm512_maskz_mov_epi32(inside, em);
      scale[r][v] = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(152), emax[r][v]), 23));
    }
  }
  __m512i sum[kMr][2];
  for (int r = 0; r < kMr; ++r) sum[r][0] = sum[r][1] = _mm512_setzero_si512();
  for (int kk = 0; kk < 16; ++kk) {
    const __m512 b0 = _mm512_loadu_ps(bp + kk * kNr), b1 = _mm512_loadu_ps(bp + kk * kNr + 16);
    for (int r = 0; r < kMr; ++r) {
      const __m512 a = _mm512_set1_ps(ap[kk * kMr + r]);
      sum[r][0] = _mm512_add_epi32(sum[r][0], _mm512_cvttps_epi32(_mm512_mul_ps(_mm512_mul_ps(a, b0), scale[r][0])));
      sum[r][1] = _mm512_add_epi32(sum[r][1], _mm512_cvttps_epi32(_mm512_mul_ps(_mm512_mul_ps(a, b1), scale[r][1])));
    }
  }
  constexpr int kRz = _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC;
  for (int r = 0; r < kMr; ++r) {
    for (int v = 0; v < 2; ++v) {
      const __m512i c_term = _mm512_cvttps_epi32(_mm512_mul_ps(acc[r][v], scale[r][v]));
      const __m512i s = sum[r][v];
      const __m512i lo64 = _mm512_add_epi64(_mm512_cvtepi32_epi64(_mm512_castsi512_si256(s)),
                                            _mm512_cvtepi32_epi64(_mm512_castsi512_si256(c_term)));
      const __m512i hi64 = _mm512_add_epi64(_mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(s, 1)),
                                            _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(c_term, 1)));
      const __m256 flo = _mm512_cvt_roundepi64_ps(lo64, kRz), fhi = _mm512_cvt_roundepi64_ps(hi64, kRz);
      const __m512 total = _mm512_insertf32x8(_mm512_castps256_ps512(flo), fhi, 1);
      const __m512 unscale = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(emax[r][v], _mm512_set1_epi32(102)), 23));
      __m512 out = _mm512_mul_round_ps(total, unscale, kRz);
      if (redo[r][v]) {
        alignas(64) float old_lanes[16], new_lanes[16];
        _mm512_store_ps(old_lanes, acc[r][v]);
        _mm512_store_ps(new_lanes, out);
        const int64_t m = m0 + r;
        for (int lane = 0; lane < 16; ++lane) {
          const int64_t n = n0 + v * 16 + lane;
          if (!((redo[r][v] >> lane) & 1) || m >= g.M || n >= g.N) continue;
          new_lanes[lane] = scalar_step_at(g, m, n, k0, old_lanes[lane]);
        }
        out = _mm512_load_ps(new_lanes);
      }
      acc[r][v] = out;
    }
  }
}

// What the shared driver below needs from the vector width: 16-lane vectors with k-masks.
struct Lanes {
  using Vec = __m512;
  using Mask = __mmask16;
  static constexpr int kWidth = 16;
  static Mask column_mask(int64_t N, int64_t n0, int v) {  // lanes of columns n0 + 16v .. that lie below N
    const auto left = static_cast<uint32_t>(std::clamp<int64_t>(N - n0 - kWidth * v, 0, kWidth));
    return static_cast<Mask>((1u << left) - 1);
  }
  static Vec load(const float* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
  static void store(float* p, Mask m, Vec v) { _mm512_mask_storeu_ps(p, m, v); }
  static Vec zero() { return _mm512_setzero_ps(); }
};

}  // namespace

#elif defined(CALICO_MODEL_GEMM_AVX2)

// The AVX-512 algorithm above on 8-lane vectors; lane masks are vectors and redo masks come from movemask.
namespace {

constexpr int kMr = 4;   // rows of A per micro-tile
constexpr int kNr = 16;  // columns per micro-tile (two 8-lane vectors; one 16 x int16 vector for exponents)

// Exponent code of the accumulator: floor(log2|c|) clamped at -126, zero -> kZeroCode, NaN/inf -> 128.
inline __m256i acc_exponent_code(__m256 acc) {
  const __m256i bits = _mm256_castps_si256(acc);
  const __m256i field = _mm256_and_si256(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(0xFF));
  const __m256i mag = _mm256_and_si256(bits, _mm256_set1_epi32(0x7FFFFFFF));
  const __m256i e = _mm256_sub_epi32(_mm256_max_epi32(field, _mm256_set1_epi32(1)), _mm256_set1_epi32(127));
  const __m256i zero = _mm256_cmpeq_epi32(mag, _mm256_setzero_si256());
  return _mm256_blendv_epi8(e, _mm256_set1_epi32(kZeroCode), zero);
}

// s + c (4 int32 lanes each) rounded toward zero to float: the double sum is exact (|.| < 2^33); clearing
// its low 29 fraction bits truncates it to 24 significant bits, so the conversion to float is exact.
inline __m128 sum_to_float_rz(__m128i s, __m128i c) {
  const __m256d t = _mm256_add_pd(_mm256_cvtepi32_pd(s), _mm256_cvtepi32_pd(c));
  const __m256d keep = _mm256_castsi256_pd(_mm256_set1_epi64x(~int64_t{0x1FFFFFFF}));
  return _mm256_cvtpd_ps(_mm256_and_pd(t, keep));
}

// One K-step (16 products) for a kMr x kNr micro-tile. acc holds the chain's values in/out.
inline void micro_step(const GemmArgs& g, const float* ap, const int16_t* ae, const float* bp, const int16_t* be,
                       int64_t m0, int64_t n0, int64_t k0, __m256 acc[kMr][2]) {
  // Exponent pass on int16 lanes (all 16 columns in one vector); product codes stay within +-16000.
  __m256i emax16[kMr];
  for (int r = 0; r < kMr; ++r) emax16[r] = _mm256_set1_epi16(2 * kZeroCode);
  for (int kk = 0; kk < 16; ++kk) {
    const __m256i eb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(be + kk * kNr));
    for (int r = 0; r < kMr; ++r)
      emax16[r] = _mm256_max_epi16(emax16[r], _mm256_add_epi16(_mm256_set1_epi16(ae[kk * kMr + r]), eb));
  }
  // Same lane classes as the AVX-512 kernel: inside the window -> vector, all-zero -> +0, else (and -0
  // accumulators) the scalar step.
  __m256 scale[kMr][2];
  __m256i emax[kMr][2];
  int redo[kMr][2];
  const __m256i below = _mm256_set1_epi32(kSafeLow - 1), above = _mm256_set1_epi32(kSafeHigh + 1);
  const __m256i neg_zero = _mm256_set1_epi32(static_cast<int32_t>(0x80000000u));
  for (int r = 0; r < kMr; ++r) {
    for (int v = 0; v < 2; ++v) {
      const __m128i half = v == 0 ? _mm256_castsi256_si128(emax16[r]) : _mm256_extracti128_si256(emax16[r], 1);
      const __m256i em = _mm256_max_epi32(_mm256_cvtepi16_epi32(half), acc_exponent_code(acc[r][v]));
      const __m256i inside = _mm256_and_si256(_mm256_cmpgt_epi32(em, below), _mm256_cmpgt_epi32(above, em));
      const __m256i all_zero = _mm256_cmpgt_epi32(_mm256_set1_epi32(-3000), em);
      const __m256i acc_neg_zero = _mm256_cmpeq_epi32(_mm256_castps_si256(acc[r][v]), neg_zero);
      const int fast = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_or_si256(inside, all_zero)));
      redo[r][v] = (~fast & 0xFF) | _mm256_movemask_ps(_mm256_castsi256_ps(acc_neg_zero));
      emax[r][v] = _mm256_and_si256(inside, em);
      scale[r][v] = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(152), emax[r][v]), 23));
    }
  }
  __m256i sum[kMr][2];
  for (int r = 0; r < kMr; ++r) sum[r][0] = sum[r][1] = _mm256_setzero_si256();
  for (int kk = 0; kk < 16; ++kk) {
    const __m256 b0 = _mm256_loadu_ps(bp + kk * kNr), b1 = _mm256_loadu_ps(bp + kk * kNr + 8);
    for (int r = 0; r < kMr; ++r) {
      const __m256 a = _mm256_set1_ps(ap[kk * kMr + r]);
      sum[r][0] = _mm256_add_epi32(sum[r][0], _mm256_cvttps_epi32(_mm256_mul_ps(_mm256_mul_ps(a, b0), scale[r][0])));
      sum[r][1] = _mm256_add_epi32(sum[r][1], _mm256_cvttps_epi32(_mm256_mul_ps(_mm256_mul_ps(a, b1), scale[r][1])));
    }
  }
  for (int r = 0; r < kMr; ++r) {
    for (int v = 0; v < 2; ++v) {
      const __m256i c_term = _mm256_cvttps_epi32(_mm256_mul_ps(acc[r][v], scale[r][v]));
      const __m256i s = sum[r][v];
      const __m256 total = _mm256_set_m128(
          sum_to_float_rz(_mm256_extracti128_si256(s, 1), _mm256_extracti128_si256(c_term, 1)),
          sum_to_float_rz(_mm256_castsi256_si128(s), _mm256_castsi256_si128(c_term)));
      // Exact (2^(Emax-25) >= 2^-126, results normal and below 2^128), so the rounding mode does not matter.
      const __m256i unscale_bits = _mm256_slli_epi32(_mm256_add_epi32(emax[r][v], _mm256_set1_epi32(102)), 23);
      const __m256 unscale = _mm256_castsi256_ps(unscale_bits);
      __m256 out = _mm256_mul_ps(total, unscale);
      if (redo[r][v]) {
        alignas(32) float old_lanes[8], new_lanes[8];
        _mm256_store_ps(old_lanes, acc[r][v]);
        _mm256_store_ps(new_lanes, out);
        const int64_t m = m0 + r;
        for (int lane = 0; lane < 8; ++lane) {
          const int64_t n = n0 + v * 8 + lane;
          if (!((redo[r][v] >> lane) & 1) || m >= g.M || n >= g.N) continue;
          new_lanes[lane] = scalar_step_at(g, m, n, k0, old_lanes[lane]);
        }
        out = _mm256_load_ps(new_lanes);
      }
      acc[r][v] = out;
    }
  }
}

// What the shared driver below needs from the vector width: 8-lane vectors with vector masks.
struct Lanes {
  using Vec = __m256;
  using Mask = __m256i;
  static constexpr int kWidth = 8;
  static Mask column_mask(int64_t N, int64_t n0, int v) {  // lanes of columns n0 + 8v .. that lie below N
    const auto left = static_cast<int32_t>(std::clamp<int64_t>(N - n0 - kWidth * v, 0, kWidth));
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(left), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static Vec load(const float* p, Mask m) { return _mm256_maskload_ps(p, m); }
  static void store(float* p, Mask m, Vec v) { _mm256_maskstore_ps(p, m, v); }
  static Vec zero() { return _mm256_setzero_ps(); }
};

}  // namespace

#endif

#if defined(CALICO_MODEL_GEMM_AVX512) || defined(CALICO_MODEL_GEMM_AVX2)

namespace {

constexpr int64_t kPackBudget = int64_t{1} << 30;  // packed bytes per group of jobs

int64_t packed_elems(int64_t rows, int64_t Kp, int width) { return (rows + width - 1) / width * Kp * width; }

// One output tile (rows mt*kMc .., columns np*kNr ..) of job g over its whole K chain: C loaded once per K
// block, the chain run in K order by micro_step, stored.
void run_tile(const GemmArgs& g, const Packed& pa, const Packed& pb, float* C, int64_t ldc, int64_t mt, int64_t np) {
  const int64_t M = g.M, N = g.N, Kp = (g.K + 15) / 16 * 16;
  const int64_t n0 = np * kNr;
  const Lanes::Mask lane_mask[2] = {Lanes::column_mask(N, n0, 0), Lanes::column_mask(N, n0, 1)};
  const int64_t m_end = std::min<int64_t>(M, (mt + 1) * kMc);
  for (int64_t kb = 0; kb < Kp; kb += kKc) {
    const int64_t kb_end = std::min<int64_t>(Kp, kb + kKc);
    for (int64_t m0 = mt * kMc; m0 < m_end; m0 += kMr) {
      Lanes::Vec acc[kMr][2];
      for (int r = 0; r < kMr; ++r)
        for (int v = 0; v < 2; ++v)
          acc[r][v] = m0 + r < M ? Lanes::load(C + (m0 + r) * ldc + n0 + v * Lanes::kWidth, lane_mask[v])
                                 : Lanes::zero();
      const int64_t mb = m0 / kMr;
      for (int64_t k0 = kb; k0 < kb_end; k0 += 16) {
        micro_step(g, pa.val + (mb * Kp + k0) * kMr, pa.exp + (mb * Kp + k0) * kMr, pb.val + (np * Kp + k0) * kNr,
                   pb.exp + (np * Kp + k0) * kNr, m0, n0, k0, acc);
      }
      for (int r = 0; r < kMr; ++r)
        for (int v = 0; v < 2; ++v)
          if (m0 + r < M) Lanes::store(C + (m0 + r) * ldc + n0 + v * Lanes::kWidth, lane_mask[v], acc[r][v]);
    }
  }
}

// Jobs with few rows and a row-contiguous B (the forward weights) do not pre-pack B: each item packs its
// column panel one K block at a time into a thread-local buffer, right before the micro-kernel reads it,
// so the weights are read once and the 3x larger packed copy never travels through memory.
constexpr int64_t kStreamMaxRows = 4 * kMc;
bool streams_b(const GemmJob& j) { return j.M <= kStreamMaxRows && j.B.k_stride == 1 && j.B.k_split >= j.K; }

// Every row tile of column panel np of job g, B packed per K block on the fly (the same packed values as the
// pre-packed path, so the same micro_step calls in the same K order per element).
void run_panel_streaming_b(const GemmArgs& g, const Packed& pa, float* C, int64_t ldc, int64_t np) {
  const int64_t M = g.M, N = g.N, K = g.K, Kp = (K + 15) / 16 * 16;
  const int64_t n0 = np * kNr;
  const Lanes::Mask lane_mask[2] = {Lanes::column_mask(N, n0, 0), Lanes::column_mask(N, n0, 1)};
  alignas(64) float bval[kKc * kNr];
  alignas(64) int16_t bexp[kKc * kNr];
  GemmOperand panel = g.B;
  panel.p += n0 * g.B.row_stride;
  for (int64_t kb = 0; kb < Kp; kb += kKc) {
    const int64_t kb_end = std::min<int64_t>(Kp, kb + kKc);
    GemmOperand block = panel;
    block.p += kb;  // k_stride 1
    pack_range(block, std::min<int64_t>(kNr, N - n0), K - kb, kb_end - kb, kNr, 0, 1, 0, kb_end - kb, Packed{bval, bexp});
    for (int64_t m0 = 0; m0 < M; m0 += kMr) {
      Lanes::Vec acc[kMr][2];
      for (int r = 0; r < kMr; ++r)
        for (int v = 0; v < 2; ++v)
          acc[r][v] = m0 + r < M ? Lanes::load(C + (m0 + r) * ldc + n0 + v * Lanes::kWidth, lane_mask[v])
                                 : Lanes::zero();
      const int64_t mb = m0 / kMr;
      for (int64_t k0 = kb; k0 < kb_end; k0 += 16) {
        micro_step(g, pa.val + (mb * Kp + k0) * kMr, pa.exp + (mb * Kp + k0) * kMr, bval + (k0 - kb) * kNr,
                   bexp + (k0 - kb) * kNr, m0, n0, k0, acc);
      }
      for (int r = 0; r < kMr; ++r)
        for (int v = 0; v < 2; ++v)
          if (m0 + r < M) Lanes::store(C + (m0 + r) * ldc + n0 + v * Lanes::kWidth, lane_mask[v], acc[r][v]);
    }
  }
}

// An operand to pack: identical (operand, rows, K, width) tuples share one packing.
struct PackKey {
  GemmOperand op;
  int64_t rows, K;
  int width;
  bool same(const GemmOperand& o, int64_t r, int64_t k, int w) const {
    return op.p == o.p && op.p2 == o.p2 && op.row_stride == o.row_stride && op.k_stride == o.k_stride &&
           op.k_split == o.k_split && rows == r && K == k && width == w;
  }
};

// The packed-operand storage, kept between batches: fresh gigabytes per GEMM phase cost more in page faults
// (kernel zeroing, one thread) than the packing itself. One lease at a time; a concurrent caller gets its own.
class PackArena {
 public:
  struct Lease {
    explicit Lease(size_t elems) : lock(arena().mutex, std::try_to_lock) {
      PackArena& a = arena();
      if (lock.owns_lock()) {
        if (a.capacity < elems) {
          a.val.reset(), a.exp.reset();
          a.val.reset(new float[elems]), a.exp.reset(new int16_t[elems]);
          a.capacity = elems;
        }
        val = a.val.get(), exp = a.exp.get();
      } else {
        own_val.reset(new float[elems]), own_exp.reset(new int16_t[elems]);
        val = own_val.get(), exp = own_exp.get();
      }
    }
    std::unique_lock<std::mutex> lock;
    std::unique_ptr<float[]> own_val;
    std::unique_ptr<int16_t[]> own_exp;
    float* val = nullptr;
    int16_t* exp = nullptr;
  };

 private:
  static PackArena& arena() {
    static PackArena a;
    return a;
  }
  std::mutex mutex;
  size_t capacity = 0;
  std::unique_ptr<float[]> val;
  std::unique_ptr<int16_t[]> exp;
};

// The jobs of one group: packs every distinct operand (one parallel loop over all blocks), then one
// parallel loop over every (job, row tile, column panel) item.
void run_group(MmaModel model, const GemmJob* jobs, size_t count) {
  std::vector<PackKey> keys;
  std::vector<size_t> a_key(count), b_key(count);
  auto key_of = [&](const GemmOperand& op, int64_t rows, int64_t K, int width) {
    for (size_t i = 0; i < keys.size(); ++i)
      if (keys[i].same(op, rows, K, width)) return i;
    keys.push_back({op, rows, K, width});
    return keys.size() - 1;
  };
  for (size_t j = 0; j < count; ++j) {
    a_key[j] = key_of(jobs[j].A, jobs[j].M, jobs[j].K, kMr);
    b_key[j] = streams_b(jobs[j]) ? SIZE_MAX : key_of(jobs[j].B, jobs[j].N, jobs[j].K, kNr);
  }
  std::vector<int64_t> offset(keys.size() + 1, 0);
  // Pack work: one block and all of K for row-contiguous operands; for transposed ones (row_stride 1) 256
  // rows by 256 k, so each source row segment read is long and each k's page is touched once per range.
  struct PackItem {
    size_t key;
    int64_t b0, b1, k0, k1;
  };
  std::vector<PackItem> pack_items;
  for (size_t i = 0; i < keys.size(); ++i) {
    const PackKey& k = keys[i];
    const int64_t Kp = (k.K + 15) / 16 * 16, blocks = (k.rows + k.width - 1) / k.width;
    offset[i + 1] = offset[i] + packed_elems(k.rows, Kp, k.width);
    const bool transposed = k.op.row_stride == 1 && k.op.k_stride != 1;
    const int64_t group = transposed ? std::max(1, 256 / k.width) : std::max(1, 8 / k.width), kchunk = transposed ? 256 : Kp;
    for (int64_t b = 0; b < blocks; b += group)
      for (int64_t kk = 0; kk < Kp; kk += kchunk)
        pack_items.push_back({i, b, std::min(blocks, b + group), kk, std::min(Kp, kk + kchunk)});
  }
  PackArena::Lease lease(static_cast<size_t>(offset.back()));
  float* const val = lease.val;
  int16_t* const exp = lease.exp;
  auto packed = [&](size_t key) { return Packed{val + offset[key], exp + offset[key]}; };
  {
    detail::ProfileScope profile_pack("  model gemm: operand packing");
#pragma omp parallel for schedule(dynamic)
    for (int64_t i = 0; i < static_cast<int64_t>(pack_items.size()); ++i) {
      const PackItem& it = pack_items[i];
      const PackKey& k = keys[it.key];
      pack_range(k.op, k.rows, k.K, (k.K + 15) / 16 * 16, k.width, it.b0, it.b1, it.k0, it.k1, packed(it.key));
    }
  }
  struct Item {
    size_t job;
    int64_t mt, np;
  };
  std::vector<Item> items;
  for (size_t j = 0; j < count; ++j) {
    if (b_key[j] == SIZE_MAX) {  // one item per column panel, all rows (mt = -1)
      for (int64_t np = 0; np < (jobs[j].N + kNr - 1) / kNr; ++np) items.push_back({j, -1, np});
      continue;
    }
    for (int64_t mt = 0; mt < (jobs[j].M + kMc - 1) / kMc; ++mt)
      for (int64_t np = 0; np < (jobs[j].N + kNr - 1) / kNr; ++np) items.push_back({j, mt, np});
  }
#pragma omp parallel for schedule(dynamic)
  for (int64_t i = 0; i < static_cast<int64_t>(items.size()); ++i) {
    const GemmJob& job = jobs[items[i].job];
    const GemmArgs g{model, job.M, job.N, job.K, job.A, job.B};
    if (items[i].mt < 0) {
      run_panel_streaming_b(g, packed(a_key[items[i].job]), job.C, job.ldc, items[i].np);
      continue;
    }
    run_tile(g, packed(a_key[items[i].job]), packed(b_key[items[i].job]), job.C, job.ldc, items[i].mt, items[i].np);
  }
}

// A job through the specification: its operands copied to row-major [M,K] and [N,K] first.
void scalar_job(MmaModel model, const GemmJob& j) {
  std::vector<uint16_t> a(static_cast<size_t>(j.M * j.K)), b(static_cast<size_t>(j.N * j.K));
  for (int64_t m = 0; m < j.M; ++m)
    for (int64_t k = 0; k < j.K; ++k) a[m * j.K + k] = j.A.at(m, k);
  for (int64_t n = 0; n < j.N; ++n)
    for (int64_t k = 0; k < j.K; ++k) b[n * j.K + k] = j.B.at(n, k);
  model_gemm_bf16_scalar(model, j.M, j.N, j.K, a.data(), j.K, b.data(), j.K, j.C, j.ldc);
}

}  // namespace

void model_gemm_bf16_batch(MmaModel model, const std::vector<GemmJob>& all) {
  std::vector<GemmJob> jobs;
  for (const GemmJob& j : all)
    if (j.M > 0 && j.N > 0 && j.K > 0) jobs.push_back(j);  // an empty chain leaves C as it is
  if (jobs.empty()) return;
  const MmaModelParams p = mma_model_params(model);
  if (p.L != 16 || p.F != 25 || p.out_fraction_bits != 23) {
    for (const GemmJob& j : jobs) scalar_job(model, j);
    return;
  }
  // Groups of consecutive jobs whose packed operands (counted without sharing) stay within the budget.
  size_t begin = 0;
  while (begin < jobs.size()) {
    size_t end = begin;
    int64_t bytes = 0;
    while (end < jobs.size()) {
      const GemmJob& j = jobs[end];
      const int64_t Kp = (j.K + 15) / 16 * 16;
      const int64_t b = 6 * (packed_elems(j.M, Kp, kMr) + (streams_b(j) ? 0 : packed_elems(j.N, Kp, kNr)));
      if (end > begin && bytes + b > kPackBudget) break;
      bytes += b;
      ++end;
    }
    run_group(model, jobs.data() + begin, end - begin);
    begin = end;
  }
}

void model_gemm_bf16(MmaModel model, int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
                     const uint16_t* B, int64_t ldb, float* C, int64_t ldc) {
  GemmJob j;
  j.M = M, j.N = N, j.K = K, j.A = {A, lda, 1}, j.B = {B, ldb, 1}, j.C = C, j.ldc = ldc;
  model_gemm_bf16_batch(model, {j});
}

#else  // neither AVX-512 nor AVX2: the specification itself

void model_gemm_bf16(MmaModel model, int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
                     const uint16_t* B, int64_t ldb, float* C, int64_t ldc) {
  model_gemm_bf16_scalar(model, M, N, K, A, lda, B, ldb, C, ldc);
}

void model_gemm_bf16_batch(MmaModel model, const std::vector<GemmJob>& jobs) {
  for (const GemmJob& j : jobs) {
    if (j.M <= 0 || j.N <= 0 || j.K <= 0) continue;
    std::vector<uint16_t> a(static_cast<size_t>(j.M * j.K)), b(static_cast<size_t>(j.N * j.K));
    for (int64_t m = 0; m < j.M; ++m)
      for (int64_t k = 0; k < j.K; ++k) a[m * j.K + k] = j.A.at(m, k);
    for (int64_t n = 0; n < j.N; ++n)
      for (int64_t k = 0; k < j.K; ++k) b[n * j.K + k] = j.B.at(n, k);
    model_gemm_bf16_scalar(model, j.M, j.N, j.K, a.data(), j.K, b.data(), j.K, j.C, j.ldc);
  }
}

#endif

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
