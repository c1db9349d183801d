// Host-side helpers of the tensor-core probe: operand formats (bf16, e4m3, e5m2) with exact constructors,
// a counter-based RNG (same inputs for any thread count), the targeted vectors of the literature, and a
// parametrised variant of the numerics.h MMA model used to diagnose mismatches.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "calico/numerics.h"

namespace calico::gpu::probe {

// splitmix64 stream keyed by (seed, index, stream): case i of a run draws the same numbers on any machine.
class Rng {
 public:
  Rng(uint64_t seed, uint64_t index, uint64_t stream) : s_(mix(seed * 0x9E3779B97F4A7C15ull ^ mix(index ^ (stream << 48)))) {}
  uint64_t next() {
    s_ += 0x9E3779B97F4A7C15ull;
    return mix(s_);
  }
  uint32_t bits(int n) { return n >= 32 ? static_cast<uint32_t>(next()) : static_cast<uint32_t>(next() & ((1ull << n) - 1)); }
  int uniform(int lo, int hi) {  // inclusive; lo <= hi
    return lo + static_cast<int>(next() % static_cast<uint64_t>(hi - lo + 1));
  }
  bool coin() { return (next() & 1) != 0; }

 private:
  static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t s_;
};

// A random fp32 bit pattern with exponent uniform in [elo, ehi] (clamped to [-149, 127]) and a random
// fraction; below -126 a subnormal whose top bit sits at 2^e.
inline uint32_t random_f32(Rng& rng, int elo, int ehi) {
  // Both ends clamped (issue 9: an ehi below -149 gave e < -149 and a negative shift below).
  elo = elo < -149 ? -149 : elo > 127 ? 127 : elo;
  ehi = ehi < -149 ? -149 : ehi > 127 ? 127 : ehi;
  if (elo > ehi) elo = ehi;
  const int e = rng.uniform(elo, ehi);
  const uint32_t sign = rng.coin() ? 0x80000000u : 0u;
  if (e >= -126) return sign | (static_cast<uint32_t>(e + 127) << 23) | rng.bits(23);
  const int top = e + 149;  // bit index of the leading one, 0..22
  return sign | (1u << top) | (rng.bits(23) & ((1u << top) - 1));
}

inline uint32_t f32_pow2_bits(int e, bool neg) { return f32_bits(exp2i(e)) | (neg ? 0x80000000u : 0u); }

struct OperandFormat {
  bool fp8;
  Fp8Kind kind;
  int bytes, frac_bits, bias, emin, emax;

  static OperandFormat bf16() { return {false, Fp8Kind::e4m3, 2, 7, 127, -126, 127}; }
  static OperandFormat fp8_of(Fp8Kind k) {
    return k == Fp8Kind::e4m3 ? OperandFormat{true, k, 1, 3, 7, -6, 8} : OperandFormat{true, k, 1, 2, 15, -14, 15};
  }

  uint32_t sign_bit() const { return fp8 ? 0x80u : 0x8000u; }
  uint32_t frac_mask() const { return (1u << frac_bits) - 1; }
  int min_pow2() const { return emin - frac_bits; }  // smallest positive subnormal is 2^min_pow2
  bool is_nan(uint32_t v) const { return fp8 ? fp8_is_nan(static_cast<uint8_t>(v), kind) : bf16_is_nan(static_cast<uint16_t>(v)); }
  bool is_inf(uint32_t v) const { return fp8 ? fp8_is_inf(static_cast<uint8_t>(v), kind) : bf16_is_inf(static_cast<uint16_t>(v)); }
  float value(uint32_t v) const { return fp8 ? fp8_to_f32(static_cast<uint8_t>(v), kind) : bf16_to_f32(static_cast<uint16_t>(v)); }
  uint32_t nan() const { return fp8 ? 0x7Fu : 0x7FC0u; }
  uint32_t inf(bool neg) const { return (fp8 ? 0x7Cu : 0x7F80u) | (neg ? sign_bit() : 0u); }  // e5m2 / bf16 only
  bool has_inf() const { return !fp8 || kind == Fp8Kind::e5m2; }
  uint32_t max_finite(bool neg) const {
    const uint32_t m = fp8 ? (kind == Fp8Kind::e4m3 ? 0x7Eu : 0x7Bu) : 0x7F7Fu;
    return m | (neg ? sign_bit() : 0u);
  }

  // Normal number (-1)^neg * 1.frac * 2^e, e clamped to [emin, emax]; e4m3's NaN code becomes the max finite.
  uint32_t make(bool neg, int e, uint32_t frac) const {
    if (e < emin) e = emin;
    if (e > emax) e = emax;
    uint32_t v = (static_cast<uint32_t>(e + bias) << frac_bits) | (frac & frac_mask());
    if (fp8 && kind == Fp8Kind::e4m3 && v == 0x7F) v = 0x7E;
    return v | (neg ? sign_bit() : 0u);
  }
  // Exact power of two 2^e (subnormal allowed); e must lie in [min_pow2(), emax].
  uint32_t pow2(int e, bool neg) const {
    if (e >= emin) return make(neg, e, 0);
    return (1u << (e - min_pow2())) | (neg ? sign_bit() : 0u);
  }
  uint32_t random_subnormal(Rng& rng) const {
    uint32_t f = rng.bits(frac_bits);
    if (f == 0) f = 1;
    return f | (rng.coin() ? sign_bit() : 0u);
  }
  // Random sign and fraction, exponent uniform in [lo, hi]; below emin the value is a subnormal.
  uint32_t random_normal(Rng& rng, int lo, int hi) const {
    if (lo > hi) lo = hi;
    const int e = rng.uniform(lo, hi);
    const bool neg = rng.coin();
    const uint32_t frac = rng.bits(frac_bits);
    if (e >= emin) return make(neg, e, frac);
    const int shift = emin - e;
    uint32_t sub = shift > frac_bits ? 1u : (((1u << frac_bits) | frac) >> shift);
    if (sub == 0) sub = 1;
    return sub | (neg ? sign_bit() : 0u);
  }
  uint32_t random_finite(Rng& rng) const {
    for (;;) {
      const uint32_t v = rng.bits(bytes * 8);
      if (!is_nan(v) && !is_inf(v)) return v;
    }
  }
};

// One output element's inputs for one K step, with the property it targets. sa/sb: E8M0 block scales of the
// row of A / column of B (read by the block-scaled instructions only; 127 = 2^0).
struct TargetedVector {
  std::string name;
  std::vector<uint32_t> a, b;
  uint32_t c = 0;
  uint8_t sa = 127, sb = 127;
};

// The targeted vectors (PROBE.md): alignment/truncation width, rounding direction, normalisation point and
// carries, zero-term exponent, sign of exact zeros, specials, overflow, subnormals, every operand value
// against a set of partners, and the edge-hunting families `edge_*` (issue 10: whole zero rows/columns
// against large, small and subnormal C, all-zero products with C = +-0, products near underflow with C = 0,
// one huge product with many tiny ones, large MX block scales with zero operands, inf/NaN in one lane, and
// the H200 measurements of issue 10).
std::vector<TargetedVector> targeted_vectors(const OperandFormat& f, int k, MmaModel model, uint64_t seed);

// Only the edge-hunting families (a subset of targeted_vectors, same order).
std::vector<TargetedVector> edge_vectors(const OperandFormat& f, int k, MmaModel model, uint64_t seed);

// One step of a model row with explicit parameters (numerics.h mma_step_*_with): the probe's main model
// (mma_model_params(model)) or a comparison model. Operands as bit patterns, k = 16 (bf16) or 32 (fp8).
uint32_t model_step_with(const OperandFormat& f, const MmaModelParams& p, const uint32_t* a, const uint32_t* b,
                         uint32_t c, uint8_t sa, uint8_t sb);

// True when some term of the step is an exact zero (a zero operand in a product, or c = +-0): the only
// steps where two models that differ in their zero rule alone can disagree.
bool has_zero_term(const OperandFormat& f, const uint32_t* a, const uint32_t* b, uint32_t c, int k);

// Comparison models of `calico probe-mma --compare-model`: "old-zero-rule" is the model with the old MMA-Sim
// snapshot's zero rule (MmaZeroRule::legacy_minus_126), the negative control of issue 10; "flat-126" puts
// every zero term at -126 (MmaZeroRule::flat_minus_126); "none" disables the comparison (returns false).
// Throws calico::Error on an unknown name.
bool compare_model_params(MmaModel model, const std::string& name, MmaModelParams& out);
const char* const kCompareModelNames = "old-zero-rule | flat-126 | none";
// One line on what a comparison model is (for reports).
std::string compare_model_description(const std::string& name);

// A family of models around numerics.h's: alignment width F, output fraction bits, how zero terms take
// part in E_max (numerics.h's two rules, or not at all), and products fused per group (groups chain through
// the accumulator).
struct VariantParams {
  int F = 25, out_bits = 23, group = 16;
  int zero_mode = 0;  // 0: zero terms at -133 (every row), 1: the old -126 rule (legacy_minus_126), 2: ignored
  static VariantParams of(MmaModel model, int k);
  std::string describe() const;
};
std::vector<VariantParams> variant_grid(const VariantParams& base);
uint32_t variant_step(const OperandFormat& f, const VariantParams& p, const uint32_t* a, const uint32_t* b, uint32_t c,
                      int k);

}  // namespace calico::gpu::probe
