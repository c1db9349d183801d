// The problem (LayerSpec), the run (RunConfig) and the routing (Routing) of one MoE layer (DESIGN 1).
// Each has validate(), which throws calico::Error naming the bad argument, and describe() for printing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "calico/numerics.h"

namespace calico {

enum class DType : uint8_t { bf16, mxfp8 };
enum class Direction : uint8_t { push, pull };

struct LayerSpec {
  std::string name = "custom";
  int hidden = 0;               // H
  int intermediate = 0;         // I (per routed expert)
  int experts = 0;              // E
  int top_k = 0;                // K
  int shared_intermediate = 0;  // I_s; 0 = no shared expert
  std::optional<float> swiglu_limit;  // clamp limit L of the SwiGLU variant, if any
  DType dtype = DType::bf16;
  MxScaleRule scale_rule = MxScaleRule::rceil;  // MXFP8 only
  MmaModel mma = MmaModel::hopper_bf16;         // the tensor-core model the GEMMs follow

  void validate() const;
  std::string describe() const;
};

constexpr double kMaxCapacityFactor = 4096.0;

struct RunConfig {
  int ranks = 1;              // EP size R; rank r owns experts [r*E/R, (r+1)*E/R)
  int tokens_per_rank = 0;    // T
  int minibatch = 0;          // tokens per rank per minibatch; 0 = all T
  int macrobatch = 0;         // minibatches per macrobatch ring slot; 0 = all
  int comm_sms_forward = 16;  // communication SMs per GPU, forward pass
  int comm_sms_backward = 16;
  Direction dispatch_forward = Direction::push, combine_forward = Direction::push;
  Direction dispatch_backward = Direction::push, combine_backward = Direction::push;
  double capacity_factor = 0.0;  // rank buffer rows = ceil(factor * T * K); 0 = sized to fit the routing;
                                 // at most kMaxCapacityFactor (= the largest R: every token on one rank)
  uint64_t seed = 1;
  // Megakernel only: the weight-gradient chains start from +0 instead of reading the carried-in accumulators
  // (MoeOptions::accumulate_weight_grads = false). A run's accumulators start at zero, so the bits are the
  // same; it selects the kernel's other weight-gradient path (the staggered one) for the comparisons.
  bool overwrite_weight_grads = false;

  int64_t total_tokens() const { return static_cast<int64_t>(ranks) * tokens_per_rank; }
  int minibatch_tokens() const { return minibatch == 0 ? tokens_per_rank : minibatch; }
  void validate(const LayerSpec& spec) const;
  std::string describe() const;
};

// Routing of the whole global batch, rows in global token order g = r*T + t (DESIGN 2.3).
struct Routing {
  int64_t tokens = 0;  // R*T
  int top_k = 0;
  std::vector<int32_t> topk_experts;   // [tokens, K] global expert ids
  std::vector<float> router_weights;   // [tokens, K]

  int32_t expert(int64_t g, int k) const { return topk_experts[g * top_k + k]; }
  float weight(int64_t g, int k) const { return router_weights[g * top_k + k]; }
  // Checks ids in [0, E), no duplicate expert within a token, finite weights, shapes.
  void validate(const LayerSpec& spec) const;
};

// Presets (DESIGN 6) live as JSON files in data/presets/NAME.json.
// The data folder: $CALICO_DATA_DIR, else PREFIX/share/calico/data beside an installed binary
// (PREFIX/bin/calico), else the source tree's data/ folder.
std::string data_dir();
// The helper scripts (plots): the scripts/ folder beside data_dir() (source and install trees alike).
std::string scripts_dir();
std::vector<std::string> preset_names();
LayerSpec load_preset(const std::string& name);
LayerSpec parse_layer_spec_json(const std::string& json_text, const std::string& origin);

const char* to_string(DType d);
const char* to_string(Direction d);
const char* to_string(MmaModel m);
const char* to_string(MxScaleRule r);
DType parse_dtype(const std::string& s);
Direction parse_direction(const std::string& s);
MmaModel parse_mma_model(const std::string& s);
MxScaleRule parse_scale_rule(const std::string& s);

}  // namespace calico
