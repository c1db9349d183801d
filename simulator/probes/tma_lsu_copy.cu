// Probe (issue 11; run on one H200 on 2026-12-01: reports/data/tma-lsu-probe-h200-2026-12-01.txt; the peer
// rows need two GPUs and are not measured yet): single-GPU copy rates and in-flight limits of the two SM transfer engines the simulator models,
// and the flag round trip within one device. In the style of ../shared/probes/p2p_bandwidth.cu.
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/tma simulator/probes/tma_lsu_copy.cu
//   /tmp/tma            # one H200; with 2 GPUs and peer access it repeats the copies to the peer
//
// What it prints and which topology parameter each line calibrates (MODEL.md "Transfer engines"):
//   lsu  <blocks> <threads>: int4 load/store loop, GB/s           -> push_store_gbps_per_sm (store issue)
//   tma  <blocks> <chunk> <depth>: cp.async.bulk global->shared->global, GB/s, bytes in flight per SM =
//        chunk x depth                                            -> tma_push_gbps_per_sm, and (with the
//        peer as source) tma_pull_bytes_in_flight_per_sm by Little's law against the flag round trip
//   flag round trip between two blocks of one GPU, us               -> fence_ns + flag_write_ns + poll_ns
#include "probe_common.cuh"

__global__ void lsu_copy(const int4* __restrict__ src, int4* __restrict__ dst, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x, s = (size_t)gridDim.x * blockDim.x;
  for (; i < n; i += s) dst[i] = src[i];
}

// One thread per block drives `depth` bulk copies of `chunk` bytes in flight: global -> shared
// (cp.async.bulk with an mbarrier), then shared -> global (cp.async.bulk.global.shared::cta + bulk_group).
__global__ void tma_copy(const char* __restrict__ src, char* __restrict__ dst, size_t bytes, int chunk, int depth) {
  extern __shared__ __align__(128) char buf[];
  __shared__ __align__(8) uint64_t bar[16];
  if (threadIdx.x != 0) return;
  for (int d = 0; d < depth; ++d) mbar_init_one(&bar[d]);
  asm volatile("fence.mbarrier_init.release.cluster;");
  uint32_t phase[16] = {};
  const size_t step = (size_t)gridDim.x * chunk * depth;
  for (size_t base = (size_t)blockIdx.x * chunk * depth; base < bytes; base += step) {
    for (int d = 0; d < depth; ++d) {
      const size_t off = base + (size_t)d * chunk;
      if (off >= bytes) break;
      bulk_load(buf + d * chunk, src + off, chunk, &bar[d]);
    }
    for (int d = 0; d < depth; ++d) {
      const size_t off = base + (size_t)d * chunk;
      if (off >= bytes) break;
      mbar_wait_flip(&bar[d], phase[d]);
      asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst + off),
                   "r"(smem_addr(buf + d * chunk)), "r"(chunk)
                   : "memory");
    }
    asm volatile("cp.async.bulk.commit_group;");
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");  // shared buffers reusable
  }
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

__global__ void pingpong(volatile int* a, volatile int* b, int iters) {
  if (threadIdx.x) return;
  for (int i = 0; i < iters; ++i) {
    if (blockIdx.x == 0) {
      *b = 2 * i + 1;
      __threadfence();
      while (*a != 2 * i + 1) {}
    } else {
      while (*b != 2 * i + 1) {}
      *a = 2 * i + 1;
      __threadfence();
    }
  }
}

static void run_copies(const char* label, char* src, char* dst, size_t bytes, int sms) {
  cudaEvent_t e1, e2;
  CK(cudaEventCreate(&e1));
  CK(cudaEventCreate(&e2));
  for (int blocks : {8, 16, 32, 66, 132})
    for (int threads : {256, 1024}) {
      lsu_copy<<<blocks, threads>>>((const int4*)src, (int4*)dst, bytes / 16);
      CK(cudaEventRecord(e1));
      for (int r = 0; r < 5; ++r) lsu_copy<<<blocks, threads>>>((const int4*)src, (int4*)dst, bytes / 16);
      CK(cudaEventRecord(e2));
      printf("%s lsu blocks %3d threads %4d: %.1f GB/s (%.1f per SM, %d B in flight per SM)\n", label, blocks, threads,
             5.0 * bytes / (time_ms(e1, e2) / 1e3) / 1e9, 5.0 * bytes / (time_ms(e1, e2) / 1e3) / 1e9 / blocks,
             threads * 16);
    }
  for (int blocks : {8, 16, 32, 66, 132})
    for (int chunk : {4096, 16384})
      for (int depth : {1, 2, 4, 8, 12}) {
        const int smem = chunk * depth;
        if (smem > 200 * 1024) continue;
        CK(cudaFuncSetAttribute(tma_copy, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        tma_copy<<<blocks, 32, smem>>>(src, dst, bytes, chunk, depth);
        CK(cudaGetLastError());
        CK(cudaEventRecord(e1));
        for (int r = 0; r < 5; ++r) tma_copy<<<blocks, 32, smem>>>(src, dst, bytes, chunk, depth);
        CK(cudaEventRecord(e2));
        const double gbps = 5.0 * bytes / (time_ms(e1, e2) / 1e3) / 1e9;
        printf("%s tma blocks %3d chunk %5d depth %2d: %.1f GB/s (%.1f per SM, %d B in flight per SM)\n", label,
               blocks, chunk, depth, gbps, gbps / blocks, smem);
      }
  (void)sms;
}

int main() {
  int n;
  CK(cudaGetDeviceCount(&n));
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, 0));
  printf("device 0 %s SMs=%d smem/block optin=%zu\n", p.name, p.multiProcessorCount, p.sharedMemPerBlockOptin);
  const size_t bytes = 1ull << 30;
  char *a, *b;
  CK(cudaSetDevice(0));
  CK(cudaMalloc(&a, bytes));
  CK(cudaMalloc(&b, bytes));
  CK(cudaMemset(a, 1, bytes));
  run_copies("local", a, b, bytes, p.multiProcessorCount);
  int* flags;
  CK(cudaMalloc(&flags, 8));
  CK(cudaMemset(flags, 0, 8));
  cudaEvent_t e1, e2;
  CK(cudaEventCreate(&e1));
  CK(cudaEventCreate(&e2));
  const int iters = 10000;
  CK(cudaEventRecord(e1));
  pingpong<<<2, 32>>>(flags, flags + 1, iters);
  CK(cudaEventRecord(e2));
  printf("flag round trip within one GPU (two blocks): %.3f us\n", time_ms(e1, e2) * 1e3 / iters);
  int can = 0;
  if (n >= 2) CK(cudaDeviceCanAccessPeer(&can, 0, 1));
  if (can) {
    CK(cudaDeviceEnablePeerAccess(1, 0));
    CK(cudaSetDevice(1));
    char* c;
    CK(cudaMalloc(&c, bytes));
    CK(cudaMemset(c, 2, bytes));
    CK(cudaSetDevice(0));
    run_copies("push-to-peer", a, c, bytes, p.multiProcessorCount);
    run_copies("pull-from-peer", c, b, bytes, p.multiProcessorCount);
  }
  return 0;
}
