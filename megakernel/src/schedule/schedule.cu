// The schedule kernels that run before each forward pass: expert counts, 128-row padded segments, and every
// (token, k)'s row in the canonical expert-major order (DESIGN 2.3: rows of expert e sorted by ascending
// global token, then k), all on the device from the routing; no count goes back to the host.
//
// Positions are found without atomics on the order: tokens are cut into chunks; per chunk and expert a
// count; a scan over chunks; then one thread per expert walks its chunk's entries in (token, k) order and
// hands out consecutive rows. Integer atomics only count (the sum is order-free).
#include <cuda_runtime.h>

#include "calico/error.h"
#include "calico/megakernel.h"
#include "device_buffer.cuh"
#include "moe/params.cuh"
#include "schedule/schedule.cuh"

namespace calico::gpu::mk {
namespace {

constexpr int kChunkTokens = 256;

__global__ void chunk_count_kernel(const int* topk, int T, int K, int E, int* chunk_counts) {
  extern __shared__ int counts[];
  for (int e = threadIdx.x; e < E; e += blockDim.x) counts[e] = 0;
  __syncthreads();
  const int t0 = blockIdx.x * kChunkTokens, t1 = min(T, t0 + kChunkTokens);
  for (int i = t0 * K + threadIdx.x; i < t1 * K; i += blockDim.x) atomicAdd(&counts[topk[i]], 1);
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x) chunk_counts[blockIdx.x * E + e] = counts[e];
}

// One block: per expert the exclusive scan over chunks (in place), the totals, segments and tile owners.
__global__ void segment_kernel(int* chunk_counts, int chunks, int E, DeviceSchedule s) {
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    int acc = 0;
    for (int c = 0; c < chunks; ++c) {
      const int n = chunk_counts[c * E + e];
      chunk_counts[c * E + e] = acc;
      acc += n;
    }
    s.counts[e] = acc;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int tiles = 0;
    for (int e = 0; e < E; ++e) {
      s.tile_first[e] = tiles;
      tiles += ceil_div(s.counts[e], kBM);
    }
    s.tile_first[E] = tiles;
    s.totals[0] = tiles * kBM;
    s.totals[1] = tiles;
  }
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x)
    for (int m = s.tile_first[e]; m < s.tile_first[e + 1]; ++m) s.tile_expert[m] = e;
}

__global__ void place_kernel(const int* topk, const float* weights, int T, int K, int E, const int* chunk_base,
                             DeviceSchedule s) {
  extern __shared__ int entries[];
  const int t0 = blockIdx.x * kChunkTokens, t1 = min(T, t0 + kChunkTokens), n = (t1 - t0) * K;
  for (int i = threadIdx.x; i < n; i += blockDim.x) entries[i] = topk[t0 * K + i];
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    int row = s.tile_first[e] * kBM + chunk_base[blockIdx.x * E + e];
    for (int i = 0; i < n; ++i) {
      if (entries[i] != e) continue;
      const int p = t0 * K + i;
      s.token_row[p] = row;
      s.row_token[row] = p / K;
      s.row_weight[row] = weights[p];
      ++row;
    }
  }
}

}  // namespace

size_t schedule_scratch_ints(int T, int E) { return static_cast<size_t>(ceil_div(T, kChunkTokens)) * E; }

void launch_schedule(const int* topk, const float* weights, int T, int K, int E, int rows_cap, int* scratch,
                     const DeviceSchedule& s, cudaStream_t stream) {
  const int chunks = ceil_div(T, kChunkTokens);
  cudaMemsetAsync(s.row_token, 0xFF, sizeof(int) * rows_cap, stream);  // -1: padding
  cudaMemsetAsync(s.row_weight, 0, sizeof(float) * rows_cap, stream);
  chunk_count_kernel<<<chunks, 256, sizeof(int) * E, stream>>>(topk, T, K, E, scratch);
  segment_kernel<<<1, 512, 0, stream>>>(scratch, chunks, E, s);
  place_kernel<<<chunks, 128, sizeof(int) * kChunkTokens * K, stream>>>(topk, weights, T, K, E, scratch, s);
}

}  // namespace calico::gpu::mk

namespace calico::gpu {

RoutingSchedule schedule_on_device(const std::vector<int>& topk, const std::vector<float>& weights, int T, int K,
                                   int E) {
  require(T >= 1 && K >= 1 && E >= 1, "schedule_on_device: T, K, E must be >= 1, got {}, {}, {}", T, K, E);
  const size_t n = static_cast<size_t>(T) * K;
  require(topk.size() == n && weights.size() == n, "schedule_on_device: topk and weights must hold T K = {}, got {} and {}",
          n, topk.size(), weights.size());
  for (size_t i = 0; i < n; ++i)
    require(topk[i] >= 0 && topk[i] < E, "schedule_on_device: topk[{}] = {} is outside [0, {})", i, topk[i], E);
  const int mtiles_cap = mk::routed_mtiles_cap(T, K, E), rows_cap = mtiles_cap * mk::kBM;
  DeviceBuffer<int> d_topk(topk), counts(E), tile_first(E + 1), tile_expert(mtiles_cap), token_row(n),
      row_token(rows_cap), totals(2), scratch(mk::schedule_scratch_ints(T, E));
  DeviceBuffer<float> d_weights(weights), row_weight(rows_cap);
  const mk::DeviceSchedule s{counts.get(),    tile_first.get(), tile_expert.get(), token_row.get(),
                             row_token.get(), row_weight.get(), totals.get()};
  mk::launch_schedule(d_topk.get(), d_weights.get(), T, K, E, rows_cap, scratch.get(), s, nullptr);
  CALICO_CUDA_CHECK_LAUNCH();
  CALICO_CUDA_CHECK(cudaDeviceSynchronize());
  RoutingSchedule r;
  const std::vector<int> tot = totals.download();
  r.padded_rows = tot[0], r.mtiles = tot[1];
  require(r.mtiles >= 0 && r.mtiles <= mtiles_cap, "schedule_on_device: {} m-tiles, more than the {} allocated",
          r.mtiles, mtiles_cap);
  r.counts = counts.download(), r.tile_first = tile_first.download(), r.tile_expert = tile_expert.download(r.mtiles);
  r.token_row = token_row.download(), r.row_token = row_token.download(), r.row_weight = row_weight.download();
  return r;
}

}  // namespace calico::gpu
