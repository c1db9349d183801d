// CUDA error checks: every runtime call and kernel launch goes through CALICO_CUDA_CHECK, which throws
// calico::Error naming the call, file:line and the CUDA error's name and text.
#pragma once

#include <cuda_runtime.h>

#include "calico/error.h"

namespace calico::gpu {

inline void cuda_check(cudaError_t err, const char* call, const char* file, int line) {
  if (err == cudaSuccess) return;
  throw Error(fmt::format("CUDA call '{}' failed at {}:{}: {} ({})", call, file, line, cudaGetErrorName(err),
                          cudaGetErrorString(err)));
}

}  // namespace calico::gpu

#define CALICO_CUDA_CHECK(call) ::calico::gpu::cuda_check((call), #call, __FILE__, __LINE__)
// After a <<<...>>> launch: catches bad configurations at once and faults at the next synchronisation.
#define CALICO_CUDA_CHECK_LAUNCH() ::calico::gpu::cuda_check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
