// What every backend (reference, megakernel, test backends) takes and gives back, so the harness can run,
// trace and diff any of them the same way.
//
// Tensor names per rank (shapes for rank r; "local experts" are r*E/R .. (r+1)*E/R - 1):
//   inputs : x [T,H] bf16, topk_experts [T,K] i32, router_weights [T,K] f32, d_out [T,H] bf16,
//            w_gate [E/R,I,H] bf16, w_up [E/R,I,H] bf16, w_down [E/R,H,I] bf16,
//            ws_gate [I_s,H] bf16, ws_up [I_s,H] bf16, ws_down [H,I_s] bf16 (shared expert, if I_s > 0)
//   outputs: out [T,H] bf16, d_x [T,H] bf16, d_router_weights [T,K] f32,
//            d_w_gate [E/R,I,H] f32, d_w_up [E/R,I,H] f32, d_w_down [E/R,H,I] f32 (fp32 accumulators),
//            d_ws_gate [I_s,H] f32, d_ws_up [I_s,H] f32, d_ws_down [H,I_s] f32 (this rank's partial sum)
// Concatenating ranks along axis 0 gives the global tensor; for every output except the shared expert's
// weight gradients that global tensor is identical for every R (DESIGN 2.3).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "calico/spec.h"
#include "calico/tensor.h"

namespace calico {

struct RunRequest {
  LayerSpec spec;
  RunConfig config;
  Routing routing;        // global, [R*T, K]
  bool backward = true;   // also run the backward pass
  int threads = 0;        // OpenMP threads; 0 = the runtime's default
};

struct RunResult {
  std::vector<TensorSet> ranks;  // [R]: inputs and outputs of each rank, names as above
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual RunResult run(const RunRequest& request) = 0;
};

// Tensors whose global (rank-concatenated) value must not depend on R, minibatch, threads or run.
inline bool is_partition_invariant(const std::string& tensor_name) {
  return tensor_name.rfind("d_ws_", 0) != 0;
}

}  // namespace calico
