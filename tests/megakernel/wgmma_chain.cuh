// Shared by the negative controls of the pipelined-wgmma check (wgmma_serialized.cu, wgmma_outlined_epilogue.cu):
// one warpgroup's 64 x 256 tile and its K loop as the megakernel runs it, one wgmma batch of four k16 steps
// left in flight while the next is issued. Compiled only, never run.
#pragma once
#include <cute/tensor.hpp>
#include <cute/atom/mma_atom.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>

using Mma = decltype(cute::make_tiled_mma(
    cute::SM90_64x256x16_F32BF16BF16_SS<cute::GMMA::Major::K, cute::GMMA::Major::K>{}));
using SmemA = decltype(cute::tile_to_shape(cute::GMMA::Layout_K_SW128_Atom<cute::bfloat16_t>{}, cute::Shape<cute::_64, cute::_64>{}));
using SmemB = decltype(cute::tile_to_shape(cute::GMMA::Layout_K_SW128_Atom<cute::bfloat16_t>{}, cute::Shape<cute::_256, cute::_64>{}));

template <class TA, class TB, class Acc>
__device__ __forceinline__ void pipelined_chain(const Mma& mma, TA& tA, TB& tB, Acc& acc, int k_tiles) {
  using namespace cute;
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
}
