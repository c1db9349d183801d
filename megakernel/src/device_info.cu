// Device discovery: how many GPUs this process sees and what they are.
#include <cuda_runtime.h>

#include <fmt/format.h>

#include "calico/megakernel.h"

namespace calico::gpu {

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

std::string device_description() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) return fmt::format("no usable GPU ({})", cudaGetErrorString(err));
  if (n == 0) return "no GPU";
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  int driver = 0;
  cudaDriverGetVersion(&driver);
  return fmt::format("{} x{}, sm_{}{}, {} SMs, driver API {}.{}", prop.name, n, prop.major, prop.minor,
                     prop.multiProcessorCount, driver / 1000, (driver % 1000) / 10);
}

}  // namespace calico::gpu
