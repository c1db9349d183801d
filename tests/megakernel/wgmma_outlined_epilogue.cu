// Negative control of the megakernel's pipelined-wgmma check (tests/megakernel/CMakeLists.txt): the epilogue a
// called function (__noinline__) that reads the accumulators, the shape of the bug the check missed until
// 2026-12-04 (ptxas outlined the backward's d_h epilogue in the accumulate-mode kernel and serialised its every
// wgmma; info C7520 there, C7514 here: the check matches the message, not one number). This file must draw
// "wgmma.mma_async instructions are serialized"; forward.cu and backward.cu must not. Compiled only, never run.
#include <cute/tensor.hpp>
#include <cute/atom/mma_atom.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>

using namespace cute;
using Mma = decltype(make_tiled_mma(SM90_64x256x16_F32BF16BF16_SS<GMMA::Major::K, GMMA::Major::K>{}));
using SmemA = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<bfloat16_t>{}, Shape<_64, _64>{}));
using SmemB = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<bfloat16_t>{}, Shape<_256, _64>{}));

// The epilogue as a call: the accumulator passes through memory.
template <class Acc>
__device__ __noinline__ void epilogue(Acc& acc, float* out) {
  for (int i = 0; i < size(acc); ++i) out[threadIdx.x * size(acc) + i] = acc(i);
}

__global__ void outlined_epilogue(float* out, int k_tiles) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __shared__ alignas(1024) bfloat16_t a[64 * 64], b[256 * 64];
  Mma mma;
  auto thr = mma.get_thread_slice(threadIdx.x);
  Tensor tA = thr.make_fragment_A(thr.partition_A(make_tensor(make_smem_ptr(a), SmemA{})));
  Tensor tB = thr.make_fragment_B(thr.partition_B(make_tensor(make_smem_ptr(b), SmemB{})));
  Tensor acc = partition_fragment_C(mma, Shape<_64, _256>{});
  clear(acc);
  for (int kt = 0; kt < k_tiles; ++kt) {
    warpgroup_fence_operand(acc);
    warpgroup_arrive();
    for (int kb = 0; kb < 4; ++kb) cute::gemm(mma, tA(_, _, kb), tB(_, _, kb), acc);
    warpgroup_commit_batch();
    warpgroup_wait<1>();
    warpgroup_fence_operand(acc);
  }
  warpgroup_wait<0>();
  warpgroup_fence_operand(acc);
  epilogue(acc, out);
#endif
}
