// Deterministic data: routing generators (DESIGN 1) and layer inputs whose every value is a function of
// (seed, tensor, global index) alone, so the same global batch is produced for any EP size R.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "calico/spec.h"

namespace calico {

// Routing source: "uniform", "zipf:S" (S > 0), "adversarial", or a path to an HDF5 routing trace.
struct RoutingSource {
  enum class Kind : uint8_t { uniform, zipf, adversarial, file } kind = Kind::uniform;
  double zipf_s = 1.0;
  std::string path;
  static RoutingSource parse(const std::string& text);  // throws calico::Error naming --routing
  std::string describe() const;
};

Routing make_routing(const LayerSpec& spec, int64_t tokens, const RoutingSource& source, uint64_t seed);
// HDF5 routing trace: datasets /routing/topk_experts [tokens, K] int32 and /routing/router_weights [tokens, K]
// float32. Written by write_routing_h5 and by calico run traces.
Routing read_routing_h5(const std::string& path);
void write_routing_h5(const std::string& path, const Routing& routing);

// Counter-based generator: the value for (seed, stream, index) never depends on how work is split.
uint64_t mix64(uint64_t x);
float uniform_at(uint64_t seed, uint64_t stream, uint64_t index);  // in [0, 1)
float normal_at(uint64_t seed, uint64_t stream, uint64_t index);   // standard normal

// A bf16 tensor [rows, cols] of normal values * scale, from (seed, stream).
std::vector<uint16_t> random_bf16(uint64_t seed, uint64_t stream, int64_t rows, int64_t cols, float scale);

}  // namespace calico
