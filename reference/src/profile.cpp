#include "profile.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace calico::ref::detail {

namespace {

struct Row {
  std::string name;
  double seconds = 0, flops = 0;
  long calls = 0;
};
std::mutex g_mutex;
std::vector<Row> g_rows;

}  // namespace

bool profiling() {
  static const bool on = [] {
    const char* v = std::getenv("CALICO_REFERENCE_PROFILE");
    return v && *v && std::strcmp(v, "0") != 0;
  }();
  return on;
}

void profile_add(const char* name, double seconds, double flops) {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (Row& r : g_rows)
    if (r.name == name) {
      r.seconds += seconds, r.flops += flops, ++r.calls;
      return;
    }
  g_rows.push_back({name, seconds, flops, 1});
}

void profile_report() {
  if (!profiling()) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_rows.empty()) return;
  std::fprintf(stderr, "\nreference profile (CALICO_REFERENCE_PROFILE)\n%-34s %6s %9s %9s\n", "step", "calls", "seconds",
               "GFLOP/s");
  for (const Row& r : g_rows) {
    if (r.flops > 0) std::fprintf(stderr, "%-34s %6ld %9.3f %9.2f\n", r.name.c_str(), r.calls, r.seconds, r.flops / r.seconds * 1e-9);
    else std::fprintf(stderr, "%-34s %6ld %9.3f %9s\n", r.name.c_str(), r.calls, r.seconds, "");
  }
  g_rows.clear();
}

}  // namespace calico::ref::detail
