// Shared helpers of the harness tests: a small layer spec, toy traces and temporary folders.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include "calico/data.h"
#include "calico/harness.h"

namespace calico::harness::testing {

// A layer small enough for fast tests, with a shared expert and E divisible by 1, 2, 4.
inline LayerSpec small_spec() {
  LayerSpec s;
  s.name = "test-small";
  s.hidden = 32;
  s.intermediate = 32;
  s.experts = 8;
  s.top_k = 2;
  s.shared_intermediate = 32;
  return s;
}

inline RunRequest small_request(int ranks, int64_t global_tokens = 16, uint64_t seed = 7) {
  RunRequest q;
  q.spec = small_spec();
  q.config.ranks = ranks;
  q.config.tokens_per_rank = static_cast<int>(global_tokens / ranks);
  q.config.seed = seed;
  q.routing = make_routing(q.spec, global_tokens, RoutingSource::parse("uniform"), seed);
  return q;
}

inline Trace toy_trace(int ranks, int runs = 2, const std::string& backend = "toy") {
  auto b = make_backend(backend);
  return run_trace(*b, small_request(ranks), runs, "uniform");
}

// A fresh folder under the system temp dir, removed at scope exit.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& tag) {
    path = std::filesystem::temp_directory_path() / ("calico-test-" + tag + "-" + std::to_string(getpid()));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

}  // namespace calico::harness::testing
