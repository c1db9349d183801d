// Device discovery: how many GPUs this process sees, what they are, and which driver runs them.
#include <cuda_runtime.h>

#include <cctype>
#include <fstream>
#include <string>

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
  if (err != cudaSuccess) {
    cudaGetLastError();
    return fmt::format("no usable GPU ({})", cudaGetErrorString(err));
  }
  if (n == 0) return "no GPU";
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  return fmt::format("{} x{}, sm_{}{}, {} SMs", prop.name, n, prop.major, prop.minor, prop.multiProcessorCount);
}

std::string driver_description() {
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  std::string kernel_driver = "unknown";
  std::ifstream f("/proc/driver/nvidia/version");  // "NVRM version: NVIDIA UNIX ... Kernel Module  580.159.04 ..."
  std::string line;
  if (f && std::getline(f, line)) {  // the first token shaped like 580.159.04
    size_t i = 0;
    while (i < line.size()) {
      const size_t j = line.find(' ', i);
      const std::string tok = line.substr(i, j == std::string::npos ? std::string::npos : j - i);
      if (!tok.empty() && std::isdigit(static_cast<unsigned char>(tok[0])) && tok.find('.') != std::string::npos) {
        kernel_driver = tok;
        break;
      }
      if (j == std::string::npos) break;
      i = j + 1;
    }
  }
  return fmt::format("kernel driver {}, CUDA driver API {}.{}, runtime {}.{}", kernel_driver, driver / 1000,
                     (driver % 1000) / 10, runtime / 1000, (runtime % 1000) / 10);
}

}  // namespace calico::gpu
