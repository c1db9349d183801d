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
// with m the 128-row tile of the expert-major buffer (segments padded to 128 rows) and n the column tile.
#include <cuda_runtime.h>

#include <utility>

// The device helpers below are compiled out of the non-sm_90a passes (the kernel body is a refusal there).
#pragma nv_diag_suppress 177

#include "combine/combine.cuh"
#include "dispatch/rows.cuh"
#include "gemm/epilogue.cuh"
#include "gemm/gather.cuh"
#include "moe/params.cuh"
#include "moe/persistent.cuh"

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
    t.m = j / n_per_m;
    t.n = j % n_per_m;
    if (t.kind == kSharedGateUp || t.kind == kSharedDown) {
      t.e = -1;
      t.rows = min(kBM, p.d.T - t.m * kBM);
    } else {
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
  const int expected = sh ? plan.ngus : plan.ngu;
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
//
// Epilogue overlap: a tile's results leave the accumulator as packed bf16 (gate/up: g and u; down: y), 64
// words per thread (a PendingTile: half in registers, half in the CTA's pending area of shared memory; all 64
// in registers would spill beside the 128 accumulators). When the CTA's next task cannot wait for this tile
// (gate/up followed by gate/up, down by down), the SwiGLU and the stores run in kSlices pieces beside the
// next tile's first wgmma batches (consume_tile's `beside`), and the tile's signal follows the last piece: the
// tensor cores do not wait for them. Otherwise (the next task may wait for this tile's signal, or there is
// none) they run at once, so the walk stays deadlock-free. Bits do not depend on when: the same values reach
// the same places.
constexpr int kSlices = 8;        // pieces of an epilogue: one beside each of the next tile's first k-tiles
constexpr int kPieceWords = 8;    // packed bf16 pairs per piece and thread: 4 in registers, 4 in shared memory

// Shared memory of a forward compute CTA: the GEMM ring plus each consumer thread's shared half of its
// pending tile (piece S of thread c at pending[S][c]: a warp's 16-byte accesses are contiguous).
struct ForwardSmem {
  GemmSmem gemm;
  uint4 pending[kSlices][kConsumerThreads];
};

struct PendingTile {
  uint32_t v[kSlices * kPieceWords / 2];  // the register half: piece S's words 0..3 at v[4S..4S+3]
  FwdTask t;
  int id;
  bool active = false;
};

// The same value, opaque to the optimiser.
__device__ __forceinline__ int launder(int v) {
  asm volatile("" : "+r"(v));
  return v;
}

__device__ __forceinline__ bool is_gateup(int kind) { return kind == kSharedGateUp || kind == kRoutedGateUp; }

// This thread's (row, column) of accumulator element i, in the 128 x 256 tile.
__device__ __forceinline__ auto acc_coords(int ctid) {
  MmaDown mma;
  return mma.get_thread_slice(ctid).partition_C(make_identity_tensor(Shape<Int<kBM>, Int<kWideN>>{}));
}

// Word r (0..7) of piece S: gate/up: r < 4 the g pair q = 4S + r, r >= 4 the u pair of the same q (columns
// + 128); down: the y pair q = 8S + r. Pair q holds accumulator elements 2q (+ 64 for u) and 2q + 1.
// NOTE: in the m64n256 accumulator fragment, element i + 64 is column n + 128 of element i (the column block
// index is the slowest mode), so each thread holds the gate and the up value of the same (m, j).
// (S and r are compile-time constants after unrolling: both indices are, so no accumulator is addressed at
// run time.)
template <class Acc>
__device__ __forceinline__ uint32_t packed_word(const Acc& acc, bool gateup, int S, int r) {
  const int ig = 2 * (4 * S + (r & 3)) + (r >= 4 ? 64 : 0), id = 2 * (8 * S + r);
  const float lo = gateup ? acc(ig) : acc(id), hi = gateup ? acc(ig + 1) : acc(id + 1);
  return pack_bf16x2(f32_to_bf16(lo), f32_to_bf16(hi));
}

// The results of one finished tile into `pend` and this thread's pending area.
template <class Acc>
__device__ __forceinline__ void pack_results(const Acc& acc, ForwardSmem& fs, PendingTile& pend, const FwdTask& t,
                                             int id, int ctid) {
  const bool gateup = is_gateup(t.kind);
  if (gateup) {
    const auto coord = acc_coords(ctid);
    CUTE_UNROLL
    for (int i = 0; i < 64; i += 2)
      if (get<1>(coord(i + 64)) != get<1>(coord(i)) + kGateUpN) __trap();  // the layout assumption above
  }
  CUTE_UNROLL
  for (int S = 0; S < kSlices; ++S) {
    CUTE_UNROLL
    for (int r = 0; r < 4; ++r) pend.v[4 * S + r] = packed_word(acc, gateup, S, r);
    fs.pending[S][ctid] = make_uint4(packed_word(acc, gateup, S, 4), packed_word(acc, gateup, S, 5),
                                     packed_word(acc, gateup, S, 6), packed_word(acc, gateup, S, 7));
  }
  pend.t = t, pend.id = id, pend.active = true;
}

// Piece S of a pending tile's epilogue: SwiGLU and three stores (gate/up) or one store (down) per pair.
// NOTE: values first, then predicated stores: no divergent branch between the wgmma batches it runs beside.
template <int S>
__device__ __forceinline__ void epilogue_piece(const ForwardParams& p, const ForwardSmem& fs,
                                               const PendingTile& pend, int ctid) {
  const auto coord = acc_coords(ctid);
  const uint4 shared_half = fs.pending[S][ctid];
  const uint32_t w[kPieceWords] = {pend.v[4 * S], pend.v[4 * S + 1], pend.v[4 * S + 2], pend.v[4 * S + 3],
                                   shared_half.x, shared_half.y, shared_half.z, shared_half.w};
  // NOTE: laundered, so that the compiler cannot hoist the addresses of all pieces out of the K loop the
  // pieces run in (they would stay live in registers across it and spill).
  FwdTask t = pend.t;
  t.m = launder(t.m), t.n = launder(t.n), t.rows = launder(t.rows);
  const bool sh = is_shared(t);
  if (is_gateup(t.kind)) {
    const int I = sh ? p.d.Is : p.d.I;
    uint16_t* G = sh ? p.gs : p.g;
    uint16_t* U = sh ? p.us : p.u;
    uint16_t* Hh = sh ? p.hs : p.h;
    const Clamp clamp{p.d.has_clamp, p.d.clamp_limit};
    CUTE_UNROLL
    for (int r = 0; r < 4; ++r) {
      const int i = 2 * (4 * S + r);
      const int m = get<0>(coord(i)), j = t.n * kGateUpN + get<1>(coord(i));
      const bool real = m < t.rows, store = j < I && (real || !sh);  // routed padding rows get exact zeros
      const uint32_t g = real ? w[r] : 0u, u = real ? w[r + 4] : 0u;
      const uint32_t h = pack_bf16x2(swiglu_h(low_bf16(g), low_bf16(u), clamp), swiglu_h(high_bf16(g), high_bf16(u), clamp));
      const int64_t at = store ? static_cast<int64_t>(t.m * kBM + m) * I + j : 0;
      if (store) {
        *reinterpret_cast<uint32_t*>(G + at) = g;
        *reinterpret_cast<uint32_t*>(U + at) = u;
        *reinterpret_cast<uint32_t*>(Hh + at) = h;
      }
    }
  } else {
    const int H = p.d.H;
    uint16_t* Y = sh ? p.ys : p.y;
    CUTE_UNROLL
    for (int r = 0; r < kPieceWords; ++r) {
      const int i = 2 * (8 * S + r);
      const int m = get<0>(coord(i)), c = t.n * kWideN + get<1>(coord(i));
      if (c < H && m < t.rows) *reinterpret_cast<uint32_t*>(Y + static_cast<int64_t>(t.m * kBM + m) * H + c) = w[r];
    }
  }
}

// The stores of a pending tile are complete: release it (h is read by TMA in the down tiles: proxy fence).
__device__ __forceinline__ void release_pending(const ForwardParams& p, PendingTile& pend, int ctid) {
  const bool gateup = is_gateup(pend.t.kind);
  if (gateup) fence_proxy_async_global();
  consumer_barrier();
  if (ctid == 0 && pend.id != p.skip_signal_task) signal_add(gateup ? gateup_counter(p, pend.t) : p.c_down_total, 1);
  pend.active = false;
}

// Piece `piece` (0..kSlices-1) of the pending epilogue; the last one releases the tile. (The registers of a
// piece are chosen at compile time: a runtime index would put the pending tile in local memory.)
template <int... S>
__device__ __forceinline__ void drain_piece(const ForwardParams& p, const ForwardSmem& fs, PendingTile& pend,
                                            int piece, int ctid, std::integer_sequence<int, S...>) {
  ((piece == S ? epilogue_piece<S>(p, fs, pend, ctid) : void()), ...);
  if (piece == kSlices - 1) release_pending(p, pend, ctid);
}
__device__ __forceinline__ void drain_piece(const ForwardParams& p, const ForwardSmem& fs, PendingTile& pend,
                                            int piece, int ctid) {
  drain_piece(p, fs, pend, piece, ctid, std::make_integer_sequence<int, kSlices>{});
}

// One gate/up or down tile. `defer`: leave its epilogue pending for the next tile's K loop (see above).
__device__ __forceinline__ bool consume(const ForwardParams& p, ForwardSmem& fs, PipeState& ps, const FwdTask& t,
                                        int id, int ctid, PendingTile& pend, bool defer) {
  GemmSmem& s = fs.gemm;
  MmaDown mma;
  auto thr = mma.get_thread_slice(ctid);
  Tensor tA = thr.make_fragment_A(thr.partition_A(smem_tensor<128, true>(&s.a[0][0])));
  Tensor tB = thr.make_fragment_B(thr.partition_B(smem_tensor<256, true>(&s.b[0][0])));
  Tensor acc = partition_fragment_C(mma, Shape<Int<kBM>, Int<kWideN>>{});
  clear(acc);
  const bool gateup = is_gateup(t.kind);
  const int k_tiles = ceil_div(gateup ? p.d.H : (is_shared(t) ? p.d.Is : p.d.I), kBK);
  const bool ok = consume_tile(
      p.sync, s, ps, k_tiles, id, [&] { warpgroup_fence_operand(acc); },
      [&](int st, int kb) { cute::gemm(mma, tA(_, _, kb, st), tB(_, _, kb, st), acc); },
      [&](int kt) {
        if (pend.active && kt < kSlices) drain_piece(p, fs, pend, kt, ctid);
      });
  if (!ok) return false;
  long long lap = clock64();
  for (int piece = k_tiles; pend.active && piece < kSlices; ++piece) drain_piece(p, fs, pend, piece, ctid);  // short K
  pack_results(acc, fs, pend, t, id, ctid);
  for (int piece = 0; !defer && piece < kSlices; ++piece) drain_piece(p, fs, pend, piece, ctid);
  if (gateup) profile_lap(p.sync, kProfEpiGateUp, lap, ctid);
  profile_lap(p.sync, kProfEpilogue, lap, ctid);
  return true;
}

// ---- the combine tail, shared by every CTA once its own queue is done ------------------------------------
template <class Barrier>
__device__ void forward_tail(const ForwardParams& p, const FwdPlan& plan, int tid, int nthreads, int* slot,
                             Barrier&& barrier) {
  if (tid == 0)
    slot[1] = wait_all(p.sync, p.c_down_total, plan.total_down(), kStageCombine, -1, kCounterDownTotal, 0);
  barrier();
  if (!slot[1]) return;
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

__device__ void forward_comm(const ForwardParams& p, const FwdPlan& plan, GemmSmem& s) {
  for (int m = blockIdx.x; !p.pull && m < plan.mt; m += p.n_comm) {  // pull: the compute CTAs gather rows
    dispatch_rows(p.x, p.sch.row_token, p.xp, m * kBM, kBM, p.d.H, threadIdx.x, kThreads);
    fence_proxy_async_global();  // read by TMA in the gate/up tiles
    __syncthreads();
    if (threadIdx.x == 0) signal_add(&p.c_dispatched[m], 1);
  }
  forward_tail(p, plan, threadIdx.x, kThreads, s.task_slot, [] { __syncthreads(); });
}

__global__ void __launch_bounds__(kThreads, 1) forward_kernel(const __grid_constant__ ForwardParams p) {
#if CALICO_MK_SM90
  extern __shared__ uint8_t smem_raw[];
  ForwardSmem& fs = *reinterpret_cast<ForwardSmem*>(&gemm_smem(smem_raw));
  GemmSmem& s = fs.gemm;
  const FwdPlan plan(p);
  PendingTile pending;  // the consumers' deferred epilogue
  run_persistent(
      p.sync, p.n_comm, s, plan, [&] { forward_comm(p, plan, s); },
      [&](PipeState& ps, const FwdTask& t, int id) { return produce(p, s, ps, t, id, plan); },
      [&](PipeState& ps, const FwdTask& t, int id, int ctid) __attribute__((always_inline)) {
        // NOTE: inlined: a call around the wgmma pipeline would serialise it (ptxas C7510).
        // Defer the epilogue when the CTA's next task is of the same phase (gate/up tasks never wait for
        // gate/up tasks, down tasks never for down tasks).
        const int next = id + static_cast<int>(gridDim.x) - p.n_comm;
        const bool defer = p.overlap_epilogues && next < plan.total && (next < plan.end_rgu) == (id < plan.end_rgu);
        return consume(p, fs, ps, t, id, ctid, pending, defer);
      },
      [&](int ctid) { forward_tail(p, plan, ctid, kConsumerThreads, s.task_slot, [] { consumer_barrier(); }); });
#else
  __trap();  // not an sm_90a build: launch_forward refuses other devices first
#endif
}

}  // namespace

size_t gemm_smem_bytes() { return sizeof(GemmSmem) + 1024; }
size_t forward_smem_bytes() { return sizeof(ForwardSmem) + 1024; }

void launch_forward(const ForwardParams& p, int grid, cudaStream_t stream) {
  static bool configured = false;
  if (!configured) {
    cudaFuncSetAttribute(forward_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(forward_smem_bytes()));
    configured = true;
  }
  forward_kernel<<<grid, kThreads, forward_smem_bytes(), stream>>>(p);
}

}  // namespace calico::gpu::mk
