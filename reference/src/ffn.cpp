// The expert FFN of the numerical contract (DESIGN 2.1-2.2): every GEMM through model_gemm_bf16 (or, for
// --dtype mxfp8 --mma blackwell-mxfp8, model_gemm_mxfp8_blackwell), SwiGLU and
// its gradient in fp32 from bf16 operands, rounding points exactly as "the backward contract" in
// calico/reference.h states. OpenMP only over independent output rows or tiles; no reduction is ever split.
// In bf16 the experts of a rank run together: each GEMM phase is one model_gemm_bf16_batch over all experts
// (ffn_forward_batch, ffn_backward_batch), so many small experts still give every thread work.
#include "ffn.h"

#include <cstring>

#include "calico/numerics.h"
#include "model_gemm.h"
#include "parallel.h"
#include "profile.h"

namespace calico::ref::detail {

// Loops over fewer elements than this run on one thread: an OpenMP region costs more than the work, and
// far more when the 2 cores are oversubscribed. Results never depend on it (outputs are independent).
constexpr int64_t kParallelMin = 1 << 12;

MxRows mx_quantize_rows(const uint16_t* a, int64_t rows, int64_t cols, MxScaleRule rule) {
  MxRows q;
  q.rows = rows;
  q.blocks = (cols + kMxBlock - 1) / kMxBlock;
  const int64_t padded = q.blocks * kMxBlock;
  q.elems.assign(static_cast<size_t>(rows * padded), 0);  // a short last block is zero-padded
  q.scales.assign(static_cast<size_t>(rows * q.blocks), 0);
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    float block[kMxBlock];
    for (int64_t b = 0; b < q.blocks; ++b) {
      const int64_t c0 = b * kMxBlock;
      const int n = static_cast<int>(std::min<int64_t>(kMxBlock, cols - c0));
      for (int i = 0; i < n; ++i) block[i] = bf16_to_f32(a[r * cols + c0 + i]);
      q.scales[r * q.blocks + b] = mx_quantize_block(block, n, Fp8Kind::e4m3, rule, q.elems.data() + r * padded + c0);
    }
  }
  return q;
}

std::vector<uint16_t> mx_qdq_rows(const uint16_t* a, int64_t rows, int64_t cols, MxScaleRule rule) {
  const MxRows q = mx_quantize_rows(a, rows, cols, rule);
  const int64_t padded = q.blocks * kMxBlock;
  std::vector<uint16_t> out(static_cast<size_t>(rows * cols));
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[r * cols + c] = mx_dequantize_to_bf16(q.elems[r * padded + c], q.scales[r * q.blocks + c / kMxBlock], Fp8Kind::e4m3);
  return out;
}

void gemm(const LayerSpec& spec, int64_t M, int64_t N, int64_t K, const uint16_t* A, const uint16_t* B, float* C) {
  if (M == 0 || N == 0 || K == 0) return;  // an empty chain leaves C as it is
  if (spec.dtype == DType::mxfp8 && spec.mma == MmaModel::blackwell_mxfp8) {
    // Blackwell: e4m3 elements and E8M0 scales straight into the block-scaled MMA model, 32 per step.
    const MxRows qa = mx_quantize_rows(A, M, K, spec.scale_rule);
    const MxRows qb = mx_quantize_rows(B, N, K, spec.scale_rule);
    model_gemm_mxfp8_blackwell(M, N, qa.blocks, qa.elems.data(), qa.scales.data(), qb.elems.data(),
                               qb.scales.data(), C, N);
    return;
  }
  if (spec.dtype == DType::mxfp8) {  // Hopper: dequantise exactly to bf16, then the BF16 MMA model
    const auto qa = mx_qdq_rows(A, M, K, spec.scale_rule);
    const auto qb = mx_qdq_rows(B, N, K, spec.scale_rule);
    model_gemm_bf16(spec.mma, M, N, K, qa.data(), K, qb.data(), K, C, N);
    return;
  }
  model_gemm_bf16(spec.mma, M, N, K, A, K, B, K, C, N);
}

std::vector<uint16_t> transpose(const uint16_t* a, int64_t rows, int64_t cols, int64_t lda) {
  std::vector<uint16_t> t(static_cast<size_t>(rows * cols));
  constexpr int64_t kTile = 64;  // cache blocking; pure data movement
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelMin)
  for (int64_t c0 = 0; c0 < cols; c0 += kTile)
    for (int64_t r0 = 0; r0 < rows; r0 += kTile)
      for (int64_t c = c0; c < std::min(cols, c0 + kTile); ++c)
        for (int64_t r = r0; r < std::min(rows, r0 + kTile); ++r) t[c * rows + r] = a[r * lda + c];
  return t;
}

namespace {

UninitVector<uint16_t> round_all(const std::vector<float>& v) {
  UninitVector<uint16_t> out(v.size());
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(v.size()) >= kParallelMin)
  for (int64_t i = 0; i < static_cast<int64_t>(v.size()); ++i) out[i] = f32_to_bf16(v[i]);
  return out;
}

// The clamp of the SwiGLU variant: g' = min(g, L), u' = clamp(u, -L, L); a NaN passes through.
float clamp_gate(float g, const LayerSpec& spec) { return (spec.swiglu_limit && g > *spec.swiglu_limit) ? *spec.swiglu_limit : g; }
float clamp_up(float u, const LayerSpec& spec) {
  if (!spec.swiglu_limit) return u;
  const float L = *spec.swiglu_limit;
  return u > L ? L : (u < -L ? -L : u);
}

}  // namespace

namespace {

// One FFN with a GEMM (threaded inside) per step: the mxfp8 path of the batch functions.
void ffn_forward_one(const LayerSpec& spec, int inter, int64_t n, const uint16_t* X, const uint16_t* Wg,
                     const uint16_t* Wu, const uint16_t* Wd, FfnSaved& saved, uint16_t* y) {
  const int64_t H = spec.hidden, I = inter;
  saved.rows = n;
  saved.x.assign(X, X + n * H);  // (mxfp8 path)
  if (n == 0) return;
  std::vector<float> acc(static_cast<size_t>(n * I), 0.0f);
  { ProfileScope p("fwd gemm gate", 2.0 * n * I * H); gemm(spec, n, I, H, X, Wg, acc.data()); }
  saved.g = round_all(acc);
  std::fill(acc.begin(), acc.end(), 0.0f);
  { ProfileScope p("fwd gemm up", 2.0 * n * I * H); gemm(spec, n, I, H, X, Wu, acc.data()); }
  saved.u = round_all(acc);
  saved.h.resize(static_cast<size_t>(n * I));
#pragma omp parallel for schedule(static) if (n * I >= kParallelMin)
  for (int64_t i = 0; i < n * I; ++i) {
    const float g = clamp_gate(bf16_to_f32(saved.g[i]), spec), u = clamp_up(bf16_to_f32(saved.u[i]), spec);
    saved.h[i] = f32_to_bf16(calico_silu(g) * u);
  }
  std::vector<float> out(static_cast<size_t>(n * H), 0.0f);
  { ProfileScope p("fwd gemm down", 2.0 * n * I * H); gemm(spec, n, H, I, saved.h.data(), Wd, out.data()); }
#pragma omp parallel for schedule(static) if (n * H >= kParallelMin)
  for (int64_t i = 0; i < n * H; ++i) y[i] = f32_to_bf16(out[i]);
}

void ffn_backward_one(const LayerSpec& spec, int inter, const FfnSaved& saved, const uint16_t* d_y, const uint16_t* Wg,
                      const uint16_t* Wu, const uint16_t* Wd, uint16_t* d_x, float* dWg, float* dWu, float* dWd) {
  const int64_t H = spec.hidden, I = inter, n = saved.rows;
  if (n == 0) return;
  // d_h = bf16(gemm(d_y, Wd^T)), contraction over H.
  std::vector<float> acc(static_cast<size_t>(n * I), 0.0f);
  {
    std::vector<uint16_t> wdT;
    {
      ProfileScope p0("bwd transpose Wd");
      wdT = transpose(Wd, H, I, I);  // [I,H]
    }
    ProfileScope p("bwd gemm d_h", 2.0 * n * I * H);
    gemm(spec, n, I, H, d_y, wdT.data(), acc.data());
  }
  // [d_g | d_u] per row, from the saved bf16 g, u (SwiGLU gradient in fp32, clamp masks).
  std::vector<uint16_t> dgu(static_cast<size_t>(n * 2 * I));
  const bool clamp = spec.swiglu_limit.has_value();
  const float L = clamp ? *spec.swiglu_limit : 0.0f;
#pragma omp parallel for schedule(static) if (n * I >= kParallelMin)
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < I; ++j) {
      const float graw = bf16_to_f32(saved.g[r * I + j]), uraw = bf16_to_f32(saved.u[r * I + j]);
      const float g = clamp_gate(graw, spec), u = clamp_up(uraw, spec);
      const float dh = bf16_to_f32(f32_to_bf16(acc[r * I + j]));
      const bool g_cut = clamp && graw > L, u_cut = clamp && (uraw > L || uraw < -L);
      dgu[r * 2 * I + j] = g_cut ? 0 : f32_to_bf16((dh * u) * calico_silu_grad(g));
      dgu[r * 2 * I + I + j] = u_cut ? 0 : f32_to_bf16(dh * calico_silu(g));
    }
  }
  // d_x = bf16(gemm([d_g | d_u], [Wg^T | Wu^T])): one chain over the 2I concatenated columns.
  {
    std::vector<uint16_t> wguT;
    {
      ProfileScope p0("bwd concat+transpose Wg|Wu");
      std::vector<uint16_t> wgu(static_cast<size_t>(2 * I * H));  // [Wg; Wu] = [2I, H]
      std::memcpy(wgu.data(), Wg, sizeof(uint16_t) * I * H);
      std::memcpy(wgu.data() + I * H, Wu, sizeof(uint16_t) * I * H);
      wguT = transpose(wgu.data(), 2 * I, H, H);  // [H, 2I]
    }
    std::vector<float> dx(static_cast<size_t>(n * H), 0.0f);
    ProfileScope p("bwd gemm d_x", 4.0 * n * I * H);
    gemm(spec, n, H, 2 * I, dgu.data(), wguT.data(), dx.data());
#pragma omp parallel for schedule(static) if (n * H >= kParallelMin)
    for (int64_t i = 0; i < n * H; ++i) d_x[i] = f32_to_bf16(dx[i]);
  }
  // Weight gradients: contraction over the n rows in canonical order, accumulators carried in.
  {
    const auto dyT = transpose(d_y, n, H, H);             // [H, n]
    const auto hT = transpose(saved.h.data(), n, I, I);   // [I, n]
    ProfileScope p("bwd gemm dW_down", 2.0 * n * I * H);
    gemm(spec, H, I, n, dyT.data(), hT.data(), dWd);
  }
  const auto xT = transpose(saved.x.data(), n, H, H);     // [H, n]
  const auto dgT = transpose(dgu.data(), n, I, 2 * I);    // [I, n]
  { ProfileScope p("bwd gemm dW_gate", 2.0 * n * I * H); gemm(spec, I, H, n, dgT.data(), xT.data(), dWg); }
  const auto duT = transpose(dgu.data() + I, n, I, 2 * I);
  { ProfileScope p("bwd gemm dW_up", 2.0 * n * I * H); gemm(spec, I, H, n, duT.data(), xT.data(), dWu); }
}

// The (task, row) pairs of a batch, so an element-wise step is one parallel loop over all rows of all tasks.
struct TaskRow {
  size_t task;
  int64_t row;
};

// Rounds the batch's fp32 results (task i's rows at out + offset[i], H columns) to bf16 into the
// per-task destination dst(i), row by row over all rows of all tasks.
template <class Dest>
void round_rows_to_bf16(const std::vector<TaskRow>& rows, const std::vector<int64_t>& offset, const float* out,
                        int64_t H, Dest&& dst) {
  const auto nrows = static_cast<int64_t>(rows.size());
#pragma omp parallel for schedule(static) if (nrows * H >= kParallelMin)
  for (int64_t k = 0; k < nrows; ++k) {
    const size_t i = rows[k].task;
    const int64_t r = rows[k].row;
    const float* o = out + offset[i];
    uint16_t* d = dst(i);
    for (int64_t c = r * H; c < (r + 1) * H; ++c) d[c] = f32_to_bf16(o[c]);
  }
}

GemmJob job(int64_t M, int64_t N, int64_t K, GemmOperand A, GemmOperand B, float* C, int64_t ldc) {
  GemmJob j;
  j.M = M, j.N = N, j.K = K, j.A = A, j.B = B, j.C = C, j.ldc = ldc;
  return j;
}

}  // namespace

void ffn_forward_batch(const LayerSpec& spec, const std::vector<FfnForwardTask>& tasks) {
  if (spec.dtype != DType::bf16) {
    for (const FfnForwardTask& t : tasks) ffn_forward_one(spec, t.inter, t.n, t.X, t.Wg, t.Wu, t.Wd, *t.saved, t.y);
    return;
  }
  const int64_t H = spec.hidden;
  const size_t count = tasks.size();
  // The fp32 accumulators of all tasks live in one buffer each (offsets oi: n*I, oh: n*H), zeroed in
  // parallel: no per-expert allocation, no serial zero-fill.
  std::vector<int64_t> oi(count + 1, 0), oh(count + 1, 0);
  std::vector<TaskRow> rows;
  for (size_t i = 0; i < count; ++i) {
    const FfnForwardTask& t = tasks[i];
    oi[i + 1] = oi[i] + t.n * t.inter, oh[i + 1] = oh[i] + t.n * H;
    for (int64_t r = 0; r < t.n; ++r) rows.push_back({i, r});
  }
  const auto nrows = static_cast<int64_t>(rows.size());
  for (size_t i = 0; i < count; ++i) {
    const FfnForwardTask& t = tasks[i];
    t.saved->rows = t.n;
    if (t.saved->x.data() != t.X || static_cast<int64_t>(t.saved->x.size()) != t.n * H) {
      t.saved->x.resize(static_cast<size_t>(t.n * H));
      if (t.n > 0) std::memcpy(t.saved->x.data(), t.X, sizeof(uint16_t) * t.n * H);
    }
    const size_t len = static_cast<size_t>(t.n) * t.inter;
    t.saved->g.resize(len), t.saved->u.resize(len), t.saved->h.resize(len);
  }
  std::vector<GemmJob> jobs;
  double flops = 0;
  {
    UninitVector<float> acc_g = parallel_zeros<float>(oi[count]), acc_u = parallel_zeros<float>(oi[count]);
    for (size_t i = 0; i < count; ++i) {
      const FfnForwardTask& t = tasks[i];
      const int64_t n = t.n, I = t.inter;
      if (n == 0) continue;
      const uint16_t* X = t.saved->x.data();
      jobs.push_back(job(n, I, H, {X, H, 1}, {t.Wg, H, 1}, acc_g.data() + oi[i], I));
      jobs.push_back(job(n, I, H, {X, H, 1}, {t.Wu, H, 1}, acc_u.data() + oi[i], I));
      flops += 4.0 * n * I * H;
    }
    {
      ProfileScope p("fwd gemm gate+up (batch)", flops);
      model_gemm_bf16_batch(spec.mma, jobs);
    }
    ProfileScope p("fwd round+swiglu");
#pragma omp parallel for schedule(static) if (nrows * 256 >= kParallelMin)
    for (int64_t k = 0; k < nrows; ++k) {
      const size_t i = rows[k].task;
      const int64_t I = tasks[i].inter, r = rows[k].row;
      FfnSaved& sv = *tasks[i].saved;
      const float* ag = acc_g.data() + oi[i];
      const float* au = acc_u.data() + oi[i];
      for (int64_t j = r * I; j < (r + 1) * I; ++j) {
        sv.g[j] = f32_to_bf16(ag[j]);
        sv.u[j] = f32_to_bf16(au[j]);
        const float g = clamp_gate(bf16_to_f32(sv.g[j]), spec), u = clamp_up(bf16_to_f32(sv.u[j]), spec);
        sv.h[j] = f32_to_bf16(calico_silu(g) * u);
      }
    }
  }
  jobs.clear();
  flops = 0;
  UninitVector<float> out = parallel_zeros<float>(oh[count]);
  for (size_t i = 0; i < count; ++i) {
    const FfnForwardTask& t = tasks[i];
    const int64_t n = t.n, I = t.inter;
    if (n == 0) continue;
    jobs.push_back(job(n, H, I, {t.saved->h.data(), I, 1}, {t.Wd, I, 1}, out.data() + oh[i], H));
    flops += 2.0 * n * I * H;
  }
  {
    ProfileScope p("fwd gemm down (batch)", flops);
    model_gemm_bf16_batch(spec.mma, jobs);
  }
  round_rows_to_bf16(rows, oh, out.data(), H, [&](size_t i) { return tasks[i].y; });
}

void ffn_backward_batch(const LayerSpec& spec, const std::vector<FfnBackwardTask>& tasks) {
  if (spec.dtype != DType::bf16) {
    for (const FfnBackwardTask& t : tasks)
      ffn_backward_one(spec, t.inter, *t.saved, t.d_y, t.Wg, t.Wu, t.Wd, t.d_x, t.dWg, t.dWu, t.dWd);
    return;
  }
  const int64_t H = spec.hidden;
  const size_t count = tasks.size();
  // One buffer per intermediate for all tasks (offsets oi: n*I, oh: n*H), zeroed in parallel where it is
  // an accumulator.
  std::vector<int64_t> oi(count + 1, 0), oh(count + 1, 0);
  std::vector<TaskRow> rows;
  for (size_t i = 0; i < count; ++i) {
    const FfnBackwardTask& t = tasks[i];
    const int64_t n = t.saved->rows;
    oi[i + 1] = oi[i] + n * t.inter, oh[i + 1] = oh[i] + n * H;
    for (int64_t r = 0; r < n; ++r) rows.push_back({i, r});
  }
  const auto nrows = static_cast<int64_t>(rows.size());
  std::vector<GemmJob> jobs;
  double flops = 0;
  UninitVector<uint16_t> dgu(static_cast<size_t>(2 * oi[count]));  // [d_g | d_u] rows, written in full below
  {
    // d_h = bf16(gemm(d_y, Wd^T)), contraction over H; Wd^T read in place.
    UninitVector<float> acc = parallel_zeros<float>(oi[count]);
    for (size_t i = 0; i < count; ++i) {
      const FfnBackwardTask& t = tasks[i];
      const int64_t n = t.saved->rows, I = t.inter;
      if (n == 0) continue;
      jobs.push_back(job(n, I, H, {t.d_y, H, 1}, {t.Wd, 1, I}, acc.data() + oi[i], I));
      flops += 2.0 * n * I * H;
    }
    {
      ProfileScope p("bwd gemm d_h (batch)", flops);
      model_gemm_bf16_batch(spec.mma, jobs);
    }
    // [d_g | d_u] per row, from the saved bf16 g, u (SwiGLU gradient in fp32, clamp masks).
    const bool clamp = spec.swiglu_limit.has_value();
    const float L = clamp ? *spec.swiglu_limit : 0.0f;
    ProfileScope p("bwd swiglu grad");
#pragma omp parallel for schedule(static) if (nrows * 256 >= kParallelMin)
    for (int64_t k = 0; k < nrows; ++k) {
      const size_t i = rows[k].task;
      const int64_t I = tasks[i].inter, r = rows[k].row;
      const FfnSaved& sv = *tasks[i].saved;
      const float* a = acc.data() + oi[i];
      uint16_t* d = dgu.data() + 2 * oi[i];
      for (int64_t j = 0; j < I; ++j) {
        const float graw = bf16_to_f32(sv.g[r * I + j]), uraw = bf16_to_f32(sv.u[r * I + j]);
        const float g = clamp_gate(graw, spec), u = clamp_up(uraw, spec);
        const float dh = bf16_to_f32(f32_to_bf16(a[r * I + j]));
        const bool g_cut = clamp && graw > L, u_cut = clamp && (uraw > L || uraw < -L);
        d[r * 2 * I + j] = g_cut ? 0 : f32_to_bf16((dh * u) * calico_silu_grad(g));
        d[r * 2 * I + I + j] = u_cut ? 0 : f32_to_bf16(dh * calico_silu(g));
      }
    }
  }
  // d_x = bf16(gemm([d_g | d_u], [Wg^T | Wu^T])): one chain over the 2I concatenated columns (the B operand
  // is the K-concatenation of Wg^T and Wu^T, read in place); and the weight gradients, contraction over the
  // n rows in canonical order with the accumulators carried in: all independent outputs, one batch.
  jobs.clear();
  flops = 0;
  UninitVector<float> dx = parallel_zeros<float>(oh[count]);
  for (size_t i = 0; i < count; ++i) {
    const FfnBackwardTask& t = tasks[i];
    const int64_t n = t.saved->rows, I = t.inter;
    if (n == 0) continue;
    const uint16_t* dg = dgu.data() + 2 * oi[i];
    const uint16_t* x = t.saved->x.data();
    jobs.push_back(job(n, H, 2 * I, {dg, 2 * I, 1}, {t.Wg, 1, H, t.Wu, I}, dx.data() + oh[i], H));
    jobs.push_back(job(H, I, n, {t.d_y, 1, H}, {t.saved->h.data(), 1, I}, t.dWd, I));
    jobs.push_back(job(I, H, n, {dg, 1, 2 * I}, {x, 1, H}, t.dWg, H));
    jobs.push_back(job(I, H, n, {dg + I, 1, 2 * I}, {x, 1, H}, t.dWu, H));
    flops += 10.0 * n * I * H;
  }
  {
    ProfileScope p("bwd gemm d_x+dW (batch)", flops);
    model_gemm_bf16_batch(spec.mma, jobs);
  }
  round_rows_to_bf16(rows, oh, dx.data(), H, [&](size_t i) { return tasks[i].d_x; });
}

void ffn_forward(const LayerSpec& spec, int inter, int64_t n, const uint16_t* X, const uint16_t* Wg,
                 const uint16_t* Wu, const uint16_t* Wd, FfnSaved& saved, uint16_t* y) {
  ffn_forward_batch(spec, {FfnForwardTask{inter, n, X, Wg, Wu, Wd, &saved, y}});
}

void ffn_backward(const LayerSpec& spec, int inter, const FfnSaved& saved, const uint16_t* d_y, const uint16_t* Wg,
                  const uint16_t* Wu, const uint16_t* Wd, uint16_t* d_x, float* dWg, float* dWu, float* dWd) {
  ffn_backward_batch(spec, {FfnBackwardTask{inter, &saved, d_y, Wg, Wu, Wd, d_x, dWg, dWu, dWd}});
}

}  // namespace calico::ref::detail
