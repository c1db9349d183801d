// float64 check mode: the MoE layer and its gradients as plain double math (Eigen GEMMs, libm exp), no
// rounding model and no MXFP8 quantisation. The yardstick for the contract mode and for finite differences;
// not bit-stable across thread counts (Eigen's blocking may depend on them).
#include <Eigen/Dense>

#include <cmath>

#include "calico/error.h"
#include "calico/reference.h"

namespace calico::ref {

namespace {

using Mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using CMap = Eigen::Map<const Mat>;
using MMap = Eigen::Map<Mat>;

struct Ffn64 {
  Mat x, g, u, h, y;  // saved forward values (g, u before the clamp)
};

double silu(double g) { return g / (1.0 + std::exp(-g)); }
double sigmoid(double g) { return 1.0 / (1.0 + std::exp(-g)); }

void forward(const LayerSpec& spec, const Mat& X, const double* wg, const double* wu, const double* wd, int I,
             Ffn64& f) {
  const int H = spec.hidden;
  f.x = X;
  f.g = X * CMap(wg, I, H).transpose();
  f.u = X * CMap(wu, I, H).transpose();
  f.h.resize(X.rows(), I);
  const bool clamp = spec.swiglu_limit.has_value();
  const double L = clamp ? *spec.swiglu_limit : 0.0;
  for (Eigen::Index i = 0; i < f.g.size(); ++i) {
    double g = f.g.data()[i], u = f.u.data()[i];
    if (clamp) g = std::min(g, L), u = std::max(-L, std::min(u, L));
    f.h.data()[i] = silu(g) * u;
  }
  f.y = f.h * CMap(wd, H, I).transpose();
}

// Returns d_x; accumulates the weight gradients.
Mat backward(const LayerSpec& spec, const Ffn64& f, const Mat& dY, const double* wg, const double* wu,
             const double* wd, int I, double* dwg, double* dwu, double* dwd) {
  const int H = spec.hidden;
  const Mat dH = dY * CMap(wd, H, I);
  Mat dG(dH.rows(), I), dU(dH.rows(), I);
  const bool clamp = spec.swiglu_limit.has_value();
  const double L = clamp ? *spec.swiglu_limit : 0.0;
  for (Eigen::Index i = 0; i < dH.size(); ++i) {
    const double graw = f.g.data()[i], uraw = f.u.data()[i];
    const double g = clamp ? std::min(graw, L) : graw, u = clamp ? std::max(-L, std::min(uraw, L)) : uraw;
    const double s = sigmoid(g), dh = dH.data()[i];
    dU.data()[i] = (clamp && (uraw > L || uraw < -L)) ? 0.0 : dh * g * s;
    dG.data()[i] = (clamp && graw > L) ? 0.0 : dh * u * s * (1.0 + g * (1.0 - s));
  }
  MMap(dwd, H, I) += dY.transpose() * f.h;
  MMap(dwg, I, H) += dG.transpose() * f.x;
  MMap(dwu, I, H) += dU.transpose() * f.x;
  return dG * CMap(wg, I, H) + dU * CMap(wu, I, H);
}

}  // namespace

F64Grads layer_f64(const F64Layer& L, int64_t tokens_per_rank, bool want_backward) {
  const LayerSpec& spec = L.spec;
  const int64_t N = L.tokens, H = spec.hidden, I = spec.intermediate, E = spec.experts, K = spec.top_k,
                Is = spec.shared_intermediate;
  require(tokens_per_rank >= 1 && N % tokens_per_rank == 0, "layer_f64: tokens_per_rank must divide N={}, got {}", N,
          tokens_per_rank);
  const int64_t R = N / tokens_per_rank;
  const CMap X(L.x.data(), N, H), dOut(L.d_out.data(), N, H);
  F64Grads out;
  Mat acc = Mat::Zero(N, H), dacc = Mat::Zero(N, H);
  out.d_router_weights.assign(static_cast<size_t>(N * K), 0.0);
  if (want_backward) {
    out.d_w_gate.assign(static_cast<size_t>(E * I * H), 0.0);
    out.d_w_up.assign(static_cast<size_t>(E * I * H), 0.0);
    out.d_w_down.assign(static_cast<size_t>(E * H * I), 0.0);
  }
  // Routed experts: rows of expert e in ascending (g, k) (order is irrelevant in exact-ish double math).
  std::vector<std::vector<std::pair<int64_t, int>>> rows(E);
  for (int64_t g = 0; g < N; ++g)
    for (int k = 0; k < K; ++k) rows[L.topk_experts[g * K + k]].push_back({g, k});
#pragma omp parallel for schedule(dynamic) if (N * K * H * I >= (1 << 22))
  for (int64_t e = 0; e < E; ++e) {
    const auto& re = rows[e];
    if (re.empty()) continue;
    Mat Xe(re.size(), H);
    for (size_t i = 0; i < re.size(); ++i) Xe.row(i) = X.row(re[i].first);
    Ffn64 f;
    const double *wg = &L.w_gate[e * I * H], *wu = &L.w_up[e * I * H], *wd = &L.w_down[e * H * I];
    forward(spec, Xe, wg, wu, wd, static_cast<int>(I), f);
    Mat dY(re.size(), H);
    for (size_t i = 0; i < re.size(); ++i) {
      const double w = L.router_weights[re[i].first * K + re[i].second];
      dY.row(i) = w * dOut.row(re[i].first);
    }
    Mat dX;
    if (want_backward)
      dX = backward(spec, f, dY, wg, wu, wd, static_cast<int>(I), &out.d_w_gate[e * I * H], &out.d_w_up[e * I * H],
                    &out.d_w_down[e * H * I]);
#pragma omp critical
    {
      // Several experts add into one token row: done under a lock; double rounding differences between
      // orders are far below what float64 mode is used to check.
      for (size_t i = 0; i < re.size(); ++i) {
        const int64_t g = re[i].first;
        const double w = L.router_weights[g * K + re[i].second];
        acc.row(g) += w * f.y.row(i);
        out.d_router_weights[g * K + re[i].second] = dOut.row(g).dot(f.y.row(i));
        if (want_backward) dacc.row(g) += dX.row(i);
      }
    }
  }
  if (Is > 0) {
    out.d_ws_gate.assign(static_cast<size_t>(R * Is * H), 0.0);
    out.d_ws_up.assign(static_cast<size_t>(R * Is * H), 0.0);
    out.d_ws_down.assign(static_cast<size_t>(R * H * Is), 0.0);
    for (int64_t r = 0; r < R; ++r) {
      const Mat Xr = X.middleRows(r * tokens_per_rank, tokens_per_rank);
      Ffn64 f;
      forward(spec, Xr, L.ws_gate.data(), L.ws_up.data(), L.ws_down.data(), static_cast<int>(Is), f);
      acc.middleRows(r * tokens_per_rank, tokens_per_rank) += f.y;
      if (want_backward) {
        const Mat dY = dOut.middleRows(r * tokens_per_rank, tokens_per_rank);
        dacc.middleRows(r * tokens_per_rank, tokens_per_rank) +=
            backward(spec, f, dY, L.ws_gate.data(), L.ws_up.data(), L.ws_down.data(), static_cast<int>(Is),
                     &out.d_ws_gate[r * Is * H], &out.d_ws_up[r * Is * H], &out.d_ws_down[r * H * Is]);
      }
    }
  }
  out.out.assign(acc.data(), acc.data() + N * H);
  if (want_backward) out.d_x.assign(dacc.data(), dacc.data() + N * H);
  return out;
}

}  // namespace calico::ref
