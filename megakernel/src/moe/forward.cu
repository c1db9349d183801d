// The forward megakernel: ONE persistent launch does the dispatch (x rows into the canonical expert-major
// order), the gate/up GEMMs with SwiGLU in their epilogue, the down GEMMs and the combine, plus the shared
// expert when I_s > 0. Push: communication CTAs [0, n_comm) move rows first. Pull: the gate/up tiles'
// producers gather their x rows straight into shared memory (gemm/gather.cuh), and the tiles of column 0
// also write them to the expert-major copy the backward reads. Compute CTAs run GEMM tiles; integer
// counters (release/acquire) connect them; all CTAs share the combine tail. Token counts never leave the device.
//
// Compute tasks, in the one order every compute CTA walks (CTA c takes tasks c, c + n, c + 2n, ...; each task
// waits only on earlier ones or on communication tasks, so the walk cannot deadlock):
//   [shared gate/up (m, n)] [routed gate/up (m, n)] [shared down (m, n)] [routed down (m, n)]
// with m the 128-row tile of the expert-major buffer (segments padded to 128 rows) and n the column tile;
// inside a phase, experts in order and groups of m-tiles column by column (schedule/tile_order.h).
#include <cuda_runtime.h>

// The device helpers below are compiled out of the non-sm_90a passes (the kernel body is a refusal there).
#pragma nv_diag_suppress 177

#include "combine/bulk_combine.cuh"
#include "combine/combine.cuh"
#include "dispatch/bulk_rows.cuh"
#include "gemm/epilogue.cuh"
#include "gemm/gather.cuh"
#include "moe/params.cuh"
#include "moe/persistent.cuh"
#include "schedule/tile_order.h"

namespace calico::gpu::mk {
namespace {

using namespace cute;

using MmaDown = decltype(make_tiled_mma(SM90_64x256x16_F32BF16BF16_SS<GMMA::Major::K, GMMA::Major::K>{},
                                        Layout<Shape<_2, _1, _1>>{}));

enum FwdKind { kSharedGateUp, kRoutedGateUp, kSharedDown, kRoutedDown };

struct FwdTask {
  int kind, m, n, e;
  int rows;  // rows of the tile that hold real tokens
};

struct FwdPlan {
  int mt, mts, ngu, ngus, nd;
  int end_sgu, end_rgu, end_sd, total;
  __device__ explicit FwdPlan(const ForwardParams& params) : p(params) {
    mt = p.sch.totals[1];
    mts = p.d.shared_mtiles();
    ngu = ceil_div(p.d.I, kGateUpN);
    ngus = p.d.Is > 0 ? ceil_div(p.d.Is, kGateUpN) : 0;
    nd = ceil_div(p.d.H, kWideN);
    end_sgu = mts * ngus;
    end_rgu = end_sgu + mt * ngu;
    end_sd = end_rgu + mts * nd;
    total = end_sd + mt * nd;
  }
  __device__ int total_down() const { return (mts + mt) * nd; }
  // Each consumer warp stores its own rows of a tile and releases its counters itself
  // (gemm/tma_store.cuh, store_rounds_per_warp): a tile is done at this many increments.
  static constexpr int kSignalsPerTile = kConsumerThreads / 32;
  static constexpr bool kReleasesByWarp = true;  // moe/persistent.cuh
  __device__ bool has_stages(const FwdTask&) const { return true; }  // every forward task has a K loop
  __device__ int timeline_stage(const FwdTask& t) const {
    return t.kind == kSharedGateUp ? kTlSharedGateUp
           : t.kind == kRoutedGateUp ? kTlGateUp
           : t.kind == kSharedDown   ? kTlSharedDown
                                     : kTlDown;
  }
  __device__ int tail_timeline_stage() const { return kTlCombine; }
  const ForwardParams& p;
  __device__ FwdTask decode(int id) const {
    FwdTask t{};
    int j, n_per_m;
    if (id < end_sgu) {
      t.kind = kSharedGateUp, j = id, n_per_m = ngus;
    } else if (id < end_rgu) {
      t.kind = kRoutedGateUp, j = id - end_sgu, n_per_m = ngu;
    } else if (id < end_sd) {
      t.kind = kSharedDown, j = id - end_rgu, n_per_m = nd;
    } else {
      t.kind = kRoutedDown, j = id - end_sd, n_per_m = nd;
    }
    // Grouped m-tiles walk each column together (schedule/tile_order.h: the weight columns' second read hits L2).
    if (t.kind == kSharedGateUp || t.kind == kSharedDown) {
      const TileMN mn = grouped_tile(j, 0, mts, n_per_m);
      t.m = mn.m, t.n = mn.n, t.e = -1;
      t.rows = min(kBM, p.d.T - t.m * kBM);
    } else {
      const TileMN mn = routed_grouped_tile(j, n_per_m, p.sch.tile_expert, p.sch.tile_first);
      t.m = mn.m, t.n = mn.n;
      t.e = p.sch.tile_expert[t.m];
      t.rows = routed_tile_rows(p.sch, t.m, t.e);
    }
    return t;
  }
};

__device__ __forceinline__ bool is_shared(const FwdTask& t) { return t.kind == kSharedGateUp || t.kind == kSharedDown; }
__device__ __forceinline__ int* gateup_counter(const ForwardParams& p, const FwdTask& t) {
  return is_shared(t) ? &p.c_gateup[p.d.mtiles_cap + t.m] : &p.c_gateup[t.m];
}

// ---- producer (the producer warpgroup; ptid = thread in it) --------------------------------------------
__device__ bool produce(const ForwardParams& p, GemmSmem& s, PipeState& ps, const FwdTask& t, int id,
                        const FwdPlan& plan) {
  const SyncContext& sc = p.sync;
  const int ptid = threadIdx.x;
  bf16_t* a = &s.a[0][0];
  bf16_t* b = &s.b[0][0];
  const bool sh = is_shared(t);
  if (t.kind == kSharedGateUp || t.kind == kRoutedGateUp) {
    const OpK128& Bg = sh ? p.tma_wsg : p.tma_wg;
    const OpK128& Bu = sh ? p.tma_wsu : p.tma_wu;
    const int l = sh ? 0 : t.e;
    // NOTE: both halves inside stage st of the 256-row B ring (a 128-row tile at its first and second
    // 16 KB), so every task kind uses the same stage footprint.
    auto load_b = [&](int kt, int st, uint64_t* bar) {
      tma_load(Bg, bar, &s.b[st][0], 0, t.n, kt, l);
      tma_load(Bu, bar, &s.b[st][0] + kGateUpN * kBK, 0, t.n, kt, l);
    };
    const int k_tiles = ceil_div(p.d.H, kBK);
    if (!sh && p.pull) {  // the tile's x rows straight from x
      const RowGather rows{p.x, p.d.H, p.d.H, p.sch.row_token, nullptr};
      const bool write_back = t.n == 0;  // one column tile per m-tile keeps the expert-major copy for the backward
      return produce_tile<true>(
          sc, s, ps, k_tiles, 2 * OpK128::kTileBytes, id, ptid, load_b,
          [&](int kt, int st) { KMajorRows::gather(rows, a, st, t.m * kBM, kt * kBK, ptid); }, [](int, int) {},
          [&](int kt, int st) {  // after publishing: off the consumers' path
            if (write_back) KMajorRows::write_back(rows, a, st, p.xp, t.m * kBM, kt * kBK, ptid);
          });
    }
    if (!sh) {
      if (!wait_counter(sc, &p.c_dispatched[t.m], 1, kStageGateUp, id, kCounterDispatched, t.m)) return false;
      fence_proxy_async_global();
    }
    const OpK128& A = sh ? p.tma_x : p.tma_xp;
    return produce_tile(sc, s, ps, k_tiles, 3 * OpK128::kTileBytes, id, ptid, [&](int kt, int st, uint64_t* bar) {
      tma_load(A, bar, a, st, t.m, kt, 0);
      load_b(kt, st, bar);
    });
  }
  const int expected = (sh ? plan.ngus : plan.ngu) * FwdPlan::kSignalsPerTile;
  const int cidx = sh ? p.d.mtiles_cap + t.m : t.m;
  if (!wait_counter(sc, gateup_counter(p, t), expected, kStageDown, id, kCounterGateUpDone, cidx)) return false;
  fence_proxy_async_global();
  const OpK128& A = sh ? p.tma_hs : p.tma_h;
  const OpK256& B = sh ? p.tma_wsd : p.tma_wd;
  const int l = sh ? 0 : t.e;
  return produce_tile(sc, s, ps, ceil_div(sh ? p.d.Is : p.d.I, kBK), OpK128::kTileBytes + OpK256::kTileBytes, id,
                      ptid, [&](int kt, int st, uint64_t* bar) {
                        tma_load(A, bar, a, st, t.m, kt, 0);
                        tma_load(B, bar, b, st, t.n, kt, l);
                      });
}

// ---- consumers (two warpgroups) -------------------------------------------------------------------------
// The gate/up tile is ONE 128 x 256 GEMM: B rows 0..127 of each stage hold 128 gate rows, rows 128..255 the
// 128 up rows with the same column index j (produce() loads them as two 128-row halves of the stage).
// One 128 x 256 tile of the forward (both operands K-major): the K loop over k_tiles k-tiles, then
// epilogue(acc, coord) with coord the (row, column) of each accumulator element. False if a wait failed.
template <class Epilogue>
__device__ __forceinline__ bool wide_tile(const ForwardParams& p, GemmSmem& s, PipeState& ps, DeferredRelease& release,
                                          int id, int ctid, int k_tiles, int rows, Epilogue&& epilogue) {
  MmaDown mma;
  auto thr = mma.get_thread_slice(ctid);
  Tensor tA = thr.make_fragment_A(thr.partition_A(smem_tensor<128, true>(&s.a[0][0])));
  Tensor tB = thr.make_fragment_B(thr.partition_B(smem_tensor<256, true>(&s.b[0][0])));
  Tensor acc = partition_fragment_C(mma, Shape<Int<kBM>, Int<kWideN>>{});
  clear(acc);
  const bool ok =
      idle_warpgroup(ctid, rows)
          ? pass_tile_stages(p.sync, s, ps, k_tiles, id, release.flush_after_batch(ctid % 32 == 0, k_tiles))
          : consume_tile(
                p.sync, s, ps, k_tiles, id, [&] { warpgroup_fence_operand(acc); },
                [&](int st, int kb) { cute::gemm(mma, tA(_, _, kb, st), tB(_, _, kb, st), acc); },
                release.flush_after_batch(ctid % 32 == 0, k_tiles));
  if (!ok) return false;
  epilogue(acc, thr.partition_C(make_identity_tensor(Shape<Int<kBM>, Int<kWideN>>{})));
  return true;
}

__device__ bool consume_gateup(const ForwardParams& p, GemmSmem& s, PipeState& ps, DeferredRelease& release,
                               const FwdTask& t, int id, int ctid) {
  return wide_tile(p, s, ps, release, id, ctid, ceil_div(p.d.H, kBK), t.rows, [&](auto& acc, const auto& coord) {
    long long lap = clock64();
    const bool sh = is_shared(t);
    const Clamp clamp = Clamp::of(p.d.has_clamp, p.d.clamp_limit);
    const StoreBf16Warp* out[3] = {sh ? &p.st_gs : &p.st_g, sh ? &p.st_us : &p.st_u, sh ? &p.st_hs : &p.st_h};
    // NOTE: in the m64n256 accumulator fragment, element i + size/2 is column n + 128 of element i (the column
    // block index is the slowest mode), so each thread holds the gate and the up value of the same (m, j).
    constexpr int kHalf = std::remove_reference_t<decltype(size(acc))>::value / 2;
    // Round 3b + k: g (k = 0), u (1), h (2) of columns [64 b, 64 b + 64) of the tile's 128. Routed padding
    // rows get exact zeros; the shared expert's rows past T and columns past I are clipped by TMA.
    store_rounds_per_warp<3 * (kGateUpN / 64)>(
        s, ctid,
        [&](int r, uint8_t* strip) {
          const int b = r / 3, k = r % 3;
          // In batches of kBatch pairs: the h round's SiLU lookups of a batch are all issued before the first
          // is used (between the strip's shared stores, which order memory, they were one round trip each).
          constexpr int kBatch = 8;
          CUTE_UNROLL
          for (int q0 = 0; q0 < 16; q0 += kBatch) {
            float2 silu_g[kBatch];
            if (k == 2) {
              CUTE_UNROLL
              for (int q = 0; q < kBatch; ++q) {
                const int i = 32 * b + 2 * (q0 + q);
                silu_g[q] = silu_of_gate2(bf16x2_from_f32(acc(i), acc(i + 1)), clamp, p.silu);
              }
            }
            CUTE_UNROLL
            for (int q = 0; q < kBatch; ++q) {
              const int i = 32 * b + 2 * (q0 + q);
              if (get<1>(coord(i + kHalf)) != get<1>(coord(i)) + kGateUpN) __trap();  // the layout assumption above
              const int m = get<0>(coord(i)), c = get<1>(coord(i)) - 64 * b;
              uint32_t w;
              if (k == 0) w = bf16x2_from_f32(acc(i), acc(i + 1));
              else if (k == 1) w = bf16x2_from_f32(acc(i + kHalf), acc(i + 1 + kHalf));
              else w = swiglu_h2(silu_g[q], bf16x2_from_f32(acc(i + kHalf), acc(i + 1 + kHalf)), clamp);
              st_shared_u32(strip, strip_offset<bf16_t>(m % 16, c), m < t.rows ? w : 0u);
            }
          }
        },
        [&](int r, const uint8_t* strip) {
          tma_store_strip(*out[r % 3], strip, t.m * 8 + ctid / 32, t.n * (kGateUpN / 64) + r / 3, 0);
        });
    profile_lap(p.sync, kProfEpiGateUp, lap, ctid);
    lap = profile_lap(p.sync, kProfEpilogue, lap, ctid);
    if (ctid % 32 == 0 && id != p.skip_signal_task) release.defer(gateup_counter(p, t));  // the down tiles read h by TMA
    profile_lap(p.sync, kProfSignal, lap, ctid);
  });
}

__device__ bool consume_down(const ForwardParams& p, GemmSmem& s, PipeState& ps, DeferredRelease& release,
                             const FwdTask& t, int id, int ctid) {
  const bool sh = is_shared(t);
  return wide_tile(p, s, ps, release, id, ctid, ceil_div(sh ? p.d.Is : p.d.I, kBK), t.rows, [&](auto& acc, const auto& coord) {
    long long lap = clock64();
    // Round r: columns [64 r, 64 r + 64). Routed padding rows hold +0 (their h rows are zeros); the combine
    // never reads them.
    store_tile_bf16_per_warp(s, ctid, acc, coord, sh ? p.st_ys : p.st_y, t.m, t.n);
    lap = profile_lap(p.sync, kProfEpilogue, lap, ctid);
    if (ctid % 32 == 0 && id != p.skip_signal_task) release.defer(p.c_down_total);  // the combine reads y
    profile_lap(p.sync, kProfSignal, lap, ctid);
  });
}

// ---- the combine tail, shared by every CTA once its own queue is done ------------------------------------
template <class Barrier>
__device__ void forward_tail(const ForwardParams& p, const FwdPlan& plan, int tid, int nthreads, GemmSmem& s,
                             Barrier&& barrier) {
  int* slot = s.task_slot;
  if (tid == 0)
    slot[1] = wait_all(p.sync, p.c_down_total, plan.total_down() * FwdPlan::kSignalsPerTile, kStageCombine, -1,
                       kCounterDownTotal, 0);
  fence_proxy_async_shared();  // generic writes of the stages and strips before the bulk loads write them
  barrier();
  if (!slot[1]) return;
  // combine/bulk_combine.cuh, in the stages and strips, idle now: the consumers have waited for every stage
  // and store of their walk, and a dynamic walk's producer published its end after its last reads. (The static
  // walk's producer leaves without a word: with pull, its last gathered rows may still be read for the
  // expert-major copy, so that case keeps the register combine.)
  if (p.bulk_combine && (p.dynamic_walk || !p.pull)) {
    (void)ld_acquire_gpu(p.c_down_total);  // this thread's own acquire of the y rows (thread 0 waited for them)
    fence_proxy_async_global();            // -> this warp's bulk loads of them
    const int nwarps = nthreads / 32;
    const auto region = static_cast<uint32_t>(offsetof(GemmSmem, full));
    const CombineLayout L = combine_layout(p.d.H, p.d.K, p.d.Is > 0, combine_warp_bytes(region, nwarps));
    uint32_t phases = 0;
    bulk_combine_warp<true>(p.sync, combine_warp(reinterpret_cast<uint8_t*>(&s), region, nwarps, tid / 32), L, p.y,
                            p.sch.token_row, p.router_weights, p.d.Is > 0 ? p.ys : nullptr, p.out, p.d.T, p.d.K,
                            p.d.H, TicketTokens(p.c_tail, p.d.T), kStageCombine, phases);
    return;
  }
  const int ct = p.combine_tokens, ntasks = ceil_div(p.d.T, ct);
  for (;;) {
    if (tid == 0) slot[0] = atomicAdd(p.c_tail, 1);
    barrier();
    const int task = slot[0];
    barrier();
    if (task >= ntasks) return;
    combine_tokens<true>(p.y, p.sch.token_row, p.router_weights, p.d.Is > 0 ? p.ys : nullptr, p.out, task * ct,
                         min(ct, p.d.T - task * ct), p.d.K, p.d.H, tid, nthreads);
  }
}

__device__ void forward_comm(const ForwardParams& p, const FwdPlan& plan, GemmSmem& s, bool with_tail) {
  if (!p.pull) {  // pull: the compute CTAs gather rows
    BulkRowsSmem& b = bulk_rows_init(s);
    uint32_t phases = 0;
    for (int m = blockIdx.x; m < plan.mt; m += p.n_comm) {
      // written and visible to the gate/up tiles' TMA reads when it returns
      if (!bulk_dispatch_rows(p.sync, b, phases, p.x, p.sch.row_token, nullptr, p.xp, m * kBM, kBM, p.d.H,
                              kStageDispatch, m))
        return;
      if (threadIdx.x == 0) signal_add(&p.c_dispatched[m], 1);
    }
    bulk_rows_release(b);
  }
  if (with_tail) forward_tail(p, plan, threadIdx.x, kThreads, s, [] { __syncthreads(); });
}

template <bool kTimeline>  // the recording instantiation (moe/persistent.cuh)
__global__ void __launch_bounds__(kThreads, 1) forward_kernel(const __grid_constant__ ForwardParams p) {
#if CALICO_MK_SM90
  extern __shared__ uint8_t smem_raw[];
  GemmSmem& s = gemm_smem(smem_raw);
  const FwdPlan plan(p);
  clock_mark(p.sync, 0);
  run_persistent<kTimeline>(
      p.sync, p.n_comm, s, plan, p.c_task, p.dynamic_walk != 0, [&](bool with_tail) { forward_comm(p, plan, s, with_tail); },
      [&](PipeState& ps, const FwdTask& t, int id) { return produce(p, s, ps, t, id, plan); },
      [&](PipeState& ps, DeferredRelease& release, const FwdTask& t, int id, int ctid) {
        return (t.kind == kSharedGateUp || t.kind == kRoutedGateUp) ? consume_gateup(p, s, ps, release, t, id, ctid)
                                                                    : consume_down(p, s, ps, release, t, id, ctid);
      },
      [&](int ctid) { forward_tail(p, plan, ctid, kConsumerThreads, s, [] { consumer_barrier(); }); });
  clock_mark(p.sync, 1);
#else
  __trap();  // not an sm_90a build: launch_forward refuses other devices first
#endif
}

}  // namespace

size_t gemm_smem_bytes() { return sizeof(GemmSmem) + 1024; }

namespace {
__global__ void silu_table_kernel(float2* pairs, float* silu, float clamp_limit) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < kSiluTableLimit) {
    const float g = bf16_to_f32(static_cast<uint16_t>(i));
    pairs[i] = make_float2(calico_silu(g), calico_silu_grad(g));
    silu[i] = calico_silu(g);
  } else if (i == kSiluTableLimit) {
    pairs[i] = make_float2(calico_silu(clamp_limit), 0.0f);  // .y never read: d_g of a cut value is 0
    silu[i] = calico_silu(clamp_limit);
  }
}
}  // namespace

void build_silu_tables(float2* pairs, float* silu, float clamp_limit, cudaStream_t stream) {
  silu_table_kernel<<<ceil_div(kSiluTableSize, 256), 256, 0, stream>>>(pairs, silu, clamp_limit);
}

void launch_forward(const ForwardParams& p, int grid, cudaStream_t stream) {
  static bool configured = false;
  if (!configured) {
    for (auto* kernel : {forward_kernel<false>, forward_kernel<true>})
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(gemm_smem_bytes()));
    configured = true;
  }
  auto* const kernel = p.sync.timeline != nullptr ? forward_kernel<true> : forward_kernel<false>;
  kernel<<<grid, kThreads, gemm_smem_bytes(), stream>>>(p);
}

}  // namespace calico::gpu::mk
