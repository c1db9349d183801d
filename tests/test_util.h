// Small helpers shared by the test programs.
#pragma once

#include <functional>
#include <string>

#include "calico/error.h"

namespace calico::test_util {

// Runs f and returns the calico::Error text it threw, or "(no error)".
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace calico::test_util
