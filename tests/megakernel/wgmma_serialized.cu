// Negative control of the megakernel's pipelined-wgmma check (tests/megakernel/CMakeLists.txt): accumulators
// defined on two paths (cleared, or loaded) before a chain that keeps one wgmma batch in flight, the pattern
// that made ptxas serialise every wgmma of the backward kernel (info C7515: one DEPBAR after each HGMMA).
// This file must draw that message; forward.cu and backward.cu must not. Compiled only, never run.
#include "wgmma_chain.cuh"

using namespace cute;

__global__ void two_definitions(const float* carry, float* out, int k_tiles, int load) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __shared__ alignas(1024) bfloat16_t a[64 * 64], b[256 * 64];
  Mma mma;
  auto thr = mma.get_thread_slice(threadIdx.x);
  Tensor tA = thr.make_fragment_A(thr.partition_A(make_tensor(make_smem_ptr(a), SmemA{})));
  Tensor tB = thr.make_fragment_B(thr.partition_B(make_tensor(make_smem_ptr(b), SmemB{})));
  Tensor acc = partition_fragment_C(mma, Shape<_64, _256>{});
  if (load) {
    for (int i = 0; i < size(acc); ++i) acc(i) = carry[threadIdx.x * size(acc) + i];
  } else {
    clear(acc);
  }
  pipelined_chain(mma, tA, tB, acc, k_tiles);
  for (int i = 0; i < size(acc); ++i) out[threadIdx.x * size(acc) + i] = acc(i);
#endif
}
