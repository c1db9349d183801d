// Targeted vectors and the model-variant search of the tensor-core probe (see probe_model.h, PROBE.md).
#include "probe_model.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "calico/error.h"

namespace calico::gpu::probe {
namespace {

class Builder {
 public:
  Builder(const OperandFormat& f, int k) : f_(f), k_(k) {}
  TargetedVector fresh(const char* name) const {
    TargetedVector v;
    v.name = name;
    v.a.assign(k_, 0);
    v.b.assign(k_, 0);
    return v;
  }
  // Product slot i = (-1)^neg 2^e as a product of two powers of two; false when the format cannot.
  bool product_pow2(TargetedVector& v, int i, int e, bool neg) const {
    int ea = std::clamp(e / 2, f_.min_pow2(), f_.emax);
    int eb = e - ea;
    if (eb > f_.emax) { ea += eb - f_.emax; eb = f_.emax; }
    if (eb < f_.min_pow2()) { ea -= f_.min_pow2() - eb; eb = f_.min_pow2(); }
    if (ea < f_.min_pow2() || ea > f_.emax || eb < f_.min_pow2() || eb > f_.emax) return false;
    v.a[i] = f_.pow2(ea, neg);
    v.b[i] = f_.pow2(eb, false);
    return true;
  }
  int k() const { return k_; }
  const OperandFormat& f() const { return f_; }
  // Largest exponent e such that 2^e is a product of two operands.
  int max_product_exp() const { return 2 * f_.emax; }
  int min_product_exp() const { return 2 * f_.min_pow2(); }

 private:
  OperandFormat f_;
  int k_;
};

void add(std::vector<TargetedVector>& out, bool ok, TargetedVector v) {
  if (ok) out.push_back(std::move(v));
}

// Big term 2^eb against small terms 2^(eb - j): where truncation starts (F) and that it is toward zero.
void align_vectors(const Builder& bl, int big, std::vector<TargetedVector>& out) {
  const int K = bl.k();
  for (int j = 0; j <= 40; ++j)
    for (int sb = 0; sb < 2; ++sb)
      for (int ss = 0; ss < 2; ++ss) {
        const int small = big - j;
        TargetedVector v = bl.fresh("align");  // big product + small product
        add(out, bl.product_pow2(v, 0, big, sb) && bl.product_pow2(v, K - 1, small, ss), v);
        v = bl.fresh("align_c_big");  // big accumulator + small product
        v.c = f32_pow2_bits(std::min(big, 127), sb);
        add(out, bl.product_pow2(v, 3 % K, std::min(big, 127) - j, ss), v);
        v = bl.fresh("align_c_small");  // big product + small accumulator
        v.c = f32_pow2_bits(std::max(small, -149), ss);
        add(out, bl.product_pow2(v, 1, big, sb), v);
        v = bl.fresh("align_split");  // small term split into two halves, truncated one by one
        add(out, bl.product_pow2(v, 0, big, sb) && bl.product_pow2(v, 1, small - 1, ss) &&
                     bl.product_pow2(v, 2, small - 1, ss), v);
        v = bl.fresh("align_many_small");  // every other slot small
        bool ok = bl.product_pow2(v, 0, big, sb);
        for (int i = 1; i < K && ok; ++i) ok = bl.product_pow2(v, i, small, ss);
        add(out, ok, v);
      }
}

// +-2^eb plus two small terms with bits around the output's last place: direction of the final rounding.
void round_vectors(const Builder& bl, int big, int F, int out_bits, std::vector<TargetedVector>& out) {
  const int lo = std::min(F, out_bits) - 4, hi = std::max(F, out_bits) + 3;
  for (int x = lo; x <= hi; ++x)
    for (int y = x; y <= hi; ++y)
      for (int s = 0; s < 8; ++s) {
        const bool nb = s & 1, nx = s & 2, ny = s & 4;
        TargetedVector v = bl.fresh("round");
        add(out, bl.product_pow2(v, 0, big, nb) && bl.product_pow2(v, 1, big - x, nx) && bl.product_pow2(v, 2, big - y, ny),
            v);
        v = bl.fresh("round_c_big");
        v.c = f32_pow2_bits(std::min(big, 127), nb);
        add(out, bl.product_pow2(v, 1, std::min(big, 127) - x, nx) && bl.product_pow2(v, 2, std::min(big, 127) - y, ny), v);
      }
}

// n products of the largest significand (carries out of the top), plus a small term near the truncation point:
// is alignment relative to E_max before normalisation, and how many carry bits are kept?
void carry_vectors(const Builder& bl, int F, std::vector<TargetedVector>& out) {
  const OperandFormat& f = bl.f();
  const int K = bl.k();
  const uint32_t top = f.make(false, 0, f.frac_mask());  // (2 - 2^-P)
  for (int n = 1; n <= K; ++n)
    for (int j = F - 3; j <= F + 3; ++j)
      for (int s = 0; s < 4; ++s) {
        const bool neg = s & 1, small_neg = s & 2;
        TargetedVector v = bl.fresh("carry");
        for (int i = 0; i < n; ++i) {
          v.a[i] = top | (neg ? f.sign_bit() : 0u);
          v.b[i] = top;
        }
        // E_max = 0 (the products' exponent); the small term sits at 2^-j, in a product slot or in C.
        bool ok = true;
        if (n < K) ok = bl.product_pow2(v, K - 1, -j, small_neg);
        else v.c = f32_pow2_bits(-j, small_neg);
        add(out, ok, v);
      }
}

// Terms so small that the zero terms' exponent (-133) decides what survives (bf16 products reach 2^-252).
void zero_term_vectors(const Builder& bl, uint64_t seed, std::vector<TargetedVector>& out) {
  const OperandFormat& f = bl.f();
  const int K = bl.k();
  if (bl.min_product_exp() > -150) return;
  Rng rng(seed, 0, 0x2E50);
  for (int t = 0; t < 1024; ++t) {
    TargetedVector v = bl.fresh("zero_term");
    const int nz = t % 4 == 3 ? K : 1 + t % 3;
    for (int i = 0; i < nz; ++i) {
      // product exponent in [-168, -138]: operands 2^ea * 1.x, 2^eb * 1.y
      const int e = rng.uniform(-168, -138);
      const int ea = e / 2, eb = e - ea;
      v.a[i] = f.make(rng.coin(), ea, rng.bits(f.frac_bits));
      v.b[i] = f.make(false, eb, rng.bits(f.frac_bits));
    }
    switch (t % 5) {
      case 0: v.c = 0; break;
      case 1: v.c = 0x80000000u; break;
      case 2: v.c = 1; break;
      case 3: v.c = 0x80000001u; break;
      default: v.c = rng.bits(23) | (rng.coin() ? 0x80000000u : 0u); break;
    }
    out.push_back(std::move(v));
  }
}

// Subnormal accumulators alone or with the smallest products: how C's bits below 2^(-126 - F) are treated.
void c_subnormal_vectors(const Builder& bl, std::vector<TargetedVector>& out) {
  for (int e = -149; e <= -126; ++e)
    for (int s = 0; s < 2; ++s) {
      TargetedVector v = bl.fresh("c_subnormal");
      v.c = f32_pow2_bits(e, s);
      out.push_back(v);
      v.c |= 1u;  // plus the last subnormal bit
      out.push_back(v);
      TargetedVector w = bl.fresh("c_subnormal_plus_product");
      w.c = f32_pow2_bits(e, s) | 1u;
      add(out, bl.product_pow2(w, 0, std::max(bl.min_product_exp(), -140), !s), w);
    }
}

// Exact zeros: signs of zero products and accumulators, exact cancellation, underflow to zero.
void zero_sign_vectors(const Builder& bl, std::vector<TargetedVector>& out) {
  const OperandFormat& f = bl.f();
  const int K = bl.k();
  const uint32_t nz = f.sign_bit();
  for (int cs = 0; cs < 2; ++cs) {
    const uint32_t c = cs ? 0x80000000u : 0u;
    for (int pattern = 0; pattern < 6; ++pattern) {
      TargetedVector v = bl.fresh("zero_sign");
      v.c = c;
      for (int i = 0; i < K; ++i) {
        switch (pattern) {
          case 0: break;                                        // +0 * +0
          case 1: v.a[i] = nz; break;                           // -0 * +0 = -0
          case 2: v.a[i] = i == 0 ? nz : 0; break;              // one -0
          case 3: v.a[i] = i == 0 ? 0 : nz; break;              // all but one -0
          case 4: v.a[i] = nz; v.b[i] = nz; break;              // -0 * -0 = +0
          default: v.a[i] = nz; v.b[i] = f.pow2(0, false); break;  // -0 * 1 = -0
        }
      }
      out.push_back(v);
      TargetedVector w = v;  // exact cancellation x - x on top of the zero pattern
      w.name = "zero_sign_cancel";
      w.a[0] = f.make(false, 0, 1);
      w.b[0] = f.make(false, 0, 3 & f.frac_mask());
      w.a[1] = w.a[0] | nz;
      w.b[1] = w.b[0];
      out.push_back(w);
      TargetedVector u = v;  // a product cancels the accumulator exactly
      u.name = "zero_sign_cancel_c";
      u.c = f32_pow2_bits(0, cs == 0);
      bl.product_pow2(u, 0, 0, cs == 1);
      out.push_back(u);
      if (bl.min_product_exp() <= -160) {  // a nonzero sum that rounds to zero: whose sign?
        TargetedVector z = v;
        z.name = "zero_sign_underflow";
        bl.product_pow2(z, 0, -160, true);
        out.push_back(z);
        bl.product_pow2(z, 0, -160, false);
        out.push_back(z);
      }
    }
  }
}

// NaN and infinity: which operand, which payload, inf * 0, inf - inf, inf from C.
void special_vectors(const Builder& bl, std::vector<TargetedVector>& out) {
  const OperandFormat& f = bl.f();
  const int K = bl.k();
  const uint32_t one = f.pow2(0, false);
  std::vector<uint32_t> nans = {f.nan(), f.nan() | f.sign_bit()};
  if (!f.fp8) nans.insert(nans.end(), {0x7F81u, 0xFFFFu, 0x7FBFu});
  if (f.fp8 && f.kind == Fp8Kind::e5m2) nans.insert(nans.end(), {0x7Du, 0x7Eu, 0xFDu});
  for (uint32_t n : nans)
    for (int pos : {0, K - 1}) {
      TargetedVector v = bl.fresh("nan_a");
      v.a[pos] = n;
      v.b[pos] = one;
      out.push_back(v);
      v = bl.fresh("nan_b_times_zero");
      v.b[pos] = n;
      out.push_back(v);
    }
  for (uint32_t c : {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFFFFFFFFu, 0x7FBFFFFFu}) {
    TargetedVector v = bl.fresh("nan_c");
    v.c = c;
    bl.product_pow2(v, 0, 0, false);
    out.push_back(v);
  }
  for (int sc = 0; sc < 3; ++sc) {  // C = +inf, -inf, 1
    const uint32_t c = sc == 0 ? 0x7F800000u : sc == 1 ? 0xFF800000u : 0x3F800000u;
    TargetedVector v = bl.fresh("inf_c");
    v.c = c;
    bl.product_pow2(v, 0, 0, true);
    out.push_back(v);
    if (!f.has_inf()) continue;
    for (int sa = 0; sa < 2; ++sa) {
      TargetedVector w = bl.fresh("inf_times_zero");
      w.c = c;
      w.a[1] = f.inf(sa);
      out.push_back(w);
      w = bl.fresh("inf_times_finite");
      w.c = c;
      w.a[1] = f.inf(sa);
      w.b[1] = one;
      out.push_back(w);
      w.name = "inf_minus_inf";
      w.a[2] = f.inf(!sa);
      w.b[2] = one;
      out.push_back(w);
    }
  }
}

// Sums at the top of fp32's range: overflow to inf only when |exact sum| >= 2^128 (RZ), products beyond fp32.
void overflow_vectors(const Builder& bl, std::vector<TargetedVector>& out) {
  const OperandFormat& f = bl.f();
  const uint32_t fmax = 0x7F7FFFFFu;
  for (int s = 0; s < 2; ++s) {
    const bool neg = s;
    for (int e : {127, 126, 120, 104, 103, 102, 20, 0}) {
      TargetedVector v = bl.fresh("overflow_c_max");
      v.c = fmax | (neg ? 0x80000000u : 0u);
      add(out, bl.product_pow2(v, 0, std::min(e, bl.max_product_exp()), neg), v);
      v.name = "overflow_c_max_opposite";
      add(out, bl.product_pow2(v, 0, std::min(e, bl.max_product_exp()), !neg), v);
    }
    if (bl.max_product_exp() >= 127) {
      TargetedVector v = bl.fresh("overflow_products");
      bl.product_pow2(v, 0, 127, neg);
      bl.product_pow2(v, 1, 127, neg);  // 2^128: inf
      out.push_back(v);
      v.name = "overflow_products_cancel";
      bl.product_pow2(v, 1, 127, !neg);  // exact 0
      out.push_back(v);
      TargetedVector w = bl.fresh("overflow_beyond_fp32");
      w.a[0] = f.max_finite(neg);
      w.b[0] = f.max_finite(false);  // ~2^256: beyond fp32 as a product
      out.push_back(w);
      w.name = "overflow_beyond_fp32_cancel";
      w.a[1] = f.max_finite(!neg);
      w.b[1] = f.max_finite(false);
      w.c = 0x3F800000u;
      out.push_back(w);
    }
  }
}

// Subnormal operands against a few partners.
void subnormal_vectors(const Builder& bl, std::vector<TargetedVector>& out) {
  const OperandFormat& f = bl.f();
  const int K = bl.k();
  const uint32_t partners[] = {f.pow2(0, false), f.pow2(f.emax, false), f.make(true, 0, f.frac_mask()), f.pow2(f.emin, false)};
  for (uint32_t s = 1; s <= f.frac_mask(); ++s)
    for (uint32_t p : partners)
      for (int cs = 0; cs < 2; ++cs) {
        TargetedVector v = bl.fresh("subnormal_operand");
        v.a[s % K] = s | (cs ? f.sign_bit() : 0u);
        v.b[s % K] = p;
        v.c = cs ? 0x00000001u : 0u;
        out.push_back(v);
      }
}

// Every operand value a against partners b (all 256 x 256 for fp8): decoding of each code.
void all_values_vectors(const Builder& bl, std::vector<TargetedVector>& out) {
  const OperandFormat& f = bl.f();
  const int K = bl.k();
  std::vector<uint32_t> partners;
  if (f.fp8) {
    for (uint32_t b = 0; b < 256; ++b) partners.push_back(b);
  } else {
    partners = {0x3F80u, 0xBF80u, 0x0001u, 0x8001u, 0x7F7Fu, 0x7F80u, 0x0000u, 0x1B80u /* 2^-72 */};
  }
  const uint32_t n = f.fp8 ? 256u : 65536u;
  for (uint32_t a = 0; a < n; ++a)
    for (size_t j = 0; j < partners.size(); ++j) {
      TargetedVector v = bl.fresh("all_values");
      const int pos = static_cast<int>((a + j) % K);
      v.a[pos] = a;
      v.b[pos] = partners[j];
      v.c = (a & 1) ? 0x3F800000u : 0u;  // half with C = 1
      out.push_back(std::move(v));
    }
}


// ---------------------------------------------------------------------------------------------------------
// Edge-hunting families (issue 10, PROBE.md "Edge families"). Random bit patterns almost never give 32 zero
// products together with a tiny C; these families build such steps on purpose, for every instruction.
// ---------------------------------------------------------------------------------------------------------

// C of a class: 0 large (2^10..2^60), 1 small normal (2^-126..2^-95, the C), 2 fp32 subnormal.
uint32_t edge_c(int cls, Rng& rng) {
  const uint32_t sign = rng.coin() ? 0x80000000u : 0u;
  switch (cls) {
    case 0: return random_f32(rng, 10, 60);
    case 1: return random_f32(rng, -126, -95);
    default: {
      const int pick = rng.uniform(0, 7);
      if (pick == 0) return sign | 1u;
      if (pick == 1) return sign | 0x7FFFFFu;
      const uint32_t v = rng.bits(23);
      return sign | (v == 0 ? 1u : v);
    }
  }
}

uint32_t zero_of(const OperandFormat& f, int signs, Rng& rng) {  // signs: 0 +0, 1 -0, 2 random
  return signs == 0 ? 0u : signs == 1 ? f.sign_bit() : (rng.coin() ? f.sign_bit() : 0u);
}

uint32_t nonzero_finite(const OperandFormat& f, Rng& rng) {
  for (;;) {
    const uint32_t v = f.random_finite(rng);
    if ((v & ~f.sign_bit()) != 0) return v;
  }
}

// Whole rows of A (side 0) or columns of B (side 1) of +0 / -0 / mixed zeros against large, small and
// subnormal C; the partner operands from the top exponents (the old -126 rule then puts the zero products'
// E_max highest) or any finite value. In a tile a vector's A is a whole row, its B a whole column.
void edge_zero_lines(const Builder& bl, uint64_t seed, std::vector<TargetedVector>& out) {
  const OperandFormat& f = bl.f();
  const int K = bl.k();
  static const char* const names[2][3] = {
      {"edge_zero_row_c_large", "edge_zero_row_c_small", "edge_zero_row_c_subnormal"},
      {"edge_zero_col_c_large", "edge_zero_col_c_small", "edge_zero_col_c_subnormal"}};
  for (int side = 0; side < 2; ++side)
    for (int cls = 0; cls < 3; ++cls)
      for (int t = 0; t < 48; ++t) {
        Rng rng(seed, static_cast<uint64_t>(t + 1000 * (cls + 3 * side)), 0xED01);
        TargetedVector v = bl.fresh(names[side][cls]);
        const int signs = t % 3;
        const bool top = (t / 3) % 2 == 0;
        for (int i = 0; i < K; ++i) {
          const uint32_t z = zero_of(f, signs, rng);
          const uint32_t partner = top ? f.random_normal(rng, f.emax - 3, f.emax) : f.random_finite(rng);
          (side == 0 ? v.a[i] : v.b[i]) = z;
          (side == 0 ? v.b[i] : v.a[i]) = partner;
        }
        v.c = edge_c(cls, rng);
        out.push_back(std::move(v));
      }
}

// Every product zero (zero in A, in B, in both, alternating, all negative) with C = +0 and -0: a +0 result.
void edge_zero_products(const Builder& bl, uint64_t seed, std::vector<TargetedVector>& out) {
  const OperandFormat& f = bl.f();
  const int K = bl.k();
  for (int pattern = 0; pattern < 5; ++pattern)
    for (int t = 0; t < 16; ++t) {
      Rng rng(seed, static_cast<uint64_t>(pattern * 100 + t), 0xED02);
      TargetedVector v = bl.fresh("edge_zero_products_c_zero");
      for (int i = 0; i < K; ++i) {
        const uint32_t z = zero_of(f, pattern == 4 ? 1 : 2, rng), z2 = zero_of(f, 2, rng);
        const uint32_t partner = t % 2 ? f.random_normal(rng, f.emax - 3, f.emax) : f.random_finite(rng);
        switch (pattern) {
          case 0: v.a[i] = z; v.b[i] = partner; break;
          case 1: v.a[i] = partner; v.b[i] = z; break;
          case 2: v.a[i] = z; v.b[i] = z2; break;
          case 3: v.a[i] = i % 2 ? partner : z; v.b[i] = i % 2 ? z : partner; break;
          default: v.a[i] = z; v.b[i] = partner | f.sign_bit(); break;
        }
      }
      v.c = (t / 2) % 2 ? 0x80000000u : 0u;
      out.push_back(std::move(v));
    }
}

// Products near the underflow threshold with C = +-0 (and a few with the smallest subnormal C), half the
// lanes zero: bf16 products at 2^-160..2^-120 (around the -133 zero term and the fp32 subnormals); Hopper
// FP8 the format's smallest products; MX products near 1 scaled by E8M0 scales to 2^-165..2^-115.
void edge_underflow(const Builder& bl, MmaModel model, uint64_t seed, std::vector<TargetedVector>& out) {
  const OperandFormat& f = bl.f();
  const int K = bl.k();
  const bool mx = model == MmaModel::blackwell_mxfp8;
  for (int t = 0; t < 96; ++t) {
    Rng rng(seed, static_cast<uint64_t>(t), 0xED03);
    TargetedVector v = bl.fresh("edge_underflow_c_zero");
    const int target = rng.uniform(-165, -115);
    for (int i = 0; i < K; ++i) {
      if (rng.coin()) {
        v.a[i] = zero_of(f, 2, rng);
        v.b[i] = f.random_finite(rng);
        continue;
      }
      if (!f.fp8) {
        const int e = rng.uniform(-160, -120), ea = e / 2, eb = e - ea;
        v.a[i] = f.make(rng.coin(), ea, rng.bits(f.frac_bits));
        v.b[i] = f.make(rng.coin(), eb, rng.bits(f.frac_bits));
      } else if (mx) {
        v.a[i] = f.random_normal(rng, -1, 1);
        v.b[i] = f.random_normal(rng, -1, 1);
      } else {
        v.a[i] = f.random_normal(rng, f.min_pow2(), f.emin + 1);
        v.b[i] = f.random_normal(rng, f.min_pow2(), f.emin + 1);
      }
    }
    if (mx) {
      v.sa = static_cast<uint8_t>(127 + target / 2);
      v.sb = static_cast<uint8_t>(127 + target - target / 2);
    }
    v.c = t % 8 == 7 ? (rng.coin() ? 0x80000001u : 1u) : (t % 2 ? 0x80000000u : 0u);
    out.push_back(std::move(v));
  }
}

// One huge product (a random lane) with tiny products (the smallest subnormal operands) and zeros in the
// other lanes; C = +-0, the smallest subnormal, +-1 or tiny: truncation of many tiny terms against one big.
void edge_huge_and_tiny(const Builder& bl, uint64_t seed, std::vector<TargetedVector>& out) {
  const OperandFormat& f = bl.f();
  const int K = bl.k();
  const int big_e = std::min(f.emax, 50);
  for (int t = 0; t < 64; ++t) {
    Rng rng(seed, static_cast<uint64_t>(t), 0xED04);
    TargetedVector v = bl.fresh("edge_huge_and_tiny");
    const int huge = rng.uniform(0, K - 1);
    for (int i = 0; i < K; ++i) {
      if (i == huge) {
        v.a[i] = f.make(t % 2 == 1, big_e, rng.bits(f.frac_bits));
        v.b[i] = f.make(false, big_e, rng.bits(f.frac_bits));
      } else if (rng.uniform(0, 3) == 0) {
        v.a[i] = zero_of(f, 2, rng);
        v.b[i] = f.random_subnormal(rng);
      } else {
        v.a[i] = f.random_subnormal(rng);
        v.b[i] = f.random_subnormal(rng);
      }
    }
    switch (t % 6) {
      case 0: v.c = 0; break;
      case 1: v.c = 0x80000000u; break;
      case 2: v.c = 1; break;
      case 3: v.c = f32_pow2_bits(0, rng.coin()); break;
      default: v.c = random_f32(rng, -149, -100); break;
    }
    out.push_back(std::move(v));
  }
}

// Blackwell MX only: large (and small) E8M0 scales with zero operands: all of A zero against B's top
// values, one zero lane next to the largest B value among small products, B half zero; C small, subnormal,
// zero or large. Under the old -126 rule a zero product kept both scale exponents (up to +254) and wiped C.
// Also the NaN scale with all-zero operands (NaN whatever the products).
void edge_mx_scales(const Builder& bl, uint64_t seed, std::vector<TargetedVector>& out) {
  const OperandFormat& f = bl.f();
  const int K = bl.k();
  const uint8_t scales[] = {254, 253, 240, 200, 160, 127, 100, 1, 0};
  int t = 0;
  for (uint8_t sa : scales)
    for (uint8_t sb : scales)
      for (int pattern = 0; pattern < 3; ++pattern, ++t) {
        Rng rng(seed, static_cast<uint64_t>(t), 0xED05);
        TargetedVector v = bl.fresh("edge_mx_scale_zero_operand");
        v.sa = sa;
        v.sb = sb;
        const int one_zero = rng.uniform(0, K - 1);
        for (int i = 0; i < K; ++i) {
          switch (pattern) {
            case 0: v.a[i] = zero_of(f, 2, rng); v.b[i] = f.random_normal(rng, f.emax - 3, f.emax); break;
            case 1:
              if (i == one_zero) { v.a[i] = zero_of(f, 2, rng); v.b[i] = f.max_finite(rng.coin()); }
              else { v.a[i] = f.random_normal(rng, f.emin, f.emin + 2); v.b[i] = f.random_normal(rng, f.emin, f.emin + 2); }
              break;
            default:
              v.a[i] = f.random_normal(rng, f.emin, f.emax);
              v.b[i] = i % 2 ? zero_of(f, 2, rng) : f.random_normal(rng, f.emin, f.emax);
              break;
          }
        }
        switch (t % 4) {
          case 0: v.c = edge_c(1, rng); break;
          case 1: v.c = edge_c(2, rng); break;
          case 2: v.c = rng.coin() ? 0x80000000u : 0u; break;
          default: v.c = edge_c(0, rng); break;
        }
        out.push_back(std::move(v));
      }
  for (int i = 0; i < 4; ++i) {
    TargetedVector v = bl.fresh("edge_mx_nan_scale_zero");
    v.sa = i % 2 ? kE8m0NaN : 127;
    v.sb = i % 2 ? 127 : kE8m0NaN;
    v.c = i < 2 ? 0u : 0x3F800000u;
    out.push_back(std::move(v));
  }
}

// inf / NaN in a single lane (each lane in turn), the other lanes zero, finite or from the top exponents:
// NaN in A or B (the partner finite or zero), inf times finite, inf times zero (NaN), C = 0, 1 or tiny.
void edge_special_lane(const Builder& bl, uint64_t seed, std::vector<TargetedVector>& out) {
  const OperandFormat& f = bl.f();
  const int K = bl.k();
  for (int lane = 0; lane < K; ++lane)
    for (int kind = 0; kind < 4; ++kind) {
      if (kind >= 2 && !f.has_inf()) continue;
      Rng rng(seed, static_cast<uint64_t>(lane * 8 + kind), 0xED06);
      static const char* const names[] = {"edge_nan_lane_a", "edge_nan_lane_b", "edge_inf_lane", "edge_inf_times_zero_lane"};
      TargetedVector v = bl.fresh(names[kind]);
      const int others = (lane + kind) % 3;
      for (int i = 0; i < K; ++i) {
        if (others == 0) { v.a[i] = zero_of(f, 2, rng); v.b[i] = f.random_finite(rng); }
        else if (others == 1) { v.a[i] = f.random_finite(rng); v.b[i] = f.random_finite(rng); }
        else { v.a[i] = f.random_normal(rng, f.emax - 3, f.emax); v.b[i] = f.random_normal(rng, f.emax - 3, f.emax); }
      }
      const uint32_t nan = f.nan() | (rng.coin() ? f.sign_bit() : 0u);
      switch (kind) {
        case 0: v.a[lane] = nan; v.b[lane] = lane % 2 ? zero_of(f, 2, rng) : nonzero_finite(f, rng); break;
        case 1: v.b[lane] = nan; v.a[lane] = lane % 2 ? nonzero_finite(f, rng) : zero_of(f, 2, rng); break;
        case 2: v.a[lane] = f.inf(rng.coin()); v.b[lane] = nonzero_finite(f, rng); break;
        default: v.a[lane] = f.inf(rng.coin()); v.b[lane] = zero_of(f, 2, rng); break;
      }
      v.c = lane % 3 == 0 ? 0u : lane % 3 == 1 ? 0x3F800000u : random_f32(rng, -149, -100);
      out.push_back(std::move(v));
    }
}

// FP8 only: the inputs measured on the H200 in issue 10 (the model must give the H200's bits; the old rule
// did not), in this instruction's format.
void edge_measured(const Builder& bl, std::vector<TargetedVector>& out) {
  const OperandFormat& f = bl.f();
  if (!f.fp8 || bl.k() != 32) return;
  auto bytes = [](const char* h) {
    std::vector<uint32_t> v;
    for (int i = 0; i < 32; ++i) v.push_back(static_cast<uint32_t>(std::stoul(std::string(h + 2 * i, 2), nullptr, 16)));
    return v;
  };
  const char* zeros = "0000008000000000000000808000000000000000800000808000008080000000";
  const char* plus_zeros = "0000000000000000000000000000000000000000000000000000000000000000";
  const char* b1 = "06d992fb5b3f4ec0cc501f74aabfb7a2b6eb2b453ce3292143e339a74ec1b25b";
  const char* b2 = "c94e6a4fcbe176186d3e239fbb583d8cdc4aad58bc2db7a2b80129791971777b";
  const char* b3 = "7800000000000000000000000000000000000000000000000000000000000000";
  struct M { const char *a, *b; uint32_t c; };
  const M ms[] = {{zeros, b1, 0x80f0deabu}, {zeros, b2, 0x00032005u}, {plus_zeros, b2, 0x00032005u},
                  {plus_zeros, b3, 0x01000000u}, {plus_zeros, b3, 0x03c00800u}};
  for (const M& m : ms) {
    TargetedVector v = bl.fresh("edge_h200_issue10");
    v.a = bytes(m.a);
    v.b = bytes(m.b);
    v.c = m.c;
    if (f.kind == Fp8Kind::e5m2)  // keep the bytes that are NaN in e5m2 out (they would mask the zero rule)
      for (auto& x : v.b)
        if (f.is_nan(x)) x &= ~0x3u;
    out.push_back(std::move(v));
  }
}

void edge_all(const Builder& bl, MmaModel model, uint64_t seed, std::vector<TargetedVector>& out) {
  edge_zero_lines(bl, seed, out);
  edge_zero_products(bl, seed, out);
  edge_underflow(bl, model, seed, out);
  edge_huge_and_tiny(bl, seed, out);
  if (model == MmaModel::blackwell_mxfp8) edge_mx_scales(bl, seed, out);
  edge_special_lane(bl, seed, out);
  edge_measured(bl, out);
}

}  // namespace

std::vector<TargetedVector> targeted_vectors(const OperandFormat& f, int k, MmaModel model, uint64_t seed) {
  const Builder bl(f, k);
  const MmaModelParams p = mma_model_params(model);
  std::vector<TargetedVector> out;
  const int big = f.fp8 ? std::min(2 * f.emax, 16) : 0;
  align_vectors(bl, big, out);
  round_vectors(bl, f.fp8 ? 0 : 0, p.F, p.out_fraction_bits, out);
  carry_vectors(bl, p.F, out);
  zero_term_vectors(bl, seed, out);
  c_subnormal_vectors(bl, out);
  zero_sign_vectors(bl, out);
  special_vectors(bl, out);
  overflow_vectors(bl, out);
  subnormal_vectors(bl, out);
  all_values_vectors(bl, out);
  edge_all(bl, model, seed, out);
  return out;
}

std::vector<TargetedVector> edge_vectors(const OperandFormat& f, int k, MmaModel model, uint64_t seed) {
  std::vector<TargetedVector> out;
  edge_all(Builder(f, k), model, seed, out);
  return out;
}

uint32_t model_step_with(const OperandFormat& f, const MmaModelParams& p, const uint32_t* a, const uint32_t* b,
                         uint32_t c, uint8_t sa, uint8_t sb) {
  if (!f.fp8) {
    uint16_t a16[16], b16[16];
    for (int i = 0; i < 16; ++i) {
      a16[i] = static_cast<uint16_t>(a[i]);
      b16[i] = static_cast<uint16_t>(b[i]);
    }
    return f32_bits(mma_step_bf16_with(a16, b16, bits_f32(c), p));
  }
  uint8_t a8[32], b8[32];
  for (int i = 0; i < 32; ++i) {
    a8[i] = static_cast<uint8_t>(a[i]);
    b8[i] = static_cast<uint8_t>(b[i]);
  }
  return f32_bits(mma_step_fp8_with(a8, f.kind, sa, b8, f.kind, sb, bits_f32(c), p));
}

bool has_zero_term(const OperandFormat& f, const uint32_t* a, const uint32_t* b, uint32_t c, int k) {
  if ((c & 0x7FFFFFFFu) == 0) return true;
  const uint32_t mag = ~f.sign_bit() & (f.fp8 ? 0xFFu : 0xFFFFu);
  for (int i = 0; i < k; ++i)
    if ((a[i] & mag) == 0 || (b[i] & mag) == 0) return true;
  return false;
}

std::string compare_model_description(const std::string& name) {
  if (name == "old-zero-rule")
    return "the model with the old MMA-Sim snapshot's zero rule (zero operand and zero C at exponent -126, a zero "
           "product keeping the other exponent and the scales)";
  if (name == "flat-126") return "the model with every zero term at exponent -126 (no other exponent, no scales)";
  return "";
}

bool compare_model_params(MmaModel model, const std::string& name, MmaModelParams& out) {
  if (name == "none") return false;
  if (name == "old-zero-rule" || name == "flat-126") {
    out = mma_model_params(model);
    out.zero_rule = name == "old-zero-rule" ? MmaZeroRule::legacy_minus_126 : MmaZeroRule::flat_minus_126;
    return true;
  }
  throw Error(fmt::format("--compare-model: unknown model '{}'; known: {}", name, kCompareModelNames));
}

VariantParams VariantParams::of(MmaModel model, int k) {
  const MmaModelParams p = mma_model_params(model);
  VariantParams v;
  v.F = p.F;
  v.out_bits = p.out_fraction_bits;
  v.group = k;
  v.zero_mode = p.zero_rule == MmaZeroRule::fixed_minus_133 ? 0 : 1;
  return v;
}

std::string VariantParams::describe() const {
  static const char* const zero[] = {"zero terms at -133", "zero operands at -126 (old rule)", "zero terms ignored"};
  return fmt::format("F={} out_fraction_bits={} products_per_fused_group={} {}", F, out_bits, group, zero[zero_mode]);
}

std::vector<VariantParams> variant_grid(const VariantParams& base) {
  std::vector<VariantParams> out;
  out.push_back(base);  // first: the published model, so ties keep it on top
  for (int g : {base.group, base.group / 2, base.group / 4})
    for (int zm = 0; zm < 3; ++zm)
      for (int F = std::max(1, base.F - 12); F <= base.F + 6; ++F)
        for (int ob = 10; ob <= 23; ++ob) {
          VariantParams v{F, ob, g, zm};
          if (v.F == base.F && v.out_bits == base.out_bits && v.group == base.group && v.zero_mode == base.zero_mode)
            continue;
          out.push_back(v);
        }
  return out;
}

uint32_t variant_step(const OperandFormat& f, const VariantParams& p, const uint32_t* a, const uint32_t* b, uint32_t c,
                      int k) {
  const MmaZeroRule rule = p.zero_mode == 1 ? MmaZeroRule::legacy_minus_126 : MmaZeroRule::fixed_minus_133;
  // Specials over the whole step, exactly as the model does.
  MmaSpecials sp;
  MmaTerm products[32];
  for (int i = 0; i < k; ++i) {
    const MmaOperand da = f.fp8 ? decode_fp8_operand(static_cast<uint8_t>(a[i]), f.kind)
                                : decode_bf16_operand(static_cast<uint16_t>(a[i]));
    const MmaOperand db = f.fp8 ? decode_fp8_operand(static_cast<uint8_t>(b[i]), f.kind)
                                : decode_bf16_operand(static_cast<uint16_t>(b[i]));
    sp.add_product(f.is_nan(a[i]), f.is_inf(a[i]), da.zero, da.negative, f.is_nan(b[i]), f.is_inf(b[i]), db.zero,
                   db.negative);
    products[i] = mma_product_term(da, db, 0, rule);
  }
  sp.add_accumulator(bits_f32(c));
  float out;
  if (sp.resolve(out)) return f32_bits(out);
  float acc = bits_f32(c);
  for (int g0 = 0; g0 < k; g0 += p.group) {
    MmaSpecials gs;
    gs.add_accumulator(acc);
    if (gs.resolve(out)) return f32_bits(out);  // an earlier group overflowed
    MmaTerm terms[33];
    int n = 0;
    for (int i = g0; i < std::min(k, g0 + p.group); ++i) terms[n++] = products[i];
    terms[n++] = mma_accumulator_term(acc, rule);
    int emax = -100000;
    for (int i = 0; i < n; ++i) {
      if (terms[i].magnitude == 0 && p.zero_mode == 2) continue;
      emax = std::max(emax, terms[i].exponent);
    }
    if (emax == -100000) {
      acc = 0.0f;  // a zero result is +0 (PROBE.md)
      continue;
    }
    int64_t sum = 0;
    for (int i = 0; i < n; ++i) sum += mma_aligned_term(terms[i], emax, p.F);
    acc = mma_round_toward_zero(sum, emax - p.F, p.out_bits);
  }
  return f32_bits(acc);
}

}  // namespace calico::gpu::probe
