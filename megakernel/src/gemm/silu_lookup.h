// What the SwiGLU epilogues (gemm/epilogue.cuh) decide per element before any arithmetic: the clamp, and
// where the (silu, grad) entry of a gate input is read. Host and device: tests/megakernel/test_silu_lookup.cpp
// checks both against the contract's formulas for every bf16 input (no GPU needed: the device computes the
// same functions).
#pragma once

#include <cstdint>

#include "calico/numerics.h"  // CALICO_HD

namespace calico::gpu::mk {

// g' = min(g, L), u' = clamp(u, -L, L); a NaN passes through (calico/reference.h). Branch-free: without a
// clamp the bound is +inf, and every comparison with it is false, as `on && ...` was (for inf and NaN too), so
// the epilogues' element loops carry no branch per element.
struct Clamp {
  float bound;
  CALICO_HD static Clamp of(int on, float limit) { return {on ? limit : __builtin_huge_valf()}; }
  CALICO_HD bool cuts_gate(float g) const { return g > bound; }
  CALICO_HD bool cuts_up(float u) const { return u > bound || u < -bound; }
  CALICO_HD float gate(float g) const { return cuts_gate(g) ? bound : g; }
  CALICO_HD float up(float u) const {  // two selects (the nested ?: of the reference compiled to a branch)
    const float low_cut = u < -bound ? -bound : u;
    return u > bound ? bound : low_cut;
  }
};

// The tables (moe/layer.cu, build_silu_tables): entry i of every bf16 i, and the clamp limit's.
constexpr int kSiluTableLimit = 65536;  // entry of the clamp limit L (silu only: d_g of a cut value is 0)
constexpr int kSiluTableSize = 65537;

// The d_h epilogue's window of the (silu, grad) table in shared memory (moe/backward.cu, produce_saved_gu:
// it rides in the unused half of each saved-u stage): the entries of every bf16 g whose exponent field is in
// [kSiluWindowExp0, +kSiluWindowExps), both signs, i.e. |g| in [2^-6, 4): ~99% of N(0, 1) gate values (the
// gate of x ~ N(0, 1) rows and 1/sqrt(H)-scaled weights). A warp's 32 scattered lookups then cost a few
// shared-memory wavefronts instead of up to 32 L1/L2 lines. Other g, and cut ones, read the global table: the
// same entries, so the bits cannot depend on where an entry was read.
// Layout: sign s's entries [kSiluWindowHalf * s, +kSiluWindowHalf) are table entries
// [silu_window_source(s), +kSiluWindowHalf), one contiguous copy per sign.
constexpr uint32_t kSiluWindowExp0 = 121, kSiluWindowExps = 8;
constexpr uint32_t kSiluWindowHalf = kSiluWindowExps * 128;  // entries of one sign
constexpr uint32_t kNotInWindow = 0xFFFFFFFFu;
CALICO_HD constexpr uint32_t silu_window_source(uint32_t sign) { return (sign << 15) + (kSiluWindowExp0 << 7); }
// The window entry holding table entry gbits, or kNotInWindow.
CALICO_HD uint32_t silu_window_entry(uint16_t gbits) {
  const uint32_t in_sign = (gbits & 0x7FFFu) - (kSiluWindowExp0 << 7);  // unsigned: below the window wraps
  return in_sign < kSiluWindowHalf ? (static_cast<uint32_t>(gbits) >> 15) * kSiluWindowHalf + in_sign : kNotInWindow;
}

}  // namespace calico::gpu::mk
