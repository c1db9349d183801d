// The router gradient as a side task fed through the pipeline's stages: d_router_weights[p] for the pairs
// p = (t, k) of [p0, p0 + n), one pair per consumer thread, each one fp32 chain over c = 0..H-1 ascending:
// acc = fmaf(d_out[t, c], y[row(p), c], acc) (calico/reference.h).
//
// Why: each thread streaming its own two 4 KB rows through the ~28 KB of L1 that the stages leave moved
// ~13 bytes per clock per SM (2.9 of 42.6 M backward cycles per qwen3 CTA). Here the producer warpgroup
// gathers, per 64-column k-tile, the n pairs' y rows into the B region of a stage and their tokens' d_out
// rows into the A region (cp.async, 16 bytes per copy, whole 128-byte row pieces per warp), and the consumers
// read them from shared memory: the loads are coalesced and run kStages k-tiles ahead of the chains.
//
// Layout: the regions use the K-major stage layouts of the GEMMs (128-byte rows, 128-byte swizzle), so a
// warp's 32 rows at one chunk hit 8 distinct 16-byte positions: the 4 wavefronts 512 bytes need anyway.
#pragma once

#include "gemm/gather.cuh"
#include "dispatch/router_tasks.h"

namespace calico::gpu::mk {

using RouterRowsY = StageRows<256, true>;     // B region: pair j's y row
using RouterRowsDout = StageRows<kBM, true>;  // A region: token t0 + i's d_out row

// One task: pairs [p0, p0 + n), n <= router_task_pairs(K) (dispatch/router_tasks.h: its tokens fit the A
// region).
static_assert(kRouterTokenRows == kBM && kRouterMaxPairs == kConsumerThreads);
struct RouterTask {
  const uint16_t* d_out;   // [T, H]
  const uint16_t* y;       // [rows, H], the forward's expert-major down outputs
  const int* token_row;    // [T * K]: pair -> row of y
  int p0, n, K, H;
  __device__ int t0() const { return p0 / K; }
  __device__ int tokens() const { return router_task_tokens(p0, n, K); }
  __device__ int k_tiles() const { return (H + kBK - 1) / kBK; }
};

// Producer thread ptid: its copies of k-tile kt into `stage` (columns past H are not copied: the chains
// stop at H).
__device__ __forceinline__ void router_gather(const RouterTask& r, GemmSmem& s, int stage, int kt, int ptid) {
  const int c = RouterRowsY::chunk(ptid), col = kt * kBK + c;
  if (col >= r.H) return;
  // The y rows' indices kBatch at a time: one index load was a dependent round trip per copy (16 per thread
  // and k-tile, one after the other). Not all 16 at once: the producer warpgroup runs on 56 registers.
  constexpr int kBatch = 4;
  static_assert(RouterRowsY::kPerThread % kBatch == 0);
#pragma unroll 1
  for (int i0 = 0; i0 < RouterRowsY::kPerThread; i0 += kBatch) {
    int row[kBatch];
#pragma unroll
    for (int q = 0; q < kBatch; ++q) {
      const int j = RouterRowsY::row(ptid, i0 + q);
      row[q] = j < r.n ? __ldg(r.token_row + r.p0 + j) : -1;  // rows are >= 0
    }
#pragma unroll
    for (int q = 0; q < kBatch; ++q)
      if (row[q] >= 0)
        cp_async_16(RouterRowsY::at(&s.b[0][0], stage, RouterRowsY::row(ptid, i0 + q), c),
                    r.y + static_cast<int64_t>(row[q]) * r.H + col, true);
  }
  const int nt = r.tokens();
#pragma unroll 1
  for (int i = 0; i < RouterRowsDout::kPerThread; ++i) {
    const int j = RouterRowsDout::row(ptid, i);
    if (j < nt) cp_async_16(RouterRowsDout::at(&s.a[0][0], stage, j, c), r.d_out + static_cast<int64_t>(r.t0() + j) * r.H + col, true);
  }
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
    auto chunk = [&](int q) {  // columns [8 q, 8 q + 8) of the k-tile, ascending: the chain's order
      const uint4 a = *reinterpret_cast<const uint4*>(RouterRowsDout::at(&s.a[0][0], ps.stage, dout_row, 8 * q));
      const uint4 b = *reinterpret_cast<const uint4*>(RouterRowsY::at(&s.b[0][0], ps.stage, j, 8 * q));
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
    mbar_arrive_if(&s.empty[ps.stage], (threadIdx.x % 32) == 0);  // this warp's reads of the stage are done
    ps.advance();
  }
  if (mine && ok) d_rw[r.p0 + ctid] = acc;
  return ok;
}

}  // namespace calico::gpu::mk
