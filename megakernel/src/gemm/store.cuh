// Coalesced epilogue stores. A consumer warp's share of a 128 x 256 accumulator tile is 16 rows x 256
// columns (CuTe's SM90 m64n256 fragment: lane l holds columns 8 nb + 2 (l % 4) + {0, 1} of rows l / 4 and
// l / 4 + 8, check_acc_fragment). Stored straight from the fragment, every 4-byte store of a warp touches 8
// rows (8 half-used sectors); staged through shared memory one 8-row half at a time, each row goes out as
// 512 contiguous bytes of 16-byte stores. Values and their order are untouched: this only moves bits.
#pragma once

#include <cstdint>

#include "gemm/sm90_tile.cuh"

namespace calico::gpu::mk {

// The warp's staging rows in shared memory (8 x kStageRowWords words).
__device__ __forceinline__ uint32_t* warp_stage(GemmSmem& s, int ctid) { return s.out_stage[ctid / 32]; }

// Writes half `r` (0: fragment rows l / 4, 1: rows l / 4 + 8) of the warp's packed bf16 pairs into the
// staging rows: pair p of the fragment (elements 2p, 2p + 1) belongs to half p % 2, column block p / 2.
// `pair(p)` returns the packed value.
// Only column blocks [0, kBlocks) are staged.
template <int kBlocks = 32, class Pair>
__device__ __forceinline__ void stage_half(uint32_t* stage, int lane, int r, Pair&& pair) {
  __syncwarp();  // the previous readers of the staging rows are done
#pragma unroll
  for (int nb = 0; nb < kBlocks; ++nb) stage[(lane / 4) * kStageRowWords + 4 * nb + lane % 4] = pair(2 * nb + r);
  __syncwarp();
}

// Traps unless the fragment is the one described above (the per-element comparisons fold to constants).
template <class Coord, class Acc>
__device__ __forceinline__ void check_store_fragment(const Coord& coord, const Acc& acc, int lane) {
  if (cute::get<1>(coord(0)) != 2 * (lane % 4)) __trap();
  CUTE_UNROLL
  for (int i = 0; i < decltype(cute::size(acc))::value; i += 2) check_acc_fragment(coord, i, (i / 2) % 2, 8 * (i / 4));
}

// 16 bytes (8 bf16) of staged row j, chunk c (columns 8c..8c+7 of the 256).
__device__ __forceinline__ uint4 staged_chunk(const uint32_t* stage, int j, int c) {
  return *reinterpret_cast<const uint4*>(stage + j * kStageRowWords + 4 * c);
}

__device__ __forceinline__ void store_16(uint16_t* p, uint4 v) { *reinterpret_cast<uint4*>(p) = v; }

// Packs two bf16 into one word, the first in the low half (the memory order of a pair of columns).
__device__ __forceinline__ uint32_t pack_bf16x2(uint16_t lo, uint16_t hi) {
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

// The tile row of staged row j of half r for this warp: the fragment's element 0 is row (warp row 0) + l / 4.
template <class Coord>
__device__ __forceinline__ int staged_row(const Coord& coord, int lane, int r, int j) {
  return cute::get<0>(coord(0)) - lane / 4 + 8 * r + j;
}

}  // namespace calico::gpu::mk
