// The layout of the bulk combine (combine/bulk_combine.cuh), host and device. Each warp of the combine tail
// streams items (token, column piece) through a ring of slots in shared memory: a slot holds one piece of
// each of the token's K rows (and of its shared-expert row), loaded by bulk copies (the copy engine, not the
// ~28 KB L1 that caps register loads in flight), and the warp runs the contract's chain on it.
// tests/megakernel/test_combine_pieces.cpp checks the layout (every byte of a row in one piece, 16-byte
// alignment, slots within the warp's share) and the chain against combine_tokens.
#pragma once

#include <cstdint>

#include "calico/numerics.h"
#include "combine/combine.cuh"

namespace calico::gpu::mk {

constexpr uint32_t kCombineMaxPiece = 1024;  // bytes of one row per slot: two 16-byte chunks per lane
constexpr int kCombineMaxSlots = 4;

struct CombineLayout {
  uint32_t piece_bytes = 0;  // a multiple of 16; the last piece of a row may be shorter
  int pieces_per_row = 0;
  int rows_per_slot = 0;     // K, plus the shared-expert row
  uint32_t slot_bytes = 0;   // rows_per_slot * piece_bytes
  int slots = 0;             // per warp; 0: the rows do not fit (the caller refuses)
};

// A warp's share of the region [0, bytes) split among nwarps warps, 128-byte aligned, after the barriers
// and items of every warp's slots (8 + 8 bytes each) are set aside at the region's end.
CALICO_HD uint32_t combine_warp_bytes(uint32_t bytes, int nwarps) {
  const uint32_t meta = static_cast<uint32_t>(nwarps) * static_cast<uint32_t>(kCombineMaxSlots) * 16u;
  return ((bytes - meta) / static_cast<uint32_t>(nwarps)) & ~127u;
}

// The largest piece (1024 bytes down to 16, halving) for which two slots fit warp_bytes, then as many slots
// as fit (at most kCombineMaxSlots). H % 8 == 0 (16-byte rows pieces), checked on the host.
CALICO_HD CombineLayout combine_layout(int H, int K, bool with_shared, uint32_t warp_bytes) {
  CombineLayout L;
  L.rows_per_slot = K + (with_shared ? 1 : 0);
  const uint32_t row_bytes = 2u * static_cast<uint32_t>(H);
  uint32_t piece = kCombineMaxPiece;
  while (piece > 16u && 2u * piece * static_cast<uint32_t>(L.rows_per_slot) > warp_bytes) piece /= 2u;
  if (piece > row_bytes) piece = row_bytes;
  L.piece_bytes = piece;
  L.slot_bytes = piece * static_cast<uint32_t>(L.rows_per_slot);
  const uint32_t fit = L.slot_bytes > 0 ? warp_bytes / L.slot_bytes : 0;
  L.slots = fit < 2u ? 0 : (fit > static_cast<uint32_t>(kCombineMaxSlots) ? kCombineMaxSlots : static_cast<int>(fit));
  L.pieces_per_row = static_cast<int>((row_bytes + piece - 1) / piece);
  return L;
}

// Bytes of piece j of a row of H columns.
CALICO_HD uint32_t combine_piece_bytes(const CombineLayout& L, int H, int j) {
  const uint32_t offset = static_cast<uint32_t>(j) * L.piece_bytes, row_bytes = 2u * static_cast<uint32_t>(H);
  return row_bytes - offset < L.piece_bytes ? row_bytes - offset : L.piece_bytes;
}

// One 16-byte output chunk from a filled slot: rows k at slot + k * piece_bytes, the shared row (if any)
// after them, the chunk at byte `at` of the piece; the chains of calico/reference.h (combine/combine.cuh):
//   forward (kWeighted, w: the token's K weights): acc = y_s (or +0); for k: acc = fmaf(w_k, y_k, acc)
//   backward (w unused):                           acc = d_x_s (or +0); for k: acc = acc + d_x_k
// then bf16(acc).
template <bool kWeighted>
CALICO_HD Vec8 combine_chunk(const uint8_t* slot, const CombineLayout& L, int K, bool with_shared,
                             const float* __restrict__ w, uint32_t at) {
  float acc[8];
  if (with_shared) {
    const Vec8 s = *reinterpret_cast<const Vec8*>(slot + static_cast<uint32_t>(K) * L.piece_bytes + at);
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[j] = bf16_to_f32(s.v[j]);
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[j] = 0.0f;
  }
  for (int k = 0; k < K; ++k) {
    const Vec8 v = *reinterpret_cast<const Vec8*>(slot + static_cast<uint32_t>(k) * L.piece_bytes + at);
    if constexpr (kWeighted) {
      const float wk = w[k];
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[j] = f32_fma(wk, bf16_to_f32(v.v[j]), acc[j]);
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[j] = f32_add(acc[j], bf16_to_f32(v.v[j]));
    }
  }
  Vec8 o;
#pragma unroll
  for (int j = 0; j < 8; ++j) o.v[j] = f32_to_bf16(acc[j]);
  return o;
}

}  // namespace calico::gpu::mk
