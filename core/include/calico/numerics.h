// The numerical contract's scalar arithmetic (DESIGN.md section 2), one definition for host and device.
//
// Everything here is __host__ __device__ and must be compiled with floating-point contraction off on both
// sides (-ffp-contract=off for g++, --fmad=false for nvcc): the reference and the megakernel call these same
// functions, so a CPU result and a GPU result can be compared bit for bit.
//
// Contents: bit casts; bf16 (RNE); e4m3 / e5m2 (RNE, saturating); e8m0; the MX block scale rules; the
// portable exp and SiLU; the tensor-core MMA models of DESIGN 2.5 (one instruction step for one output
// element).
#pragma once

#include <cmath>    // host side of every build, nvcc's host pass included (std::fma, std::nearbyint)
#include <cstdint>
#include <cstring>  // std::memcpy for host bit casts

#if defined(__CUDACC__)
#define CALICO_HD __host__ __device__ __forceinline__
#else
#define CALICO_HD inline
#endif

namespace calico {

// ---------------------------------------------------------------------------------------------------------
// Bit casts and small integer helpers
// ---------------------------------------------------------------------------------------------------------
CALICO_HD uint32_t f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

CALICO_HD float bits_f32(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

CALICO_HD int count_leading_zeros64(uint64_t x) {  // x != 0
#if defined(__CUDA_ARCH__)
  return __clzll(static_cast<long long>(x));
#else
  return __builtin_clzll(x);
#endif
}

CALICO_HD float f32_add(float a, float b) {  // round to nearest, on both sides
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

CALICO_HD float f32_fma(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

CALICO_HD float f32_rint(float x) {  // round to nearest even integer; exact
#if defined(__CUDA_ARCH__)
  return rintf(x);
#else
  return std::nearbyint(x);
#endif
}

CALICO_HD bool f32_is_nan(float x) { return (f32_bits(x) & 0x7FFFFFFFu) > 0x7F800000u; }
CALICO_HD bool f32_is_inf(float x) { return (f32_bits(x) & 0x7FFFFFFFu) == 0x7F800000u; }
CALICO_HD bool f32_is_finite(float x) { return (f32_bits(x) & 0x7F800000u) != 0x7F800000u; }

// 2^e as a float for e in [-149, 127], built from bits (no library call, exact).
CALICO_HD float exp2i(int e) {
  if (e >= -126) return bits_f32(static_cast<uint32_t>(e + 127) << 23);
  return bits_f32(1u << (e + 149));
}

constexpr uint32_t kF32CanonicalNaN = 0x7FFFFFFFu;  // what the tensor cores write for a NaN result
constexpr uint16_t kBf16CanonicalNaN = 0x7FFFu;

// ---------------------------------------------------------------------------------------------------------
// bf16: 1 sign, 8 exponent, 7 fraction bits; same range as fp32
// ---------------------------------------------------------------------------------------------------------
CALICO_HD float bf16_to_f32(uint16_t h) { return bits_f32(static_cast<uint32_t>(h) << 16); }

// Round to nearest, ties to even. Overflow gives inf (IEEE); every NaN becomes the canonical 0x7FFF.
CALICO_HD uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return kBf16CanonicalNaN;
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

CALICO_HD float round_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

// ---------------------------------------------------------------------------------------------------------
// FP8 (OCP OFP8): e4m3 "FN" (bias 7, max 448, no inf, NaN = S.1111.111) and e5m2 (bias 15, max 57344, IEEE-like)
// ---------------------------------------------------------------------------------------------------------
enum class Fp8Kind : uint8_t { e4m3, e5m2 };

struct Fp8Format {
  int fraction_bits;  // 3 or 2
  int bias;           // 7 or 15
  int emin;           // exponent of the smallest normal: 1 - bias
  float max_finite;   // 448 or 57344
};

CALICO_HD Fp8Format fp8_format(Fp8Kind kind) {
  return kind == Fp8Kind::e4m3 ? Fp8Format{3, 7, -6, 448.0f} : Fp8Format{2, 15, -14, 57344.0f};
}

constexpr uint8_t kE4m3NaN = 0x7F;
constexpr uint8_t kE5m2NaN = 0x7F;
constexpr uint8_t kE5m2Inf = 0x7C;

// floor(log2|x|) of a finite nonzero float, subnormals included.
CALICO_HD int f32_floor_log2(float x) {
  uint32_t u = f32_bits(x) & 0x7FFFFFFFu;
  int biased = static_cast<int>(u >> 23);
  if (biased != 0) return biased - 127;
  return -149 + (63 - count_leading_zeros64(u));  // subnormal: position of the top set bit
}

// Normalised 24-bit significand (hidden bit at bit 23) of a finite nonzero float, subnormals included.
CALICO_HD uint32_t f32_significand(float x) {
  const uint32_t u = f32_bits(x) & 0x7FFFFFFFu;
  if ((u >> 23) != 0) return (u & 0x7FFFFFu) | 0x800000u;
  return u << (count_leading_zeros64(u) - 40);  // top set bit moved to bit 23
}

// Decode an FP8 byte to float (exact). NaN decodes to the canonical fp32 NaN.
CALICO_HD float fp8_to_f32(uint8_t v, Fp8Kind kind) {
  const Fp8Format fmt = fp8_format(kind);
  const bool negative = (v & 0x80) != 0;
  const int exp_bits = kind == Fp8Kind::e4m3 ? 4 : 5;
  const int exp_field = (v & 0x7F) >> fmt.fraction_bits;
  const int frac = v & ((1 << fmt.fraction_bits) - 1);
  const int exp_all_ones = (1 << exp_bits) - 1;
  if (kind == Fp8Kind::e4m3 && (v & 0x7F) == 0x7F) return bits_f32(kF32CanonicalNaN);
  if (kind == Fp8Kind::e5m2 && exp_field == exp_all_ones) {
    if (frac != 0) return bits_f32(kF32CanonicalNaN);
    return bits_f32(negative ? 0xFF800000u : 0x7F800000u);
  }
  float magnitude;
  if (exp_field == 0) {
    magnitude = static_cast<float>(frac) * exp2i(fmt.emin - fmt.fraction_bits);
  } else {
    magnitude = static_cast<float>((1 << fmt.fraction_bits) | frac) *
                exp2i(exp_field - fmt.bias - fmt.fraction_bits);
  }
  return negative ? -magnitude : magnitude;
}

// Encode a float to FP8: round to nearest even on the FP8 grid (subnormals included). With `saturate`,
// anything beyond max_finite (inf too) becomes +-max_finite; without it, overflow gives inf (e5m2) or NaN
// (e4m3 has no inf). NaN gives NaN.
CALICO_HD uint8_t f32_to_fp8(float x, Fp8Kind kind, bool saturate = true) {
  const Fp8Format fmt = fp8_format(kind);
  const uint8_t sign = (f32_bits(x) >> 31) ? 0x80 : 0x00;
  const uint8_t nan = kind == Fp8Kind::e4m3 ? kE4m3NaN : kE5m2NaN;
  if (f32_is_nan(x)) return nan;
  const uint8_t max_code = kind == Fp8Kind::e4m3 ? 0x7E : 0x7B;
  const uint8_t overflow_code = saturate ? max_code : (kind == Fp8Kind::e4m3 ? nan : kE5m2Inf);
  float a = x < 0 ? -x : x;
  if (f32_is_inf(a)) return sign | overflow_code;
  if (a == 0.0f) return sign;
  // Quantum of the FP8 grid at |x|: 2^(max(e, emin) - fraction_bits). Scaling by it is exact.
  int e = f32_floor_log2(a);
  if (e < fmt.emin) e = fmt.emin;
  const int q = e - fmt.fraction_bits;
  // n = a / 2^q rounded to nearest even integer. q lies in [emin - fraction_bits, 127 - fraction_bits], so
  // 2^-q is a normal float and a / 2^q is exact.
  const float n = f32_rint(a * exp2i(-q));
  const float rounded = n * exp2i(q);
  if (rounded > fmt.max_finite) return sign | overflow_code;
  // Re-encode the rounded magnitude (it is exactly representable).
  if (rounded == 0.0f) return sign;
  int re = f32_floor_log2(rounded);
  if (re < fmt.emin) {
    const int frac = static_cast<int>(rounded * exp2i(fmt.fraction_bits - fmt.emin));
    return sign | static_cast<uint8_t>(frac);
  }
  const int frac = static_cast<int>(rounded * exp2i(fmt.fraction_bits - re)) - (1 << fmt.fraction_bits);
  return sign | static_cast<uint8_t>(((re + fmt.bias) << fmt.fraction_bits) | frac);
}

// ---------------------------------------------------------------------------------------------------------
// E8M0 block scales and MX (OCP MX v1.0) quantisation of one 32-element block
// ---------------------------------------------------------------------------------------------------------
constexpr int kMxBlock = 32;
constexpr uint8_t kE8m0NaN = 0xFF;

enum class MxScaleRule : uint8_t {
  rceil,      // smallest s with amax <= max_finite * 2^s: never saturates (default; production Blackwell)
  ocp_floor,  // OCP v1.0: floor(log2 amax) - emax_elem; the largest elements may saturate
};

// The scale's exponent (unbiased) for a block whose largest magnitude is `amax` (finite, > 0),
// clamped to E8M0's finite range [-127, 127].
CALICO_HD int mx_scale_exponent(float amax, Fp8Kind kind, MxScaleRule rule) {
  const Fp8Format fmt = fp8_format(kind);
  const int emax_elem = f32_floor_log2(fmt.max_finite);  // 8 for e4m3, 15 for e5m2
  int s = f32_floor_log2(amax) - emax_elem;
  // RCEIL: amax * 2^-s lies in [2^emax_elem, 2^(emax_elem+1)); it exceeds max_finite exactly when amax's
  // normalised significand exceeds max_finite's (1.75 for both formats), and then one step up suffices.
  if (rule == MxScaleRule::rceil && f32_significand(amax) > f32_significand(fmt.max_finite)) s += 1;
  if (s < -127) s = -127;
  if (s > 127) s = 127;
  return s;
}

CALICO_HD uint8_t e8m0_from_exponent(int s) { return static_cast<uint8_t>(s + 127); }
CALICO_HD bool e8m0_is_nan(uint8_t v) { return v == kE8m0NaN; }
CALICO_HD int e8m0_exponent(uint8_t v) { return static_cast<int>(v) - 127; }

// Quantise one block of `n` (<= 32) floats. Rules (documented in DESIGN 2.6 and here):
//  - any NaN or inf in the block: scale = NaN (0xFF), elements = NaN; the whole block dequantises to NaN;
//  - all-zero block: scale = 2^0 (127), elements are signed zeros;
//  - otherwise the scale from `rule`, elements = x / 2^s rounded to nearest even, saturating.
CALICO_HD uint8_t mx_quantize_block(const float* x, int n, Fp8Kind kind, MxScaleRule rule, uint8_t* out) {
  float amax = 0.0f;
  bool non_finite = false;
  for (int i = 0; i < n; ++i) {
    const float a = x[i] < 0 ? -x[i] : x[i];
    if (!f32_is_finite(x[i])) non_finite = true;
    else if (a > amax) amax = a;
  }
  const uint8_t nan = kind == Fp8Kind::e4m3 ? kE4m3NaN : kE5m2NaN;
  if (non_finite) {
    for (int i = 0; i < n; ++i) out[i] = nan;
    return kE8m0NaN;
  }
  if (amax == 0.0f) {
    for (int i = 0; i < n; ++i) out[i] = (f32_bits(x[i]) >> 31) ? 0x80 : 0x00;
    return e8m0_from_exponent(0);
  }
  const int s = mx_scale_exponent(amax, kind, rule);
  // x * 2^-s in two exact steps so that 2^-s never leaves the float range (s in [-127, 127]).
  const int half = -s / 2;
  const float f1 = exp2i(half), f2 = exp2i(-s - half);
  for (int i = 0; i < n; ++i) out[i] = f32_to_fp8(x[i] * f1 * f2, kind, true);
  return e8m0_from_exponent(s);
}

// Dequantise one MX element to bf16, as the Hopper path does (DESIGN 2.6): the float product
// element * 2^s is exact (at most 4 significant bits, lowest bit >= 2^-143 > 2^-149), then one bf16 RNE,
// which is exact while the result's lowest bit is >= 2^-133 (bf16's subnormal quantum); beyond the float
// range (e5m2 or e4m3 times 2^127) it gives inf.
CALICO_HD uint16_t mx_dequantize_to_bf16(uint8_t element, uint8_t scale, Fp8Kind kind) {
  if (e8m0_is_nan(scale)) return kBf16CanonicalNaN;
  const float v = fp8_to_f32(element, kind);
  const int s = e8m0_exponent(scale);
  const int half = s / 2;
  return f32_to_bf16(v * exp2i(half) * exp2i(s - half));
}

// ---------------------------------------------------------------------------------------------------------
// Portable exp and SiLU: explicit fma/mul/add in fp32, the same bits on every compiler and device.
// ---------------------------------------------------------------------------------------------------------
CALICO_HD float calico_exp(float x) {
  if (f32_is_nan(x)) return x;
  if (x > 88.72283935546875f) return bits_f32(0x7F800000u);  // above log(FLT_MAX): +inf
  if (x < -103.97208404541016f) return 0.0f;                 // below log(2^-150): 0
  // x = n*ln2 + r, |r| <= ln2/2; ln2 split in a high part with trailing zeros (exact n*ln2_hi) and a low part.
  const float n = f32_rint(x * 1.44269502162933349609375f);
  float r = f32_fma(n, -0.693145751953125f, x);
  r = f32_fma(n, -1.428606765330187045e-06f, r);
  // exp(r) on [-ln2/2, ln2/2] = 1 + r + r^2 * P(r), P the Cephes expf minimax polynomial (degree 5).
  float p = 1.9875691500e-4f;
  p = f32_fma(p, r, 1.3981999507e-3f);
  p = f32_fma(p, r, 8.3334519073e-3f);
  p = f32_fma(p, r, 4.1665795894e-2f);
  p = f32_fma(p, r, 1.6666665459e-1f);
  p = f32_fma(p, r, 5.0000001201e-1f);
  p = f32_fma(p, r * r, r) + 1.0f;
  // p * 2^n in two exact power-of-two steps (n in [-150, 128]) so subnormal results round once.
  const int ni = static_cast<int>(n);
  const int n1 = ni / 2;
  return p * exp2i(n1) * exp2i(ni - n1);
}

// sigmoid(g) = 1 / (1 + exp(-g)); silu(g) = g * sigmoid(g) written as g / (1 + exp(-g)) (DESIGN 2.1).
// NOTE (probe-mma 2026-11-30): NaN results are made canonical (0x7FFFFFFF): x86 keeps an input NaN's payload
// and makes inf/inf 0xFFC00000, CUDA gives 0x7FFFFFFF; tests/megakernel/test_numerics_gpu.cpp found it.
CALICO_HD float canonical_nan(float x) { return f32_is_nan(x) ? bits_f32(kF32CanonicalNaN) : x; }
CALICO_HD float calico_sigmoid(float g) { return canonical_nan(1.0f / (1.0f + calico_exp(-g))); }
CALICO_HD float calico_silu(float g) { return canonical_nan(g / (1.0f + calico_exp(-g))); }

// d silu / d g = s * (1 + g * (1 - s)), s = sigmoid(g), evaluated in exactly this order.
CALICO_HD float calico_silu_grad(float g) {
  const float s = calico_sigmoid(g);
  return canonical_nan(s * (1.0f + g * (1.0f - s)));
}

// ---------------------------------------------------------------------------------------------------------
// Tensor-core MMA models (DESIGN 2.5): one instruction step for one output element.
//
// The step fuses L exact products and the accumulator c. Each term is sign * M * 2^(E - P) with integer M
// holding P fraction bits; E = e_a + e_b (+ block-scale exponents) for products, floor(log2|c|) (clamped at
// -126) for c. All terms are truncated toward zero to multiples of 2^(Emax - F), summed exactly, normalised
// once and rounded toward zero to `out_fraction_bits` on a grid that stops at 2^(-126 - out_fraction_bits).
//
// Zero terms (DESIGN 2.5 rule 3): a zero product or a zero c is a term with E = -133 and no scale
// exponents, in every row. BF16: matched on our H200 (mma.sync, wgmma). FP8: the wgmma e4m3/e5m2 outputs of
// issue 10 measured on the H200 (all 32 products zero, tiny c: c is kept on the 2^-139 grid that E_max = e_c
// gives) follow it and not the -126 rule; regression tests/core/test_numerics.cpp
// NumericsMma.Fp8ZeroRuleMeasuredOnH200; the full probe re-run is megakernel/PROBE.md's. The old rule came
// from an MMA-Sim snapshot (github.com/microsoft/MMA-Sim) that decoded a zero operand with exponent -126, so
// a zero product kept E = -126 + e_other + scales and could set E_max; it is kept only as
// MmaZeroRule::legacy_minus_126, the probe's negative control (`--compare-model old-zero-rule`). Another
// MMA-Sim snapshot puts every zero term at a flat -126 (mmasim/arithmetic/fdpa.py truncated_fused_sum, "TODO:
// handle zero"): MmaZeroRule::flat_minus_126 (`--compare-model flat-126`). For Hopper FP8 it gives the same
// bits as -133 (no FP8 product or nonzero c has E < -126); BF16 and MX with small scales tell them apart.
// A zero sum is +0 in every row, whatever the terms' signs (measured on the H200).
// Hopper wgmma FP8: F = 13 and the result keeps 13 fraction bits ("f32_e8m13"), so below 2^-126 its grid
// is 2^-139. Blackwell kind::mxf8f6f4 (K = 32): F = 25, fp32 RZ. NaN rules: the products and c summed in
// float64 give NaN (any NaN input or E8M0 NaN scale, inf*0, +inf with -inf) -> 0x7FFFFFFF, or inf -> that inf.
// ---------------------------------------------------------------------------------------------------------
enum class MmaModel : uint8_t {
  hopper_bf16,       // wgmma k16 / mma.sync m16n8k16 bf16, fp32 accumulate: L=16, F=25
  hopper_fp8,        // wgmma k32 e4m3/e5m2: L=32, F=13, 13 fraction bits out
  blackwell_bf16,    // tcgen05 kind::f16: L=16, F=25
  blackwell_mxfp8,   // tcgen05 kind::mxf8f6f4 block_scale, block 32: L=32, F=25
};

enum class MmaZeroRule : uint8_t {
  fixed_minus_133,   // every row: a zero product or zero c is a term at E = -133, no scale exponents
  legacy_minus_126,  // NOT a model row: the old MMA-Sim snapshot's rule (zero operand and zero c decode with
                     // exponent -126, a zero product keeps e_other and the scales); the probe's negative control
  flat_minus_126,    // NOT a model row: every zero term at E = -126, no other exponent (a comparison model)
};

struct MmaModelParams {
  int L;                  // products fused per step
  int F;                  // alignment width below the largest term's exponent
  int out_fraction_bits;  // fraction bits kept by the final round-toward-zero
  MmaZeroRule zero_rule;
};

CALICO_HD MmaModelParams mma_model_params(MmaModel m) {
  switch (m) {
    case MmaModel::hopper_bf16: return {16, 25, 23, MmaZeroRule::fixed_minus_133};
    case MmaModel::hopper_fp8: return {32, 13, 13, MmaZeroRule::fixed_minus_133};
    case MmaModel::blackwell_bf16: return {16, 25, 23, MmaZeroRule::fixed_minus_133};
    case MmaModel::blackwell_mxfp8: return {32, 25, 23, MmaZeroRule::fixed_minus_133};
  }
  return {16, 25, 23, MmaZeroRule::fixed_minus_133};
}

// One decoded term of the fused sum.
struct MmaTerm {
  int64_t magnitude;  // M: integer significand (0 for a zero term)
  int exponent;       // E
  int fraction_bits;  // P
  bool negative;
};

// Decoded finite operand: value = (-1)^neg * m * 2^(e - p).
struct MmaOperand {
  uint32_t m;
  int e;
  int p;
  bool negative;
  bool zero;
};

CALICO_HD MmaOperand decode_bf16_operand(uint16_t v) {
  const bool neg = (v >> 15) != 0;
  const int exp_field = (v >> 7) & 0xFF;
  const uint32_t frac = v & 0x7F;
  if (exp_field == 0) return {frac, -126, 7, neg, frac == 0};
  return {frac | 0x80u, exp_field - 127, 7, neg, false};
}

CALICO_HD MmaOperand decode_fp8_operand(uint8_t v, Fp8Kind kind) {
  const Fp8Format fmt = fp8_format(kind);
  const bool neg = (v >> 7) != 0;
  const int exp_field = (v & 0x7F) >> fmt.fraction_bits;
  const uint32_t frac = v & ((1u << fmt.fraction_bits) - 1);
  if (exp_field == 0) return {frac, fmt.emin, fmt.fraction_bits, neg, frac == 0};
  return {frac | (1u << fmt.fraction_bits), exp_field - fmt.bias, fmt.fraction_bits, neg, false};
}

constexpr int kMmaZeroTermExponent = -133;          // every row: exponent of a zero term
constexpr int kLegacyZeroOperandExponent = -126;    // legacy_minus_126 / flat_minus_126 only (comparison models)

CALICO_HD MmaTerm mma_product_term(const MmaOperand& a, const MmaOperand& b, int scale_exponent,
                                   MmaZeroRule rule = MmaZeroRule::fixed_minus_133) {
  const bool neg = a.negative != b.negative;
  if (a.zero || b.zero) {
    if (rule == MmaZeroRule::fixed_minus_133) return {0, kMmaZeroTermExponent, 0, neg};
    if (rule == MmaZeroRule::flat_minus_126) return {0, kLegacyZeroOperandExponent, 0, neg};
    const int ea = a.zero ? kLegacyZeroOperandExponent : a.e, eb = b.zero ? kLegacyZeroOperandExponent : b.e;
    return {0, ea + eb + scale_exponent, 0, neg};
  }
  return {static_cast<int64_t>(a.m) * b.m, a.e + b.e + scale_exponent, a.p + b.p, neg};
}

CALICO_HD MmaTerm mma_accumulator_term(float c, MmaZeroRule rule = MmaZeroRule::fixed_minus_133) {
  const uint32_t u = f32_bits(c);
  const bool neg = (u >> 31) != 0;
  const int exp_field = static_cast<int>((u >> 23) & 0xFF);
  const uint32_t frac = u & 0x7FFFFFu;
  if (exp_field == 0) {
    if (frac == 0)
      return {0, rule == MmaZeroRule::fixed_minus_133 ? kMmaZeroTermExponent : kLegacyZeroOperandExponent, 0, neg};
    return {frac, -126, 23, neg};
  }
  return {static_cast<int64_t>(frac | 0x800000u), exp_field - 127, 23, neg};
}

// Exact signed value of the term in units of 2^(emax - F), truncated toward zero.
CALICO_HD int64_t mma_aligned_term(const MmaTerm& t, int emax, int F) {
  if (t.magnitude == 0) return 0;
  const int shift = t.exponent - t.fraction_bits - emax + F;  // value / unit = M * 2^shift
  int64_t v;
  if (shift >= 0) v = t.magnitude << shift;  // shift <= F - P + (E - Emax) <= 25: no overflow
  else v = -shift >= 63 ? 0 : (t.magnitude >> -shift);
  return t.negative ? -v : v;
}

// Normalise sum * 2^unit_exponent once and round toward zero to `fraction_bits` bits below the leading bit,
// the exponent clamped at -126 as fp32 does (so 23 bits give the fp32 subnormal grid 2^-149, 13 bits give
// 2^-139). |result| >= 2^128 gives inf. An exact zero is +0, whatever the terms' signs: measured on the H200
// for BF16 (mma.sync and wgmma, megakernel/PROBE.md) and FP8 (wgmma e4m3/e5m2).
CALICO_HD float mma_round_toward_zero(int64_t sum, int unit_exponent, int fraction_bits) {
  if (sum == 0) return 0.0f;
  const bool neg = sum < 0;
  uint64_t mag = static_cast<uint64_t>(neg ? -sum : sum);
  const int msb = 63 - count_leading_zeros64(mag);
  int exponent = msb + unit_exponent;  // floor(log2 |result|)
  const uint32_t sign = neg ? 0x80000000u : 0u;
  if (exponent >= 128) return bits_f32(sign | 0x7F800000u);
  // Keep bits down to 2^(max(exponent, -126) - fraction_bits).
  const int lsb = (exponent < -126 ? -126 : exponent) - fraction_bits;
  const int drop = lsb - unit_exponent;  // bits of mag below the kept grid
  if (drop > 0) mag = drop >= 64 ? 0 : (mag >> drop);
  else mag <<= -drop;
  // Now value = mag * 2^lsb exactly, with at most fraction_bits+1 significant bits (<= 24).
  // NOTE (probe-mma 2026-11-30, megakernel/PROBE.md): a nonzero sum truncated to zero gives +0 on the H200
  // (mma.sync and wgmma bf16), not a zero of the sum's sign.
  if (mag == 0) return 0.0f;
  // Build the float: mag * 2^lsb is exactly representable.
  const int top = 63 - count_leading_zeros64(mag);
  const int e = top + lsb;
  uint32_t bits;
  if (e >= -126) {
    const uint32_t frac = static_cast<uint32_t>((mag << (23 - top)) & 0x7FFFFFu);
    bits = (static_cast<uint32_t>(e + 127) << 23) | frac;
  } else {
    bits = static_cast<uint32_t>(mag << (lsb + 149));  // subnormal: units of 2^-149
  }
  return bits_f32(sign | bits);
}

// The fused step over n product terms plus the accumulator term, given NaN/inf status already resolved.
CALICO_HD float mma_fused_sum(const MmaTerm* terms, int n, const MmaModelParams& p) {
  int emax = terms[0].exponent;
  for (int i = 1; i < n; ++i)
    if (terms[i].exponent > emax) emax = terms[i].exponent;
  int64_t sum = 0;
  for (int i = 0; i < n; ++i) sum += mma_aligned_term(terms[i], emax, p.F);
  // NOTE (probe-mma 2026-11-30, megakernel/PROBE.md): an exact zero result is +0 for every row, even when
  // every term is -0. Regression: tests/megakernel/test_probe_model.cpp ZeroResultIsPositive.
  return mma_round_toward_zero(sum, emax - p.F, p.out_fraction_bits);
}

// Special values (DESIGN 2.5 rule 1). Returns true and sets `out` when the result is NaN or inf.
struct MmaSpecials {
  bool nan = false, pos_inf = false, neg_inf = false;
  CALICO_HD void add_product(bool a_nan, bool a_inf, bool a_zero, bool a_neg, bool b_nan, bool b_inf, bool b_zero,
                             bool b_neg) {
    if (a_nan || b_nan || (a_inf && b_zero) || (b_inf && a_zero)) { nan = true; return; }
    if (a_inf || b_inf) ((a_neg != b_neg) ? neg_inf : pos_inf) = true;
  }
  CALICO_HD void add_accumulator(float c) {
    if (f32_is_nan(c)) nan = true;
    else if (f32_is_inf(c)) ((f32_bits(c) >> 31) ? neg_inf : pos_inf) = true;
  }
  CALICO_HD bool resolve(float& out) const {
    if (nan || (pos_inf && neg_inf)) { out = bits_f32(kF32CanonicalNaN); return true; }
    if (pos_inf) { out = bits_f32(0x7F800000u); return true; }
    if (neg_inf) { out = bits_f32(0xFF800000u); return true; }
    return false;
  }
};

CALICO_HD bool bf16_is_nan(uint16_t v) { return (v & 0x7FFF) > 0x7F80; }
CALICO_HD bool bf16_is_inf(uint16_t v) { return (v & 0x7FFF) == 0x7F80; }

// BF16 step: c + sum_{i<16} a[i]*b[i] (Hopper wgmma/mma.sync and Blackwell tcgen05 kind::f16 share it).
// mma_step_bf16_with takes the parameters explicitly (the probe's comparison models); mma_step_bf16 uses the
// model's row.
CALICO_HD float mma_step_bf16_with(const uint16_t* a, const uint16_t* b, float c, const MmaModelParams& p) {
  MmaSpecials specials;
  MmaTerm terms[17];
  for (int i = 0; i < 16; ++i) {
    const MmaOperand da = decode_bf16_operand(a[i]), db = decode_bf16_operand(b[i]);
    specials.add_product(bf16_is_nan(a[i]), bf16_is_inf(a[i]), da.zero, da.negative, bf16_is_nan(b[i]),
                         bf16_is_inf(b[i]), db.zero, db.negative);
    terms[i] = mma_product_term(da, db, 0, p.zero_rule);
  }
  specials.add_accumulator(c);
  float out;
  if (specials.resolve(out)) return out;
  terms[16] = mma_accumulator_term(c, p.zero_rule);
  return mma_fused_sum(terms, 17, p);
}

CALICO_HD float mma_step_bf16(const uint16_t* a, const uint16_t* b, float c, MmaModel model = MmaModel::hopper_bf16) {
  return mma_step_bf16_with(a, b, c, mma_model_params(model));
}

CALICO_HD bool fp8_is_nan(uint8_t v, Fp8Kind kind) {
  if (kind == Fp8Kind::e4m3) return (v & 0x7F) == 0x7F;
  return (v & 0x7F) > 0x7C;
}
CALICO_HD bool fp8_is_inf(uint8_t v, Fp8Kind kind) { return kind == Fp8Kind::e5m2 && (v & 0x7F) == 0x7C; }

// FP8 step: c + sum_{i<32} a[i]*b[i] * 2^(scale_a + scale_b). Hopper wgmma (no scales: pass 127/127, i.e.
// 2^0) and Blackwell kind::mxf8f6f4 block_scale (one E8M0 scale per operand per 32-block).
// mma_step_fp8_with takes the parameters explicitly (the probe's comparison models).
CALICO_HD float mma_step_fp8_with(const uint8_t* a, Fp8Kind ka, uint8_t scale_a, const uint8_t* b, Fp8Kind kb,
                                  uint8_t scale_b, float c, const MmaModelParams& p) {
  MmaSpecials specials;
  if (e8m0_is_nan(scale_a) || e8m0_is_nan(scale_b)) specials.nan = true;
  const int scale_exponent = e8m0_exponent(scale_a) + e8m0_exponent(scale_b);
  MmaTerm terms[33];
  for (int i = 0; i < 32; ++i) {
    const MmaOperand da = decode_fp8_operand(a[i], ka), db = decode_fp8_operand(b[i], kb);
    specials.add_product(fp8_is_nan(a[i], ka), fp8_is_inf(a[i], ka), da.zero, da.negative, fp8_is_nan(b[i], kb),
                         fp8_is_inf(b[i], kb), db.zero, db.negative);
    terms[i] = mma_product_term(da, db, scale_exponent, p.zero_rule);
  }
  specials.add_accumulator(c);
  float out;
  if (specials.resolve(out)) return out;
  terms[32] = mma_accumulator_term(c, p.zero_rule);
  return mma_fused_sum(terms, 33, p);
}

CALICO_HD float mma_step_fp8(const uint8_t* a, Fp8Kind ka, uint8_t scale_a, const uint8_t* b, Fp8Kind kb,
                             uint8_t scale_b, float c, MmaModel model) {
  return mma_step_fp8_with(a, ka, scale_a, b, kb, scale_b, c, mma_model_params(model));
}

CALICO_HD float mma_step_hopper_fp8(const uint8_t* a, Fp8Kind ka, const uint8_t* b, Fp8Kind kb, float c) {
  return mma_step_fp8(a, ka, 127, b, kb, 127, c, MmaModel::hopper_fp8);
}

CALICO_HD float mma_step_blackwell_mxfp8(const uint8_t* a, Fp8Kind ka, uint8_t scale_a, const uint8_t* b,
                                         Fp8Kind kb, uint8_t scale_b, float c) {
  return mma_step_fp8(a, ka, scale_a, b, kb, scale_b, c, MmaModel::blackwell_mxfp8);
}

}  // namespace calico
