// A typed device allocation that frees itself (plain cudaMalloc: no managed memory on the device machine).
#pragma once

#include <cstddef>
#include <vector>

#include "cuda_check.cuh"

namespace calico::gpu {

template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) {
    if (n_ > 0) CALICO_CUDA_CHECK(cudaMalloc(&ptr_, n_ * sizeof(T)));
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void upload(const std::vector<T>& host) {
    require(host.size() <= n_, "DeviceBuffer::upload: {} elements into a buffer of {}", host.size(), n_);
    if (!host.empty()) CALICO_CUDA_CHECK(cudaMemcpy(ptr_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download(size_t count) const {
    require(count <= n_, "DeviceBuffer::download: {} elements from a buffer of {}", count, n_);
    std::vector<T> host(count);
    if (count > 0) CALICO_CUDA_CHECK(cudaMemcpy(host.data(), ptr_, count * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  std::vector<T> download() const { return download(n_); }
  T* get() const { return ptr_; }
  size_t size() const { return n_; }

 private:
  T* ptr_ = nullptr;
  size_t n_ = 0;
};

}  // namespace calico::gpu
