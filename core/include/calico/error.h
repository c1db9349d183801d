// One error type for the whole project: every bad input becomes a calico::Error whose message names the
// argument, the allowed range and the value seen. CUDA/NCCL checks live in megakernel/src/cuda_check.cuh.
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace calico {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws calico::Error with a formatted message when `cond` is false.
template <typename... Args>
void require(bool cond, fmt::format_string<Args...> format, Args&&... args) {
  if (!cond) throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace calico
