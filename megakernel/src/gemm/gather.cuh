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
#include "gemm/epilogue.cuh"
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
    words[j] = bf16x2_from_f32(__fmul_rn(w, bf16x2_lo(words[j])), __fmul_rn(w, bf16x2_hi(words[j])));
  }
  *reinterpret_cast<uint4*>(chunk) = v;
}

// A stage of BMN x kBK elements filled from token rows. K-major (the A operand of d_h and gate/up): the
// stage's BMN rows are source rows, its kBK columns source columns [col0, col0 + kBK). MN-major (the
// weight-gradient operands, whose K is the expert's rows): the stage's kBK K entries are source rows, its BMN
// entries source columns [col0, col0 + BMN). Source rows are rows [row0, ...) of the expert-major order.
// Thread ptid copies 8-column chunk ptid % kChunksPerRow of source rows ptid / kChunksPerRow + kRowStep i:
// each warp reads whole 128- (K-major) or 256/512-byte (MN-major) row pieces.
template <int BMN, bool KMajor>
struct StageRows {
  static constexpr int kRows = KMajor ? BMN : kBK, kCols = KMajor ? kBK : BMN;
  static constexpr int kChunksPerRow = kCols / 8, kRowStep = kProducerThreads / kChunksPerRow;
  static constexpr int kPerThread = kRows / kRowStep;
  // The 8 elements of source row j (of this stage), columns c..c+7 (of this stage).
  __device__ static bf16_t* at(bf16_t* base, int stage, int j, int c) {
    auto s = smem_tensor<BMN, KMajor>(base);
    return KMajor ? &s(j, c, stage) : &s(c, j, stage);
  }
  __device__ static int row(int ptid, int i) { return ptid / kChunksPerRow + kRowStep * i; }
  __device__ static int chunk(int ptid) { return (ptid % kChunksPerRow) * 8; }

  __device__ static void gather(const RowGather& g, bf16_t* base, int stage, int row0, int col0, int ptid) {
    const int c = chunk(ptid), col = col0 + c;
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int j = row(ptid, i);
      const int t = __ldg(g.row_token + row0 + j);
      const bool ok = t >= 0 && col < g.cols;
      cp_async_16(at(base, stage, j, c), ok ? g.src + static_cast<int64_t>(t) * g.ld + col : g.src, ok);
    }
  }
  // The copied chunks, once landed, also to rows [row0, ...) of the expert-major buffer `dst` (g.cols
  // columns; padding rows as the zeros they were filled with).
  __device__ static void write_back(const RowGather& g, bf16_t* base, int stage, uint16_t* dst, int row0, int col0,
                                    int ptid) {
    const int c = chunk(ptid), col = col0 + c;
    if (col >= g.cols) return;
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int j = row(ptid, i);
      // streaming store (evict first): 0.5 GB of rows must not push the weights out of L2
      __stcs(reinterpret_cast<uint4*>(dst + static_cast<int64_t>(row0 + j) * g.cols + col),
             *reinterpret_cast<const uint4*>(at(base, stage, j, c)));
    }
  }
  __device__ static void scale(const RowGather& g, bf16_t* base, int stage, int row0, int col0, int ptid) {
    const int c = chunk(ptid);
    if (col0 + c >= g.cols) return;  // zero fill past the tensor stays +0
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int j = row(ptid, i);
      scale_chunk(at(base, stage, j, c), __ldg(g.row_weight + row0 + j));
    }
  }
};
using KMajorRows = StageRows<kBM, true>;
template <int BMN>
using MnMajorRows = StageRows<BMN, false>;

}  // namespace calico::gpu::mk
