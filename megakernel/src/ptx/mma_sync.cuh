// Inline-PTX wrapper for the warp-level MMA the probe checks: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// (sm_80 and later, so it compiles for every target in CMAKE_CUDA_ARCHITECTURES).
//
// Fragment layout (PTX ISA, "Matrix Fragments for mma.m16n8k16"), with g = lane / 4 and t = lane % 4:
//   A (16x16, row-major) a[0]: (g, 2t..2t+1)  a[1]: (g+8, 2t..)  a[2]: (g, 2t+8..)  a[3]: (g+8, 2t+8..)
//   B (16x8, k x n)      b[0]: (k = 2t..2t+1, n = g)             b[1]: (k = 2t+8.., n = g)
//   C, D (16x8 f32)      d[0], d[1]: (g, 2t), (g, 2t+1)          d[2], d[3]: (g+8, 2t), (g+8, 2t+1)
#pragma once

#include <cstdint>

namespace calico::gpu::ptx {

__device__ __forceinline__ void mma_sync_m16n8k16_bf16_f32(float (&d)[4], const uint32_t (&a)[4],
                                                           const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

}  // namespace calico::gpu::ptx
