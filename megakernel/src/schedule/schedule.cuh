// Launcher of the device schedule (schedule.cu): fills a DeviceSchedule from topk [T,K] and weights [T,K].
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "moe/params.cuh"

namespace calico::gpu::mk {

size_t schedule_scratch_ints(int T, int E);
void launch_schedule(const int* topk, const float* weights, int T, int K, int E, int rows_cap, int* scratch,
                     const DeviceSchedule& s, cudaStream_t stream);

}  // namespace calico::gpu::mk
