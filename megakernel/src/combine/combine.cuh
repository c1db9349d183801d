// The combine tasks (home rank): per token and column, the fixed-order reductions of calico/reference.h.
//   forward : acc = y_s (or +0); for k = 0..K-1: acc = fmaf(w_k, y_k, acc); out = bf16(acc)
//   backward: acc = d_x_s (or +0); for k = 0..K-1: acc = acc + d_x_k;        d_x = bf16(acc)
// Every (token, column) is one thread's sequential chain: no atomics, no split. NOTE: rows and shared are
// written earlier in the same launch by other CTAs: no __restrict__/const-cache loads on them.
#pragma once

#include <cstdint>

#include "calico/numerics.h"

namespace calico::gpu::mk {

struct alignas(16) Vec8 {  // 16 bytes of bf16 (H % 8 == 0, checked on the host)
  uint16_t v[8];
};

template <bool kWeighted>
__device__ __forceinline__ void combine_tokens(const uint16_t* rows, const int* __restrict__ token_row,
                                               const float* __restrict__ weights, const uint16_t* shared,
                                               uint16_t* __restrict__ out, int t0, int nt, int K, int H, int tid,
                                               int nthreads) {
  const int vpr = H / 8;
  for (int i = tid; i < nt * vpr; i += nthreads) {
    const int t = t0 + i / vpr, c = (i % vpr) * 8;
    float acc[8];
    if (shared) {
      const Vec8 s = *reinterpret_cast<const Vec8*>(shared + static_cast<int64_t>(t) * H + c);
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[j] = bf16_to_f32(s.v[j]);
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[j] = 0.0f;
    }
#pragma unroll 8
    for (int k = 0; k < K; ++k) {  // unrolled: the K row loads are independent and go out together (K = 8 in
                                   // the presets: one memory round trip per output chunk)
      const int row = token_row[t * K + k];
      const Vec8 v = *reinterpret_cast<const Vec8*>(rows + static_cast<int64_t>(row) * H + c);
      if constexpr (kWeighted) {
        const float w = weights[t * K + k];
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[j] = f32_fma(w, bf16_to_f32(v.v[j]), acc[j]);
      } else {
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[j] = __fadd_rn(acc[j], bf16_to_f32(v.v[j]));
      }
    }
    Vec8 o;
#pragma unroll
    for (int j = 0; j < 8; ++j) o.v[j] = f32_to_bf16(acc[j]);
    *reinterpret_cast<Vec8*>(out + static_cast<int64_t>(t) * H + c) = o;
  }
}

}  // namespace calico::gpu::mk
