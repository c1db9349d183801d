// The megakernel as a calico::Backend: the same RunRequest, the same generated inputs (ref::layer_input, a
// function of the seed alone) and the same tensors, names and order as the reference, so `calico diff` and
// `calico gate` compare the two bit for bit. One GPU, R = 1 for now (the kernel is written for R ranks).
#include <fmt/format.h>

#include <algorithm>

#include "calico/error.h"
#include "calico/megakernel.h"
#include "calico/reference.h"
#include "megakernel_backend.h"

namespace calico::harness {
namespace {

template <typename T>
T* data_of(Tensor& t) {
  return reinterpret_cast<T*>(t.bytes.data());
}

Tensor zeros(const std::string& name, ElemType type, std::vector<int64_t> shape) {
  Tensor t{name, type, std::move(shape), {}};
  t.bytes.assign(static_cast<size_t>(t.numel() * elem_size(type)), 0);
  return t;
}

class MegakernelBackend final : public Backend {
 public:
  std::string name() const override { return "megakernel"; }

  RunResult run(const RunRequest& q) override {
    q.spec.validate();
    q.config.validate(q.spec);
    q.routing.validate(q.spec);
    require(q.config.ranks == 1,
            "--ranks: the megakernel backend runs R = 1 on one GPU for now (peers over NVLink come next), got {}",
            q.config.ranks);
    require(q.routing.tokens == q.config.total_tokens(), "routing has {} tokens, the config needs R*T={}",
            q.routing.tokens, q.config.total_tokens());
    build_schedule(q.spec, q.config, q.routing);  // capacity and routing errors exactly as the reference reports them
    const LayerSpec& spec = q.spec;
    const int64_t T = q.config.tokens_per_rank, H = spec.hidden, I = spec.intermediate, K = spec.top_k,
                  E = spec.experts, Is = spec.shared_intermediate;
    const uint64_t seed = q.config.seed;

    TensorSet set;
    auto input = [&](const char* name, std::vector<int64_t> shape, ref::InputTensor which, int64_t rows_per_expert) {
      Tensor t = zeros(name, ElemType::bf16, std::move(shape));
      if (rows_per_expert == 0) {
        ref::layer_input(spec, seed, which, 0, 0, t.shape[0], data_of<uint16_t>(t));
      } else {
        const int64_t per = t.numel() / E;
        for (int64_t e = 0; e < E; ++e)
          ref::layer_input(spec, seed, which, static_cast<int>(e), 0, rows_per_expert, data_of<uint16_t>(t) + e * per);
      }
      set.add(std::move(t));
    };
    input("x", {T, H}, ref::InputTensor::x, 0);
    set.add(Tensor::from("topk_experts", ElemType::i32, {T, K}, q.routing.topk_experts));
    set.add(Tensor::from("router_weights", ElemType::f32, {T, K}, q.routing.router_weights));
    input("d_out", {T, H}, ref::InputTensor::d_out, 0);
    input("w_gate", {E, I, H}, ref::InputTensor::w_gate, I);
    input("w_up", {E, I, H}, ref::InputTensor::w_up, I);
    input("w_down", {E, H, I}, ref::InputTensor::w_down, H);
    if (Is > 0) {
      input("ws_gate", {Is, H}, ref::InputTensor::ws_gate, 0);
      input("ws_up", {Is, H}, ref::InputTensor::ws_up, 0);
      input("ws_down", {H, Is}, ref::InputTensor::ws_down, 0);
    }
    auto bf16_of = [&](const char* n) { return set.find(n) ? set.find(n)->data<uint16_t>() : nullptr; };

    gpu::MoeLayer layer(spec, T, megakernel_options(q.config));
    gpu::MoeInputs in;
    in.x = bf16_of("x"), in.d_out = bf16_of("d_out");
    in.topk_experts = set.find("topk_experts")->data<int32_t>();
    in.router_weights = set.find("router_weights")->data<float>();
    in.w_gate = bf16_of("w_gate"), in.w_up = bf16_of("w_up"), in.w_down = bf16_of("w_down");
    in.ws_gate = bf16_of("ws_gate"), in.ws_up = bf16_of("ws_up"), in.ws_down = bf16_of("ws_down");
    layer.set_inputs(in);
    layer.forward();
    if (q.backward) layer.backward();
    layer.synchronize();

    // Output order of the reference (calico/backend.h): out, d_x, d_router_weights, the weight gradients.
    Tensor out = zeros("out", ElemType::bf16, {T, H});
    gpu::MoeOutputs o;
    o.out = data_of<uint16_t>(out);
    std::vector<Tensor> grads;
    if (q.backward) {
      grads.push_back(zeros("d_x", ElemType::bf16, {T, H}));
      grads.push_back(zeros("d_router_weights", ElemType::f32, {T, K}));
      grads.push_back(zeros("d_w_gate", ElemType::f32, {E, I, H}));
      grads.push_back(zeros("d_w_up", ElemType::f32, {E, I, H}));
      grads.push_back(zeros("d_w_down", ElemType::f32, {E, H, I}));
      o.d_x = data_of<uint16_t>(grads[0]);
      o.d_router_weights = data_of<float>(grads[1]);
      o.d_w_gate = data_of<float>(grads[2]);
      o.d_w_up = data_of<float>(grads[3]);
      o.d_w_down = data_of<float>(grads[4]);
      if (Is > 0) {
        grads.push_back(zeros("d_ws_gate", ElemType::f32, {Is, H}));
        grads.push_back(zeros("d_ws_up", ElemType::f32, {Is, H}));
        grads.push_back(zeros("d_ws_down", ElemType::f32, {H, Is}));
        o.d_ws_gate = data_of<float>(grads[5]);
        o.d_ws_up = data_of<float>(grads[6]);
        o.d_ws_down = data_of<float>(grads[7]);
      }
    }
    layer.get_outputs(o);
    set.add(std::move(out));
    for (auto& g : grads) set.add(std::move(g));
    RunResult r;
    r.ranks.push_back(std::move(set));
    return r;
  }
};

}  // namespace

gpu::MoeOptions megakernel_options(const RunConfig& c) {
  gpu::MoeOptions o;
  // Dispatch directions: pull (the compute CTAs gather the token rows themselves) needs no data-movement CTAs
  // at R = 1, so a pass's comm SM count applies to push only.
  o.pull_forward = c.dispatch_forward == Direction::pull;
  o.pull_backward = c.dispatch_backward == Direction::pull;
  o.comm_ctas_forward = o.pull_forward ? 0 : c.comm_sms_forward;
  o.comm_ctas_backward = o.pull_backward ? 0 : c.comm_sms_backward;
  // The combine tail's task size follows the minibatch (0: the default of 16 tokens); at R = 1 the
  // overlap granularity of dispatch -> GEMM is the 128-row tile. Results never depend on either.
  if (c.minibatch > 0) o.combine_tokens = std::min(c.minibatch, 4096);
  o.accumulate_weight_grads = !c.overwrite_weight_grads;
  return o;
}

std::unique_ptr<Backend> make_megakernel_backend() { return std::make_unique<MegakernelBackend>(); }

}  // namespace calico::harness
