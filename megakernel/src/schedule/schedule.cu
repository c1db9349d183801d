// The schedule kernels that run before each forward pass: expert counts, 128-row padded segments, and every
// (token, k)'s row in the canonical expert-major order (DESIGN 2.3: rows of expert e sorted by ascending
// global token, then k), all on the device from the routing; no count goes back to the host.
//
// Positions are found without atomics on the order: tokens are cut into chunks; per chunk and expert a
// count; a scan over chunks and one over experts; then one warp per chunk walks its entries in (token, k)
// order, 32 at a time, and hands out consecutive rows (a lane's rank among the lanes of the same expert,
// __match_any_sync, after that expert's rows of the earlier steps). Integer atomics only count (the sum is
// order-free).
//
// NOTE (why not one thread per expert walking its chunk, as before 2026-12-04): that walk read all of a
// chunk's 2,048 entries per expert, one dependent shared load each (~2,048 x 30 cycles per expert, two
// experts per thread at E = 256), and the segment kernel's thread 0 summed the experts' tiles one global load
// at a time; the timeline put 74 us (qwen3, E = 128) and ~470 us (deepseek-v3-routed, E = 256) of each
// forward outside the persistent kernel.
#include <cub/block/block_scan.cuh>
#include <cuda_runtime.h>

#include "calico/error.h"
#include "calico/megakernel.h"
#include "device_buffer.cuh"
#include "moe/params.cuh"
#include "schedule/schedule.cuh"

namespace calico::gpu::mk {
namespace {

constexpr int kChunkTokens = 256;     // tokens per chunk: one warp places them (place_kernel)
constexpr int kPlaceWarps = 4;        // chunks per place_kernel block
constexpr int kSegmentThreads = 512;  // the one segment_kernel block
constexpr int kPlaceBatch = 8;        // steps of 32 entries whose routing a place_kernel warp loads at once

// Also marks every row as padding (token -1, weight 0); place_kernel, later on the stream, overwrites the
// routed ones. (Was two cudaMemsetAsync calls: two more launches on the forward's critical path.)
__global__ void chunk_count_kernel(const int* topk, int T, int K, int E, int* chunk_counts, int rows_cap,
                                   int* row_token, float* row_weight) {
  extern __shared__ int counts[];
  for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < rows_cap; r += gridDim.x * blockDim.x) {
    row_token[r] = -1;
    row_weight[r] = 0.0f;
  }
  for (int e = threadIdx.x; e < E; e += blockDim.x) counts[e] = 0;
  __syncthreads();
  const int t0 = blockIdx.x * kChunkTokens, t1 = min(T, t0 + kChunkTokens);
  for (int i = t0 * K + threadIdx.x; i < t1 * K; i += blockDim.x) atomicAdd(&counts[topk[i]], 1);
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x) chunk_counts[blockIdx.x * E + e] = counts[e];
}

// One block: per expert the exclusive scan over chunks (chunk_base), the totals; the experts' m-tiles scanned
// across the block (each thread a run of consecutive experts), the segments and the tile owners.
// Shared memory: [E] m-tiles per expert.
__global__ void __launch_bounds__(kSegmentThreads) segment_kernel(const int* __restrict__ chunk_counts,
                                                                  int* __restrict__ chunk_base, int chunks, int E,
                                                                  DeviceSchedule s) {
  extern __shared__ int tiles[];
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    int acc = 0;
#pragma unroll 8
    for (int c = 0; c < chunks; ++c) {  // (separate input and output: the loads run ahead of the sum)
      const int n = chunk_counts[c * E + e];
      chunk_base[c * E + e] = acc;
      acc += n;
    }
    s.counts[e] = acc;
    tiles[e] = ceil_div(acc, kBM);
  }
  __syncthreads();
  const int per = ceil_div(E, kSegmentThreads);
  const int e0 = min(E, static_cast<int>(threadIdx.x) * per), e1 = min(E, e0 + per);
  int run = 0;
  for (int e = e0; e < e1; ++e) run += tiles[e];
  using Scan = cub::BlockScan<int, kSegmentThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  int first = 0, total = 0;
  Scan(scan_storage).ExclusiveSum(run, first, total);
  for (int e = e0; e < e1; ++e) {
    s.tile_first[e] = first;
    for (int m = first; m < first + tiles[e]; ++m) s.tile_expert[m] = e;
    first += tiles[e];
  }
  if (threadIdx.x == 0) {
    s.tile_first[E] = total;
    s.totals[0] = total * kBM;
    s.totals[1] = total;
  }
}

// One warp per chunk. Shared memory: [kPlaceWarps][E] the next row of each expert in the warp's chunk.
__global__ void place_kernel(const int* __restrict__ topk, const float* __restrict__ weights, int T, int K, int E,
                             int chunks, const int* __restrict__ chunk_base, DeviceSchedule s) {
  extern __shared__ int next_row[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int chunk = blockIdx.x * kPlaceWarps + warp;
  if (chunk >= chunks) return;  // (a whole warp: no block barrier follows)
  int* next = next_row + warp * E;
  for (int e = lane; e < E; e += 32) next[e] = s.tile_first[e] * kBM + chunk_base[chunk * E + e];
  __syncwarp();
  const int p0 = chunk * kChunkTokens * K, p1 = min(T, (chunk + 1) * kChunkTokens) * K;
  const unsigned below = (1u << lane) - 1u;
  // The routing of kPlaceBatch steps is loaded before any is placed: the loads are independent, so they are
  // in flight together instead of one global latency per step ahead of the step's shuffle and shared update.
  for (int q0 = p0; q0 < p1; q0 += 32 * kPlaceBatch) {
    int expert[kPlaceBatch];
    float weight[kPlaceBatch];
#pragma unroll
    for (int b = 0; b < kPlaceBatch; ++b) {
      const int p = q0 + 32 * b + lane;
      expert[b] = p < p1 ? topk[p] : -1;  // (the host checked 0 <= e < E)
      weight[b] = p < p1 ? weights[p] : 0.0f;
    }
#pragma unroll
    for (int b = 0; b < kPlaceBatch; ++b) {
      const int p = q0 + 32 * b + lane, e = expert[b];
      const bool live = p < p1;
      const unsigned peers = __match_any_sync(~0u, e);  // the lanes of this step with the same expert
      const int rank = __popc(peers & below);           // of them, those before this lane (lower p)
      const int row = live ? next[e] + rank : 0;
      __syncwarp();                                     // every lane has read next[] before the update
      if (live && rank == 0) next[e] += __popc(peers);  // the group's lowest lane
      __syncwarp();
      if (live) {
        s.token_row[p] = row;
        s.row_token[row] = p / K;
        s.row_weight[row] = weight[b];
      }
    }
  }
}

}  // namespace

// chunk_counts, then chunk_base: [chunks][E] each.
size_t schedule_scratch_ints(int T, int E) { return 2 * static_cast<size_t>(ceil_div(T, kChunkTokens)) * E; }

void launch_schedule(const int* topk, const float* weights, int T, int K, int E, int rows_cap, int* scratch,
                     const DeviceSchedule& s, cudaStream_t stream) {
  const int chunks = ceil_div(T, kChunkTokens);
  int* chunk_counts = scratch;
  int* chunk_base = scratch + static_cast<size_t>(chunks) * E;
  chunk_count_kernel<<<chunks, 256, sizeof(int) * E, stream>>>(topk, T, K, E, chunk_counts, rows_cap, s.row_token,
                                                               s.row_weight);
  segment_kernel<<<1, kSegmentThreads, sizeof(int) * E, stream>>>(chunk_counts, chunk_base, chunks, E, s);
  place_kernel<<<ceil_div(chunks, kPlaceWarps), 32 * kPlaceWarps, sizeof(int) * kPlaceWarps * E, stream>>>(
      topk, weights, T, K, E, chunks, chunk_base, s);
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
