// Negative control of the megakernel's pipelined-wgmma check (tests/megakernel/CMakeLists.txt): the epilogue a
// called function (__noinline__) that reads the accumulators, the shape of the bug the check missed until
// 2026-12-04 (ptxas outlined the backward's d_h epilogue in the accumulate-mode kernel and serialised its every
// wgmma; info C7520 there, C7514 here: the check matches the message, not one number). This file must draw
// "wgmma.mma_async instructions are serialized"; forward.cu and backward.cu must not. Compiled only, never run.
#include "wgmma_chain.cuh"

using namespace cute;

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
  pipelined_chain(mma, tA, tB, acc, k_tiles);
  epilogue(acc, out);
#endif
}
