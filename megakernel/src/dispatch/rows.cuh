// Data-movement tasks of the megakernel's communication CTAs: the dispatch of token rows into the canonical
// expert-major order (forward: x; backward: d_y = bf16(w_k * d_out)) and the router-weight gradient.
// With R ranks the destination rows live in the owner rank's buffer, reached through the peer table; at
// R = 1 that is the local buffer. 16-byte vectors, coalesced along the row; H % 8 == 0 (checked on the host).
#pragma once

#include <cstdint>

#include "calico/numerics.h"

namespace calico::gpu::mk {

struct alignas(16) Vec8 {
  uint16_t v[8];
};

// Rows [row0, row0 + nrows) of `dst` (H columns) get x[row_token[row]], or zeros for padding rows.
__device__ __forceinline__ void dispatch_rows(const uint16_t* __restrict__ x, const int* __restrict__ row_token,
                                              uint16_t* __restrict__ dst, int row0, int nrows, int H, int tid,
                                              int nthreads) {
  const int vpr = H / 8;
  for (int i = tid; i < nrows * vpr; i += nthreads) {
    const int r = row0 + i / vpr, c = (i % vpr) * 8;
    const int t = row_token[r];
    Vec8 v = {};
    if (t >= 0) v = *reinterpret_cast<const Vec8*>(x + static_cast<int64_t>(t) * H + c);
    *reinterpret_cast<Vec8*>(dst + static_cast<int64_t>(r) * H + c) = v;
  }
}

// d_y rows: bf16(w_k * d_out[t, c]) (one fp32 multiply, calico/reference.h), zeros for padding rows.
__device__ __forceinline__ void dispatch_dy_rows(const uint16_t* __restrict__ d_out, const int* __restrict__ row_token,
                                                 const float* __restrict__ row_weight, uint16_t* __restrict__ dst,
                                                 int row0, int nrows, int H, int tid, int nthreads) {
  const int vpr = H / 8;
  for (int i = tid; i < nrows * vpr; i += nthreads) {
    const int r = row0 + i / vpr, c = (i % vpr) * 8;
    const int t = row_token[r];
    Vec8 v = {};
    if (t >= 0) {
      const float w = row_weight[r];
      const Vec8 d = *reinterpret_cast<const Vec8*>(d_out + static_cast<int64_t>(t) * H + c);
#pragma unroll
      for (int j = 0; j < 8; ++j) v.v[j] = f32_to_bf16(__fmul_rn(w, bf16_to_f32(d.v[j])));
    }
    *reinterpret_cast<Vec8*>(dst + static_cast<int64_t>(r) * H + c) = v;
  }
}

// d_router_weights[p] for pairs p = t*K + k in [p0, p0 + n): one thread per pair, the fp32 chain over
// c = 0..H-1 ascending: acc = fmaf(d_out[t, c], y_k[c], acc) (calico/reference.h).
__device__ __forceinline__ void router_grad_pairs(const uint16_t* __restrict__ d_out, const uint16_t* __restrict__ y,
                                                  const int* __restrict__ token_row, float* __restrict__ d_rw,
                                                  int p0, int n, int K, int H, int tid, int nthreads) {
  for (int i = tid; i < n; i += nthreads) {
    const int p = p0 + i, t = p / K;
    const uint16_t* a = d_out + static_cast<int64_t>(t) * H;
    const uint16_t* b = y + static_cast<int64_t>(token_row[p]) * H;
    float acc = 0.0f;
    for (int c = 0; c < H; c += 8) {
      const Vec8 va = *reinterpret_cast<const Vec8*>(a + c), vb = *reinterpret_cast<const Vec8*>(b + c);
#pragma unroll
      for (int j = 0; j < 8; ++j) acc = f32_fma(bf16_to_f32(va.v[j]), bf16_to_f32(vb.v[j]), acc);
    }
    d_rw[p] = acc;
  }
}

}  // namespace calico::gpu::mk
