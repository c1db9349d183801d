// The fixed per-rank tensor names of backend.h with their types and shapes, so the trace reader can reject
// a wrong-schema file and the gate can reject a backend that returns something else.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "calico/spec.h"
#include "calico/tensor.h"

namespace calico::harness {

struct TensorSchema {
  ElemType type;
  std::vector<int64_t> shape;
  bool input;
};

// Expected type and shape of `name` on one rank; nullopt for a name backend.h does not define.
std::optional<TensorSchema> tensor_schema(const std::string& name, const LayerSpec& spec, const RunConfig& config);
bool is_input_tensor(const std::string& name);
// Throws calico::Error naming `where` and the tensor when `t` does not match its schema.
void check_tensor_schema(const Tensor& t, const LayerSpec& spec, const RunConfig& config, const std::string& where);

}  // namespace calico::harness
