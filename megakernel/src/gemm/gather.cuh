// Pull dispatch at R = 1: the producer warpgroup of a compute CTA gathers token rows straight into the
// swizzled operand stage (cp.async, 16 bytes per copy), so no data-movement CTA writes an expert-major copy
// of x or d_y first. Row r of the expert-major order is token row_token[r] of the source (-1: a padding row,
// zero-filled). Every element lands where a TMA load of the expert-major buffer would have put it (the
// address comes from the same CuTe layout the wgmma descriptors read), so the GEMMs and their bits are
// those of the push path.
//
// d_y = bf16(w * d_out[t]) (one fp32 multiply, calico/reference.h) is gathered raw and scaled in place by
// the thread that copied each chunk (scale), once its copies have landed and before it publishes them.
// Padding rows have weight 0 (+0 * +0 = +0); zero fill past the tensor's columns is left as +0.
#pragma once

#include "calico/numerics.h"
#include "gemm/sm90_tile.cuh"

namespace calico::gpu::mk {

// Where the rows come from: element (row r, column c) is src[row_token[r] * ld + c] for c < cols.
struct RowGather {
  const uint16_t* src;
  int64_t ld;
  int cols;
  const int* row_token;
  const float* row_weight;  // the d_y scale per row (scale_* only)
};

// 8 bf16 of one chunk: out = bf16(w * in), in place in shared memory.
__device__ __forceinline__ void scale_chunk(bf16_t* chunk, float w) {
  uint4 v = *reinterpret_cast<const uint4*>(chunk);
  uint32_t* words = reinterpret_cast<uint32_t*>(&v);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint16_t lo = f32_to_bf16(__fmul_rn(w, bf16_to_f32(static_cast<uint16_t>(words[j] & 0xFFFFu))));
    const uint16_t hi = f32_to_bf16(__fmul_rn(w, bf16_to_f32(static_cast<uint16_t>(words[j] >> 16))));
    words[j] = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
  }
  *reinterpret_cast<uint4*>(chunk) = v;
}

// K-major A stage (128 rows x kBK columns): rows [row0, row0 + 128), columns [k0, k0 + kBK). Thread ptid
// copies chunk ptid % 8 (8 columns) of rows ptid / 8 + 16 i: each warp reads 4 whole 128-byte row pieces.
struct KMajorRows {
  static constexpr int kChunksPerRow = kBK / 8, kRowStep = kProducerThreads / kChunksPerRow;
  static constexpr int kPerThread = kBM / kRowStep;
  __device__ static bf16_t* at(bf16_t* a, int stage, int r, int c) {
    auto sA = smem_tensor<kBM, true>(a);
    return &sA(r, c, stage);
  }
  __device__ static void gather(const RowGather& g, bf16_t* a, int stage, int row0, int k0, int ptid) {
    const int c = (ptid % kChunksPerRow) * 8, col = k0 + c;
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int r = ptid / kChunksPerRow + kRowStep * i;
      const int t = __ldg(g.row_token + row0 + r);
      const bool ok = t >= 0 && col < g.cols;
      cp_async_16(at(a, stage, r, c), ok ? g.src + static_cast<int64_t>(t) * g.ld + col : g.src, ok);
    }
  }
  // The copied chunks, once landed, also to rows [row0, row0 + 128) of the expert-major buffer `dst`
  // (g.cols columns; padding rows as the zeros they were filled with).
  __device__ static void write_back(const RowGather& g, bf16_t* a, int stage, uint16_t* dst, int row0, int k0,
                                    int ptid) {
    const int c = (ptid % kChunksPerRow) * 8, col = k0 + c;
    if (col >= g.cols) return;
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int r = ptid / kChunksPerRow + kRowStep * i;
      // streaming store (evict first): 0.5 GB of rows must not push the weights out of L2
      __stcs(reinterpret_cast<uint4*>(dst + static_cast<int64_t>(row0 + r) * g.cols + col),
             *reinterpret_cast<const uint4*>(at(a, stage, r, c)));
    }
  }
  __device__ static void scale(const RowGather& g, bf16_t* a, int stage, int row0, int k0, int ptid) {
    const int c = (ptid % kChunksPerRow) * 8;
    if (k0 + c >= g.cols) return;  // zero fill past the tensor stays +0
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int r = ptid / kChunksPerRow + kRowStep * i;
      scale_chunk(at(a, stage, r, c), __ldg(g.row_weight + row0 + r));
    }
  }
};

// MN-major stage (BMN columns of the source as MN x kBK rows as K): the weight-gradient operands, whose K is
// the expert's rows. Element (mn, k) is source row row0 + k, column n0 + mn. Thread ptid copies chunk
// ptid % (BMN / 8) (8 columns) of rows ptid / (BMN / 8) + step i.
template <int BMN>
struct MnMajorRows {
  static constexpr int kChunksPerRow = BMN / 8, kRowStep = kProducerThreads / kChunksPerRow;
  static constexpr int kPerThread = kBK / kRowStep;
  __device__ static bf16_t* at(bf16_t* base, int stage, int mn, int k) {
    auto s = smem_tensor<BMN, false>(base);
    return &s(mn, k, stage);
  }
  __device__ static void gather(const RowGather& g, bf16_t* base, int stage, int row0, int n0, int ptid) {
    const int mn = (ptid % kChunksPerRow) * 8, col = n0 + mn;
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int k = ptid / kChunksPerRow + kRowStep * i;
      const int t = __ldg(g.row_token + row0 + k);
      const bool ok = t >= 0 && col < g.cols;
      cp_async_16(at(base, stage, mn, k), ok ? g.src + static_cast<int64_t>(t) * g.ld + col : g.src, ok);
    }
  }
  __device__ static void scale(const RowGather& g, bf16_t* base, int stage, int row0, int n0, int ptid) {
    const int mn = (ptid % kChunksPerRow) * 8;
    if (n0 + mn >= g.cols) return;  // zero fill past the tensor stays +0
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int k = ptid / kChunksPerRow + kRowStep * i;
      scale_chunk(at(base, stage, mn, k), __ldg(g.row_weight + row0 + k));
    }
  }
};

}  // namespace calico::gpu::mk
