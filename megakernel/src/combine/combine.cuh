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

// Output chunks (16 bytes) per thread and pass: the K row loads of all of them go out together, one memory
// round trip per pass (with one chunk a thread had K = 8 loads in flight and the combine was latency bound).
constexpr int kCombineChunks = 2;

// Tokens [t0, t0 + nt), H / 8 chunks per token, chunks spread over nthreads threads (tid: this one). Host and
// device: tests/megakernel/test_combine_tokens.cpp runs every thread's share on the host against the contract.
template <bool kWeighted>
CALICO_HD void combine_tokens(const uint16_t* rows, const int* __restrict__ token_row,
                                               const float* __restrict__ weights, const uint16_t* shared,
                                               uint16_t* __restrict__ out, int t0, int nt, int K, int H, int tid,
                                               int nthreads) {
  const int vpr = H / 8, n = nt * vpr;
  for (int i0 = tid; i0 < n; i0 += kCombineChunks * nthreads) {
    int t[kCombineChunks], c[kCombineChunks];
    bool real[kCombineChunks];
#pragma unroll
    for (int q = 0; q < kCombineChunks; ++q) {
      const int i = i0 + q * nthreads;
      real[q] = i < n;
      const int ii = real[q] ? i : i0;  // a chunk past the end repeats chunk i0's loads and stores nothing
      t[q] = t0 + ii / vpr, c[q] = (ii % vpr) * 8;
    }
    float acc[kCombineChunks][8];
#pragma unroll
    for (int q = 0; q < kCombineChunks; ++q) {
      if (shared) {
        const Vec8 s = *reinterpret_cast<const Vec8*>(shared + static_cast<int64_t>(t[q]) * H + c[q]);
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[q][j] = bf16_to_f32(s.v[j]);
      } else {
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[q][j] = 0.0f;
      }
    }
#pragma unroll 8
    for (int k = 0; k < K; ++k) {  // unrolled: the K row loads of every chunk are independent and go out together
#pragma unroll
      for (int q = 0; q < kCombineChunks; ++q) {
        const int row = token_row[t[q] * K + k];
        const Vec8 v = *reinterpret_cast<const Vec8*>(rows + static_cast<int64_t>(row) * H + c[q]);
        if constexpr (kWeighted) {
          const float w = weights[t[q] * K + k];
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[q][j] = f32_fma(w, bf16_to_f32(v.v[j]), acc[q][j]);
        } else {
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[q][j] = f32_add(acc[q][j], bf16_to_f32(v.v[j]));
        }
      }
    }
#pragma unroll
    for (int q = 0; q < kCombineChunks; ++q) {
      if (!real[q]) continue;
      Vec8 o;
#pragma unroll
      for (int j = 0; j < 8; ++j) o.v[j] = f32_to_bf16(acc[q][j]);
      *reinterpret_cast<Vec8*>(out + static_cast<int64_t>(t[q]) * H + c[q]) = o;
    }
  }
}

}  // namespace calico::gpu::mk
