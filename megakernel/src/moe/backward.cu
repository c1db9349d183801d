// The backward megakernel: ONE persistent launch does the d_y dispatch (bf16(w_k * d_out) rows in the
// canonical expert-major order: by communication CTAs with push; with pull, gathered and scaled in the d_h
// tiles' stages, the tiles of column 0 writing them to the expert-major d_y the dW_down tiles read by TMA),
// d_router_weights, the dgrad GEMMs (d_h with the SwiGLU backward in its
// epilogue, then d_x_k over the concatenated [d_g | d_u]), the weight-gradient GEMMs into the fp32
// accumulators, and the d_x combine; the shared expert alongside when I_s > 0. Roles, counters and the
// task walk are those of forward.cu.
//
// Compute tasks in walk order (each waits only on earlier ones or on communication tasks):
//   [shared d_h] [routed d_h] [shared d_x_k] [routed d_x_k] [shared dW_down] [routed dW_down (e, tile)]
//   [shared dW_gate] [shared dW_up] [routed dW_gate (e, tile)] [routed dW_up (e, tile)]
// The dgrad phases walk experts in order and groups of m-tiles column by column (schedule/tile_order.h).
// Side tasks in the same walk (no K loop; the consumer warpgroups run them): d_router_weights spread over the
// dgrad tiles, the d_x combine over the weight-gradient tiles, so their HBM traffic overlaps other CTAs'
// tensor-core time (they were a tail after the last tile: 1.2 M of 12 M cycles per qwen3 backward).
//
// NOTE (weight gradients, calico/reference.h): K is the expert's rows in canonical order, k16 steps from row
// 0 of its segment; one CTA runs the whole chain of an output tile, starting from the carried-in fp32 value,
// and stops after the step holding the last real row. The result is stored as fp32, never rounded.
//
// One kernel per weight-gradient mode, each in a translation unit of its own: this file builds the overwrite
// kernel, moe/backward_accumulate.cu includes it with CALICO_MK_BWD_CARRY_IN = 1 for the accumulate kernel.
// NVVM's inliner decides per translation unit and the two kernels sit at the edge of its budget: built together,
// the accumulate kernel got its d_h epilogue as a called function, which serialised its every wgmma (ptxas
// C7520; 3.4x slower, 2026-12-04), and forcing that epilogue inline in both cost the overwrite kernel 1.5%.
#include <cuda_runtime.h>

#ifndef CALICO_MK_BWD_CARRY_IN
#define CALICO_MK_BWD_CARRY_IN 0
#endif
#if CALICO_MK_BWD_CARRY_IN
#define CALICO_MK_DH_EPILOGUE_INLINE __attribute__((always_inline))
#else
#define CALICO_MK_DH_EPILOGUE_INLINE
#endif

// The device helpers below are compiled out of the non-sm_90a passes (the kernel body is a refusal there).
#pragma nv_diag_suppress 177

#include "combine/bulk_combine.cuh"
#include "combine/combine.cuh"
#include "dispatch/bulk_rows.cuh"
#include "dispatch/router_stages.cuh"
#include "gemm/epilogue.cuh"
#include "gemm/gather.cuh"
#include "moe/params.cuh"
#include "moe/persistent.cuh"
#include "schedule/tile_order.h"

namespace calico::gpu::mk {
namespace {

using namespace cute;

using MmaDgrad = decltype(make_tiled_mma(SM90_64x256x16_F32BF16BF16_SS<GMMA::Major::K, GMMA::Major::MN>{},
                                         Layout<Shape<_2, _1, _1>>{}));
using MmaWgrad = decltype(make_tiled_mma(SM90_64x256x16_F32BF16BF16_SS<GMMA::Major::MN, GMMA::Major::MN>{},
                                         Layout<Shape<_2, _1, _1>>{}));

enum BwdKind {
  kDh,     // d_h tile (m, n over I) + SwiGLU backward
  kDx,     // d_x_k tile (m, n over H)
  kWDown,  // dW_down tile (c-tile, j-tile)
  kWGate,  // dW_gate tile (j-tile, c-tile)
  kWUp,    // dW_up tile
  // side tasks (schedule/tile_order.h, interleaved_slot): no K loop, run by the consumer warpgroups
  kRouter,   // d_router_weights of pairs [m * router_pairs, +router_pairs)
  kCombine,  // d_x of tokens [m * combine_tokens, +combine_tokens), after every d_x_k tile
};

struct BwdTask {
  int kind;
  bool shared;
  int m, n;   // dgrad: row tile and column tile; wgrad: the weight's row tile (128) and column tile (256)
  int e;      // expert (-1: shared expert)
  int rows;   // dgrad: real rows of the tile; wgrad: real rows of the expert (the chain's K)
  int row0;   // wgrad: first row of the expert's segment
};

struct BwdPlan {
  static constexpr bool kReleasesByWarp = false;  // consumer thread 0 holds them (moe/persistent.cuh)
  int mt, mts, ndh, ndhs, nd;
  int wd_m, wd_n, wds_n, wg_m, wgs_m, wg_n;  // wgrad tile grids
  int ends[10];
  int n_gemm;               // the GEMM tiles (ends[9])
  int n_router, n_combine;  // the side tasks
  int combine_lead;         // weight-gradient tiles before the first combine task
  int total;
  __device__ explicit BwdPlan(const BackwardParams& params) : p(params) {
    const LayerDims& d = p.d;
    mt = p.sch.totals[1];
    mts = d.shared_mtiles();
    const bool sh = d.Is > 0;
    ndh = ceil_div(d.I, kWideN);
    ndhs = sh ? ceil_div(d.Is, kWideN) : 0;
    nd = ceil_div(d.H, kWideN);
    wd_m = ceil_div(d.H, kBM);
    wd_n = ceil_div(d.I, kWideN);
    wds_n = sh ? ceil_div(d.Is, kWideN) : 0;
    wg_m = ceil_div(d.I, kBM);
    wgs_m = sh ? ceil_div(d.Is, kBM) : 0;
    wg_n = ceil_div(d.H, kWideN);
    const int counts[10] = {mts * ndhs,          mt * ndh,           mts * nd,           mt * nd,
                            sh ? wd_m * wds_n : 0, d.E * wd_m * wd_n, wgs_m * wg_n,       wgs_m * wg_n,
                            d.E * wg_m * wg_n,   d.E * wg_m * wg_n};
    int acc = 0;
    for (int i = 0; i < 10; ++i) ends[i] = (acc += counts[i]);
    n_gemm = acc;
    n_router = ceil_div(d.T * d.K, p.router_pairs);
    n_combine = ceil_div(d.T, p.combine_tokens);
    // NOTE: a combine task waits for the last d_x_k tiles, which the walk hands out just before the weight
    // gradients: some tiles per CTA first (each CTA runs its last d_x_k meanwhile).
    combine_lead = min(n_gemm - ends[3], 8 * static_cast<int>(gridDim.x));
    total = n_gemm + n_router + n_combine;
  }
  // The walk: the router-gradient tasks spread over the dgrad tiles, the combine tasks over the weight
  // gradients after combine_lead (the task's HBM traffic overlaps other CTAs' tensor-core time).
  __device__ bool is_side(const BwdTask& t) const { return t.kind == kRouter || t.kind == kCombine; }
  __device__ int total_dx() const { return (mts + mt) * nd; }
  // False for a weight gradient of an expert without rows (no k-tile; its accumulator is left as it is).
  __device__ bool has_stages(const BwdTask& t) const { return (t.kind != kWDown && t.kind != kWGate && t.kind != kWUp) || t.rows > 0; }

  __device__ int timeline_stage(const BwdTask& t) const {
    switch (t.kind) {
      case kDh: return t.shared ? kTlSharedDh : kTlDh;
      case kDx: return t.shared ? kTlSharedDx : kTlDx;
      case kWDown: return t.shared ? kTlSharedWDown : kTlWDown;
      case kWGate: return t.shared ? kTlSharedWGate : kTlWGate;
      case kWUp: return t.shared ? kTlSharedWUp : kTlWUp;
      case kRouter: return kTlRouter;
      default: return kTlDxCombine;
    }
  }
  __device__ int tail_timeline_stage() const { return -1; }  // no tail: the d_x combine runs as side tasks

  const BackwardParams& p;
  __device__ BwdTask decode(int id) const {
    const int n_dgrad = ends[3], first_region = n_dgrad + n_router;
    const WalkSlot slot = id < first_region
                              ? interleaved_slot(id, n_dgrad, n_router, 0)
                              : interleaved_slot(id - first_region, n_gemm - n_dgrad, n_combine, combine_lead);
    if (slot.side) {
      BwdTask t{};
      t.kind = id < first_region ? kRouter : kCombine;
      t.m = slot.index;
      t.e = -1;
      return t;
    }
    return decode_gemm(id < first_region ? slot.index : n_dgrad + slot.index);
  }
  __device__ BwdTask decode_gemm(int id) const {
    int phase = 0;
    while (id >= ends[phase]) ++phase;
    const int j = id - (phase == 0 ? 0 : ends[phase - 1]);
    BwdTask t{};
    t.shared = (phase == 0 || phase == 2 || phase == 4 || phase == 6 || phase == 7);
    switch (phase) {
      case 0: case 1: t.kind = kDh; break;
      case 2: case 3: t.kind = kDx; break;
      case 4: case 5: t.kind = kWDown; break;
      case 6: case 8: t.kind = kWGate; break;
      default: t.kind = kWUp; break;
    }
    if (t.kind == kDh || t.kind == kDx) {
      // NOTE: with pull, every routed m-tile's d_h column 0 comes first: those tiles gather d_y and write it
      // expert-major, and the later columns read it by TMA, long since written (grouped right behind column 0,
      // a column-1 producer would wait out the whole column-0 tile of its m-tile).
      // The rest in the grouped order (schedule/tile_order.h: tiles of one expert's weight columns together).
      const int n_per_m = t.kind == kDh ? (t.shared ? ndhs : ndh) : nd;
      const bool column0_first = t.kind == kDh && p.pull_dy && !t.shared;
      if (column0_first && j < mt) {
        t.m = j, t.n = 0;
      } else {
        const int jj = column0_first ? j - mt : j, cols = column0_first ? n_per_m - 1 : n_per_m;
        const TileMN mn = t.shared ? grouped_tile(jj, 0, mts, cols)
                                   : routed_grouped_tile(jj, cols, p.sch.tile_expert, p.sch.tile_first);
        t.m = mn.m, t.n = mn.n + (column0_first ? 1 : 0);
      }
      if (t.shared) {
        t.e = -1;
        t.rows = min(kBM, p.d.T - t.m * kBM);
      } else {
        t.e = p.sch.tile_expert[t.m];
        t.rows = routed_tile_rows(p.sch, t.m, t.e);
      }
      return t;
    }
    const int gm = t.kind == kWDown ? wd_m : (t.shared ? wgs_m : wg_m);
    const int gn = t.kind == kWDown ? (t.shared ? wds_n : wd_n) : wg_n;
    const int per_e = gm * gn;
    t.e = t.shared ? -1 : j / per_e;
    const int r = t.shared ? j : j % per_e;
    t.m = r / gn;
    t.n = r % gn;
    if (t.shared) {
      t.rows = p.d.T;
      t.row0 = 0;
    } else {
      t.rows = p.sch.counts[t.e];
      t.row0 = p.sch.tile_first[t.e] * kBM;
    }
    return t;
  }
};

__device__ __forceinline__ int chain_steps(const BwdTask& t) { return ceil_div(t.rows, 16); }
__device__ __forceinline__ int expert_mtiles(const BackwardParams& p, int e) {
  return p.sch.tile_first[e + 1] - p.sch.tile_first[e];
}

// The fp32 weight-gradient accumulator a wgrad task reads, extends and writes: W [M, N] row-major.
struct WgradTarget {
  float* W;
  int M, N;
};
__device__ __forceinline__ WgradTarget wgrad_target(const BackwardParams& p, const BwdTask& t) {
  const LayerDims& d = p.d;
  if (t.kind == kWDown)
    return {t.shared ? p.d_wsd : p.d_wd + static_cast<int64_t>(t.e) * d.H * d.I, d.H, t.shared ? d.Is : d.I};
  float* base = t.kind == kWGate ? (t.shared ? p.d_wsg : p.d_wg) : (t.shared ? p.d_wsu : p.d_wu);
  return {t.shared ? base : base + static_cast<int64_t>(t.e) * d.I * d.H, t.shared ? d.Is : d.I, d.H};
}

__device__ __forceinline__ const StoreF32& wgrad_store(const BackwardParams& p, const BwdTask& t) {
  if (t.kind == kWDown) return t.shared ? p.st_wsd : p.st_wd;
  if (t.kind == kWGate) return t.shared ? p.st_wsg : p.st_wg;
  return t.shared ? p.st_wsu : p.st_wu;
}

// The carried-in accumulator tile (128 rows of 1 KB) is pulled into L2 while the producer runs ahead of the
// consumers, so their blocking read of it before the chain's first step hits L2 rather than HBM.
__device__ __forceinline__ void prefetch_carry_in(const BackwardParams& p, const BwdTask& t, int ptid) {
  if (!p.carry_in_wgrad) return;
  const WgradTarget w = wgrad_target(p, t);
  const int row = t.m * kBM + ptid, col = t.n * kWideN;
  if (row >= w.M) return;
  const uint32_t bytes = static_cast<uint32_t>(min(kWideN, w.N - col)) * 4u;
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(w.W + static_cast<int64_t>(row) * w.N + col),
               "r"(bytes)
               : "memory");
}

// After a d_h tile's k-tiles, kWideN / kBK more stages: block b holds the tile's saved g (A region) and u (B
// region, first 128 rows) of columns [64 b, 64 b + 64), loaded by TMA while the last k-tiles compute, so the
// SwiGLU backward reads them from shared memory (from global memory, 8 dependent round trips per tile made the
// d_h epilogue longer than its main loop). A block past I is an empty stage. False if a wait failed.
constexpr int kSavedGuBlocks = kWideN / kBK;
// A saved-g/u stage's SiLU table window: the B region past the 128-row u tile.
__device__ __forceinline__ uint8_t* saved_gu_window(GemmSmem& s, int stage) {
  static_assert(OpK128::kTileBytes + kSiluWindowBytes <= sizeof(s.b[0]), "the window fits behind the u tile");
  return reinterpret_cast<uint8_t*>(&s.b[stage][0]) + OpK128::kTileBytes;
}
__device__ __forceinline__ bool produce_saved_gu(const BackwardParams& p, GemmSmem& s, PipeState& ps,
                                                 const BwdTask& t, int id, int ptid) {
  const int I = t.shared ? p.d.Is : p.d.I;
  const OpK128& G = t.shared ? p.tma_gs : p.tma_g;
  const OpK128& U = t.shared ? p.tma_us : p.tma_u;
  for (int blk = 0; blk < kSavedGuBlocks; ++blk) {
    const int kt = t.n * kSavedGuBlocks + blk;  // the 64-column block of g and u
    const bool in = kt * kBK < I;
    if (!mbar_wait(p.sync, &s.empty[ps.stage], ps.phase ^ 1u, kStagePipelineEmpty, id, kCounterMbarEmpty, ps.stage))
      return false;
    if (ptid == 0) {
      mbar_arrive_expect_tx(&s.full[ps.stage], (in ? 2 * OpK128::kTileBytes : 0) + kSiluWindowBytes);
      if (in) {
        tma_load(G, &s.full[ps.stage], &s.a[0][0], ps.stage, t.m, kt, 0);
        tma_load(U, &s.full[ps.stage], &s.b[ps.stage][0], 0, t.m, kt, 0);
      }
      // The SiLU table's window (gemm/epilogue.cuh) behind the u tile, in every block's stage (also past I,
      // so the epilogue never reads a stale window): two bulk copies, one per sign, from L2.
      uint8_t* window = saved_gu_window(s, ps.stage);
      for (uint32_t sign = 0; sign < 2; ++sign)
        bulk_load(window + sign * (kSiluWindowBytes / 2), p.silu.entries + silu_window_source(sign), kSiluWindowBytes / 2,
                  &s.full[ps.stage]);
    }
    mbar_arrive(&s.full[ps.stage]);
    ps.advance();
  }
  return true;
}

// Router-gradient side task m: pairs [m * router_pairs, +router_pairs) (the last one shorter).
__device__ __forceinline__ RouterTask router_task(const BackwardParams& p, const BwdTask& t) {
  const int pairs = p.d.T * p.d.K, p0 = t.m * p.router_pairs;
  return {p.d_out, p.y, p.sch.token_row, p0, min(p.router_pairs, pairs - p0), p.d.K, p.d.H};
}

// ---- producer (the producer warpgroup; ptid = thread in it) --------------------------------------------
__device__ __forceinline__ bool produce(const BackwardParams& p, GemmSmem& s, PipeState& ps, const BwdTask& t, int id,
                        const BwdPlan& plan) {
  const SyncContext& sc = p.sync;
  const LayerDims& d = p.d;
  const int ptid = threadIdx.x;
  bf16_t* a = &s.a[0][0];
  bf16_t* b = &s.b[0][0];
  const int l = t.shared ? 0 : t.e;
  const bool pull_dy = p.pull_dy && !t.shared;
  // pull: d_y = bf16(w * d_out) rows and x rows gathered from d_out and x (gemm/gather.cuh)
  const RowGather dy_rows{p.d_out, d.H, d.H, p.sch.row_token, p.sch.row_weight};
  constexpr uint32_t kBytesDgrad = OpK128::kTileBytes + OpMN256::kTileBytes;
  constexpr uint32_t kBytesWgrad = OpMN128::kTileBytes + OpMN256::kTileBytes;
  switch (t.kind) {
    case kRouter: {  // the pairs' y and d_out rows, k-tile by k-tile (dispatch/router_stages.cuh)
      const RouterTask r = router_task(p, t);
      const RouterThreadRows rows = router_thread_rows(r, ptid);
      return produce_tile<true>(
          sc, s, ps, r.k_tiles(), 0, id, ptid, [](int, int, uint64_t*) {},
          [&](int kt, int st) { router_gather(r, rows, s, st, kt, ptid); }, [](int, int) {}, [](int, int) {});
    }
    case kCombine:  // every stage with bulk copies (the consumers' region), else one
      for (int i = 0; i < (p.bulk_combine ? kStages : 1); ++i)
        if (!publish_empty_stage(sc, s, ps, ptid, id, [] {})) return false;
      return true;
    case kDh: {
      const OpMN256& B = t.shared ? p.tma_wsd_t : p.tma_wd_t;
      const int k_tiles = ceil_div(d.H, kBK);
      auto load_b = [&](int kt, int st, uint64_t* bar) { tma_load(B, bar, b, st, t.n, kt, l); };
      if (pull_dy && t.n == 0) {
        // Pull: the tiles of column 0 gather and scale their d_y rows, write them to the expert-major d_y
        // (as the pull forward's gate/up tiles write x) and release c_dy[m] (the later columns' TMA reads)
        // and c_dy_expert (the dW_down tiles').
        const bool ok = produce_tile<true>(
            sc, s, ps, k_tiles, OpMN256::kTileBytes, id, ptid, load_b,
            [&](int kt, int st) { KMajorRows::gather(dy_rows, a, st, t.m * kBM, kt * kBK, ptid); },
            [&](int kt, int st) { KMajorRows::scale(dy_rows, a, st, t.m * kBM, kt * kBK, ptid); },
            [&](int kt, int st) {  // after publishing: off the consumers' path
              KMajorRows::write_back(dy_rows, a, st, p.dy, t.m * kBM, kt * kBK, ptid);
            });
        fence_proxy_async_global();  // the rows are read by TMA in the later d_h columns and dW_down tiles
        // NOTE: the vote is also the barrier that orders every thread's rows before thread 0's release.
        const bool all = producer_all(ok);
        if (all && ptid == 0) {
          signal_add(&p.c_dy[t.m], 1);
          signal_add(&p.c_dy_expert[t.e], 1);
        }
        return all && produce_saved_gu(p, s, ps, t, id, ptid);
      }
      if (!t.shared) {
        if (!wait_counter(sc, &p.c_dy[t.m], 1, kStageDgradH, id, kCounterDyDone, t.m)) return false;
        fence_proxy_async_global();
      }
      const OpK128& A = t.shared ? p.tma_dout : p.tma_dy;
      return produce_tile(sc, s, ps, k_tiles, kBytesDgrad, id, ptid,
                          [&](int kt, int st, uint64_t* bar) {
                            tma_load(A, bar, a, st, t.m, kt, 0);
                            load_b(kt, st, bar);
                          }) &&
             produce_saved_gu(p, s, ps, t, id, ptid);
    }
    case kDx: {
      const int cidx = t.shared ? d.mtiles_cap + t.m : t.m;
      if (!wait_counter(sc, &p.c_dh[cidx], t.shared ? plan.ndhs : plan.ndh, kStageDgradX, id, kCounterDhDone, cidx))
        return false;
      fence_proxy_async_global();
      const int half = ceil_div(t.shared ? d.Is : d.I, kBK);
      const OpK128& Ag = t.shared ? p.tma_dgs : p.tma_dg;
      const OpK128& Au = t.shared ? p.tma_dus : p.tma_du;
      const OpMN256& Bg = t.shared ? p.tma_wsg_t : p.tma_wg_t;
      const OpMN256& Bu = t.shared ? p.tma_wsu_t : p.tma_wu_t;
      // ONE chain over [d_g | d_u]: the d_g k-tiles first, then the d_u ones.
      return produce_tile(sc, s, ps, 2 * half, kBytesDgrad, id, ptid, [&](int kt, int st, uint64_t* bar) {
        const bool up = kt >= half;
        tma_load(up ? Au : Ag, bar, a, st, t.m, up ? kt - half : kt, 0);
        tma_load(up ? Bu : Bg, bar, b, st, t.n, up ? kt - half : kt, l);
      });
    }
    case kWDown: {
      prefetch_carry_in(p, t, ptid);
      const OpMN256& B = t.shared ? p.tma_hs_mn : p.tma_h_mn;
      const int k0 = t.row0 / kBK, k_tiles = ceil_div(chain_steps(t), kBK / 16);
      auto load_b = [&](int kt, int st, uint64_t* bar) { tma_load(B, bar, b, st, t.n, k0 + kt, 0); };
      // A: the expert-major d_y rows (push: the communication CTAs; pull: the d_h tiles of column 0)
      if (!t.shared) {
        if (!wait_counter(sc, &p.c_dy_expert[t.e], expert_mtiles(p, t.e), kStageWgradDown, id, kCounterDyExpert, t.e))
          return false;
        fence_proxy_async_global();
      }
      const OpMN128& A = t.shared ? p.tma_dout_mn : p.tma_dy_mn;
      return produce_tile(sc, s, ps, k_tiles, kBytesWgrad, id, ptid, [&](int kt, int st, uint64_t* bar) {
        tma_load(A, bar, a, st, t.m, k0 + kt, 0);
        load_b(kt, st, bar);
      });
    }
    default: {  // kWGate, kWUp
      prefetch_carry_in(p, t, ptid);
      const int ei = t.shared ? d.E : t.e;
      const int expected = t.shared ? plan.mts * plan.ndhs : expert_mtiles(p, t.e) * plan.ndh;
      if (!wait_counter(sc, &p.c_dh_expert[ei], expected, t.kind == kWGate ? kStageWgradGate : kStageWgradUp, id,
                        kCounterDhExpert, ei))
        return false;
      fence_proxy_async_global();
      const bool up = t.kind == kWUp;
      const OpMN128& A = t.shared ? (up ? p.tma_dus_mn : p.tma_dgs_mn) : (up ? p.tma_du_mn : p.tma_dg_mn);
      // B: the forward's expert-major x rows (dispatched by push, written back from the gathered stages by pull)
      const OpMN256& B = t.shared ? p.tma_x_mn : p.tma_xp_mn;
      const int k0 = t.row0 / kBK, k_tiles = ceil_div(chain_steps(t), kBK / 16);
      return produce_tile(sc, s, ps, k_tiles, kBytesWgrad, id, ptid, [&](int kt, int st, uint64_t* bar) {
        tma_load(A, bar, a, st, t.m, k0 + kt, 0);
        tma_load(B, bar, b, st, t.n, k0 + kt, 0);
      });
    }
  }
}

// ---- consumers ------------------------------------------------------------------------------------------
// One 128 x 256 tile: `init(acc, coord)`, the K loop, `epilogue(acc, coord)`.
// `after_batch(kt)`: besides the deferred release's flush (consume_tile's after_batch).
template <class Mma, bool AKMajor, bool BKMajor, class Init, class Epilogue, class AfterBatch>
__device__ __forceinline__ bool wide_tile(const BackwardParams& p, GemmSmem& s, PipeState& ps, DeferredRelease& release,
                                          int id, int ctid, int k_tiles, int rows, int main_slot, Init&& init, Epilogue&& epilogue,
                                          AfterBatch&& after_batch) {
  Mma mma;
  auto thr = mma.get_thread_slice(ctid);
  Tensor tA = thr.make_fragment_A(thr.partition_A(smem_tensor<128, AKMajor>(&s.a[0][0])));
  Tensor tB = thr.make_fragment_B(thr.partition_B(smem_tensor<256, BKMajor>(&s.b[0][0])));
  Tensor acc = partition_fragment_C(mma, Shape<Int<kBM>, Int<kWideN>>{});
  Tensor coord = thr.partition_C(make_identity_tensor(Shape<Int<kBM>, Int<kWideN>>{}));
  const long long c0 = clock64();
  init(acc, coord);
  const long long cm = profile_lap(p.sync, kProfCarryIn, c0, ctid);
  auto after = [&, flush = release.flush_after_batch(ctid == 0, k_tiles)](int kt) {
    flush(kt);
    after_batch(kt);
  };
  const bool ok =
      idle_warpgroup(ctid, rows)
          ? pass_tile_stages(p.sync, s, ps, k_tiles, id, after)
          : consume_tile(
                p.sync, s, ps, k_tiles, id, [&] { warpgroup_fence_operand(acc); },
                [&](int st, int kb) { cute::gemm(mma, tA(_, _, kb, st), tB(_, _, kb, st), acc); }, after,
                kProfFullWaitDgradH + (main_slot - kProfMainDgradH));
  if (!ok) return false;
  const long long c1 = profile_lap(p.sync, main_slot, cm, ctid);
  static_assert(kProfMainWgrad - kProfMainDgradH == kProfKtilesWgrad - kProfKtilesDgradH &&
                    kProfMainWgrad - kProfMainDgradH == kProfFullWaitWgrad - kProfFullWaitDgradH &&
                    kProfMainWgrad - kProfMainDgradH == kProfEpiWgrad - kProfEpiDgradH,
                "slots in the same order");
  if (ctid == 0) profile_add(p.sync, kProfKtilesDgradH + (main_slot - kProfMainDgradH), k_tiles);
  epilogue(acc, coord);
  profile_lap(p.sync, kProfEpilogue, c1, ctid);
  profile_lap(p.sync, kProfEpiDgradH + (main_slot - kProfMainDgradH), c1, ctid);
  return true;
}

__device__ bool consume_dh(const BackwardParams& p, GemmSmem& s, PipeState& ps, DeferredRelease& release,
                           const BwdTask& t, int id, int ctid) {
  const int I = t.shared ? p.d.Is : p.d.I;
  const Clamp clamp = Clamp::of(p.d.has_clamp, p.d.clamp_limit);
  const int k_tiles = ceil_div(p.d.H, kBK);
  bool saved_ok = true;  // the waits for the saved g / u stages
  const bool ok = wide_tile<MmaDgrad, true, false>(
      p, s, ps, release, id, ctid, k_tiles, t.rows, kProfMainDgradH, [](auto& acc, auto&) { clear(acc); },
      // (CALICO_MK_DH_EPILOGUE_INLINE: see the top of the file)
[&](auto& acc, auto& coord) CALICO_MK_DH_EPILOGUE_INLINE {
        const StoreBf16& DG = t.shared ? p.st_dgs : p.st_dg;
        const StoreBf16& DU = t.shared ? p.st_dus : p.st_du;
        static_assert(std::remove_reference_t<decltype(size(acc))>::value == 128, "64 d_h words per thread");
        uint32_t dh_words[64], du_words[16];
        pack_bf16x2(acc, dh_words);
        // Lookups in batches of kBatch pairs: every table lookup of a batch is issued before the first is used
        // (they were one dependent round trip each). A block's first batch is issued a round early, in the d_u
        // round of the block before (or before the first round), so that its misses' L2 round trip runs beside
        // that round's stores and barriers.
        constexpr int kBatch = 8;  // registers: the consumers run at 224 (setmaxnreg); 16 pairs measured slower
        struct Batch {
          uint32_t g2[kBatch];
          float2 e[kBatch][2];
        };
        // g of (m, c) at the offset of a 128-row K-major stage: the strips' swizzle, 128 rows deep.
        auto issue_batch = [&](Batch& bt, int b, int q0) {
          const uint8_t* g_stage = reinterpret_cast<const uint8_t*>(&s.a[ps.stage][0]);
          const uint32_t window = smem_addr(saved_gu_window(s, ps.stage));
          CUTE_UNROLL
          for (int q = 0; q < kBatch; ++q) {
            const int i = 32 * b + 2 * (q0 + q);
            bt.g2[q] = ld_shared_u32(g_stage + strip_offset<bf16_t>(get<0>(coord(i)), get<1>(coord(i)) - 64 * b));
          }
          CUTE_UNROLL
          for (int q = 0; q < kBatch; ++q) {
            CUTE_UNROLL
            for (int h = 0; h < 2; ++h)
              bt.e[q][h] = silu_pair(static_cast<uint16_t>(h ? bt.g2[q] >> 16 : bt.g2[q] & 0xFFFFu),
                                     gate_cut(bt.g2[q], h, clamp), window, p.silu);
          }
        };
        // Padding rows get exact zeros (the wgrad chains' last step reads them); the shared expert's rows past T
        // and columns past I are clipped by TMA.
        auto finish_batch = [&](const Batch& bt, int b, int q0, uint8_t* strip) {
          const uint8_t* u_stage = reinterpret_cast<const uint8_t*>(&s.b[ps.stage][0]);
          CUTE_UNROLL
          for (int q = 0; q < kBatch; ++q) {
            const int i = 32 * b + 2 * (q0 + q);
            const int m = get<0>(coord(i)), c = get<1>(coord(i)) - 64 * b, j = t.n * kWideN + get<1>(coord(i));
            const uint32_t off = strip_offset<bf16_t>(m, c);
            const SwigluGrad2 o = swiglu_backward2(dh_words[i / 2], bt.g2[q], ld_shared_u32(u_stage + off), bt.e[q][0],
                                                   bt.e[q][1], clamp);
            const bool real = m < t.rows && j < I;
            st_shared_u32(strip, strip_offset<bf16_t>(m % 64, c), real ? o.dg : 0u);
            du_words[q0 + q] = real ? o.du : 0u;
          }
        };
        auto wait_saved = [&] {
          saved_ok = mbar_wait(p.sync, &s.full[ps.stage], ps.phase, kStagePipelineFull, id, kCounterMbarFull, ps.stage) && saved_ok;
        };
        Batch ahead;
        wait_saved();
        issue_batch(ahead, 0, 0);
        // Rounds 2b and 2b + 1: d_g and d_u of columns [64 b, 64 b + 64), from the saved g and u of stage block
        // b (produce_saved_gu); the d_u words wait in registers for their round.
        store_rounds<2 * kSavedGuBlocks>(
            p.sync, s, ctid,
            [&](int r, uint8_t* strip) {
              const int b = r / 2;
              if (r % 2 == 1) {  // d_u, computed in the round before
                CUTE_UNROLL
                for (int q = 0; q < 16; ++q) {
                  const int i = 32 * b + 2 * q;
                  st_shared_u32(strip, strip_offset<bf16_t>(get<0>(coord(i)) % 64, get<1>(coord(i)) - 64 * b), du_words[q]);
                }
                if (b + 1 < kSavedGuBlocks) {  // the next block's stage (ps advanced in round 2b)
                  wait_saved();
                  issue_batch(ahead, b + 1, 0);
                }
                return;
              }
              finish_batch(ahead, b, 0, strip);
              CUTE_UNROLL
              for (int q0 = kBatch; q0 < 16; q0 += kBatch) {
                Batch fresh;
                issue_batch(fresh, b, q0);
                finish_batch(fresh, b, q0, strip);
              }
              __syncwarp();
              release_stage(s, ps.stage);  // this warp's reads are done
              ps.advance();
            },
            [&](int r, int wg, const uint8_t* strip) {
              tma_store_strip(r % 2 ? DU : DG, strip, t.m * 2 + wg, t.n * (kWideN / 64) + r / 2, 0);
            });
      },
      [](int) {});
  if (!ok || !saved_ok) return false;
  const long long lap = clock64();
  if (ctid == 0 && id != p.skip_signal_task)  // d_g, d_u are read by TMA (d_x_k and wgrad tiles)
    release.defer(&p.c_dh[t.shared ? p.d.mtiles_cap + t.m : t.m], &p.c_dh_expert[t.shared ? p.d.E : t.e]);
  profile_lap(p.sync, kProfSignal, lap, ctid);
  return true;
}

__device__ bool consume_dx(const BackwardParams& p, GemmSmem& s, PipeState& ps, DeferredRelease& release,
                           const BwdTask& t, int id, int ctid) {
  const int k_tiles = 2 * ceil_div(t.shared ? p.d.Is : p.d.I, kBK);
  const bool ok = wide_tile<MmaDgrad, true, false>(
      p, s, ps, release, id, ctid, k_tiles, t.rows, kProfMainDgradX, [](auto& acc, auto&) { clear(acc); },
      [&](auto& acc, auto& coord) {
        // Round r: columns [64 r, 64 r + 64). Padding rows hold +0 (their d_g, d_u rows are zeros); the combine
        // never reads them.
        store_tile_bf16(p.sync, s, ctid, acc, coord, t.shared ? p.st_dxs : p.st_dx, t.m, t.n);
      },
      [](int) {});
  if (!ok) return false;
  const long long lap = clock64();
  if (ctid == 0 && id != p.skip_signal_task) release.defer(p.c_dx_total);  // the combine reads d_x_k
  profile_lap(p.sync, kProfSignal, lap, ctid);
  return true;
}

// kCarryIn: the chains start from the carried-in accumulators (MoeOptions::accumulate_weight_grads), else from
// +0 (clear). A compile-time choice (one kernel per mode): a runtime branch between clear(acc) and the loads
// made ptxas serialise every wgmma (C7515), and reading a row of zeros instead cost ~1,200 cycles per tile.
//
// Overwrite mode (!kCarryIn): the two consumer warpgroups run a weight-gradient tile staggered. Warpgroup 1
// starts once warpgroup 0 has issued k-tile kWgradLag - 1 (the `go`: s.wgrad_go = the task), and each stores
// its 64 rows on its own (store_rounds<..., true>), so one warpgroup's epilogue (64 KB of fp32, bound by the
// SM's TMA store rate: ~29 B/clk with nothing else running, simulator/probes/epilogue_store_rate.cu) runs
// while the other's wgmma use the tensor cores, where both epilogues used to leave them idle at once. Both
// still read every stage (a stage is released when all eight warps have read it), so the lag is at most
// kWgradLag stages of the ring. Bits: each output element is still one chain in one warpgroup; only the time
// at which it runs moves. Measured on the H200 (2026-12-02, reports/megakernel-2026-12-01.md, eleventh pass):
// deepseek-v3 forward + backward -3% to -5%, qwen3 -1% to -4% in overwrite mode; lags 1, 2, 3 alike; in
// accumulate mode (the carried-in accumulator read and written, 2x the HBM traffic) no faster, so not used.
// NOTE: the go waits for thread 0's boxes to be read (bulk_wait_read<0>): in a joint epilogue it issued
// warpgroup 1's strips too, which warpgroup 1 rewrites in its own epilogue.
#ifndef CALICO_MK_WGRAD_LAG
#define CALICO_MK_WGRAD_LAG 2
#endif
#ifndef CALICO_MK_STAGGER_CARRY_IN
#define CALICO_MK_STAGGER_CARRY_IN 0
#endif
constexpr int kWgradLag = CALICO_MK_WGRAD_LAG;
template <bool kCarryIn>
__device__ bool consume_wgrad(const BackwardParams& p, GemmSmem& s, PipeState& ps, DeferredRelease& release,
                              const BwdTask& t, int id, int ctid) {
  constexpr bool kStagger = !kCarryIn || CALICO_MK_STAGGER_CARRY_IN;
  const int k_tiles = ceil_div(chain_steps(t), kBK / 16);  // 0: no stages, no go (the static walk's empty tiles)
  // NOTE: a go that does not come is recorded as a timeout (which aborts the launch) and then taken as given:
  // the go orders no data, only time, and a warpgroup that left the walk alone would leave the other waiting
  // at a joint barrier (bar.sync has no bound). Both go on; their next unsatisfied waits see the abort.
  auto wait_go = [&] {
    if constexpr (kStagger)
      if (ctid >= 128 && k_tiles > 0)
        (void)wait_shared_at_least(p.sync, &s.wgrad_go, id, kStageWgradDown + (t.kind - kWDown), id, kCounterWgradGo, id);
  };
  const WgradTarget w = wgrad_target(p, t);
  // NOTE: addresses as two row pointers plus compile-time offsets (the fragment's structure, checked below):
  // per-element 64-bit addresses, shared by the carry-in read and the write-back, stayed live across the
  // main loop and spilled.
  struct Rows {
    const float* row[2];
    bool row_ok[2];
    int col0, N;
  } rows{};
  auto locate = [&](auto& coord) {
    const int m0 = get<0>(coord(0)), n0 = get<1>(coord(0));
    rows.col0 = t.n * kWideN + n0;
    rows.N = w.N;
    for (int r = 0; r < 2; ++r) {
      const int row = t.m * kBM + m0 + 8 * r;
      rows.row_ok[r] = row < w.M;
      rows.row[r] = w.W + static_cast<int64_t>(rows.row_ok[r] ? row : 0) * w.N + rows.col0;
    }
  };
  const bool ok = wide_tile<MmaWgrad, false, false>(
      p, s, ps, release, id, ctid, k_tiles, kBM, kProfMainWgrad,  // (every row of a weight tile is real)
      [&](auto& acc, auto& coord) {  // the carried-in fp32 accumulator, or +0 (MoeOptions::accumulate_weight_grads)
        if constexpr (!kCarryIn) {
          clear(acc);
          wait_go();
        } else {
          locate(coord);
          CUTE_UNROLL
          for (int i = 0; i < size(acc); i += 2) {
            const int r = (i / 2) % 2, off = 8 * (i / 4);
            check_acc_fragment(coord, i, r, off);
            const bool in = rows.row_ok[r] && rows.col0 + off < rows.N;
            const float2 v = in ? *reinterpret_cast<const float2*>(rows.row[r] + off) : make_float2(0.0f, 0.0f);
            acc(i) = v.x;
            acc(i + 1) = v.y;
          }
          wait_go();
        }
      },
      [&](auto& acc, auto& coord) {  // round r: fp32 columns [32 r, 32 r + 32); TMA clips the edges
        const StoreF32& out = wgrad_store(p, t);
        store_rounds<kWideN / 32, kStagger>(
            p.sync, s, ctid,
            [&](int r, uint8_t* strip) {
              CUTE_UNROLL
              for (int i = 16 * r; i < 16 * r + 16; i += 2) {
                const int m = get<0>(coord(i)), c = get<1>(coord(i)) - 32 * r;
                st_shared_f32x2(strip, strip_offset<float>(m % 64, c), acc(i), acc(i + 1));
              }
            },
            [&](int r, int wg, const uint8_t* strip) {
              tma_store_strip(out, strip, t.m * 2 + wg, t.n * (kWideN / 32) + r, t.shared ? 0 : t.e);
            });
      },
      [&](int kt) {  // the go for warpgroup 1
        if (kStagger && ctid == 0 && kt == (k_tiles < kWgradLag ? k_tiles : kWgradLag) - 1 && !p.skip_wgrad_go) {
          bulk_wait_read<0>();
          asm volatile("st.release.cta.shared.b32 [%0], %1;\n" ::"r"(smem_addr(&s.wgrad_go)), "r"(id) : "memory");
        }
      });
  return ok;
}

// ---- side tasks and the communication CTAs --------------------------------------------------------------
// A side task on the 256 consumer threads. Router gradient: its k-tiles' stages (dispatch/router_stages.cuh),
// no dependency (d_out and the forward's y). Combine: its empty stages, then after every d_x_k tile (the
// counter is complete long before most), the tokens' chains: by bulk copies into the kStages stages it holds
// (combine/bulk_combine.cuh: the register loads' ~28 KB of L1 in flight kept it at ~14 B/clk per SM), or by
// combine_tokens with one stage passed through.
// combine_phases: the parities of this warp's combine slot barriers (GemmSmem::combine_bar), kept across tasks.
__device__ bool consume_side(const BackwardParams& p, const BwdPlan& plan, GemmSmem& s, PipeState& ps,
                             DeferredRelease& release, const BwdTask& t, int id, int ctid, uint32_t& combine_phases) {
  if (ctid == 0) release.flush();  // before the side task's waits (a combine task waits for every d_x_k tile)
  const long long c0 = clock64();
  if (t.kind == kRouter) {
    const bool ok = router_chains(p.sync, router_task(p, t), s, ps, p.d_router_weights, id, ctid);
    profile_lap(p.sync, kProfSideRouter, c0, ctid);
    return ok;
  }
  const PipeState held = ps;
  if (p.bulk_combine) {
    for (int i = 0; i < kStages; ++i) {  // held until the chains are done
      if (!mbar_wait(p.sync, &s.full[ps.stage], ps.phase, kStagePipelineFull, id, kCounterMbarFull, ps.stage)) return false;
      ps.advance();
    }
  } else if (!consume_empty_stage(p.sync, s, ps, id)) {
    return false;
  }
  if (ctid == 0) s.task_slot[1] = wait_all(p.sync, p.c_dx_total, plan.total_dx(), kStageCombineBwd, id, kCounterDxTotal, 0);
  consumer_barrier();
  const bool ready = s.task_slot[1] != 0;
  consumer_barrier();  // every thread has read the slot before thread 0 writes it again
  if (!ready) return false;
  const long long c1 = profile_lap(p.sync, kProfSideCombineWait, c0, ctid);
  const int ct = p.combine_tokens, t0 = t.m * ct, end = min(t0 + ct, p.d.T);
  const uint16_t* dxs = p.d.Is > 0 ? p.dxs : nullptr;
  bool ok = true;
  if (p.bulk_combine) {
    (void)ld_acquire_gpu(p.c_dx_total);  // this thread's own acquire of the d_x_k rows (thread 0 waited)
    fence_proxy_async_global();          // -> this warp's bulk loads of them
    fence_proxy_async_shared();          // this thread's generic accesses of the stages before the bulk loads
    constexpr int kWarps = kConsumerThreads / 32;
    static_assert(sizeof(GemmSmem::combine_bar) == sizeof(uint64_t) * kWarps * kCombineMaxSlots);
    constexpr auto kRegion = static_cast<uint32_t>(sizeof(GemmSmem::a) + sizeof(GemmSmem::b));
    static_assert(offsetof(GemmSmem, b) == sizeof(GemmSmem::a), "the stages are one region");
    const CombineLayout L = combine_layout(p.d.H, p.d.K, dxs != nullptr, combine_warp_bytes(kRegion, kWarps));
    const int warp = ctid / 32;
    ok = bulk_combine_warp<false>(
        p.sync, combine_warp(reinterpret_cast<uint8_t*>(&s.a[0][0]), kRegion, kWarps, warp, s.combine_bar[warp]), L,
        p.dx, p.sch.token_row, nullptr, dxs, p.d_x, end, p.d.K, p.d.H, StridedTokens{t0 + warp, kWarps},
        kStageCombineBwd, combine_phases);
    fence_proxy_async_shared();  // the items (generic writes) before the next TMA writes of the stages
    __syncwarp();                // every lane's reads of the stages are done
    PipeState back = held;
    for (int i = 0; i < kStages; ++i, back.advance()) release_stage(s, back.stage);
  } else {
    combine_tokens<false>(p.dx, p.sch.token_row, nullptr, dxs, p.d_x, t0, end - t0, p.d.K, p.d.H, ctid,
                          kConsumerThreads);
  }
  profile_lap(p.sync, kProfSideCombine, c1, ctid);
  return ok;
}

__device__ void backward_comm(const BackwardParams& p, const BwdPlan& plan, GemmSmem& s) {
  if (p.pull_dy) return;  // pull: the compute CTAs gather d_y
  BulkRowsSmem& b = bulk_rows_init(s);
  uint32_t phases = 0;
  for (int m = blockIdx.x; m < plan.mt; m += p.n_comm) {
    // written and visible to the d_h and dW_down tiles' TMA reads when it returns
    if (!bulk_dispatch_rows(p.sync, b, phases, p.d_out, p.sch.row_token, p.sch.row_weight, p.dy, m * kBM, kBM, p.d.H,
                            kStageDyDispatch, m))
      return;
    if (threadIdx.x == 0) {
      signal_add(&p.c_dy[m], 1);
      signal_add(&p.c_dy_expert[p.sch.tile_expert[m]], 1);
    }
  }
  bulk_rows_release(b);
}

template <bool kCarryIn, bool kTimeline>  // kTimeline: the recording instantiation (moe/persistent.cuh)
__global__ void __launch_bounds__(kThreads, 1) backward_kernel(const __grid_constant__ BackwardParams p) {
#if CALICO_MK_SM90
  extern __shared__ uint8_t smem_raw[];
  GemmSmem& s = gemm_smem(smem_raw);
  const BwdPlan plan(p);
  uint32_t combine_phases = 0;  // a consumer thread's (consume_side)
  clock_mark(p.sync, 0);
  run_persistent<kTimeline>(
      p.sync, p.n_comm, s, plan, p.c_task, p.dynamic_walk != 0, [&](bool) { backward_comm(p, plan, s); },
      [&](PipeState& ps, const BwdTask& t, int id) { return produce(p, s, ps, t, id, plan); },
      [&](PipeState& ps, DeferredRelease& release, const BwdTask& t, int id, int ctid) {
        bool ok;
        switch (t.kind) {
          case kDh: ok = consume_dh(p, s, ps, release, t, id, ctid); break;
          case kDx: ok = consume_dx(p, s, ps, release, t, id, ctid); break;
          case kRouter:
          case kCombine: ok = consume_side(p, plan, s, ps, release, t, id, ctid, combine_phases); break;
          default: ok = consume_wgrad<kCarryIn>(p, s, ps, release, t, id, ctid); break;
        }
        return ok;
      },
      [](int) {});  // no tail: the router gradient and the combine are side tasks of the walk
  clock_mark(p.sync, 1);
#else
  __trap();  // not an sm_90a build: the host refuses other devices first
#endif
}

}  // namespace

#if CALICO_MK_BWD_CARRY_IN
void launch_backward_accumulate(const BackwardParams& p, int grid, cudaStream_t stream) {
#else
void launch_backward_overwrite(const BackwardParams& p, int grid, cudaStream_t stream) {
#endif
  constexpr bool kCarryIn = CALICO_MK_BWD_CARRY_IN != 0;
  static bool configured = false;
  if (!configured) {
    for (auto* kernel : {backward_kernel<kCarryIn, false>, backward_kernel<kCarryIn, true>})
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(gemm_smem_bytes()));
    configured = true;
  }
  auto* const kernel = p.sync.timeline != nullptr ? backward_kernel<kCarryIn, true> : backward_kernel<kCarryIn, false>;
  kernel<<<grid, kThreads, gemm_smem_bytes(), stream>>>(p);
}

}  // namespace calico::gpu::mk
