// What the SwiGLU epilogues decide per element (gemm/silu_lookup.h), checked on the host for every bf16 input:
// the branch-free clamp against the contract's formulas (calico/reference.h: g' = min(g, L), u' = clamp(u, -L,
// L), a NaN passes through; the cut masks of the backward), and the d_h epilogue's shared-memory window of the
// (silu, grad) table: every entry it answers for is the table's own entry, and it answers for exactly the g
// with |g| in [2^-6, 4). Each check has a negative control: a plausible wrong version it must reject.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "gemm/silu_lookup.h"

namespace calico::gpu::mk {
namespace {

// The contract's clamp, written as the reference writes it (reference/src/ffn.cpp: clamp_gate, clamp_up, and
// the backward's g_cut / u_cut).
struct ContractClamp {
  bool on;
  float L;
  float gate(float g) const { return (on && g > L) ? L : g; }
  float up(float u) const { return !on ? u : (u > L ? L : (u < -L ? -L : u)); }
  bool cuts_gate(float g) const { return on && g > L; }
  bool cuts_up(float u) const { return on && (u > L || u < -L); }
};

struct ClampCandidate {
  std::function<float(float)> gate, up;
  std::function<bool(float)> cuts_gate, cuts_up;
};

ClampCandidate ours(bool on, float L) {
  const Clamp c = Clamp::of(on, L);
  return {[c](float g) { return c.gate(g); }, [c](float u) { return c.up(u); },
          [c](float g) { return c.cuts_gate(g); }, [c](float u) { return c.cuts_up(u); }};
}

// Every bf16 value (NaNs and infinities included) and a few floats no bf16 holds.
std::vector<float> inputs() {
  std::vector<float> v;
  for (uint32_t b = 0; b < 65536; ++b) v.push_back(bf16_to_f32(static_cast<uint16_t>(b)));
  for (float f : {0.3f, -0.3f, 1e-45f, -1e-45f, 3.4028235e38f, -3.4028235e38f}) v.push_back(f);
  return v;
}

// "" or the first input where the candidate differs from the contract (bitwise for values: a NaN must keep
// its bits).
std::string clamp_problem(bool on, float L, const ClampCandidate& c) {
  const ContractClamp want{on, L};
  for (float x : inputs()) {
    const std::string at = "on " + std::to_string(on) + " L " + std::to_string(L) + " x bits " + std::to_string(f32_bits(x));
    if (f32_bits(c.gate(x)) != f32_bits(want.gate(x))) return at + ": gate";
    if (f32_bits(c.up(x)) != f32_bits(want.up(x))) return at + ": up";
    if (c.cuts_gate(x) != want.cuts_gate(x)) return at + ": cuts_gate";
    if (c.cuts_up(x) != want.cuts_up(x)) return at + ": cuts_up";
  }
  return "";
}

const float kLimits[] = {0.5f, 1.0f, 7.0f, 0.3f, 1e-40f /* subnormal */, 0.0f, 3.0e38f,
                         std::numeric_limits<float>::infinity()};

TEST(SiluLookup, ClampEqualsTheContractForEveryBf16Input) {
  for (bool on : {false, true})
    for (float L : kLimits) EXPECT_EQ(clamp_problem(on, L, ours(on, L)), "");
}

TEST(SiluLookup, ClampCheckCatchesWrongClamps) {
  // fminf / fmaxf return the other operand for a NaN: NaNs would not pass through.
  const float L = 1.0f;
  ClampCandidate min_max = ours(true, L);
  min_max.up = [L](float u) { return std::fmin(std::fmax(u, -L), L); };
  EXPECT_NE(clamp_problem(true, L, min_max), "");
  // A bound of 0 for "no clamp" (instead of +inf) cuts everything positive.
  EXPECT_NE(clamp_problem(false, L, ours(true, 0.0f)), "");
  // The selects in the other order differ where both cuts hold (L < 0 is not a valid limit, but the order of the
  // reference is what is claimed): u > L and u < -L at once.
  ClampCandidate swapped = ours(true, -1.0f);
  swapped.up = [](float u) { const float L = -1.0f; const float hi = u > L ? L : u; return u < -L ? -L : hi; };
  EXPECT_NE(clamp_problem(true, -1.0f, swapped), "");
  EXPECT_EQ(clamp_problem(true, -1.0f, ours(true, -1.0f)), "");  // ours keeps the reference's order
}

// The window as produce_saved_gu fills it: per sign, kSiluWindowHalf table entries from `source(sign)`. The
// table's entries are stood in for by their own indices, so a window entry names the table entry it holds.
std::vector<uint32_t> fill_window(const std::function<uint32_t(uint32_t)>& source) {
  std::vector<uint32_t> window(2 * kSiluWindowHalf);
  for (uint32_t sign = 0; sign < 2; ++sign)
    for (uint32_t j = 0; j < kSiluWindowHalf; ++j) window[sign * kSiluWindowHalf + j] = source(sign) + j;
  return window;
}

// "" or the first gate input the window answers wrongly for (entry(g): the window entry the epilogue reads).
std::string window_problem(const std::vector<uint32_t>& window, const std::function<uint32_t(uint16_t)>& entry) {
  uint32_t answered = 0;
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint16_t g = static_cast<uint16_t>(b);
    const float a = std::fabs(bf16_to_f32(g));
    const bool covered = a >= 0x1p-6f && a < 4.0f;  // NaN: false
    const uint32_t w = entry(g);
    const std::string at = "g bits " + std::to_string(b);
    if ((w != kNotInWindow) != covered) return at + (covered ? ": not answered" : ": answered");
    if (w == kNotInWindow) continue;
    if (w >= window.size()) return at + ": entry past the window";
    if (window[w] != b) return at + ": holds table entry " + std::to_string(window[w]);
    ++answered;
  }
  return answered == 2 * kSiluWindowHalf ? "" : "window entries unused";
}

TEST(SiluLookup, WindowHoldsTheTableEntriesOfEveryGateInputItAnswersFor) {
  EXPECT_EQ(window_problem(fill_window(silu_window_source), silu_window_entry), "");
  EXPECT_EQ(silu_window_source(1) - silu_window_source(0), 0x8000u);  // sign 1: the same magnitudes, negative
}

TEST(SiluLookup, WindowCheckCatchesWrongCopiesAndIndices) {
  // The copy one exponent off.
  EXPECT_NE(window_problem(fill_window([](uint32_t s) { return silu_window_source(s) + 128; }), silu_window_entry), "");
  // Both signs copied from the positive half.
  EXPECT_NE(window_problem(fill_window([](uint32_t) { return silu_window_source(0); }), silu_window_entry), "");
  // The index without the sign.
  EXPECT_NE(window_problem(fill_window(silu_window_source), [](uint16_t g) {
              const uint32_t w = silu_window_entry(g);
              return w == kNotInWindow ? w : w % kSiluWindowHalf;
            }),
            "");
}

}  // namespace
}  // namespace calico::gpu::mk
