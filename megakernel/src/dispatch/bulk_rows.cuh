// Push dispatch by the copy engine: a data-movement CTA moves token rows global -> shared -> global with bulk
// copies (cp.async.bulk), in pieces of up to kPieceBytes through a ring of kSlotsPerWarp shared-memory slots
// per warp. The forward's x rows are copied as they are; the backward's d_y rows are scaled in shared memory
// (d_y = bf16(w * d_out), the same conversion as the pull gather's scale_chunk) before they go out.
//
// Why: a data-movement CTA runs with the compute CTAs' 226 KB of shared memory, so its L1 is ~28 KB, and the
// lines of register loads in flight must fit there: dispatch_rows (16 loads of 16 B per thread) moved ~200
// GB/s with 32 CTAs, so the push passes waited for their rows (profile of 2026-12-01: the gate/up and d_h
// tiles' counter waits). Bulk copies land in shared memory: 12 warps x 4 slots x 4 KB = 192 KB in flight.
//
// NOTE (bits): the bytes are those dispatch_rows / dispatch_dy_rows wrote (padding rows are zeros, stored
// from a zero piece; the scale is numerics.h's f32_to_bf16(w * x), checked equal for all floats in
// test_numerics_gpu).
#pragma once

#include "dispatch/row_pieces.h"
#include "gemm/gather.cuh"
#include "gemm/sm90_tile.cuh"
#include "gemm/tma_store.cuh"
#include "sync/bounded_wait.cuh"

namespace calico::gpu::mk {

constexpr int kPieceBytes = 4096;
constexpr int kSlotsPerWarp = 4;
constexpr int kCommWarps = kThreads / 32;

// The data-movement CTA's view of its dynamic shared memory (the compute CTAs' GemmSmem, reused).
struct BulkRowsSmem {
  alignas(128) uint8_t zero[kPieceBytes];
  alignas(128) uint8_t slot[kCommWarps][kSlotsPerWarp][kPieceBytes];
  alignas(8) uint64_t bar[kCommWarps][kSlotsPerWarp];
};
static_assert(sizeof(BulkRowsSmem) <= sizeof(GemmSmem), "the data-movement CTA reuses the compute CTAs' shared memory");

__device__ __forceinline__ void bulk_load(void* smem, const void* gmem, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   smem_addr(smem)),
               "l"(gmem), "r"(bytes), "r"(smem_addr(bar))
               : "memory");
}
__device__ __forceinline__ void bulk_store(void* gmem, const void* smem, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(gmem), "r"(smem_addr(smem)),
               "r"(bytes)
               : "memory");
}

// The zero piece and the slots' barriers (all threads of the CTA).
__device__ __forceinline__ BulkRowsSmem& bulk_rows_init(GemmSmem& s) {
  BulkRowsSmem& b = *reinterpret_cast<BulkRowsSmem*>(&s);
  for (int i = threadIdx.x; i < kPieceBytes / 16; i += blockDim.x) reinterpret_cast<uint4*>(b.zero)[i] = uint4{0, 0, 0, 0};
  if (threadIdx.x < kCommWarps * kSlotsPerWarp) mbar_init(&b.bar[0][0] + threadIdx.x, 1);
  fence_proxy_async_shared();  // the zero piece is read by the bulk stores (async proxy)
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  __syncthreads();
  return b;
}
// Before the memory is reused (a data-movement CTA that joins the compute walk re-initialises it as GemmSmem).
__device__ __forceinline__ void bulk_rows_release(BulkRowsSmem& b) {
  __syncthreads();
  if (threadIdx.x < kCommWarps * kSlotsPerWarp)
    asm volatile("mbarrier.inval.shared::cta.b64 [%0];\n" ::"r"(smem_addr(&b.bar[0][0] + threadIdx.x)) : "memory");
  __syncthreads();
}

// Rows [row0, row0 + nrows) of dst (H bf16 columns) <- src[row_token[row]] (scaled by row_weight[row] when
// given), zeros for padding rows; called by every thread of the CTA, which returns once the rows are
// written and visible to other CTAs' TMA reads (the caller then releases their counter). False if a wait
// failed. `phases`: per warp, the parity bits of its slots' barriers, carried from call to call.
__device__ __forceinline__ bool bulk_dispatch_rows(const SyncContext& sc, BulkRowsSmem& b, uint32_t& phases,
                                                   const uint16_t* src, const int* row_token, const float* row_weight,
                                                   uint16_t* dst, int row0, int nrows, int H, int stage, int task) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const uint32_t row_bytes = static_cast<uint32_t>(H) * 2u;
  const int pieces = pieces_per_row(row_bytes, kPieceBytes);
  const int n = warp_items(nrows * pieces, warp, kCommWarps);  // dispatch/row_pieces.h
  struct Piece {
    int token;
    uint32_t offset, bytes;
    int row;
  };
  auto piece = [&](int i) {
    const RowPiece q = row_piece(warp, i, kCommWarps, pieces, row_bytes, kPieceBytes);
    return Piece{__ldg(row_token + row0 + q.row), q.offset, q.bytes, row0 + q.row};
  };
  auto issue = [&](int i) {  // lane 0: the load of item i into its slot (nothing for a padding row)
    const Piece p = piece(i);
    if (p.token < 0) return;
    uint64_t* bar = &b.bar[warp][i % kSlotsPerWarp];
    mbar_arrive_expect_tx(bar, p.bytes);
    bulk_load(b.slot[warp][i % kSlotsPerWarp], reinterpret_cast<const uint8_t*>(src + static_cast<int64_t>(p.token) * H) + p.offset,
              p.bytes, bar);
  };
  if (lane == 0)
    for (int i = 0; i < min(n, kSlotsPerWarp); ++i) issue(i);
  bool ok = true;
  for (int i = 0; i < n && ok; ++i) {
    const Piece p = piece(i);
    const int k = i % kSlotsPerWarp;
    uint8_t* slot = b.slot[warp][k];
    if (p.token >= 0) {
      ok = mbar_wait(sc, &b.bar[warp][k], (phases >> k) & 1u, stage, task, kCounterBulkLoad, p.row);
      phases ^= 1u << k;
      if (!ok) break;
      if (row_weight != nullptr) {  // d_y: scaled in place, each lane its 16-byte chunks
        const float w = __ldg(row_weight + p.row);
        for (uint32_t c = 16u * lane; c < p.bytes; c += 16u * 32u) scale_chunk(reinterpret_cast<bf16_t*>(slot + c), w);
        fence_proxy_async_shared();  // this lane's writes -> the bulk store's reads
        __syncwarp();
      }
    }
    if (lane == 0) {
      bulk_store(reinterpret_cast<uint8_t*>(dst + static_cast<int64_t>(p.row) * H) + p.offset, p.token >= 0 ? slot : b.zero,
                 p.bytes);
      bulk_commit();
      // The previous item's slot goes to the item kSlotsPerWarp after it once its store has read it.
      if (i >= 1 && i - 1 + kSlotsPerWarp < n) {
        bulk_wait_read<1>();
        issue(i - 1 + kSlotsPerWarp);
      }
    }
    __syncwarp();
  }
  if (lane == 0) bulk_wait_all_written();  // written and ordered before the counter's release
  __syncwarp();
  // NOTE: a failed wait leaves loads in flight on this warp's barriers; the launch is aborting (every wait returns).
  return __syncthreads_and(ok) != 0;
}

}  // namespace calico::gpu::mk
