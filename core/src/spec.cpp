// LayerSpec / RunConfig / Routing validation, printing, and the JSON presets under data/presets.
#include "calico/spec.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "calico/error.h"
#include "calico/json_fields.h"

#ifndef CALICO_DEFAULT_DATA_DIR
#define CALICO_DEFAULT_DATA_DIR "data"
#endif

namespace calico {

namespace {
void require_range(const char* arg, int64_t v, int64_t lo, int64_t hi) {
  require(v >= lo && v <= hi, "{} must be in [{}, {}], got {}", arg, lo, hi, v);
}
}  // namespace

void LayerSpec::validate() const {
  require_range("hidden (H)", hidden, 1, 1 << 20);
  require_range("intermediate (I)", intermediate, 1, 1 << 20);
  require_range("experts (E)", experts, 1, 1 << 16);
  require(top_k >= 1 && top_k <= experts, "top_k (K) must be in [1, experts={}], got {}", experts, top_k);
  require_range("shared_intermediate (I_s)", shared_intermediate, 0, 1 << 20);
  if (swiglu_limit)
    require(std::isfinite(*swiglu_limit) && *swiglu_limit > 0, "swiglu_limit must be finite and > 0, got {}",
            *swiglu_limit);
  if (dtype == DType::mxfp8) {
    require(hidden % kMxBlock == 0, "hidden (H) must be a multiple of {} for mxfp8, got {}", kMxBlock, hidden);
    require(intermediate % kMxBlock == 0, "intermediate (I) must be a multiple of {} for mxfp8, got {}", kMxBlock,
            intermediate);
    require(shared_intermediate % kMxBlock == 0,
            "shared_intermediate (I_s) must be a multiple of {} for mxfp8, got {}", kMxBlock, shared_intermediate);
  }
}

std::string LayerSpec::describe() const {
  return fmt::format("{}: H={} I={} E={} K={} I_s={}{} dtype={} mma={}", name, hidden, intermediate, experts, top_k,
                     shared_intermediate, swiglu_limit ? fmt::format(" clamp={}", *swiglu_limit) : "",
                     to_string(dtype), to_string(mma));
}

void RunConfig::validate(const LayerSpec& spec) const {
  require_range("ranks (R)", ranks, 1, 4096);
  require(spec.experts % ranks == 0, "ranks (R) must divide experts (E={}), got R={}", spec.experts, ranks);
  require(tokens_per_rank >= 1 && tokens_per_rank <= (1 << 24), "tokens per rank (T) must be in [1, {}], got {}",
          1 << 24, tokens_per_rank);
  require(minibatch >= 0 && minibatch <= tokens_per_rank,
          "minibatch must be in [0, tokens per rank={}] (0 = all), got {}", tokens_per_rank, minibatch);
  require(macrobatch >= 0, "macrobatch must be >= 0 (0 = all), got {}", macrobatch);
  require_range("comm_sms_forward", comm_sms_forward, 1, 1024);
  require_range("comm_sms_backward", comm_sms_backward, 1, 1024);
  require(std::isfinite(capacity_factor) && capacity_factor >= 0.0 && capacity_factor <= kMaxCapacityFactor,
          "capacity factor (--capacity) must be in [0, {}] (0 = fit), got {}", kMaxCapacityFactor, capacity_factor);
}

std::string RunConfig::describe() const {
  return fmt::format(
      "R={} T={} minibatch={} macrobatch={} comm_sms={}/{} dispatch={}/{} combine={}/{} capacity={} seed={}", ranks,
      tokens_per_rank, minibatch_tokens(), macrobatch, comm_sms_forward, comm_sms_backward,
      to_string(dispatch_forward), to_string(dispatch_backward), to_string(combine_forward),
      to_string(combine_backward), capacity_factor, seed) + (overwrite_weight_grads ? " weight_grads=overwrite" : "");
}

void Routing::validate(const LayerSpec& spec) const {
  require(tokens >= 1, "routing tokens must be >= 1, got {}", tokens);
  require(top_k == spec.top_k, "routing top_k must equal the spec's K={}, got {}", spec.top_k, top_k);
  const auto n = static_cast<size_t>(tokens) * static_cast<size_t>(top_k);
  require(topk_experts.size() == n, "routing topk_experts must have tokens*K={} entries, got {}", n,
          topk_experts.size());
  require(router_weights.size() == n, "routing router_weights must have tokens*K={} entries, got {}", n,
          router_weights.size());
  for (int64_t g = 0; g < tokens; ++g) {
    for (int k = 0; k < top_k; ++k) {
      const int32_t e = expert(g, k);
      require(e >= 0 && e < spec.experts, "routing topk_experts[{}][{}] must be in [0, E={}), got {}", g, k,
              spec.experts, e);
      require(std::isfinite(weight(g, k)), "routing router_weights[{}][{}] must be finite, got {}", g, k,
              weight(g, k));
      for (int j = 0; j < k; ++j)
        require(expert(g, j) != e, "routing topk_experts[{}] names expert {} twice (slots {} and {})", g, e, j, k);
    }
  }
}

std::string data_dir() {
  if (const char* env = std::getenv("CALICO_DATA_DIR"); env && *env) return env;
  // An installed binary (PREFIX/bin/calico, or a program linked against the installed libraries in
  // PREFIX/bin) finds PREFIX/share/calico/data.
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto installed = exe.parent_path().parent_path() / "share" / "calico" / "data";
    if (std::filesystem::is_directory(installed / "presets", ec)) return installed.string();
  }
  return CALICO_DEFAULT_DATA_DIR;
}

std::string scripts_dir() { return (std::filesystem::path(data_dir()).parent_path() / "scripts").string(); }

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  const auto dir = std::filesystem::path(data_dir()) / "presets";
  if (std::filesystem::is_directory(dir))
    for (const auto& entry : std::filesystem::directory_iterator(dir))
      if (entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

LayerSpec parse_layer_spec_json(const std::string& json_text, const std::string& origin) {
  // Checked fields (issue 9): integers integral and in LayerSpec's documented ranges, unknown keys an error.
  const nlohmann::json j = parse_json_text(json_text, origin);
  JsonFields f(j, origin);
  LayerSpec s;
  s.name = f.string("name", origin);
  s.hidden = static_cast<int>(f.integer("hidden", 1, 1 << 20));
  s.intermediate = static_cast<int>(f.integer("intermediate", 1, 1 << 20));
  s.experts = static_cast<int>(f.integer("experts", 1, 1 << 16));
  s.top_k = static_cast<int>(f.integer("top_k", 1, 1 << 16));
  s.shared_intermediate = static_cast<int>(f.integer("shared_intermediate", 0, 1 << 20, 0));
  if (f.has("swiglu_limit")) s.swiglu_limit = static_cast<float>(f.number("swiglu_limit", 1e-30, 3e38));
  f.allow("swiglu_limit");
  f.allow("source");       // where the shape comes from (free text)
  f.allow("description");  // free text
  f.finish();
  s.validate();
  return s;
}

LayerSpec load_preset(const std::string& name) {
  const auto path = std::filesystem::path(data_dir()) / "presets" / (name + ".json");
  std::ifstream in(path);
  if (!in) {
    std::string known;
    for (const auto& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
    throw Error(fmt::format("unknown preset '{}' (no file {}); known presets: {}", name, path.string(), known));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_layer_spec_json(ss.str(), path.string());
}

const char* to_string(DType d) { return d == DType::bf16 ? "bf16" : "mxfp8"; }
const char* to_string(Direction d) { return d == Direction::push ? "push" : "pull"; }
const char* to_string(MxScaleRule r) { return r == MxScaleRule::rceil ? "rceil" : "ocp-floor"; }
const char* to_string(MmaModel m) {
  switch (m) {
    case MmaModel::hopper_bf16: return "hopper-bf16";
    case MmaModel::hopper_fp8: return "hopper-fp8";
    case MmaModel::blackwell_bf16: return "blackwell-bf16";
    case MmaModel::blackwell_mxfp8: return "blackwell-mxfp8";
  }
  return "?";
}

DType parse_dtype(const std::string& s) {
  if (s == "bf16") return DType::bf16;
  if (s == "mxfp8") return DType::mxfp8;
  throw Error(fmt::format("--dtype must be bf16 or mxfp8, got '{}'", s));
}
Direction parse_direction(const std::string& s) {
  if (s == "push") return Direction::push;
  if (s == "pull") return Direction::pull;
  throw Error(fmt::format("direction must be push or pull, got '{}'", s));
}
MxScaleRule parse_scale_rule(const std::string& s) {
  if (s == "rceil") return MxScaleRule::rceil;
  if (s == "ocp-floor") return MxScaleRule::ocp_floor;
  throw Error(fmt::format("--scale-rule must be rceil or ocp-floor, got '{}'", s));
}
MmaModel parse_mma_model(const std::string& s) {
  for (auto m : {MmaModel::hopper_bf16, MmaModel::hopper_fp8, MmaModel::blackwell_bf16, MmaModel::blackwell_mxfp8})
    if (s == to_string(m)) return m;
  throw Error(fmt::format(
      "--mma must be one of hopper-bf16, hopper-fp8, blackwell-bf16, blackwell-mxfp8, got '{}'", s));
}

}  // namespace calico
