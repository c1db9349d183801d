// Backends by name for the harness: the reference, "toy" (a small self-contained MoE-shaped
// layer that follows the canonical order, so harness tests do not depend on the reference's speed) and two
// seeded faults that the gate must catch: a one-bit flip (wrapping any backend) and a changed reduction order.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "calico/harness.h"
#include "calico/numerics.h"
#include "calico/reference.h"
#include "megakernel_backend.h"
#include "schema.h"

namespace calico::harness {
namespace {

// ---- toy backend -----------------------------------------------------------------------------------------

uint64_t splitmix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// bf16 in [-scale/2, scale/2) from (seed, stream, index) alone: the same for every partition.
uint16_t toy_value(uint64_t seed, uint64_t stream, uint64_t index, float scale) {
  const uint64_t h = splitmix(splitmix(seed * 0x100000001B3ull + stream) ^ index);
  const float u = static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
  return f32_to_bf16((u - 0.5f) * scale);
}

std::vector<uint16_t> toy_tensor(uint64_t seed, uint64_t stream, int64_t n, float scale) {
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = toy_value(seed, stream, static_cast<uint64_t>(i), scale);
  return v;
}

// dot of bf16 vectors in fp32, ascending index, one fma per step: the toy's only GEMM primitive.
float dot_bf16(const uint16_t* a, const uint16_t* b, int64_t n, int64_t stride_b = 1) {
  float acc = 0.0f;
  for (int64_t i = 0; i < n; ++i) acc = f32_fma(bf16_to_f32(a[i]), bf16_to_f32(b[i * stride_b]), acc);
  return acc;
}

// The toy expert: a = bf16(x Wg^T) [I], y = bf16(a Wd^T) [H]. No up projection, no SwiGLU.
void toy_expert(const uint16_t* x, const uint16_t* wg, const uint16_t* wd, int64_t H, int64_t I, uint16_t* a,
                uint16_t* y) {
  for (int64_t i = 0; i < I; ++i) a[i] = f32_to_bf16(dot_bf16(x, wg + i * H, H));
  for (int64_t h = 0; h < H; ++h) y[h] = f32_to_bf16(dot_bf16(a, wd + h * I, I));
}

class ToyBackend final : public Backend {
 public:
  // rank_partials: the seeded reduction-order fault. d_w_down is summed per source rank first (ascending g
  // within a rank), then the R partial sums are added in rank order: the canonical order at R = 1, a
  // different one for R > 1 (exactly the partition dependence DESIGN 2.3 forbids).
  explicit ToyBackend(bool rank_partials = false) : rank_partials_(rank_partials) {}
  std::string name() const override { return rank_partials_ ? "faulty-order(toy, d_w_down by rank)" : "toy"; }

  RunResult run(const RunRequest& q) override {
    q.spec.validate();
    q.config.validate(q.spec);
    q.routing.validate(q.spec);
    const int64_t N = q.config.total_tokens(), H = q.spec.hidden, I = q.spec.intermediate, K = q.spec.top_k;
    const int64_t E = q.spec.experts, Is = q.spec.shared_intermediate;
    require(q.routing.tokens == N, "routing has {} tokens, the config needs R*T={}", q.routing.tokens, N);
    const uint64_t s = q.config.seed;
    const auto x = toy_tensor(s, 1, N * H, 2.0f), dout = toy_tensor(s, 2, N * H, 2.0f);
    const auto wg = toy_tensor(s, 3, E * I * H, 0.25f), wu = toy_tensor(s, 4, E * I * H, 0.25f);
    const auto wd = toy_tensor(s, 5, E * H * I, 0.25f);
    const auto wsg = toy_tensor(s, 6, Is * H, 0.25f), wsu = toy_tensor(s, 7, Is * H, 0.25f);
    const auto wsd = toy_tensor(s, 8, H * Is, 0.25f);

    // Forward per (g, k); a and y kept for the backward pass.
    std::vector<uint16_t> a(N * K * I), y(N * K * H), as(N * Is), ys(N * H, 0), out(N * H), dx(N * H);
    std::vector<float> drw(N * K);
    for (int64_t g = 0; g < N; ++g) {
      for (int k = 0; k < K; ++k) {
        const int64_t e = q.routing.expert(g, k);
        toy_expert(&x[g * H], &wg[e * I * H], &wd[e * H * I], H, I, &a[(g * K + k) * I], &y[(g * K + k) * H]);
      }
      if (Is > 0) toy_expert(&x[g * H], wsg.data(), wsd.data(), H, Is, &as[g * Is], &ys[g * H]);
      for (int64_t h = 0; h < H; ++h) {
        float acc = Is > 0 ? bf16_to_f32(ys[g * H + h]) : 0.0f;
        for (int k = 0; k < K; ++k) acc = f32_fma(q.routing.weight(g, k), bf16_to_f32(y[(g * K + k) * H + h]), acc);
        out[g * H + h] = f32_to_bf16(acc);
      }
    }
    // Backward: d_y_k = bf16(w_k d_out); d_w_down[e] and d_w_gate[e] summed over e's rows in ascending g
    // (the canonical order), fp32 accumulators.
    std::vector<float> dwg(E * I * H, 0.0f), dwu(E * I * H, 0.0f), dwd(E * H * I, 0.0f);
    const int parts = rank_partials_ ? q.config.ranks : 1;
    std::vector<std::vector<float>> dwd_part(parts, std::vector<float>(E * H * I, 0.0f));
    std::vector<uint16_t> dy(H), da(std::max<int64_t>(I, Is));
    for (int64_t g = 0; g < N; ++g) {
      std::vector<float> dxacc(H, 0.0f);
      for (int k = 0; k < K; ++k) {
        const int64_t e = q.routing.expert(g, k), row = g * K + k;
        drw[row] = dot_bf16(&dout[g * H], &y[row * H], H);
        for (int64_t h = 0; h < H; ++h) dy[h] = f32_to_bf16(q.routing.weight(g, k) * bf16_to_f32(dout[g * H + h]));
        for (int64_t i = 0; i < I; ++i) da[i] = f32_to_bf16(dot_bf16(dy.data(), &wd[e * H * I + i], H, I));
        for (int64_t h = 0; h < H; ++h)
          for (int64_t i = 0; i < I; ++i) {
            float& acc = dwd_part[parts == 1 ? 0 : g / q.config.tokens_per_rank][(e * H + h) * I + i];
            acc = f32_fma(bf16_to_f32(dy[h]), bf16_to_f32(a[row * I + i]), acc);
          }
        for (int64_t i = 0; i < I; ++i)
          for (int64_t h = 0; h < H; ++h) {
            float& acc = dwg[(e * I + i) * H + h];
            acc = f32_fma(bf16_to_f32(da[i]), bf16_to_f32(x[g * H + h]), acc);
          }
        for (int64_t h = 0; h < H; ++h)
          dxacc[h] = f32_fma(bf16_to_f32(da[h % I]), bf16_to_f32(wg[e * I * H + h]), dxacc[h]);
      }
      for (int64_t h = 0; h < H; ++h) dx[g * H + h] = f32_to_bf16(dxacc[h]);
    }
    dwd = dwd_part[0];
    for (int r = 1; r < parts; ++r)
      for (size_t j = 0; j < dwd.size(); ++j) dwd[j] = dwd[j] + dwd_part[r][j];
    return split(q, x, dout, wg, wu, wd, wsg, wsu, wsd, out, dx, drw, dwg, dwu, dwd, as);
  }

 private:
  bool rank_partials_;

  template <typename T>
  static Tensor slice(const std::string& name, ElemType type, const std::vector<T>& v, int64_t row0, int64_t rows,
                      std::vector<int64_t> inner) {
    int64_t n = 1;
    for (auto d : inner) n *= d;
    std::vector<int64_t> shape{rows};
    shape.insert(shape.end(), inner.begin(), inner.end());
    std::vector<T> part(v.begin() + row0 * n, v.begin() + (row0 + rows) * n);
    return Tensor::from(name, type, shape, part);
  }

  RunResult split(const RunRequest& q, const std::vector<uint16_t>& x, const std::vector<uint16_t>& dout,
                  const std::vector<uint16_t>& wg, const std::vector<uint16_t>& wu, const std::vector<uint16_t>& wd,
                  const std::vector<uint16_t>& wsg, const std::vector<uint16_t>& wsu, const std::vector<uint16_t>& wsd,
                  const std::vector<uint16_t>& out, const std::vector<uint16_t>& dx, const std::vector<float>& drw,
                  const std::vector<float>& dwg, const std::vector<float>& dwu, const std::vector<float>& dwd,
                  const std::vector<uint16_t>& as) {
    const int64_t T = q.config.tokens_per_rank, H = q.spec.hidden, I = q.spec.intermediate, K = q.spec.top_k;
    const int64_t El = q.spec.experts / q.config.ranks, Is = q.spec.shared_intermediate;
    RunResult res;
    for (int r = 0; r < q.config.ranks; ++r) {
      TensorSet s;
      const int64_t t0 = r * T, e0 = r * El;
      s.add(slice("x", ElemType::bf16, x, t0, T, {H}));
      s.add(slice("topk_experts", ElemType::i32, q.routing.topk_experts, t0, T, {K}));
      s.add(slice("router_weights", ElemType::f32, q.routing.router_weights, t0, T, {K}));
      s.add(slice("d_out", ElemType::bf16, dout, t0, T, {H}));
      s.add(slice("w_gate", ElemType::bf16, wg, e0, El, {I, H}));
      s.add(slice("w_up", ElemType::bf16, wu, e0, El, {I, H}));
      s.add(slice("w_down", ElemType::bf16, wd, e0, El, {H, I}));
      s.add(slice("ws_gate", ElemType::bf16, wsg, 0, Is, {H}));
      s.add(slice("ws_up", ElemType::bf16, wsu, 0, Is, {H}));
      s.add(slice("ws_down", ElemType::bf16, wsd, 0, H, {Is}));
      s.add(slice("out", ElemType::bf16, out, t0, T, {H}));
      if (q.backward) {
        s.add(slice("d_x", ElemType::bf16, dx, t0, T, {H}));
        s.add(slice("d_router_weights", ElemType::f32, drw, t0, T, {K}));
        s.add(slice("d_w_gate", ElemType::f32, dwg, e0, El, {I, H}));
        s.add(slice("d_w_up", ElemType::f32, dwu, e0, El, {I, H}));
        s.add(slice("d_w_down", ElemType::f32, dwd, e0, El, {H, I}));
        // Shared expert: this rank's partial sum over its own tokens, ascending t.
        std::vector<float> dsg(Is * H, 0.0f), dsu(Is * H, 0.0f), dsd(H * Is, 0.0f);
        for (int64_t t = 0; t < T; ++t)
          for (int64_t h = 0; h < H; ++h)
            for (int64_t i = 0; i < Is; ++i) {
              float& acc = dsd[h * Is + i];
              acc = f32_fma(bf16_to_f32(dout[(t0 + t) * H + h]), bf16_to_f32(as[(t0 + t) * Is + i]), acc);
            }
        s.add(slice("d_ws_gate", ElemType::f32, dsg, 0, Is, {H}));
        s.add(slice("d_ws_up", ElemType::f32, dsu, 0, Is, {H}));
        s.add(slice("d_ws_down", ElemType::f32, dsd, 0, H, {Is}));
      }
      res.ranks.push_back(std::move(s));
    }
    return res;
  }
};

// ---- fault wrappers --------------------------------------------------------------------------------------

// "name:k=v:k=v" -> {"k": "v", ...} (':' because ',' separates backends in `calico gate --backend`)
std::map<std::string, std::string> parse_params(const std::string& spec, const std::string& backend) {
  std::map<std::string, std::string> p;
  size_t pos = spec.find(':');
  while (pos != std::string::npos) {
    const size_t next = spec.find(':', pos + 1);
    const std::string item = spec.substr(pos + 1, next == std::string::npos ? std::string::npos : next - pos - 1);
    const auto eq = item.find('=');
    require(eq != std::string::npos && eq > 0, "--backend {}: parameters must be key=value, got '{}'", backend, item);
    p[item.substr(0, eq)] = item.substr(eq + 1);
    pos = next;
  }
  return p;
}

int64_t param_int(const std::map<std::string, std::string>& p, const std::string& key, int64_t def,
                  const std::string& backend) {
  auto it = p.find(key);
  if (it == p.end()) return def;
  try {
    size_t used = 0;
    const int64_t v = std::stoll(it->second, &used);
    require(used == it->second.size() && v >= 0, "");
    return v;
  } catch (...) {
    throw Error(fmt::format("--backend {}: {} must be an integer >= 0, got '{}'", backend, key, it->second));
  }
}

class BitflipBackend final : public Backend {
 public:
  BitflipBackend(std::unique_ptr<Backend> inner, int64_t run, std::string tensor, int64_t token, int64_t column)
      : inner_(std::move(inner)), run_(run), tensor_(std::move(tensor)), token_(token), column_(column) {}
  std::string name() const override {
    return fmt::format("faulty-bitflip(inner={},run={},tensor={},token={},column={})", inner_->name(), run_, tensor_,
                       token_, column_);
  }
  RunResult run(const RunRequest& q) override {
    RunResult res = inner_->run(q);
    if (calls_++ != run_) return res;
    // The global row `token_` of a sharded tensor lives on rank token_ / rows-per-rank.
    const Tensor* t0 = res.ranks.at(0).find(tensor_);
    require(t0 && !t0->shape.empty() && t0->shape[0] > 0, "faulty-bitflip: inner backend has no tensor '{}'", tensor_);
    const int64_t rows = t0->shape[0], rank = token_ / rows, row = token_ % rows;
    require(rank < static_cast<int64_t>(res.ranks.size()), "faulty-bitflip: token {} is beyond the {} ranks", token_,
            res.ranks.size());
    for (auto& t : res.ranks[rank].tensors) {
      if (t.name != tensor_) continue;
      const int64_t cols = t.numel() / rows;
      require(column_ < cols, "faulty-bitflip: column must be < {}, got {}", cols, column_);
      t.bytes[static_cast<size_t>((row * cols + column_) * elem_size(t.type))] ^= 1;  // little-endian: lowest bit
    }
    return res;
  }

 private:
  std::unique_ptr<Backend> inner_;
  int64_t run_, calls_ = 0;
  std::string tensor_;
  int64_t token_, column_;
};

std::string base_name(const std::string& spec) { return spec.substr(0, spec.find(':')); }

}  // namespace

std::vector<std::string> backend_names() {
  return {"reference", "toy", "faulty-bitflip", "faulty-order", "megakernel"};
}

bool backend_available(const std::string& name) {
  const std::string b = base_name(name);
  if (b == "megakernel") return gpu::device_count() > 0;
  return b == "reference" || b == "toy" || b == "faulty-bitflip" || b == "faulty-order";
}

std::unique_ptr<Backend> make_backend(const std::string& spec) {
  const std::string b = base_name(spec);
  if (b == "toy") return std::make_unique<ToyBackend>();
  if (b == "reference") {
    require(spec == "reference", "--backend reference takes no parameters, got '{}'", spec);
    return ref::make_reference_backend(ref::ReferenceMode::contract);
  }
  if (b == "faulty-order") {
    require(spec == b, "--backend faulty-order takes no parameters, got '{}'", spec);
    return std::make_unique<ToyBackend>(true);
  }
  if (b == "faulty-bitflip") {
    auto p = parse_params(spec, b);
    const std::string inner = p.count("inner") ? p["inner"] : "reference";
    require(base_name(inner).rfind("faulty", 0) != 0, "--backend {}: inner must not be a faulty backend", b);
    auto inner_backend = make_backend(inner);
    for (const auto& [k, v] : p)
      require(k == "inner" || k == "run" || k == "tensor" || k == "token" || k == "column",
              "--backend faulty-bitflip: unknown parameter '{}' (inner, run, tensor, token, column)", k);
    return std::make_unique<BitflipBackend>(std::move(inner_backend), param_int(p, "run", 1, b),
                                            p.count("tensor") ? p["tensor"] : "out", param_int(p, "token", 0, b),
                                            param_int(p, "column", 0, b));
  }
  if (b == "megakernel") {
    require(spec == "megakernel", "--backend megakernel takes no parameters, got '{}'", spec);
    return make_megakernel_backend();
  }
  throw Error(
      fmt::format("--backend must be one of reference, toy, faulty-bitflip[:k=v...], "
                  "faulty-order, megakernel; got '{}'",
                  spec));
}

}  // namespace calico::harness
