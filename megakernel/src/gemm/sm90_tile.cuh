// The Hopper GEMM building block of the megakernel: one output tile at a time, TMA into 128-byte-swizzled
// shared memory, a kStages-deep mbarrier ring, wgmma issued by two consumer warpgroups (64 rows each), one
// producer thread in a third warpgroup. CuTe (CUTLASS 4.2 headers) supplies the layouts, the TMA atoms and
// the GMMA descriptors; the K loop and its order are ours.
//
// NOTE (the numerical contract, DESIGN 2.2): every output element is one fp32 chain along K. The consumer
// issues the k16 wgmma steps of k-tile 0, 1, 2, ... in ascending order on the same accumulator registers,
// which start at +0 (or at the carried-in fp32 value for weight gradients) with scale-d = 1: exactly
// acc = MMA(a[k], b[k], acc) of the model. No split-K, no reordering, no atomics. Zero-filled columns past K
// (TMA's out-of-bounds fill, zero padding rows) add zero terms, which the model leaves without effect; see
// consume_tile for the steps past a chain's end.
#pragma once

#include <cute/tensor.hpp>  // NOTE: first; the atom headers below assume it
#include <cute/atom/copy_atom.hpp>
#include <cute/atom/copy_traits_sm90_tma.hpp>
#include <cute/atom/mma_atom.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cutlass/arch/reg_reconfig.h>

#include "gemm/pipeline_rules.h"
#include "sync/bounded_wait.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define CALICO_MK_SM90 1
#else
#define CALICO_MK_SM90 0
#endif

namespace calico::gpu::mk {

using bf16_t = cute::bfloat16_t;
constexpr int kBM = 128;     // rows of an output tile (two consumer warpgroups of 64)
constexpr int kBK = 64;      // K of one pipeline stage: four k16 wgmma steps (128 bytes of bf16: the swizzle)
constexpr int kStages = 4;   // ring depth: 4 x 48 KB of the 227 KB of shared memory
constexpr int kThreads = 384;             // producer warpgroup + 2 consumer warpgroups
constexpr int kConsumerThreads = 256;
constexpr int kProducerThreads = 128;

template <bool KMajor>
using SwizzleAtom = std::conditional_t<KMajor, cute::GMMA::Layout_K_SW128_Atom<bf16_t>,
                                       cute::GMMA::Layout_MN_SW128_Atom<bf16_t>>;
// (BMN, BK, stage) operand tile in shared memory. NOTE: an MN-major tile repeats its 64 x 8 swizzle atom along
// K first (as CUTLASS's SM90 collectives do), so each 64-wide MN strip of a stage is one contiguous 8 KB block
// and TMA fills it with one 64 x 64 box; repeating along MN first made every box 64 x 8 (1 KB): 48 TMA
// instructions per weight-gradient k-tile instead of 6. The wgmma read the same values either way (the
// descriptors follow the layout), so no bit changes.
template <bool KMajor>
using AtomOrder = std::conditional_t<KMajor, cute::Step<cute::_1, cute::_2, cute::_3>, cute::Step<cute::_2, cute::_1, cute::_3>>;
template <int BMN, bool KMajor>
using SmemLayout = decltype(cute::tile_to_shape(SwizzleAtom<KMajor>{},
                                                cute::Shape<cute::Int<BMN>, cute::Int<kBK>, cute::Int<kStages>>{},
                                                AtomOrder<KMajor>{}));

// Global operands are 3-D (MN, K, L): L is the expert for weights (so a tile never reads a neighbouring
// expert: out-of-bounds rows and columns are zero-filled) and 1 for activations.
using GmemShape = cute::Shape<int, int, int>;
using StrideKMajor = cute::Stride<int64_t, cute::_1, int64_t>;
using StrideMNMajor = cute::Stride<cute::_1, int64_t, int64_t>;
template <bool KMajor>
using GmemStride = std::conditional_t<KMajor, StrideKMajor, StrideMNMajor>;

template <int BMN, bool KMajor>
using TmaAtom = decltype(cute::make_tma_atom(
    cute::SM90_TMA_LOAD{},
    cute::make_tensor(cute::make_gmem_ptr(static_cast<const bf16_t*>(nullptr)), GmemShape{}, GmemStride<KMajor>{}),
    SmemLayout<BMN, KMajor>{}(cute::_, cute::_, 0), cute::Shape<cute::Int<BMN>, cute::Int<kBK>>{}));

// A TMA-loadable operand: the atom (descriptor inside) and the global shape it was built for.
template <int BMN, bool KMajor>
struct TmaOperand {
  TmaAtom<BMN, KMajor> atom;
  int mn = 0, k = 0, l = 0;
  static constexpr int kTileBytes = BMN * kBK * 2;
};
using OpK128 = TmaOperand<128, true>;    // K-major 128-row tile (activations as A, gate/up weights as B)
using OpK256 = TmaOperand<256, true>;    // K-major 256-row tile (down weights as B)
using OpMN128 = TmaOperand<128, false>;  // MN-major 128 tile (wgrad A)
using OpMN256 = TmaOperand<256, false>;  // MN-major 256 tile (dgrad B, wgrad B)

constexpr int kTaskRing = 8;  // entries of the dynamic walk's task ring (moe/persistent.cuh)
constexpr int kRingInts = 8;  // per entry: the task index and the decoded task

// Epilogue output staging (gemm/tma_store.cuh): per consumer warpgroup, kOutSlots strips of 64 rows x 128 B.
constexpr int kOutSlots = 2;
constexpr int kStripBytes = 64 * 128;

// Shared memory of a compute CTA: A stages (16 KB each), B stages (32 KB each: one 256-row tile or a gate
// half and an up half of 128 rows), the epilogues' output strips (32 KB), the ring's barriers. 225 KB of
// the 227 KB a CTA may have.
struct GemmSmem {
  alignas(1024) bf16_t a[kStages][kBM * kBK];
  alignas(1024) bf16_t b[kStages][256 * kBK];
  alignas(1024) uint8_t out[2 * kOutSlots][kStripBytes];
  alignas(8) uint64_t full[kStages];
  alignas(8) uint64_t empty[kStages];
  int next_task;  // the producer warpgroup's current ticket (dynamic walk)
  int task_slot[4];
  // The last weight-gradient task warpgroup 1 may start (moe/backward.cu, consume_wgrad); -1 before any.
  int wgrad_go;
  int ring[kTaskRing][kRingInts];  // the dynamic walk's tasks, index and decoded (moe/persistent.cuh)
  // The backward's combine tasks: each consumer warp's slot barriers (combine/bulk_combine.cuh), set up once
  // with the pipeline's and kept across tasks (the slots themselves live in the stages the task holds).
  alignas(8) uint64_t combine_bar[kConsumerThreads / 32][4];
  // Consumer thread 0's start of the running task's timeline record (moe/persistent.cuh): kept here, not in
  // registers, so the record costs the task body nothing when the timeline is off.
  unsigned long long timeline_task_start;
};
static_assert(sizeof(GemmSmem) + 1024 <= 227 * 1024, "a CTA's shared memory (with the alignment slack)");
constexpr int kNoTask = -1;

// The GemmSmem inside a launch's dynamic shared memory. NOTE: the 128-byte swizzle needs 1024-byte aligned
// stages; launches ask for sizeof(GemmSmem) + 1 KB of slack.
__device__ __forceinline__ GemmSmem& gemm_smem(uint8_t* raw) {
  const uint32_t addr = smem_addr(raw);
  return *reinterpret_cast<GemmSmem*>(raw + ((1024 - (addr & 1023)) & 1023));
}

struct PipeState {
  int stage = 0;
  uint32_t phase = 0;
  __device__ __forceinline__ void advance() {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1u;
    }
  }
};

// Arrivals on a stage's empty barrier: by default lane 0 of each consumer warp, once the warp has read the
// stage (after __syncwarp where the reads are the threads' own loads). CALICO_MK_EMPTY_PER_THREAD=1 (a debug
// build, CMake option of the same name): every consumer thread arrives for its own reads, an order
// compute-sanitizer's racecheck can follow (it does not follow a __syncwarp and one lane's release:
// MEGAKERNEL.md, NOTE (racecheck)).
#ifndef CALICO_MK_EMPTY_PER_THREAD
#define CALICO_MK_EMPTY_PER_THREAD 0
#endif
constexpr int kEmptyArrivals = CALICO_MK_EMPTY_PER_THREAD ? kConsumerThreads : kConsumerThreads / 32;
// This consumer thread's part in releasing `stage` (when: false skips it; a predicate, not a branch).
__device__ __forceinline__ void release_stage(GemmSmem& s, int stage, bool when = true) {
  mbar_arrive_if(&s.empty[stage], when && (CALICO_MK_EMPTY_PER_THREAD || threadIdx.x % 32 == 0));
}

__device__ __forceinline__ void pipeline_init(GemmSmem& s) {
  for (int i = 0; i < kStages; ++i) {
    // full: producer thread 0's arrive.expect_tx (the TMA bytes) plus one arrive per producer thread once the
    // rows it gathered (if any) are in the stage.
    mbar_init(&s.full[i], 1 + kProducerThreads);
    // empty: one arrive per consumer warp (lane 0, once its own wgmma that read the stage completed and after
    // its reads of the stage's task index, moe/persistent.cuh), or per consumer thread (release_stage)
    mbar_init(&s.empty[i], kEmptyArrivals);
  }
  for (auto& warp : s.combine_bar)
    for (uint64_t& bar : warp) mbar_init(&bar, 1);
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// Shared-memory view of stage-indexed operand storage.
template <int BMN, bool KMajor>
__device__ __forceinline__ auto smem_tensor(bf16_t* base) {
  return cute::make_tensor(cute::make_smem_ptr(base), SmemLayout<BMN, KMajor>{});
}

// Issues the TMA load of k-tile `kt` of the (mn_tile, l) strip of `op` into `stage` of `smem_base`.
template <int BMN, bool KMajor>
__device__ __forceinline__ void tma_load(const TmaOperand<BMN, KMajor>& op, uint64_t* bar, bf16_t* smem_base,
                                         int stage, int mn_tile, int kt, int l) {
  using namespace cute;
  Tensor m = op.atom.get_tma_tensor(make_shape(op.mn, op.k, op.l));
  Tensor g = local_tile(m, Shape<Int<BMN>, Int<kBK>>{}, make_coord(mn_tile, _, l));  // (BMN, BK, k)
  Tensor s = smem_tensor<BMN, KMajor>(smem_base);                                    // (BMN, BK, stage)
  auto [tg, ts] = tma_partition(op.atom, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(s), group_modes<0, 2>(g));
  copy(op.atom.with(*bar), tg(_, kt), ts(_, stage));
}

// ---- cp.async: token rows gathered straight into a stage (gemm/gather.cuh) ---------------------------------
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  // src-size 0 zero-fills the 16 bytes (padding rows, columns past the tensor), like TMA's out-of-bounds fill
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem),
               "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
// This thread's generic-proxy shared-memory writes (cp.async, st.shared) become visible to the async proxy
// (wgmma reads its operands through it) before the arrive that publishes them.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}

// Producer side of one tile, run by all kProducerThreads threads (ptid): for each k-tile, wait for a free
// stage; thread 0 expects `tma_bytes` and issues the TMA loads (`issue(kt, stage, bar)`); every thread then
// copies its share of the gathered rows (`gather(kt, stage)`, cp.async) and arrives once that share has
// landed and `finish(kt, stage)` (an in-place transform of its own chunks, or nothing) is done; then
// `after(kt, stage)` may still read the published stage (the consumers only read it, and this thread
// rewrites it only kStages k-tiles later). The copies of kGatherLag k-tiles stay in flight before the oldest
// is published. False when a wait failed (the launch is aborting).
// NOTE: at most kStages - 2 (gemm/pipeline_rules.h): lag 3 deadlocked on the H200 (2026-12-01, branch
// try/gather-lag3). Why that ended as an unspecified launch failure rather than the named timeout is not
// diagnosed (a wait that times out with a gather's cp.async still in flight is the suspect).
constexpr int kGatherLag = 2;
static_assert(gather_lag_fits(kGatherLag, kStages), "a gathering producer would deadlock the ring");
template <bool kGathers, class Issue, class Gather, class Finish, class After>
__device__ __forceinline__ bool produce_tile(const SyncContext& sc, GemmSmem& s, PipeState& ps, int k_tiles,
                                             uint32_t tma_bytes, int task, int ptid, Issue&& issue,
                                             Gather&& gather, Finish&& finish, After&& after) {
  PipeState pub = ps;  // the oldest stage not yet published
  int published = 0;
  auto publish_one = [&] {
    fence_proxy_async_shared();
    mbar_arrive(&s.full[pub.stage]);
    after(published, pub.stage);
    pub.advance();
    ++published;
  };
  for (int kt = 0; kt < k_tiles; ++kt) {
    if (!mbar_wait(sc, &s.empty[ps.stage], ps.phase ^ 1u, kStagePipelineEmpty, task, kCounterMbarEmpty, ps.stage))
      return false;
    if (ptid == 0) {
      mbar_arrive_expect_tx(&s.full[ps.stage], tma_bytes);
      issue(kt, ps.stage, &s.full[ps.stage]);
    }
    if constexpr (kGathers) {
      gather(kt, ps.stage);
      cp_async_commit();
      if (kt >= kGatherLag) {
        cp_async_wait<kGatherLag>();
        finish(published, pub.stage);
        publish_one();
      }
    } else {
      mbar_arrive(&s.full[ps.stage]);
    }
    ps.advance();
  }
  if constexpr (kGathers) {
    cp_async_wait<0>();
    while (published < k_tiles) {
      finish(published, pub.stage);
      publish_one();
    }
  }
  return true;
}
// A tile whose operands all come by TMA.
template <class Issue>
__device__ __forceinline__ bool produce_tile(const SyncContext& sc, GemmSmem& s, PipeState& ps, int k_tiles,
                                             uint32_t tma_bytes, int task, int ptid, Issue&& issue) {
  return produce_tile<false>(sc, s, ps, k_tiles, tma_bytes, task, ptid, issue, [](int, int) {}, [](int, int) {},
                             [](int, int) {});
}

// Consumer side of one tile's K loop: `mma_step(stage, kb)` issues the k16 step kb (0..3) of the stage;
// `fence_acc()` fences the accumulator registers. Every k-tile issues all four steps (a uniform path keeps
// the wgmma stream unserialised): the steps of the last k-tile past the chain's end multiply exact-zero rows
// (padding rows are written as +0, rows past a tensor's end are zero fill), and a step whose products are
// all zero returns its accumulator unchanged (calico/reference.h, NOTE on padding: only -0 would become +0,
// and no accumulator here is -0 after the chain's first real step; an empty chain issues no step at all).
// One k-tile's batch of four steps stays in flight while the next one is issued (the order of the steps on
// the accumulator is unchanged: wgmma of one warpgroup complete in issue order); a stage is released once
// the batch that read it has completed.
// `after_batch(kt)`: after k-tile kt's batch is issued and the one before it completed (gemm/tma_store.cuh,
// DeferredRelease: the previous tile's releases). `wait_slot`: a second profile slot for the full waits (the
// backward's per-GEMM-kind slot), or -1.
template <class FenceAcc, class MmaStep, class AfterBatch>
__device__ __forceinline__ bool consume_tile(const SyncContext& sc, GemmSmem& s, PipeState& ps, int k_tiles,
                                             int task, FenceAcc&& fence_acc, MmaStep&& mma_step,
                                             AfterBatch&& after_batch, int wait_slot = -1) {
  using namespace cute;
  // NOTE: a failed wait does not leave the loop (the launch is aborting and every later wait returns at
  // once): an exit with a wgmma batch in flight would make ptxas serialise every wgmma (C7511/C7518).
  bool ok = true;
  int previous = -1;  // the stage read by the batch still in flight
  const long long c0 = clock64();
  long long waited = 0;  // profile only: two clock reads per k-tile, no branch near the wgmma
  for (int kt = 0; kt < k_tiles; ++kt) {
    const long long w0 = clock64();
    const bool got = mbar_wait(sc, &s.full[ps.stage], ps.phase, kStagePipelineFull, task, kCounterMbarFull, ps.stage);
    waited += clock64() - w0;
    ok = ok && got;
    fence_acc();
    warpgroup_arrive();
#pragma unroll
    for (int kb = 0; kb < kBK / 16; ++kb) mma_step(ps.stage, kb);
    warpgroup_commit_batch();
    warpgroup_wait<1>();
    fence_acc();
    release_stage(s, previous < 0 ? 0 : previous, previous >= 0);
    previous = ps.stage;
    ps.advance();
    after_batch(kt);
  }
  warpgroup_wait<0>();
  fence_acc();
  release_stage(s, previous < 0 ? 0 : previous, previous >= 0);
  if (sc.profile != nullptr && threadIdx.x == 128) {
    profile_add(sc, kProfMainloop, clock64() - c0);
    profile_add(sc, kProfKtiles, k_tiles);
    profile_add(sc, kProfFullWait, waited);
    if (wait_slot >= 0) profile_add(sc, wait_slot, waited);
  }
  return ok;
}

// A consumer warpgroup none of whose 64 rows holds a real token (a tile of at most 64 real rows: warpgroup
// 1; a tile without any: both). Its MMAs would multiply zero rows only, leaving the accumulators at the +0
// they start from, so it walks the stages without them (pass_tile_stages) and the SM's tensor cores serve the
// other warpgroup alone (a lone warpgroup runs its k-tile in about half the time of two, megakernel/PROBE.md).
// The epilogue writes +0 (or nothing) for padding rows either way, so no bit changes.
__device__ __forceinline__ bool idle_warpgroup(int ctid, int rows) { return warpgroup_rows_all_padding(ctid / 128, rows); }

// consume_tile for an idle warpgroup: the same waits and releases (each warp releases every stage once),
// no wgmma; `after_batch(kt)` as there.
template <class AfterBatch>
__device__ __forceinline__ bool pass_tile_stages(const SyncContext& sc, GemmSmem& s, PipeState& ps, int k_tiles,
                                                 int task, AfterBatch&& after_batch) {
  bool ok = true;
  for (int kt = 0; kt < k_tiles; ++kt) {
    ok = mbar_wait(sc, &s.full[ps.stage], ps.phase, kStagePipelineFull, task, kCounterMbarFull, ps.stage) && ok;
    __syncwarp();  // lane 0 releases the stage for the whole warp
    release_stage(s, ps.stage);
    ps.advance();
    after_batch(kt);
  }
  return ok;
}

// The m64n256 fp32 accumulator fragment of a consumer thread (CuTe's SM90 GMMA C layout): element i (even)
// holds columns n0 + 8 * (i / 4) + {0, 1} of row m0 + 8 * ((i / 2) % 2), (m0, n0) being element 0's. Traps
// if CuTe's layout ever says otherwise (the comparisons fold to constants when it agrees).
template <class Coord>
__device__ __forceinline__ void check_acc_fragment(const Coord& coord, int i, int r, int off) {
  using cute::get;
  if (get<0>(coord(i)) != get<0>(coord(0)) + 8 * r || get<1>(coord(i)) != get<1>(coord(0)) + off ||
      get<1>(coord(i + 1)) != get<1>(coord(i)) + 1)
    __trap();
}

// Barrier among the producer warpgroup's threads (named barrier 2) that returns whether `ok` held in all.
__device__ __forceinline__ bool producer_all(bool ok) {
  uint32_t all;
  asm volatile(
      "{\n.reg .pred p, q;\n"
      "setp.ne.b32 q, %1, 0;\n"
      "bar.red.and.pred p, 2, %2, q;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(all)
      : "r"(static_cast<int>(ok)), "n"(kProducerThreads)
      : "memory");
  return all != 0;
}

// Barrier among the 256 consumer threads (named barrier 1): orders their epilogue stores before a signal.
__device__ __forceinline__ void consumer_barrier() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(kConsumerThreads) : "memory");
}
// Barrier among one consumer warpgroup's 128 threads (named barriers 3 and 4): the weight-gradient epilogues,
// which each warpgroup runs on its own (moe/backward.cu, consume_wgrad).
__device__ __forceinline__ void warpgroup_barrier(int wg) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(3 + wg) : "memory");
}

}  // namespace calico::gpu::mk
