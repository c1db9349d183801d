// Tensor schema of backend.h (names, types, per-rank shapes) and how ranks combine into global tensors.
#include "schema.h"

#include <fmt/ranges.h>

#include "calico/error.h"
#include "calico/harness.h"

namespace calico::harness {

bool is_input_tensor(const std::string& name) {
  for (const char* n :
       {"x", "topk_experts", "router_weights", "d_out", "w_gate", "w_up", "w_down", "ws_gate", "ws_up", "ws_down"})
    if (name == n) return true;
  return false;
}

std::optional<TensorSchema> tensor_schema(const std::string& name, const LayerSpec& spec, const RunConfig& config) {
  const int64_t T = config.tokens_per_rank, H = spec.hidden, I = spec.intermediate, K = spec.top_k;
  const int64_t El = config.ranks > 0 ? spec.experts / config.ranks : 0, Is = spec.shared_intermediate;
  const bool in = is_input_tensor(name);
  const std::string base = name.rfind("d_", 0) == 0 ? name.substr(2) : name;
  const bool grad = base != name;
  if (base == "x" || base == "out") return TensorSchema{ElemType::bf16, {T, H}, in};
  if (name == "topk_experts") return TensorSchema{ElemType::i32, {T, K}, in};
  if (base == "router_weights") return TensorSchema{ElemType::f32, {T, K}, in};
  const ElemType wt = grad ? ElemType::f32 : ElemType::bf16;
  if (base == "w_gate" || base == "w_up") return TensorSchema{wt, {El, I, H}, in};
  if (base == "w_down") return TensorSchema{wt, {El, H, I}, in};
  if (base == "ws_gate" || base == "ws_up") return TensorSchema{wt, {Is, H}, in};
  if (base == "ws_down") return TensorSchema{wt, {H, Is}, in};
  return std::nullopt;
}

void check_tensor_schema(const Tensor& t, const LayerSpec& spec, const RunConfig& config, const std::string& where) {
  auto s = tensor_schema(t.name, spec, config);
  require(s.has_value(), "{}: unknown tensor '{}' (backend.h names the allowed tensors)", where, t.name);
  require(t.type == s->type, "{}: tensor '{}' must be {}, got {}", where, t.name, to_string(s->type),
          to_string(t.type));
  require(t.shape == s->shape, "{}: tensor '{}' must have shape [{}], got [{}]", where, t.name,
          fmt::join(s->shape, ","), fmt::join(t.shape, ","));
  require(static_cast<int64_t>(t.bytes.size()) == t.numel() * elem_size(t.type),
          "{}: tensor '{}' holds {} bytes, its shape needs {}", where, t.name, t.bytes.size(),
          t.numel() * elem_size(t.type));
}

Placement placement_of(const std::string& name) {
  if (name.rfind("d_ws_", 0) == 0) return Placement::partial;
  if (name.rfind("ws_", 0) == 0) return Placement::replicated;
  return Placement::sharded;
}

std::vector<std::string> axis_names(const std::string& name, size_t ndim) {
  const std::string base = name.rfind("d_", 0) == 0 ? name.substr(2) : name;
  std::vector<std::string> axes;
  if (base == "x" || base == "out" || base == "topk_experts" || base == "router_weights") {
    axes = {"token", base == "topk_experts" || base == "router_weights" ? "slot" : "column"};
  } else if (ndim == 3) {
    axes = {"expert", "row", "column"};
  } else if (ndim == 2) {
    axes = {"row", "column"};
  }
  while (axes.size() < ndim) axes.insert(axes.begin(), fmt::format("axis{}", ndim - axes.size() - 1));
  axes.resize(ndim);
  return axes;
}

}  // namespace calico::harness
