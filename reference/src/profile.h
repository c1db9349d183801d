// Internal: an opt-in time breakdown of the reference's expert stages (per GEMM kind and per element-wise
// step). Enabled by CALICO_REFERENCE_PROFILE=1 (any non-empty value but 0); run_reference then prints the
// table to stderr after the run. Only ever called outside parallel regions; costs nothing when off.
#pragma once

#include <chrono>

namespace calico::ref::detail {

bool profiling();
// Adds seconds (and optional model-GEMM flops) to the named row.
void profile_add(const char* name, double seconds, double flops = 0.0);
// Prints the table to stderr and clears it (no-op when profiling is off or nothing was recorded).
void profile_report();

struct ProfileScope {
  const char* name;
  double flops;
  std::chrono::steady_clock::time_point t0;
  explicit ProfileScope(const char* n, double f = 0.0)
      : name(n), flops(f), t0(profiling() ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{}) {}
  ~ProfileScope() {
    if (profiling()) profile_add(name, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), flops);
  }
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;
};

}  // namespace calico::ref::detail
