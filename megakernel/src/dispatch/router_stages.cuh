// The router gradient as a side task fed through the pipeline's stages: d_router_weights[p] for the pairs
// p = (t, k) of [p0, p0 + n), one pair per consumer thread, each one fp32 chain over c = 0..H-1 ascending:
// acc = fmaf(d_out[t, c], y[row(p), c], acc) (calico/reference.h).
//
// Why two copy paths: the producer warpgroup's 16-byte cp.async gathers of the rows moved ~10 bytes per clock
// per SM (2.32 of 38.0 M backward cycles per qwen3 CTA): cp.async in flight is capped by the ~28 KB of L1
// the stages leave. Bulk copies of the 128-byte row pieces alone were slower (3.51 M: ~19 cycles per copy of
// the copy engine). So the first kRouterBulkPairs pairs' y pieces and every d_out piece go by cp.async.bulk, the
// other pairs' by cp.async, both into the rows of dispatch/router_tasks.h's layout, and the consumers read
// them from shared memory kStages k-tiles behind.
#pragma once

#include "dispatch/bulk_rows.cuh"
#include "dispatch/router_tasks.h"
#include "gemm/sm90_tile.cuh"
#include "sync/bounded_wait.cuh"

namespace calico::gpu::mk {

// One task: pairs [p0, p0 + n), n <= router_task_pairs(K).
static_assert(router_task_pairs(1) <= kRouterTokenRows && router_task_pairs(2) <= kRouterYRows);
static_assert(kRouterMaxPairs == kConsumerThreads && sizeof(GemmSmem::a[0]) == kRouterDoutBytes &&
              sizeof(GemmSmem::b[0]) == kRouterYBytes);
struct RouterTask {
  const uint16_t* d_out;   // [T, H]
  const uint16_t* y;       // [rows, H], the forward's expert-major down outputs
  const int* token_row;    // [T * K]: pair -> row of y
  int p0, n, K, H;
  __device__ int t0() const { return p0 / K; }
  __device__ int tokens() const { return router_task_tokens(p0, n, K); }
  __device__ int k_tiles() const { return (H + kBK - 1) / kBK; }
};

__device__ __forceinline__ uint8_t* router_y_row(GemmSmem& s, int stage, int j) {
  return reinterpret_cast<uint8_t*>(&s.b[stage][0]) + static_cast<uint32_t>(j) * kRouterRowStride;
}
__device__ __forceinline__ uint8_t* router_dout_row(GemmSmem& s, int stage, int i) {
  return reinterpret_cast<uint8_t*>(&s.a[stage][0]) + static_cast<uint32_t>(i) * kRouterRowStride;
}

// A producer thread's rows of y in one task, loaded once for all its k-tiles (one index load per copy and
// k-tile, in dependent batches, was ~4 round trips per k-tile). -1: no such pair.
struct RouterThreadRows {
  int bulk[2];                        // bulk items ptid and ptid + 128 (items past the bulk pairs: d_out rows)
  int copy[kRouterCopyRowsPerThread];  // cp.async rows kRouterBulkPairs + ptid / 8 + 16 i
};
__device__ __forceinline__ RouterThreadRows router_thread_rows(const RouterTask& r, int ptid) {
  RouterThreadRows t;
  const int nb = min(kRouterBulkPairs, r.n);
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int b = ptid + i * kProducerThreads;
    t.bulk[i] = b < nb ? __ldg(r.token_row + r.p0 + b) : -1;
  }
#pragma unroll
  for (int i = 0; i < kRouterCopyRowsPerThread; ++i) {
    const int j = kRouterBulkPairs + ptid / 8 + 16 * i;
    t.copy[i] = j < r.n ? __ldg(r.token_row + r.p0 + j) : -1;
  }
  return t;
}

// Producer thread ptid's copies of k-tile kt into `stage` (inside produce_tile's gathering loop: its
// arrival follows its cp.async). Bulk items b = ptid, ptid + 128: y rows [0, nb), then the tokens' d_out
// rows, after this thread's expect_tx of their bytes on the stage's full barrier (so the count never runs
// ahead of the copies). cp.async: 16-byte chunk ptid % 8 of the rows after the bulk pairs.
__device__ __forceinline__ void router_gather(const RouterTask& r, const RouterThreadRows& rows, GemmSmem& s, int stage,
                                              int kt, int ptid) {
  static_assert(kRouterBulkPairs + kRouterTokenRows <= 2 * kProducerThreads, "two bulk items per thread at most");
  const int nb = min(kRouterBulkPairs, r.n), nbulk = nb + r.tokens();
  const uint32_t bytes = router_piece_bytes(r.H, kt), offset = static_cast<uint32_t>(kt) * kRouterPieceBytes;
  const auto* y = reinterpret_cast<const uint8_t*>(r.y);
  uint64_t* full = &s.full[stage];
  if (ptid < nbulk) mbar_expect_tx(full, bytes * (ptid + kProducerThreads < nbulk ? 2u : 1u));
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int b = ptid + i * kProducerThreads;
    if (b < nb) {
      bulk_load(router_y_row(s, stage, b), y + static_cast<int64_t>(rows.bulk[i]) * 2 * r.H + offset, bytes, full);
    } else if (b < nbulk) {
      const int t = b - nb;
      bulk_load(router_dout_row(s, stage, t),
                reinterpret_cast<const uint8_t*>(r.d_out) + static_cast<int64_t>(r.t0() + t) * 2 * r.H + offset, bytes,
                full);
    }
  }
  const uint32_t c = 16u * static_cast<uint32_t>(ptid % 8);
  if (c >= bytes) return;  // columns past H: not read by the chains
#pragma unroll
  for (int i = 0; i < kRouterCopyRowsPerThread; ++i)
    if (rows.copy[i] >= 0)
      cp_async_16(router_y_row(s, stage, kRouterBulkPairs + ptid / 8 + 16 * i) + c,
                  y + static_cast<int64_t>(rows.copy[i]) * 2 * r.H + offset + c, true);
}

// Consumer thread ctid (pair p0 + ctid when ctid < n): the chain over every k-tile's stage, each stage
// released by its warp once read; then the result. False if a wait failed (the launch is aborting).
__device__ __forceinline__ bool router_chains(const SyncContext& sc, const RouterTask& r, GemmSmem& s,
                                              PipeState& ps, float* d_rw, int task, int ctid) {
  const bool mine = ctid < r.n;
  const int j = mine ? ctid : 0, dout_row = mine ? (r.p0 + ctid) / r.K - r.t0() : 0;
  float acc = 0.0f;
  bool ok = true;
  for (int kt = 0; kt < r.k_tiles(); ++kt) {
    ok = mbar_wait(sc, &s.full[ps.stage], ps.phase, kStagePipelineFull, task, kCounterMbarFull, ps.stage) && ok;
    const int chunks = min(kBK, r.H - kt * kBK) / 8;
    const uint8_t* arow = router_dout_row(s, ps.stage, dout_row);
    const uint8_t* brow = router_y_row(s, ps.stage, j);
    auto chunk = [&](int q) {  // columns [8 q, 8 q + 8) of the k-tile, ascending: the chain's order
      const uint4 a = *reinterpret_cast<const uint4*>(arow + 16 * q);
      const uint4 b = *reinterpret_cast<const uint4*>(brow + 16 * q);
      const uint32_t* aw = reinterpret_cast<const uint32_t*>(&a);
      const uint32_t* bw = reinterpret_cast<const uint32_t*>(&b);
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        acc = f32_fma(bf16x2_lo(aw[w]), bf16x2_lo(bw[w]), acc);
        acc = f32_fma(bf16x2_hi(aw[w]), bf16x2_hi(bw[w]), acc);
      }
    };
    if (mine && chunks == kBK / 8) {
#pragma unroll
      for (int q = 0; q < kBK / 8; ++q) chunk(q);  // unrolled: the 16 loads go out before the chain needs them
    } else if (mine) {
      for (int q = 0; q < chunks; ++q) chunk(q);
    }
    __syncwarp();
    release_stage(s, ps.stage);  // this warp's reads of the stage are done
    ps.advance();
  }
  if (mine && ok) d_rw[r.p0 + ctid] = acc;
  return ok;
}

}  // namespace calico::gpu::mk
