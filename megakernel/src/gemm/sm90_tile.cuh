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

template <bool KMajor>
using SwizzleAtom = std::conditional_t<KMajor, cute::GMMA::Layout_K_SW128_Atom<bf16_t>,
                                       cute::GMMA::Layout_MN_SW128_Atom<bf16_t>>;
// (BMN, BK, stage) operand tile in shared memory.
template <int BMN, bool KMajor>
using SmemLayout = decltype(cute::tile_to_shape(SwizzleAtom<KMajor>{},
                                                cute::Shape<cute::Int<BMN>, cute::Int<kBK>, cute::Int<kStages>>{}));

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

// Shared memory of a compute CTA: A stages (16 KB each), B stages (32 KB each: one 256-row tile or a gate
// half and an up half of 128 rows), the ring's barriers.
struct GemmSmem {
  alignas(1024) bf16_t a[kStages][kBM * kBK];
  alignas(1024) bf16_t b[kStages][256 * kBK];
  alignas(8) uint64_t full[kStages];
  alignas(8) uint64_t empty[kStages];
  int task_slot[4];
};

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

__device__ __forceinline__ void pipeline_init(GemmSmem& s) {
  for (int i = 0; i < kStages; ++i) {
    mbar_init(&s.full[i], 1);   // the producer's arrive.expect_tx
    mbar_init(&s.empty[i], 2);  // one arrive per consumer warpgroup
  }
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

// Producer side of one tile: for each k-tile, wait for a free stage, expect the bytes, issue the loads
// (`issue(kt, stage, bar)`). False when a wait failed (the launch is aborting).
template <class Issue>
__device__ __forceinline__ bool produce_tile(const SyncContext& sc, GemmSmem& s, PipeState& ps, int k_tiles,
                                             uint32_t stage_bytes, int task, Issue&& issue) {
  for (int kt = 0; kt < k_tiles; ++kt) {
    if (!mbar_wait(sc, &s.empty[ps.stage], ps.phase ^ 1u, kStagePipelineEmpty, task, kCounterMbarEmpty, ps.stage,
                   /*full_warp=*/false))
      return false;
    mbar_arrive_expect_tx(&s.full[ps.stage], stage_bytes);
    issue(kt, ps.stage, &s.full[ps.stage]);
    ps.advance();
  }
  return true;
}

// Consumer side of one tile's K loop: `mma_step(stage, kb)` issues the k16 step kb (0..3) of the stage;
// `fence_acc()` fences the accumulator registers. Every k-tile issues all four steps (a uniform path keeps
// the wgmma stream unserialised): the steps of the last k-tile past the chain's end multiply exact-zero rows
// (padding rows are written as +0, rows past a tensor's end are TMA zero fill), and a step whose products are
// all zero returns its accumulator unchanged (calico/reference.h, NOTE on padding: only -0 would become +0,
// and no accumulator here is -0 after the chain's first real step; an empty chain issues no step at all).
template <class FenceAcc, class MmaStep>
__device__ __forceinline__ bool consume_tile(const SyncContext& sc, GemmSmem& s, PipeState& ps, int k_tiles,
                                             int task, FenceAcc&& fence_acc, MmaStep&& mma_step) {
  using namespace cute;
  const bool leader = (threadIdx.x % 128) == 0;
  // The four k16 steps of a k-tile go out as one batch and complete before the stage is released. NOTE:
  // keeping a batch in flight across the next (bounded, hence branchy) barrier wait makes ptxas serialise
  // every wgmma (C7511/C7518, seen in the SASS as a DEPBAR after each HGMMA); ending each batch here does not.
  const long long c0 = clock64();
  for (int kt = 0; kt < k_tiles; ++kt) {
    if (!mbar_wait(sc, &s.full[ps.stage], ps.phase, kStagePipelineFull, task, kCounterMbarFull, ps.stage))
      return false;
    fence_acc();
    warpgroup_arrive();
#pragma unroll
    for (int kb = 0; kb < kBK / 16; ++kb) mma_step(ps.stage, kb);
    warpgroup_commit_batch();
    warpgroup_wait<0>();
    fence_acc();
    mbar_arrive_if(&s.empty[ps.stage], leader);
    ps.advance();
  }
  if (sc.profile != nullptr && threadIdx.x == 128) profile_add(sc, kProfMainloop, clock64() - c0);
  return true;
}

// Barrier among the 256 consumer threads (named barrier 1): orders their epilogue stores before a signal.
__device__ __forceinline__ void consumer_barrier() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(kConsumerThreads) : "memory");
}

}  // namespace calico::gpu::mk
