// The in-process driver of the reference layer: generates the inputs from the seed, builds the schedule,
// runs the stage functions rank by rank with the exchanges in between (an emulated all-to-all), and wraps it
// all as calico::Backend. Also the float64 check mode's glue.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "calico/data.h"
#include "calico/error.h"
#include "calico/reference.h"
#include "parallel.h"
#include "profile.h"

namespace calico::ref {

const char* to_string(ReferenceMode m) { return m == ReferenceMode::contract ? "contract" : "float64"; }

ReferenceMode parse_reference_mode(const std::string& s) {
  if (s == "contract") return ReferenceMode::contract;
  if (s == "float64") return ReferenceMode::float64;
  throw Error(fmt::format("--mode must be contract or float64, got '{}'", s));
}

void layer_input(const LayerSpec& spec, uint64_t seed, InputTensor which, int expert, int64_t row0, int64_t rows,
                 uint16_t* out) {
  int64_t cols = spec.hidden;
  double fan_in = 1.0;
  switch (which) {
    case InputTensor::x:
    case InputTensor::d_out: expert = 0; break;
    case InputTensor::w_gate:
    case InputTensor::w_up: fan_in = spec.hidden; break;
    case InputTensor::w_down: cols = spec.intermediate, fan_in = spec.intermediate; break;
    case InputTensor::ws_gate:
    case InputTensor::ws_up: expert = 0, fan_in = spec.hidden; break;
    case InputTensor::ws_down: expert = 0, cols = spec.shared_intermediate, fan_in = spec.shared_intermediate; break;
  }
  const float scale = static_cast<float>(1.0 / std::sqrt(fan_in));  // sqrt and / are correctly rounded
  const uint64_t stream = (static_cast<uint64_t>(which) << 32) | static_cast<uint32_t>(expert);
  const int64_t base = row0 * cols;
  const uint64_t key = stream_key(seed, stream);
#pragma omp parallel for schedule(static) if (rows * cols >= (1 << 12))
  for (int64_t i = 0; i < rows * cols; ++i) out[i] = f32_to_bf16(normal_with_key(key, base + i) * scale);
}

namespace {

using Clock = std::chrono::steady_clock;

struct Timer {
  StageTimes* times;
  void add(const std::string& stage, Clock::time_point since) {
    if (!times) return;
    const double s = std::chrono::duration<double>(Clock::now() - since).count();
    for (auto& [name, total] : *times)
      if (name == stage) {
        total += s;
        return;
      }
    times->emplace_back(stage, s);
  }
};

template <typename T>
T* data_of(Tensor& t) { return reinterpret_cast<T*>(t.bytes.data()); }

// A tensor whose producer writes every element: no zero-fill (Tensor::bytes does not zero on resize), so
// the producer's parallel loop touches its pages first.
Tensor uninit(const std::string& name, ElemType type, std::vector<int64_t> shape) {
  Tensor t{name, type, std::move(shape), {}};
  t.bytes.resize(static_cast<size_t>(t.numel() * elem_size(type)));
  return t;
}

// A zero tensor (the weight-gradient accumulators): zeroed in parallel, in 2 MiB pieces (one huge page each),
// instead of one thread value-initialising 45 GB at deepseek-v3's size.
Tensor zeros(const std::string& name, ElemType type, std::vector<int64_t> shape) {
  Tensor t = uninit(name, type, std::move(shape));
  detail::parallel_zero(t.bytes.data(), t.bytes.size());
  return t;
}

// The inputs of one rank (calico/backend.h names and shapes), generated from the seed.
TensorSet rank_inputs(const LayerSpec& spec, const RunConfig& cfg, const Routing& routing, int r) {
  const int64_t T = cfg.tokens_per_rank, H = spec.hidden, I = spec.intermediate, K = spec.top_k, Is = spec.shared_intermediate;
  const int EL = spec.experts / cfg.ranks;
  TensorSet set;
  auto bf16_tensor = [&](const char* name, std::vector<int64_t> shape, InputTensor which, int64_t rows_per_expert) {
    Tensor t = uninit(name, ElemType::bf16, shape);  // layer_input writes every element
    if (which == InputTensor::x || which == InputTensor::d_out) {
      layer_input(spec, cfg.seed, which, 0, r * T, T, data_of<uint16_t>(t));
    } else if (which == InputTensor::w_gate || which == InputTensor::w_up || which == InputTensor::w_down) {
      for (int le = 0; le < EL; ++le)
        layer_input(spec, cfg.seed, which, r * EL + le, 0, rows_per_expert,
                    data_of<uint16_t>(t) + le * rows_per_expert * (t.numel() / EL / rows_per_expert));
    } else {
      layer_input(spec, cfg.seed, which, 0, 0, shape[0], data_of<uint16_t>(t));
    }
    set.add(std::move(t));
  };
  bf16_tensor("x", {T, H}, InputTensor::x, 0);
  set.add(Tensor::from("topk_experts", ElemType::i32, {T, K},
                       std::vector<int32_t>(routing.topk_experts.begin() + r * T * K,
                                            routing.topk_experts.begin() + (r + 1) * T * K)));
  set.add(Tensor::from("router_weights", ElemType::f32, {T, K},
                       std::vector<float>(routing.router_weights.begin() + r * T * K,
                                          routing.router_weights.begin() + (r + 1) * T * K)));
  bf16_tensor("d_out", {T, H}, InputTensor::d_out, 0);
  bf16_tensor("w_gate", {EL, I, H}, InputTensor::w_gate, I);
  bf16_tensor("w_up", {EL, I, H}, InputTensor::w_up, I);
  bf16_tensor("w_down", {EL, H, I}, InputTensor::w_down, H);
  if (Is > 0) {
    bf16_tensor("ws_gate", {Is, H}, InputTensor::ws_gate, 0);
    bf16_tensor("ws_up", {Is, H}, InputTensor::ws_up, 0);
    bf16_tensor("ws_down", {H, Is}, InputTensor::ws_down, 0);
  }
  return set;
}

const uint16_t* bf16_of(const TensorSet& set, const char* name) {
  const Tensor* t = set.find(name);
  return t ? t->data<uint16_t>() : nullptr;
}

// The all-to-all: received[dst][src] = sent[src][dst].
std::vector<std::vector<RowBuffer>> exchange(std::vector<std::vector<RowBuffer>>& sent) {
  const size_t R = sent.size();
  std::vector<std::vector<RowBuffer>> received(R, std::vector<RowBuffer>(R));
  for (size_t src = 0; src < R; ++src)
    for (size_t dst = 0; dst < R; ++dst) received[dst][src] = std::move(sent[src][dst]);
  return received;
}

void run_contract(const RunRequest& req, const Schedule& s, std::vector<TensorSet>& ranks, Timer& timer) {
  const LayerSpec& spec = req.spec;
  const int R = req.config.ranks;
  const int64_t T = req.config.tokens_per_rank, H = spec.hidden, I = spec.intermediate, K = spec.top_k,
                Is = spec.shared_intermediate;
  const int EL = spec.experts / R;
  std::vector<ExpertWeights> w(R);
  for (int r = 0; r < R; ++r)
    w[r] = {bf16_of(ranks[r], "w_gate"), bf16_of(ranks[r], "w_up"),  bf16_of(ranks[r], "w_down"),
            bf16_of(ranks[r], "ws_gate"), bf16_of(ranks[r], "ws_up"), bf16_of(ranks[r], "ws_down")};

  // Forward.
  auto t0 = Clock::now();
  std::vector<std::vector<RowBuffer>> sent(R);
  for (int r = 0; r < R; ++r) sent[r] = dispatch_pack(s, r, static_cast<int>(H), bf16_of(ranks[r], "x"));
  auto received = exchange(sent);
  timer.add("forward dispatch", t0);
  t0 = Clock::now();
  std::vector<std::vector<FfnSaved>> saved(R);
  for (int r = 0; r < R; ++r) sent[r] = expert_forward(spec, s, r, received[r], w[r], saved[r]);
  auto received_y = exchange(sent);
  timer.add("forward experts", t0);
  t0 = Clock::now();
  std::vector<FfnSaved> shared_saved(R);
  std::vector<RowBuffer> y_shared(R);
  if (Is > 0)
    for (int r = 0; r < R; ++r) y_shared[r] = shared_forward(spec, T, bf16_of(ranks[r], "x"), w[r], shared_saved[r]);
  timer.add("forward shared expert", t0);
  t0 = Clock::now();
  for (int r = 0; r < R; ++r) {
    Tensor out = uninit("out", ElemType::bf16, {T, H});
    combine(spec, s, req.routing, r, received_y[r], y_shared[r], data_of<uint16_t>(out));
    ranks[r].add(std::move(out));
  }
  timer.add("forward combine", t0);
  if (!req.backward) return;

  // Backward.
  t0 = Clock::now();
  for (int r = 0; r < R; ++r) {
    Tensor d_rw = uninit("d_router_weights", ElemType::f32, {T, K});
    router_grad(spec, s, r, bf16_of(ranks[r], "d_out"), received_y[r], data_of<float>(d_rw));
    ranks[r].add(std::move(d_rw));
  }
  received_y.clear();
  timer.add("backward router grad", t0);
  t0 = Clock::now();
  for (int r = 0; r < R; ++r) sent[r] = dispatch_pack(s, r, static_cast<int>(H), bf16_of(ranks[r], "d_out"));
  received = exchange(sent);
  timer.add("backward dispatch", t0);
  t0 = Clock::now();
  std::vector<TensorSet> grads(R);
  for (int r = 0; r < R; ++r) {
    grads[r].add(zeros("d_w_gate", ElemType::f32, {EL, I, H}));
    grads[r].add(zeros("d_w_up", ElemType::f32, {EL, I, H}));
    grads[r].add(zeros("d_w_down", ElemType::f32, {EL, H, I}));
    if (Is > 0) {
      grads[r].add(zeros("d_ws_gate", ElemType::f32, {Is, H}));
      grads[r].add(zeros("d_ws_up", ElemType::f32, {Is, H}));
      grads[r].add(zeros("d_ws_down", ElemType::f32, {H, Is}));
    }
  }
  auto grad_ptrs = [&](int r) {
    auto f = [&](const char* n) { Tensor* t = const_cast<Tensor*>(grads[r].find(n)); return t ? data_of<float>(*t) : nullptr; };
    return ExpertGrads{f("d_w_gate"), f("d_w_up"), f("d_w_down"), f("d_ws_gate"), f("d_ws_up"), f("d_ws_down")};
  };
  for (int r = 0; r < R; ++r) {
    sent[r] = expert_backward(spec, s, req.routing, r, received[r], w[r], saved[r], grad_ptrs(r));
    saved[r].clear();
  }
  auto received_dx = exchange(sent);
  timer.add("backward experts", t0);
  t0 = Clock::now();
  std::vector<RowBuffer> dx_shared(R);
  if (Is > 0)
    for (int r = 0; r < R; ++r)
      dx_shared[r] = shared_backward(spec, T, bf16_of(ranks[r], "d_out"), w[r], shared_saved[r], grad_ptrs(r));
  timer.add("backward shared expert", t0);
  t0 = Clock::now();
  for (int r = 0; r < R; ++r) {
    Tensor d_x = uninit("d_x", ElemType::bf16, {T, H});
    backward_combine(spec, s, r, received_dx[r], dx_shared[r], data_of<uint16_t>(d_x));
    // Order of calico/backend.h: d_x, d_router_weights, then the weight gradients.
    auto& ts = ranks[r].tensors;
    const auto pos = std::find_if(ts.begin(), ts.end(), [](const Tensor& t) { return t.name == "d_router_weights"; });
    ts.insert(pos, std::move(d_x));
    for (auto& g : grads[r].tensors) ranks[r].add(std::move(g));
  }
  timer.add("backward combine", t0);
}

std::vector<double> to_f64_bf16(const uint16_t* p, size_t n) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = bf16_to_f32(p[i]);
  return v;
}

// float64 mode: gathers the global inputs, runs layer_f64, splits the outputs per rank as f64 tensors.
void run_float64(const RunRequest& req, std::vector<TensorSet>& ranks, Timer& timer) {
  const auto t0 = Clock::now();
  const LayerSpec& spec = req.spec;
  const int R = req.config.ranks;
  const int64_t T = req.config.tokens_per_rank, H = spec.hidden, I = spec.intermediate, K = spec.top_k,
                Is = spec.shared_intermediate;
  const int EL = spec.experts / R;
  F64Layer layer;
  layer.spec = spec;
  layer.tokens = R * T;
  layer.topk_experts = req.routing.topk_experts;
  layer.router_weights.assign(req.routing.router_weights.begin(), req.routing.router_weights.end());
  auto append = [&](std::vector<double>& dst, const TensorSet& set, const char* name) {
    const Tensor* t = set.find(name);
    const auto v = to_f64_bf16(t->data<uint16_t>(), static_cast<size_t>(t->numel()));
    dst.insert(dst.end(), v.begin(), v.end());
  };
  for (int r = 0; r < R; ++r) {
    append(layer.x, ranks[r], "x");
    append(layer.d_out, ranks[r], "d_out");
    append(layer.w_gate, ranks[r], "w_gate");
    append(layer.w_up, ranks[r], "w_up");
    append(layer.w_down, ranks[r], "w_down");
  }
  if (Is > 0) {
    append(layer.ws_gate, ranks[0], "ws_gate");
    append(layer.ws_up, ranks[0], "ws_up");
    append(layer.ws_down, ranks[0], "ws_down");
  }
  const F64Grads f = layer_f64(layer, T, req.backward);
  auto slice = [](const std::vector<double>& v, int r, int64_t per) {
    return std::vector<double>(v.begin() + r * per, v.begin() + (r + 1) * per);
  };
  for (int r = 0; r < R; ++r) {
    auto& set = ranks[r];
    set.add(Tensor::from("out", ElemType::f64, {T, H}, slice(f.out, r, T * H)));
    if (!req.backward) continue;
    set.add(Tensor::from("d_x", ElemType::f64, {T, H}, slice(f.d_x, r, T * H)));
    set.add(Tensor::from("d_router_weights", ElemType::f64, {T, K}, slice(f.d_router_weights, r, T * K)));
    set.add(Tensor::from("d_w_gate", ElemType::f64, {EL, I, H}, slice(f.d_w_gate, r, EL * I * H)));
    set.add(Tensor::from("d_w_up", ElemType::f64, {EL, I, H}, slice(f.d_w_up, r, EL * I * H)));
    set.add(Tensor::from("d_w_down", ElemType::f64, {EL, H, I}, slice(f.d_w_down, r, EL * H * I)));
    if (Is > 0) {
      set.add(Tensor::from("d_ws_gate", ElemType::f64, {Is, H}, slice(f.d_ws_gate, r, Is * H)));
      set.add(Tensor::from("d_ws_up", ElemType::f64, {Is, H}, slice(f.d_ws_up, r, Is * H)));
      set.add(Tensor::from("d_ws_down", ElemType::f64, {H, Is}, slice(f.d_ws_down, r, H * Is)));
    }
  }
  timer.add("float64 layer", t0);
}

class ReferenceBackend final : public Backend {
 public:
  explicit ReferenceBackend(ReferenceMode mode) : mode_(mode) {}
  std::string name() const override { return std::string("reference-") + to_string(mode_); }
  RunResult run(const RunRequest& request) override { return run_reference(request, mode_); }

 private:
  ReferenceMode mode_;
};

}  // namespace

RunResult run_reference(const RunRequest& req, ReferenceMode mode, StageTimes* times) {
  Timer timer{times};
  auto t0 = Clock::now();
  const Schedule s = build_schedule(req.spec, req.config, req.routing);  // validates spec, config and routing
  if (mode == ReferenceMode::contract)
    require(req.spec.mma == MmaModel::hopper_bf16 || req.spec.mma == MmaModel::blackwell_bf16 ||
                (req.spec.mma == MmaModel::blackwell_mxfp8 && req.spec.dtype == DType::mxfp8),
            "--mma must be a bf16 model (hopper-bf16 or blackwell-bf16), or blackwell-mxfp8 with --dtype mxfp8, "
            "for the reference: --dtype mxfp8 with a bf16 model is the Hopper path (dequantise to bf16, BF16 MMA), "
            "with blackwell-mxfp8 the Blackwell one (block-scaled MMA model); got '{}' with --dtype {}",
            to_string(req.spec.mma), to_string(req.spec.dtype));
  require(req.threads >= 0 && req.threads <= 1024, "--threads must be in [0, 1024] (0 = default), got {}",
          req.threads);
  const int saved_threads = omp_get_max_threads();
  if (req.threads > 0) omp_set_num_threads(req.threads);
  timer.add("schedule", t0);
  RunResult result;
  try {
    t0 = Clock::now();
    result.ranks.resize(req.config.ranks);
    for (int r = 0; r < req.config.ranks; ++r) result.ranks[r] = rank_inputs(req.spec, req.config, req.routing, r);
    timer.add("inputs", t0);
    if (mode == ReferenceMode::contract) run_contract(req, s, result.ranks, timer);
    else run_float64(req, result.ranks, timer);
  } catch (...) {
    omp_set_num_threads(saved_threads);
    throw;
  }
  omp_set_num_threads(saved_threads);
  detail::profile_report();
  return result;
}

std::unique_ptr<Backend> make_reference_backend(ReferenceMode mode) { return std::make_unique<ReferenceBackend>(mode); }

}  // namespace calico::ref
