// The combine tasks (home rank): per token and column, the fixed-order reductions of calico/reference.h.
//   forward : acc = y_s (or +0); for k = 0..K-1: acc = fmaf(w_k, y_k, acc); out = bf16(acc)
//   backward: acc = d_x_s (or +0); for k = 0..K-1: acc = acc + d_x_k;        d_x = bf16(acc)
// Every (token, column) is one thread's sequential chain: no atomics, no split. NOTE: rows and shared are
// written earlier in the same launch by other CTAs: no __restrict__/const-cache loads on them.
#pragma once

#include <cstdint>

#include "calico/numerics.h"
#include "dispatch/rows.cuh"

namespace calico::gpu::mk {

// NOTE: two output chunks per thread and step, so 2 x K row loads are in flight (K = 8 in the presets: the
// loads of one step go out together before its chains); the combine is memory-latency bound.
template <bool kWeighted>
__device__ __forceinline__ void combine_tokens(const uint16_t* rows, const int* __restrict__ token_row,
                                               const float* __restrict__ weights, const uint16_t* shared,
                                               uint16_t* __restrict__ out, int t0, int nt, int K, int H, int tid,
                                               int nthreads) {
  const int vpr = H / 8, total = nt * vpr;
  for (int base = tid; base < total; base += 2 * nthreads) {
    int t[2], c[2];
    bool in[2];
    float acc[2][8];
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      const int i = base + q * nthreads;
      in[q] = i < total;
      t[q] = t0 + (in[q] ? i : base) / vpr;  // an item past the end repeats the first (never stored)
      c[q] = ((in[q] ? i : base) % vpr) * 8;
      if (shared) {
        const Vec8 v = *reinterpret_cast<const Vec8*>(shared + static_cast<int64_t>(t[q]) * H + c[q]);
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[q][j] = bf16_to_f32(v.v[j]);
      } else {
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[q][j] = 0.0f;
      }
    }
#pragma unroll 8
    for (int k = 0; k < K; ++k) {
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        const int row = token_row[t[q] * K + k];
        const Vec8 v = *reinterpret_cast<const Vec8*>(rows + static_cast<int64_t>(row) * H + c[q]);
        if constexpr (kWeighted) {
          const float w = weights[t[q] * K + k];
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[q][j] = f32_fma(w, bf16_to_f32(v.v[j]), acc[q][j]);
        } else {
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[q][j] = __fadd_rn(acc[q][j], bf16_to_f32(v.v[j]));
        }
      }
    }
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      if (!in[q]) continue;
      Vec8 o;
#pragma unroll
      for (int j = 0; j < 8; ++j) o.v[j] = f32_to_bf16(acc[q][j]);
      *reinterpret_cast<Vec8*>(out + static_cast<int64_t>(t[q]) * H + c[q]) = o;
    }
  }
}

}  // namespace calico::gpu::mk
