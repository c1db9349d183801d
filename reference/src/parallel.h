// Internal: parallel first touch of large buffers. Storage from calico/buffer.h is not zeroed on allocation;
// these loops write it from all threads (static partition in 2 MiB pieces, one huge page each), so no
// single thread faults in gigabytes before the parallel work starts. Results never depend on them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "calico/buffer.h"

namespace calico::ref::detail {

inline void parallel_zero(void* p, size_t bytes) {
  auto* b = static_cast<uint8_t*>(p);
  const auto pieces = static_cast<int64_t>((bytes + kHugeBlock - 1) / kHugeBlock);
#pragma omp parallel for schedule(static) if (pieces > 1)
  for (int64_t i = 0; i < pieces; ++i) {
    const size_t off = static_cast<size_t>(i) * kHugeBlock;
    std::memset(b + off, 0, bytes - off < kHugeBlock ? bytes - off : kHugeBlock);
  }
}

// A buffer of n zeros, zeroed in parallel.
template <typename T>
UninitVector<T> parallel_zeros(size_t n) {
  UninitVector<T> v(n);
  parallel_zero(v.data(), n * sizeof(T));
  return v;
}

}  // namespace calico::ref::detail
