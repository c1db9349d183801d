// Tile model of the expert GEMMs and bandwidth model of SwiGLU (MODEL.md, "Compute"): a GEMM of M x N x K
// becomes ceil(M/tile_m) * ceil(N/tile_n) tiles of 2*tile_m*tile_n*K flops each at the per-SM tensor rate;
// tiles run in waves over the compute SMs; the task takes at least its HBM bytes / HBM bandwidth. Weight
// gradients carry an fp32 accumulator across minibatches (DESIGN 2.3): loaded and stored per minibatch.
// A tile's outputs leave after its main loop at `epilogue_store_gbps_per_sm` (0: not priced), which the
// megakernel's timeline measured as not overlapping the tile's wgmma (MODEL.md, "Compute").
#include <algorithm>
#include <cmath>

#include "work.h"

namespace calico::sim {

namespace {

struct Work {
  double tiles = 0, tile_ps = 0, bytes = 0;
};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct Gemms {
  const Topology& topo;
  double flops_per_ps_sm;  // per SM, with efficiency and dtype speedup
  double wbytes;           // bytes per weight element
  Work w;
  // The epilogue of one tile of `bytes_per_element` outputs (bf16 2, the fp32 weight gradients 4), in ps.
  double epilogue_ps(double bytes_per_element) const {
    const double rate = topo.epilogue_store_gbps_per_sm * 1e-3;  // bytes/ps
    return rate > 0 ? bytes_per_element * topo.tile_m * topo.tile_n / rate : 0.0;
  }
  // out[M, N] = in[M, K] * W[N, K]^T: tiles over the output, depth K.
  void gemm(int64_t m, int64_t n, int64_t k) {
    if (m == 0) return;
    const double tiles = double(ceil_div(m, topo.tile_m)) * double(ceil_div(n, topo.tile_n));
    w.tiles += tiles;
    w.tile_ps += tiles * (2.0 * topo.tile_m * topo.tile_n * double(k) / flops_per_ps_sm + epilogue_ps(2.0));
    w.bytes += double(n) * double(k) * wbytes + 2.0 * double(m) * double(k) + 2.0 * double(m) * double(n);
  }
  // dW[N, K] += dY[rows, N]^T X[rows, K]: tiles over the weight, depth rows, fp32 accumulator in and out.
  void wgrad(int64_t n, int64_t k, int64_t rows) {
    if (rows == 0) return;
    const double tiles = double(ceil_div(n, topo.tile_m)) * double(ceil_div(k, topo.tile_n));
    w.tiles += tiles;
    w.tile_ps += tiles * (2.0 * topo.tile_m * topo.tile_n * double(rows) / flops_per_ps_sm + epilogue_ps(4.0));
    w.bytes += 2.0 * double(rows) * double(n + k) + 8.0 * double(n) * double(k);
  }
  void elementwise(double bytes) { w.bytes += bytes; }
};

void expert_work(Gemms& g, Pass pass, Stage stage, int64_t rows, int64_t h, int64_t i) {
  if (rows == 0) return;
  const bool fwd = pass == Pass::forward;
  switch (stage) {
    case Stage::gate_up:
      if (fwd) {
        g.gemm(rows, 2 * i, h);
      } else {
        g.gemm(rows, h, 2 * i);
        g.wgrad(2 * i, h, rows);
      }
      break;
    case Stage::swiglu:
      g.elementwise(fwd ? rows * (4.0 * i + 2.0 * i) : rows * (6.0 * i + 4.0 * i));
      break;
    case Stage::down:
      if (fwd) {
        g.gemm(rows, h, i);
      } else {
        g.gemm(rows, i, h);
        g.wgrad(h, i, rows);
      }
      break;
    default:
      break;
  }
}

}  // namespace

Time task_duration(const Topology& topo, const LayerSpec& spec, const Traffic& tr, Pass pass, Stage stage, int gpu,
                   int mb, int sms, double hbm_gbps) {
  const double speed = spec.dtype == DType::mxfp8 ? topo.mxfp8_speedup : 1.0;
  Gemms g{topo, topo.bf16_tflops * topo.gemm_efficiency * speed / topo.sms,
          spec.dtype == DType::mxfp8 ? 1.0 + 1.0 / 32 : 2.0, {}};
  if (stage == Stage::shared) {
    const int64_t rows = tr.home_tokens[size_t(mb) * tr.ranks + gpu];
    for (Stage s : {Stage::gate_up, Stage::swiglu, Stage::down})
      expert_work(g, pass, s, rows, spec.hidden, spec.shared_intermediate);
  } else {
    for (int e = 0; e < tr.experts; ++e)
      if (tr.expert_owner[e] == gpu) expert_work(g, pass, stage, tr.rows(mb, e), spec.hidden, spec.intermediate);
  }
  if (stage == Stage::combine) {
    // EP = 1 (layer.cpp): each token's weighted sum of its K expert rows, read where the GEMMs wrote them,
    // memory-bound: the (token, k) rows read and the token rows written at the local copy rate (read and
    // write counted, as `local_copy_gbps` is measured).
    const double rows = double(tr.combine(mb, gpu, gpu)), tokens = double(tr.home_tokens[size_t(mb) * tr.ranks + gpu]);
    const double bytes = 2.0 * spec.hidden * (rows + tokens);
    return static_cast<Time>(std::llround(bytes / (topo.local_copy_gbps * 1e-3) + topo.task_overhead_ns * kPsPerNs));
  }
  double ps = 0;
  if (g.w.tiles > 0) ps = std::ceil(g.w.tiles / sms) * (g.w.tile_ps / g.w.tiles);
  ps = std::max(ps, g.w.bytes / ((hbm_gbps > 0 ? hbm_gbps : topo.hbm_gbps) * 1e-3));
  return static_cast<Time>(std::llround(ps + topo.task_overhead_ns * kPsPerNs));
}

}  // namespace calico::sim
