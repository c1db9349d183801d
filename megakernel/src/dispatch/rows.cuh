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

// NOTE: each thread keeps kCopyDepth independent 16-byte loads in flight (loads first, then stores): 384
// threads x 16 x 16 B = 96 KB per SM covers the memory latency. With 4 in flight (24 KB per SM) 16 SMs moved
// ~215 GB/s and the dispatch, not the GEMMs, set the pace of the forward (measured with calico bench --profile).
constexpr int kCopyDepth = 16;
constexpr int kChainDepth = 4;  // the router gradient's look-ahead (two rows per thread)

// Rows [row0, row0 + nrows) of `dst` (H columns) get x[row_token[row]], or zeros for padding rows.
__device__ __forceinline__ void dispatch_rows(const uint16_t* __restrict__ x, const int* __restrict__ row_token,
                                              uint16_t* __restrict__ dst, int row0, int nrows, int H, int tid,
                                              int nthreads) {
  const int vpr = H / 8, total = nrows * vpr;
  for (int base = tid; base < total; base += nthreads * kCopyDepth) {
    Vec8 v[kCopyDepth];
#pragma unroll
    for (int u = 0; u < kCopyDepth; ++u) {
      const int i = base + u * nthreads;
      v[u] = Vec8{};
      if (i < total) {
        const int t = row_token[row0 + i / vpr];
        if (t >= 0) v[u] = *reinterpret_cast<const Vec8*>(x + static_cast<int64_t>(t) * H + (i % vpr) * 8);
      }
    }
#pragma unroll
    for (int u = 0; u < kCopyDepth; ++u) {
      const int i = base + u * nthreads;
      if (i < total) *reinterpret_cast<Vec8*>(dst + static_cast<int64_t>(row0 + i / vpr) * H + (i % vpr) * 8) = v[u];
    }
  }
}

// d_y rows: bf16(w_k * d_out[t, c]) (one fp32 multiply, calico/reference.h), zeros for padding rows.
__device__ __forceinline__ void dispatch_dy_rows(const uint16_t* __restrict__ d_out, const int* __restrict__ row_token,
                                                 const float* __restrict__ row_weight, uint16_t* __restrict__ dst,
                                                 int row0, int nrows, int H, int tid, int nthreads) {
  const int vpr = H / 8, total = nrows * vpr;
  for (int base = tid; base < total; base += nthreads * kCopyDepth) {
    Vec8 v[kCopyDepth];
    float w[kCopyDepth];
#pragma unroll
    for (int u = 0; u < kCopyDepth; ++u) {
      const int i = base + u * nthreads;
      v[u] = Vec8{};
      w[u] = 0.0f;
      if (i < total) {
        const int r = row0 + i / vpr, t = row_token[r];
        if (t >= 0) {
          w[u] = row_weight[r];
          v[u] = *reinterpret_cast<const Vec8*>(d_out + static_cast<int64_t>(t) * H + (i % vpr) * 8);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kCopyDepth; ++u) {
      const int i = base + u * nthreads;
      if (i >= total) continue;
      Vec8 o;
#pragma unroll
      for (int j = 0; j < 8; ++j) o.v[j] = f32_to_bf16(__fmul_rn(w[u], bf16_to_f32(v[u].v[j])));
      *reinterpret_cast<Vec8*>(dst + static_cast<int64_t>(row0 + i / vpr) * H + (i % vpr) * 8) = o;
    }
  }
}

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
