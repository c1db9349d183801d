// Row helpers of the side tasks: 16-byte vectors of bf16 and the router-weight gradient (the push dispatch
// moves rows with bulk copies: dispatch/bulk_rows.cuh). H % 8 == 0 (checked on the host).
#pragma once

#include <cstdint>

#include "calico/numerics.h"

namespace calico::gpu::mk {

struct alignas(16) Vec8 {
  uint16_t v[8];
};

constexpr int kChainDepth = 4;  // the router gradient's look-ahead (two rows per thread)

// d_router_weights[p] for pairs p = t*K + k in [p0, p0 + n): one thread per pair, the fp32 chain over
// c = 0..H-1 ascending: acc = fmaf(d_out[t, c], y_k[c], acc) (calico/reference.h). The loads of the next
// kChainDepth vectors are issued before the chain consumes them.
__device__ __forceinline__ void router_grad_pairs(const uint16_t* __restrict__ d_out, const uint16_t* __restrict__ y,
                                                  const int* __restrict__ token_row, float* __restrict__ d_rw,
                                                  int p0, int n, int K, int H, int tid, int nthreads) {
  for (int i = tid; i < n; i += nthreads) {
    const int p = p0 + i, t = p / K;
    const uint16_t* a = d_out + static_cast<int64_t>(t) * H;
    const uint16_t* b = y + static_cast<int64_t>(token_row[p]) * H;
    float acc = 0.0f;
    int c = 0;
    for (; c + 8 * kChainDepth <= H; c += 8 * kChainDepth) {
      Vec8 va[kChainDepth], vb[kChainDepth];
#pragma unroll
      for (int u = 0; u < kChainDepth; ++u) {
        va[u] = *reinterpret_cast<const Vec8*>(a + c + 8 * u);
        vb[u] = *reinterpret_cast<const Vec8*>(b + c + 8 * u);
      }
#pragma unroll
      for (int u = 0; u < kChainDepth; ++u)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc = f32_fma(bf16_to_f32(va[u].v[j]), bf16_to_f32(vb[u].v[j]), acc);
    }
    for (; c < H; c += 8) {
      const Vec8 va = *reinterpret_cast<const Vec8*>(a + c), vb = *reinterpret_cast<const Vec8*>(b + c);
#pragma unroll
      for (int j = 0; j < 8; ++j) acc = f32_fma(bf16_to_f32(va.v[j]), bf16_to_f32(vb.v[j]), acc);
    }
    d_rw[p] = acc;
  }
}

}  // namespace calico::gpu::mk
