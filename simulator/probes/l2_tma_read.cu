// Probe (issue 8, prepared 2026-12-01, NOT yet run): how fast TMA can fill shared memory from L2 on all SMs
// at once, the question behind the megakernel's main loops (a 128 x 256 x 64 k-tile asks 48 KB per ~1,300
// cycles, ~9.7 TB/s over 132 SMs at the dense rate). Each CTA keeps `depth` bulk loads (cp.async.bulk
// global -> shared, mbarrier completion, nothing written back) of `chunk` bytes in flight, reading a working
// set of `set` bytes over and over: a set well inside the 50 MB L2 times L2 -> SM; 1 GiB times HBM. Two read
// patterns: "shared" (every CTA walks the same set from its own offset: operands several CTAs read, like
// the weights of one expert) and "disjoint" (each CTA its own slice).
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/l2 simulator/probes/l2_tma_read.cu
//   /tmp/l2                       # one line per (pattern, set, CTAs, chunk x depth): GB/s total and per SM
#include "probe_common.cuh"

constexpr int kMaxDepth = 16;

// One thread per CTA: `loads` bulk loads of `chunk` bytes, `depth` in flight, from offsets that step through
// the working set [src, src + set). shared: CTA b starts at offset b * chunk * depth of the same set;
// disjoint: CTA b reads only its slice of set / gridDim.x bytes.
__global__ void l2_read(const char* __restrict__ src, size_t set, int chunk, int depth, int loads, bool shared,
                        unsigned long long* sink) {
  extern __shared__ __align__(128) char buf[];
  __shared__ __align__(8) uint64_t bar[kMaxDepth];
  if (threadIdx.x != 0) return;
  for (int d = 0; d < depth; ++d) mbar_init_one(&bar[d]);
  asm volatile("fence.mbarrier_init.release.cluster;");
  const size_t slice = shared ? set : set / gridDim.x;
  const size_t base = shared ? (size_t)blockIdx.x * chunk * depth % set : (size_t)blockIdx.x * slice;
  const size_t span = slice / chunk * chunk;  // whole chunks
  uint32_t phase[kMaxDepth] = {};
  size_t pos = 0;
  for (int i = 0; i < loads; i += depth) {
    for (int d = 0; d < depth; ++d) {
      const size_t off = shared ? (base + pos) % span : base + pos % span;
      pos += chunk;
      bulk_load(buf + d * chunk, src + off, chunk, &bar[d]);
    }
    for (int d = 0; d < depth; ++d) mbar_wait_flip(&bar[d], phase[d]);
  }
  atomicAdd(sink, static_cast<unsigned long long>(buf[0]));  // keep the loads observable
}

int main() {
  int dev = 0;
  CK(cudaSetDevice(dev));
  cudaDeviceProp p{};
  CK(cudaGetDeviceProperties(&p, dev));
  printf("device %s, %d SMs, L2 %d MB\n", p.name, p.multiProcessorCount, p.l2CacheSize >> 20);
  const size_t big = 1ull << 30;
  char* src = nullptr;
  unsigned long long* sink = nullptr;
  CK(cudaMalloc(&src, big));
  CK(cudaMemset(src, 1, big));
  CK(cudaMalloc(&sink, sizeof(*sink)));
  CK(cudaFuncSetAttribute(l2_read, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  cudaEvent_t e1, e2;
  CK(cudaEventCreate(&e1));
  CK(cudaEventCreate(&e2));
  const size_t sets[] = {8ull << 20, 24ull << 20, 40ull << 20, big};
  const int ctas[] = {8, 66, p.multiProcessorCount};
  const int shapes[][2] = {{16384, 4}, {16384, 12}, {49152, 4}};  // chunk, depth: 64 / 192 / 192 KB in flight
  for (int pattern = 0; pattern < 2; ++pattern)
    for (size_t set : sets)
      for (int blocks : ctas)
        for (auto& shape : shapes) {
          const int chunk = shape[0], depth = shape[1];
          if (!pattern && set < static_cast<size_t>(chunk) * depth) continue;
          if (pattern && set / blocks < static_cast<size_t>(chunk) * depth) continue;
          const int loads = 4096;
          l2_read<<<blocks, 32, chunk * depth>>>(src, set, chunk, depth, 64, pattern == 0, sink);  // warm
          CK(cudaGetLastError());
          CK(cudaEventRecord(e1));
          l2_read<<<blocks, 32, chunk * depth>>>(src, set, chunk, depth, loads, pattern == 0, sink);
          CK(cudaEventRecord(e2));
          CK(cudaEventSynchronize(e2));
          const double bytes = static_cast<double>(blocks) * loads * chunk;
          const double gbps = bytes / (time_ms(e1, e2) / 1e3) / 1e9;
          printf("%-8s set %5zu MB  ctas %3d  in flight %3d KB  %8.0f GB/s  %6.1f GB/s per SM\n",
                 pattern == 0 ? "shared" : "disjoint", set >> 20, blocks, chunk * depth / 1024, gbps, gbps / blocks);
        }
  return 0;
}
