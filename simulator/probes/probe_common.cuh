// What the standalone probes of this folder share: the CUDA error check, event timing and the bulk-copy
// (TMA) pieces, one thread driving them. Header-only: each probe still builds with one nvcc line.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#define CK(x)                                                                 \
  do {                                                                        \
    cudaError_t e = (x);                                                      \
    if (e != cudaSuccess) {                                                   \
      printf("ERR %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); \
      exit(1);                                                                \
    }                                                                         \
  } while (0)

static float time_ms(cudaEvent_t e1, cudaEvent_t e2) {
  float ms;
  CK(cudaEventSynchronize(e2));
  CK(cudaEventElapsedTime(&ms, e1, e2));
  return ms;
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init_one(uint64_t* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(bar)));
}
// The arrival of this thread on `bar`, which then expects `bytes` more of bulk copies before its phase completes.
__device__ __forceinline__ void mbar_arrive_expect(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}
// One bulk copy global -> shared of `bytes` that completes its bytes on `bar` (no arrival: several such copies
// can share one expectation, as a gathered group of rows does in dispatch_rows.cu).
__device__ __forceinline__ void bulk_load_tx(void* smem, const void* gmem, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   smem_addr(smem)),
               "l"(gmem), "r"(bytes), "r"(smem_addr(bar))
               : "memory");
}
// One bulk load global -> shared of `bytes`, completing on `bar` (which expects them first).
__device__ __forceinline__ void bulk_load(void* smem, const void* gmem, int bytes, uint64_t* bar) {
  mbar_arrive_expect(bar, static_cast<uint32_t>(bytes));
  bulk_load_tx(smem, gmem, static_cast<uint32_t>(bytes), bar);
}
// Spins until the phase of `bar` with this parity completes, then flips the parity.
__device__ __forceinline__ void mbar_wait_flip(uint64_t* bar, uint32_t& parity) {
  uint32_t done = 0;
  while (!done)
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done)
                 : "r"(smem_addr(bar)), "r"(parity));
  parity ^= 1;
}

// A probe's command line: argv[1..] names the modes to run (each one of names[0, n)); none given: every mode.
// valid() prints an error naming an unknown argument and the modes (the probe's main then returns 2).
struct ModeArgs {
  int argc;
  char** argv;
  const char* const* names;
  int n;
  bool wanted(int mode) const {
    if (argc < 2) return true;
    for (int i = 1; i < argc; ++i)
      if (std::strcmp(argv[i], names[mode]) == 0) return true;
    return false;
  }
  bool valid() const {
    for (int i = 1; i < argc; ++i) {
      bool known = false;
      for (int m = 0; m < n; ++m) known = known || std::strcmp(argv[i], names[m]) == 0;
      if (!known) {
        printf("ERR unknown mode '%s' (modes:", argv[i]);
        for (int m = 0; m < n; ++m) printf(" %s", names[m]);
        printf(")\n");
        return false;
      }
    }
    return true;
  }
};

