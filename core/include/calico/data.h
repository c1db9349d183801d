// Deterministic data: routing generators (DESIGN 1) and layer inputs whose every value is a function of
// (seed, tensor, global index) alone, so the same global batch is produced for any EP size R.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "calico/spec.h"

namespace calico {

// Routing source: "uniform", "zipf:S" (S > 0), "adversarial", or a path to an HDF5 routing trace.
//  - uniform: K distinct experts per token, each uniform over E (duplicates redrawn).
//  - zipf:S: popularity rank i has weight (i+1)^-S, ranks a seeded permutation of the experts; K drawn
//    without replacement in proportion to weight.
//  - adversarial: slot k of every token goes to expert k (experts 0..K-1): all on rank 0 when K <= E/R,
//    else on the first ceil(K/(E/R)) ranks, the closest to "one rank" K allows, for every R.
//  - file: the first R*T rows of /routing/topk_experts and /routing/router_weights (see read_routing_h5).
//  Generated router weights: softmax over the K chosen experts of N(0,1) logits (fp32, calico_exp).
//  Every generated value is a function of (seed, global token g) only: the global batch is the same for any R.
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
// Limits checked before allocation: at most kMaxRoutingTokens rows, K <= kMaxRoutingTopK, and
// kMaxRoutingEntries (tokens * K) entries; a dataset may not claim more data than its file can hold.
constexpr uint64_t kMaxRoutingTokens = uint64_t{1} << 28, kMaxRoutingTopK = 1 << 16,
                   kMaxRoutingEntries = uint64_t{1} << 28;
Routing read_routing_h5(const std::string& path);
void write_routing_h5(const std::string& path, const Routing& routing);

// Counter-based generator: the value for (seed, stream, index) never depends on how work is split.
// mix64 is SplitMix64's finaliser (a bijection with full avalanche); hash(seed, stream, index) =
// mix64(stream_key(seed, stream) ^ index).
inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
inline uint64_t stream_key(uint64_t seed, uint64_t stream) { return mix64(mix64(seed) ^ stream); }
float uniform_at(uint64_t seed, uint64_t stream, uint64_t index);  // in [0, 1)
float normal_at(uint64_t seed, uint64_t stream, uint64_t index);   // standard normal (Irwin-Hall, 8 terms)

// normal_at(seed, stream, i) == normal_with_key(stream_key(seed, stream), i), inline for bulk generation:
// the sum of 8 independent 16-bit uniforms, centred and scaled to unit variance (integer sums and one IEEE
// multiply, so the bits are portable; bounded, |z| < 4.9).
inline float normal_with_key(uint64_t key, uint64_t index) {
  const uint64_t h0 = mix64(key ^ (2 * index)), h1 = mix64(key ^ (2 * index + 1));
  int64_t sum = 0;
  for (int i = 0; i < 4; ++i)
    sum += static_cast<int64_t>((h0 >> (16 * i)) & 0xFFFF) + static_cast<int64_t>((h1 >> (16 * i)) & 0xFFFF);
  // Each uniform is (v + 0.5) / 65536 with variance 1/12; 8 of them: mean 4, variance 2/3.
  const double centred = (static_cast<double>(sum) + 4.0 - 4.0 * 65536.0) / 65536.0;
  return static_cast<float>(centred * 1.2247448713915890491);  // sqrt(3/2)
}

// A bf16 tensor [rows, cols] of normal values * scale, from (seed, stream).
std::vector<uint16_t> random_bf16(uint64_t seed, uint64_t stream, int64_t rows, int64_t cols, float scale);

}  // namespace calico
