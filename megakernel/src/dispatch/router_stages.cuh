// The router gradient as a side task fed through the pipeline's stages: d_router_weights[p] for the pairs
// p = (t, k) of [p0, p0 + n), one pair per consumer thread, each one fp32 chain over c = 0..H-1 ascending:
// acc = fmaf(d_out[t, c], y[row(p), c], acc) (calico/reference.h).
//
// Why bulk copies: the producer warpgroup's 16-byte cp.async gathers of the same rows moved ~10 bytes per
// clock per SM (2.34 of 38.0 M backward cycles per qwen3 CTA): register and cp.async loads in flight are
// capped by the ~28 KB of L1 that the stages leave. Here each producer thread copies whole 128-byte row
// pieces (one k-tile's 64 columns of a pair's y row or of a token's d_out row) with cp.async.bulk, the copy
// engine's path, into the rows of dispatch/router_tasks.h's layout, and the consumers read them from shared
// memory kStages k-tiles behind.
#pragma once

#include "dispatch/bulk_rows.cuh"
#include "dispatch/router_tasks.h"
#include "gemm/sm90_tile.cuh"

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

// The producer warpgroup (ptid): per k-tile, thread ptid copies y rows ptid and ptid + 128 (pairs of the
// task) and d_out row ptid (tokens of the task), each after its arrive.expect_tx of their bytes on the
// stage's full barrier (1 + 128 arrivals: thread 0 arrives once more, in place of the TMA thread's). False if
// a wait failed.
__device__ __forceinline__ bool router_produce(const SyncContext& sc, const RouterTask& r, GemmSmem& s, PipeState& ps,
                                               int task, int ptid) {
  static_assert(kProducerThreads == 128 && router_task_pairs(2) <= 2 * kProducerThreads);
  const int j1 = ptid + kProducerThreads, nt = r.tokens();
  // the pairs' rows of y, loaded once for all k-tiles (-1: no such pair)
  const int row0 = ptid < r.n ? __ldg(r.token_row + r.p0 + ptid) : -1;
  const int row1 = j1 < r.n ? __ldg(r.token_row + r.p0 + j1) : -1;
  const bool dout = ptid < nt;
  const uint32_t copies = (row0 >= 0) + (row1 >= 0) + (dout ? 1u : 0u);
  for (int kt = 0; kt < r.k_tiles(); ++kt) {
    if (!mbar_wait(sc, &s.empty[ps.stage], ps.phase ^ 1u, kStagePipelineEmpty, task, kCounterMbarEmpty, ps.stage))
      return false;
    uint64_t* full = &s.full[ps.stage];
    const uint32_t bytes = router_piece_bytes(r.H, kt), offset = static_cast<uint32_t>(kt) * kRouterPieceBytes;
    mbar_arrive_expect_tx(full, copies * bytes);
    if (ptid == 0) mbar_arrive(full);
    const auto* y = reinterpret_cast<const uint8_t*>(r.y);
    if (row0 >= 0) bulk_load(router_y_row(s, ps.stage, ptid), y + static_cast<int64_t>(row0) * 2 * r.H + offset, bytes, full);
    if (row1 >= 0) bulk_load(router_y_row(s, ps.stage, j1), y + static_cast<int64_t>(row1) * 2 * r.H + offset, bytes, full);
    if (dout)
      bulk_load(router_dout_row(s, ps.stage, ptid),
                reinterpret_cast<const uint8_t*>(r.d_out) + static_cast<int64_t>(r.t0() + ptid) * 2 * r.H + offset,
                bytes, full);
    ps.advance();
  }
  return true;
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
    mbar_arrive_if(&s.empty[ps.stage], (threadIdx.x % 32) == 0);  // this warp's reads of the stage are done
    ps.advance();
  }
  if (mine && ok) d_rw[r.p0 + ctid] = acc;
  return ok;
}

}  // namespace calico::gpu::mk
