// Host side of the megakernel layer (calico/megakernel_moe.h): validation, device buffers, the TMA operands
// (CuTe atoms over the global tensors), the launches, and the translation of a device error record into a
// calico::Error.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <string>
#include <vector>

#include "calico/error.h"
#include "calico/numerics.h"
#include "calico/megakernel_moe.h"
#include "device_buffer.cuh"
#include "combine/combine_pieces.h"
#include "moe/params.cuh"
#include "schedule/schedule.cuh"

namespace calico::gpu {

using mk::ceil_div;
using mk::kBM;

namespace {

const char* stage_name(int s) {
  static const char* kNames[] = {"none",          "dispatch",        "gate/up GEMM",    "down GEMM",
                                 "combine",       "d_y dispatch",    "router gradient", "d_h GEMM",
                                 "d_x_k GEMM",    "dW_down GEMM",    "dW_gate GEMM",    "dW_up GEMM",
                                 "d_x combine",   "pipeline (consumer waiting for TMA)",
                                 "pipeline (producer waiting for a free stage)"};
  static_assert(std::size(kNames) == mk::kStageCount, "a name for every stage");
  return (s >= 0 && s < mk::kStageCount) ? kNames[s] : "unknown";
}

const char* counter_name(int c) {
  static const char* kNames[] = {"none",           "dispatched[m-tile]", "gate/up done[m-tile]", "down tiles done",
                                 "d_y done[m-tile]", "d_y done[expert]", "d_h done[m-tile]",     "d_h done[expert]",
                                 "d_x_k tiles done", "mbarrier full[stage]", "mbarrier empty[stage]",
                                 "bulk row load[row]", "weight-gradient go[task]"};
  return (c >= 0 && c <= mk::kCounterWgradGo) ? kNames[c] : "unknown";
}

template <int BMN, bool KMajor>
mk::TmaOperand<BMN, KMajor> make_operand(const uint16_t* ptr, int mn, int k, int l, int64_t ld, int64_t lstride) {
  using namespace cute;
  mk::TmaOperand<BMN, KMajor> op;
  auto gptr = make_gmem_ptr(reinterpret_cast<const mk::bf16_t*>(ptr));
  auto shape = make_shape(mn, k, l);
  auto tile = Shape<Int<BMN>, Int<mk::kBK>>{};
  if constexpr (KMajor) {
    op.atom = make_tma_atom(SM90_TMA_LOAD{}, make_tensor(gptr, shape, make_stride(ld, _1{}, lstride)),
                            mk::SmemLayout<BMN, KMajor>{}(_, _, 0), tile);
  } else {
    op.atom = make_tma_atom(SM90_TMA_LOAD{}, make_tensor(gptr, shape, make_stride(_1{}, ld, lstride)),
                            mk::SmemLayout<BMN, KMajor>{}(_, _, 0), tile);
  }
  op.mn = mn, op.k = k, op.l = l;
  return op;
}

// A row-major output [L, rows, cols] the epilogues store by strips (gemm/tma_store.cuh).
template <class T, int kBoxRows = 64, class P>
mk::StoreOperand<T, kBoxRows> store_rows(P* ptr, int rows, int cols, int L = 1) {
  using namespace cute;
  static_assert(sizeof(T) == sizeof(P));
  mk::StoreOperand<T, kBoxRows> op;
  auto g = make_tensor(make_gmem_ptr(reinterpret_cast<T*>(ptr)), make_shape(rows, cols, L),
                       make_stride(static_cast<int64_t>(cols), _1{}, static_cast<int64_t>(rows) * cols));
  op.atom = make_tma_atom(SM90_TMA_STORE{}, g, mk::StripLayout<T, kBoxRows>{},
                          Shape<Int<kBoxRows>, Int<mk::kStripCols<T>>>{});
  op.rows = rows, op.cols = cols, op.l = L;
  return op;
}

// Row-major activations [rows, cols]: as a K-major operand (MN = rows, K = cols) ...
template <int BMN>
mk::TmaOperand<BMN, true> rows_as_k_major(const uint16_t* p, int rows, int cols) {
  return make_operand<BMN, true>(p, rows, cols, 1, cols, static_cast<int64_t>(rows) * cols);
}
// ... or with the rows as K (MN = cols, K = rows): the weight-gradient operands.
template <int BMN>
mk::TmaOperand<BMN, false> rows_as_k(const uint16_t* p, int rows, int cols) {
  return make_operand<BMN, false>(p, cols, rows, 1, cols, static_cast<int64_t>(rows) * cols);
}
// Weights [L, R, C] row-major: B with N = R, K = C (K-major), or N = C, K = R (MN-major, the transpose).
template <int BMN>
mk::TmaOperand<BMN, true> weight(const uint16_t* p, int L, int R, int C) {
  return make_operand<BMN, true>(p, R, C, L, C, static_cast<int64_t>(R) * C);
}
template <int BMN>
mk::TmaOperand<BMN, false> weight_transposed(const uint16_t* p, int L, int R, int C) {
  return make_operand<BMN, false>(p, C, R, L, C, static_cast<int64_t>(R) * C);
}

// Uniform in [-a, a) with a = sqrt(3) * scale (variance scale^2), from (seed, index) alone.
__global__ void fill_uniform_bf16(uint16_t* p, size_t n, uint64_t seed, float scale) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + i;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
    p[i] = f32_to_bf16(__fmul_rn(__fadd_rn(__fmul_rn(u, 2.0f), -1.0f), 1.7320508f * scale));
  }
}

}  // namespace

void MoeOptions::validate() const {
  const int lo_f = pull_forward ? 0 : 1, lo_b = pull_backward ? 0 : 1;
  require(comm_ctas_forward >= lo_f && comm_ctas_forward <= 1024,
          "comm SMs (forward) must be in [{}, 1024] for the megakernel with {} dispatch (data-movement CTAs), got {}",
          lo_f, pull_forward ? "pull" : "push", comm_ctas_forward);
  require(comm_ctas_backward >= lo_b && comm_ctas_backward <= 1024,
          "comm SMs (backward) must be in [{}, 1024] for the megakernel with {} dispatch, got {}", lo_b,
          pull_backward ? "pull" : "push", comm_ctas_backward);
  require(ctas >= 0 && ctas <= 4096, "ctas must be in [0, 4096] (0 = every SM), got {}", ctas);
  require(combine_tokens >= 1 && combine_tokens <= 4096, "combine tokens must be in [1, 4096], got {}", combine_tokens);
  require(std::isfinite(wait_timeout_s) && wait_timeout_s > 0 && wait_timeout_s <= 3600,
          "wait timeout must be in (0, 3600] seconds, got {}", wait_timeout_s);
}

void validate_megakernel_layer(const LayerSpec& spec, int64_t tokens) {
  spec.validate();
  require(spec.dtype == DType::bf16, "--dtype: the megakernel runs bf16 (mxfp8 on the device is not built yet), got {}",
          to_string(spec.dtype));
  require(spec.mma == MmaModel::hopper_bf16, "--mma: the megakernel on Hopper computes hopper-bf16, got {}",
          to_string(spec.mma));
  require(spec.hidden % 8 == 0, "hidden (H) must be a multiple of 8 for the megakernel (16-byte rows), got {}",
          spec.hidden);
  require(spec.intermediate % 16 == 0,
          "intermediate (I) must be a multiple of 16 for the megakernel ([d_g | d_u] is one k16 chain), got {}",
          spec.intermediate);
  require(spec.shared_intermediate % 16 == 0,
          "shared_intermediate (I_s) must be a multiple of 16 for the megakernel, got {}", spec.shared_intermediate);
  // The bulk combines' slots (combine/bulk_combine.cuh): two per warp for K (+1) rows of 16 bytes, in the
  // forward tail (12 warps, the stages and strips) and the backward's combine tasks (8 warps, the stages).
  const bool shared = spec.shared_intermediate > 0;
  const mk::CombineLayout tail = mk::combine_layout(
      spec.hidden, spec.top_k, shared,
      mk::combine_warp_bytes(static_cast<uint32_t>(offsetof(mk::GemmSmem, full)), mk::kThreads / 32));
  const mk::CombineLayout side = mk::combine_layout(
      spec.hidden, spec.top_k, shared,
      mk::combine_warp_bytes(static_cast<uint32_t>(sizeof(mk::GemmSmem::a) + sizeof(mk::GemmSmem::b)),
                             mk::kConsumerThreads / 32));
  require(tail.slots >= 2 && side.slots >= 2,
          "top_k (K) = {} is too large for the megakernel's combine (its rows do not fit shared memory)", spec.top_k);
  require(tokens >= 1 && tokens * spec.top_k + static_cast<int64_t>(spec.experts) * kBM <= (int64_t{1} << 30),
          "tokens per rank must be in [1, {}] for the megakernel at top-k {}, got {}",
          ((int64_t{1} << 30) - static_cast<int64_t>(spec.experts) * kBM) / spec.top_k, spec.top_k, tokens);
}

// CALICO_MK_COMBINE=registers selects the register-load combines (the forward tail and the backward's combine
// tasks), =registers-backward only the backward's: A/B knobs for the benchmark; the bits are the same either way.
static int bulk_combine_enabled(bool backward) {
  const char* v = std::getenv("CALICO_MK_COMBINE");
  if (v == nullptr || std::string(v) == "bulk") return 1;
  if (std::string(v) == "registers-backward") return backward ? 0 : 1;
  require(std::string(v) == "registers", "CALICO_MK_COMBINE must be 'bulk', 'registers' or 'registers-backward', got '{}'",
          v);
  return 0;
}

struct MoeLayer::Impl {
  LayerSpec spec;
  MoeOptions opt;
  mk::LayerDims d;
  int sms = 0, ctas = 0;
  cudaStream_t stream = nullptr;
  std::vector<std::unique_ptr<DeviceBuffer<uint16_t>>> bf16_buffers;
  std::vector<std::unique_ptr<DeviceBuffer<float>>> f32_buffers;
  std::vector<std::unique_ptr<DeviceBuffer<int>>> int_buffers;
  size_t bytes = 0;
  uint16_t *x, *d_out, *wg, *wu, *wd, *wsg = nullptr, *wsu = nullptr, *wsd = nullptr;
  int* topk;
  float* rw;
  uint16_t *xp, *g, *u, *h, *y, *gs = nullptr, *us = nullptr, *hs = nullptr, *ys = nullptr, *out;
  uint16_t *dy, *dg, *du, *dx, *dgs = nullptr, *dus = nullptr, *dxs = nullptr, *d_x;
  float *d_rw, *d_wg, *d_wu, *d_wd, *d_wsg = nullptr, *d_wsu = nullptr, *d_wsd = nullptr;
  float2* silu_pairs;  // gemm/epilogue.cuh's SiluTables
  float* silu_values;
  int *sched_ints, *scratch, *counters_fwd, *counters_bwd, *abort_flag;
  size_t n_counters_fwd = 0, n_counters_bwd = 0;
  mk::ErrorRecord* error = nullptr;
  unsigned long long* profile = nullptr;  // [2][kProfSlots]: forward, backward
  unsigned long long* clocks = nullptr;   // [2][4]: SyncContext::clocks of the forward, the backward
  // The per-task timeline (record_timeline): [2][capacity] records and [2] counters, forward then backward.
  mk::TimelineSlot* timeline_slots = nullptr;
  unsigned* timeline_counts = nullptr;
  unsigned timeline_capacity = 0;
  bool recording = false;
  mk::DeviceSchedule sch;
  mk::ForwardParams fp;
  mk::BackwardParams bp;
  cudaEvent_t ev0 = nullptr, ev1 = nullptr;
  std::unique_ptr<DeviceBuffer<uint8_t>> l2_flush;

  template <typename T>
  T* alloc(std::vector<std::unique_ptr<DeviceBuffer<T>>>& list, size_t n) {
    list.push_back(std::make_unique<DeviceBuffer<T>>(std::max<size_t>(n, 1)));
    bytes += list.back()->size() * sizeof(T);
    return list.back()->get();
  }
  uint16_t* bf16(size_t n) { return alloc(bf16_buffers, n); }
  float* f32(size_t n) { return alloc(f32_buffers, n); }
  int* i32(size_t n) { return alloc(int_buffers, n); }

  Impl(const LayerSpec& s, int64_t tokens, const MoeOptions& o) : spec(s), opt(o) {
    validate_megakernel_layer(spec, tokens);
    opt.validate();
    int dev = 0, count = 0;
    const cudaError_t found = cudaGetDeviceCount(&count);
    require(found == cudaSuccess && count > 0, "the megakernel needs a CUDA GPU; none is usable ({})",
            found == cudaSuccess ? "no device" : cudaGetErrorString(found));
    CALICO_CUDA_CHECK(cudaGetDevice(&dev));
    cudaDeviceProp prop{};
    CALICO_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    require(prop.major == 9,
            "the megakernel runs on Hopper (sm_90a); this GPU is sm_{}{} ({}). The Blackwell (tcgen05) kernels are "
            "not built yet",
            prop.major, prop.minor, prop.name);
    sms = prop.multiProcessorCount;
    ctas = opt.ctas > 0 ? opt.ctas : sms;
    require(ctas <= sms, "ctas must be at most the GPU's {} SMs (one persistent CTA per SM), got {}", sms, ctas);
    require(opt.comm_ctas_forward < ctas && opt.comm_ctas_backward < ctas,
            "comm SMs ({} forward, {} backward) must leave at least one compute CTA of the {} CTAs",
            opt.comm_ctas_forward, opt.comm_ctas_backward, ctas);
    d.T = static_cast<int>(tokens);
    d.H = spec.hidden, d.I = spec.intermediate, d.Is = spec.shared_intermediate, d.E = spec.experts, d.K = spec.top_k;
    d.has_clamp = spec.swiglu_limit.has_value();
    d.clamp_limit = spec.swiglu_limit.value_or(0.0f);
    d.mtiles_cap = mk::routed_mtiles_cap(d.T, d.K, d.E);
    d.rows_cap = d.mtiles_cap * kBM;
    CALICO_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CALICO_CUDA_CHECK(cudaEventCreate(&ev0));
    CALICO_CUDA_CHECK(cudaEventCreate(&ev1));
    allocate();
    build_params();
  }

  ~Impl() {
    if (ev0) cudaEventDestroy(ev0);
    if (ev1) cudaEventDestroy(ev1);
    if (stream) cudaStreamDestroy(stream);
  }

  void allocate() {
    const size_t T = d.T, H = d.H, I = d.I, Is = d.Is, E = d.E, K = d.K, rows = d.rows_cap;
    x = bf16(T * H), d_out = bf16(T * H);
    topk = i32(T * K), rw = f32(T * K);
    wg = bf16(E * I * H), wu = bf16(E * I * H), wd = bf16(E * H * I);
    // xp: the expert-major x rows, read by dW_gate/dW_up (push: dispatched; pull: written back by the gate/up
    // tiles of column 0 from their gathered stages). dy: push only (pull gathers the rows in the GEMM tiles).
    xp = bf16(rows * H);
    dy = bf16(rows * H);  // pull: written by the d_h tiles of column 0 (moe/backward.cu)
    g = bf16(rows * I), u = bf16(rows * I), h = bf16(rows * I), y = bf16(rows * H);
    out = bf16(T * H);
    dg = bf16(rows * I), du = bf16(rows * I), dx = bf16(rows * H), d_x = bf16(T * H);
    d_rw = f32(T * K);
    d_wg = f32(E * I * H), d_wu = f32(E * I * H), d_wd = f32(E * H * I);
    silu_pairs = reinterpret_cast<float2*>(f32(2 * mk::kSiluTableSize));
    silu_values = f32(mk::kSiluTableSize);
    mk::build_silu_tables(silu_pairs, silu_values, d.clamp_limit, stream);
    CALICO_CUDA_CHECK(cudaGetLastError());
    if (Is > 0) {
      wsg = bf16(Is * H), wsu = bf16(Is * H), wsd = bf16(H * Is);
      gs = bf16(T * Is), us = bf16(T * Is), hs = bf16(T * Is), ys = bf16(T * H);
      dgs = bf16(T * Is), dus = bf16(T * Is), dxs = bf16(T * H);
      d_wsg = f32(Is * H), d_wsu = f32(Is * H), d_wsd = f32(H * Is);
    }
    const size_t mtc = d.mtiles_cap, mts = d.shared_mtiles();
    // schedule: counts[E] tile_first[E+1] tile_expert[mtc] token_row[T*K] row_token[rows] totals[2]
    sched_ints = i32(E + (E + 1) + mtc + T * K + rows + 2);
    sch.counts = sched_ints;
    sch.tile_first = sch.counts + E;
    sch.tile_expert = sch.tile_first + E + 1;
    sch.token_row = sch.tile_expert + mtc;
    sch.row_token = sch.token_row + T * K;
    sch.totals = sch.row_token + rows;
    sch.row_weight = f32(rows);
    scratch = i32(mk::schedule_scratch_ints(d.T, d.E));
    n_counters_fwd = mtc + (mtc + mts) + 3;
    counters_fwd = i32(n_counters_fwd);
    n_counters_bwd = mtc + E + (mtc + mts) + (E + 1) + 2;  // ... c_dx_total, c_task
    counters_bwd = i32(n_counters_bwd);
    abort_flag = i32(1);
    error = reinterpret_cast<mk::ErrorRecord*>(i32(sizeof(mk::ErrorRecord) / sizeof(int)));
    CALICO_CUDA_CHECK(cudaMemset(error, 0, sizeof(mk::ErrorRecord)));
    if (opt.profile) {
      profile = reinterpret_cast<unsigned long long*>(i32(4 * mk::kProfSlots));
      CALICO_CUDA_CHECK(cudaMemset(profile, 0, 16 * mk::kProfSlots));
    }
    clocks = reinterpret_cast<unsigned long long*>(i32(16));
    CALICO_CUDA_CHECK(cudaMemset(clocks, 0, 8 * sizeof(unsigned long long)));
    CALICO_CUDA_CHECK(cudaMemset(abort_flag, 0, sizeof(int)));
  }

  void build_params() {
    const int T = d.T, H = d.H, I = d.I, Is = d.Is, E = d.E, rows = d.rows_cap;
    mk::SyncContext sync{error, abort_flag, static_cast<uint64_t>(opt.wait_timeout_s * 1e9), 0, profile, clocks,
                         nullptr, nullptr, 0};  // the timeline: record_timeline
    fp = {};
    fp.d = d, fp.sch = sch, fp.sync = sync;
    fp.n_comm = opt.comm_ctas_forward, fp.pull = opt.pull_forward, fp.combine_tokens = opt.combine_tokens, fp.bulk_combine = bulk_combine_enabled(false), fp.skip_signal_task = opt.lose_signal_forward;
    fp.x = x, fp.router_weights = rw;
    fp.xp = xp, fp.g = g, fp.u = u, fp.h = h, fp.y = y, fp.gs = gs, fp.us = us, fp.hs = hs, fp.ys = ys, fp.out = out;
    fp.c_dispatched = counters_fwd;
    fp.c_gateup = fp.c_dispatched + d.mtiles_cap;
    fp.c_down_total = fp.c_gateup + d.mtiles_cap + d.shared_mtiles();
    fp.c_tail = fp.c_down_total + 1;
    fp.c_task = fp.c_tail + 1;
    fp.dynamic_walk = opt.dynamic_walk;
    fp.silu = {silu_pairs, silu_values};
    if (!opt.pull_forward) fp.tma_xp = rows_as_k_major<128>(xp, rows, H);
    fp.tma_wg = weight<128>(wg, E, I, H);
    fp.tma_wu = weight<128>(wu, E, I, H);
    fp.tma_h = rows_as_k_major<128>(h, rows, I);
    fp.tma_wd = weight<256>(wd, E, H, I);
    fp.st_g = store_rows<mk::bf16_t, 16>(g, rows, I);
    fp.st_u = store_rows<mk::bf16_t, 16>(u, rows, I);
    fp.st_h = store_rows<mk::bf16_t, 16>(h, rows, I);
    fp.st_y = store_rows<mk::bf16_t, 16>(y, rows, H);
    if (Is > 0) {
      fp.st_gs = store_rows<mk::bf16_t, 16>(gs, T, Is);
      fp.st_us = store_rows<mk::bf16_t, 16>(us, T, Is);
      fp.st_hs = store_rows<mk::bf16_t, 16>(hs, T, Is);
      fp.st_ys = store_rows<mk::bf16_t, 16>(ys, T, H);
      fp.tma_x = rows_as_k_major<128>(x, T, H);
      fp.tma_wsg = weight<128>(wsg, 1, Is, H);
      fp.tma_wsu = weight<128>(wsu, 1, Is, H);
      fp.tma_hs = rows_as_k_major<128>(hs, T, Is);
      fp.tma_wsd = weight<256>(wsd, 1, H, Is);
    }

    bp = {};
    bp.d = d, bp.sch = sch, bp.sync = sync;
    bp.sync.clocks = clocks + 4;
    if (profile) bp.sync.profile = profile + mk::kProfSlots;
    bp.n_comm = opt.comm_ctas_backward, bp.pull_dy = opt.pull_backward, bp.combine_tokens = opt.combine_tokens, bp.bulk_combine = bulk_combine_enabled(true), bp.skip_signal_task = opt.lose_signal_backward;
    bp.skip_wgrad_go = opt.lose_wgrad_go ? 1 : 0;
    bp.d_out = d_out;
    bp.xp = xp, bp.g = g, bp.u = u, bp.h = h, bp.y = y, bp.x = x, bp.gs = gs, bp.us = us, bp.hs = hs;
    bp.dy = dy, bp.dg = dg, bp.du = du, bp.dx = dx, bp.dgs = dgs, bp.dus = dus, bp.dxs = dxs, bp.d_x = d_x;
    bp.d_router_weights = d_rw;
    bp.d_wg = d_wg, bp.d_wu = d_wu, bp.d_wd = d_wd, bp.d_wsg = d_wsg, bp.d_wsu = d_wsu, bp.d_wsd = d_wsd;
    bp.c_dy = counters_bwd;
    bp.c_dy_expert = bp.c_dy + d.mtiles_cap;
    bp.c_dh = bp.c_dy_expert + E;
    bp.c_dh_expert = bp.c_dh + d.mtiles_cap + d.shared_mtiles();
    bp.c_dx_total = bp.c_dh_expert + E + 1;
    bp.c_task = bp.c_dx_total + 1;
    bp.dynamic_walk = opt.dynamic_walk;
    bp.silu = {silu_pairs, silu_values};
    bp.tma_dy = rows_as_k_major<128>(dy, rows, H);
    bp.tma_dy_mn = rows_as_k<128>(dy, rows, H);
    bp.tma_xp_mn = rows_as_k<256>(xp, rows, H);
    bp.tma_dg = rows_as_k_major<128>(dg, rows, I);
    bp.tma_du = rows_as_k_major<128>(du, rows, I);
    bp.tma_wd_t = weight_transposed<256>(wd, E, H, I);  // N = j (I), K = c (H)
    bp.tma_wg_t = weight_transposed<256>(wg, E, I, H);  // N = c (H), K = j (I)
    bp.tma_wu_t = weight_transposed<256>(wu, E, I, H);
    bp.tma_dg_mn = rows_as_k<128>(dg, rows, I);
    bp.tma_du_mn = rows_as_k<128>(du, rows, I);
    bp.tma_h_mn = rows_as_k<256>(h, rows, I);
    bp.tma_g = rows_as_k_major<128>(g, rows, I);
    bp.tma_u = rows_as_k_major<128>(u, rows, I);
    bp.carry_in_wgrad = opt.accumulate_weight_grads;
    bp.router_pairs = mk::router_task_pairs(d.K);
    bp.st_dg = store_rows<mk::bf16_t>(dg, rows, I);
    bp.st_du = store_rows<mk::bf16_t>(du, rows, I);
    bp.st_dx = store_rows<mk::bf16_t>(dx, rows, H);
    bp.st_wd = store_rows<float>(d_wd, H, I, E);
    bp.st_wg = store_rows<float>(d_wg, I, H, E);
    bp.st_wu = store_rows<float>(d_wu, I, H, E);
    if (Is > 0) {
      bp.st_dgs = store_rows<mk::bf16_t>(dgs, T, Is);
      bp.st_dus = store_rows<mk::bf16_t>(dus, T, Is);
      bp.st_dxs = store_rows<mk::bf16_t>(dxs, T, H);
      bp.st_wsd = store_rows<float>(d_wsd, H, Is);
      bp.st_wsg = store_rows<float>(d_wsg, Is, H);
      bp.st_wsu = store_rows<float>(d_wsu, Is, H);
      bp.tma_dout = rows_as_k_major<128>(d_out, T, H);
      bp.tma_dgs = rows_as_k_major<128>(dgs, T, Is);
      bp.tma_dus = rows_as_k_major<128>(dus, T, Is);
      bp.tma_gs = rows_as_k_major<128>(gs, T, Is);
      bp.tma_us = rows_as_k_major<128>(us, T, Is);
      bp.tma_wsd_t = weight_transposed<256>(wsd, 1, H, Is);
      bp.tma_wsg_t = weight_transposed<256>(wsg, 1, Is, H);
      bp.tma_wsu_t = weight_transposed<256>(wsu, 1, Is, H);
      bp.tma_dout_mn = rows_as_k<128>(d_out, T, H);
      bp.tma_dgs_mn = rows_as_k<128>(dgs, T, Is);
      bp.tma_dus_mn = rows_as_k<128>(dus, T, Is);
      bp.tma_hs_mn = rows_as_k<256>(hs, T, Is);
      bp.tma_x_mn = rows_as_k<256>(x, T, H);
    }
  }

  void upload(void* dst, const void* src, size_t bytes_) {
    if (bytes_ > 0) CALICO_CUDA_CHECK(cudaMemcpy(dst, src, bytes_, cudaMemcpyHostToDevice));
  }
  void download(void* dst, const void* src, size_t bytes_) {
    if (dst && bytes_ > 0) CALICO_CUDA_CHECK(cudaMemcpy(dst, src, bytes_, cudaMemcpyDeviceToHost));
  }

  void set_inputs(const MoeInputs& in) {
    const size_t T = d.T, H = d.H, I = d.I, Is = d.Is, E = d.E, K = d.K;
    require(in.x && in.d_out && in.topk_experts && in.router_weights && in.w_gate && in.w_up && in.w_down,
            "MoeLayer::set_inputs: x, d_out, topk_experts, router_weights and the routed weights are required");
    require(Is == 0 || (in.ws_gate && in.ws_up && in.ws_down),
            "MoeLayer::set_inputs: the shared-expert weights are required when I_s > 0");
    for (size_t i = 0; i < T * K; ++i)
      require(in.topk_experts[i] >= 0 && in.topk_experts[i] < static_cast<int>(E),
              "topk_experts[{}] = {} is outside [0, {})", i, in.topk_experts[i], E);
    upload(x, in.x, 2 * T * H);
    upload(d_out, in.d_out, 2 * T * H);
    upload(topk, in.topk_experts, 4 * T * K);
    upload(rw, in.router_weights, 4 * T * K);
    upload(wg, in.w_gate, 2 * E * I * H);
    upload(wu, in.w_up, 2 * E * I * H);
    upload(wd, in.w_down, 2 * E * H * I);
    if (Is > 0) {
      upload(wsg, in.ws_gate, 2 * Is * H);
      upload(wsu, in.ws_up, 2 * Is * H);
      upload(wsd, in.ws_down, 2 * H * Is);
    }
    zero_weight_grads();
    CALICO_CUDA_CHECK(cudaDeviceSynchronize());
  }

  void set_random_inputs(const int32_t* topk_experts, const float* router_weights, uint64_t seed) {
    const size_t T = d.T, H = d.H, I = d.I, Is = d.Is, E = d.E, K = d.K;
    for (size_t i = 0; i < T * K; ++i)
      require(topk_experts[i] >= 0 && topk_experts[i] < static_cast<int>(E), "topk_experts[{}] = {} is outside [0, {})",
              i, topk_experts[i], E);
    upload(topk, topk_experts, 4 * T * K);
    upload(rw, router_weights, 4 * T * K);
    auto fill = [&](uint16_t* p, size_t n, uint64_t stream_id, double fan_in) {
      fill_uniform_bf16<<<1024, 256, 0, stream>>>(p, n, seed * 16 + stream_id, static_cast<float>(1.0 / std::sqrt(fan_in)));
      CALICO_CUDA_CHECK_LAUNCH();
    };
    fill(x, T * H, 1, 1), fill(d_out, T * H, 2, 1);
    fill(wg, E * I * H, 3, H), fill(wu, E * I * H, 4, H), fill(wd, E * H * I, 5, I);
    if (Is > 0) fill(wsg, Is * H, 6, H), fill(wsu, Is * H, 7, H), fill(wsd, H * Is, 8, Is);
    zero_weight_grads();
    CALICO_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  void zero_weight_grads() {
    const size_t H = d.H, I = d.I, Is = d.Is, E = d.E;
    CALICO_CUDA_CHECK(cudaMemsetAsync(d_wg, 0, 4 * E * I * H, stream));
    CALICO_CUDA_CHECK(cudaMemsetAsync(d_wu, 0, 4 * E * I * H, stream));
    CALICO_CUDA_CHECK(cudaMemsetAsync(d_wd, 0, 4 * E * H * I, stream));
    if (Is > 0) {
      CALICO_CUDA_CHECK(cudaMemsetAsync(d_wsg, 0, 4 * Is * H, stream));
      CALICO_CUDA_CHECK(cudaMemsetAsync(d_wsu, 0, 4 * Is * H, stream));
      CALICO_CUDA_CHECK(cudaMemsetAsync(d_wsd, 0, 4 * H * Is, stream));
    }
  }

  // An upper bound on one pass's records: every task of either walk (each GEMM phase's tiles counted with the
  // m-tile capacity and 128-wide columns), both side-task kinds, and a dispatch and a tail record per CTA.
  size_t timeline_bound() const {
    const size_t mt = d.mtiles_cap + d.shared_mtiles(), H = ceil_div(d.H, kBM), I = ceil_div(d.I, kBM);
    const size_t Is = ceil_div(d.Is, kBM), E = d.E;
    const size_t forward = mt * (I + Is + 2 * H);
    const size_t backward = mt * (I + Is + 2 * H) + 3 * (E * H * I + H * Is) + static_cast<size_t>(d.T) * d.K +
                            static_cast<size_t>(d.T);
    return std::max(forward, backward) + 2 * static_cast<size_t>(ctas);
  }
  void record_timeline(bool on) {
    if (on && timeline_slots == nullptr) {
      const size_t cap = timeline_bound();
      require(cap < (size_t{1} << 31), "record_timeline: {} records per pass is more than this build records", cap);
      timeline_capacity = static_cast<unsigned>(cap);
      CALICO_CUDA_CHECK(cudaStreamSynchronize(stream));
      timeline_slots = reinterpret_cast<mk::TimelineSlot*>(i32(2 * cap * sizeof(mk::TimelineSlot) / sizeof(int)));
      timeline_counts = reinterpret_cast<unsigned*>(i32(2));
      CALICO_CUDA_CHECK(cudaMemset(timeline_counts, 0, 2 * sizeof(unsigned)));
    }
    recording = on;
    for (int pass = 0; pass < 2; ++pass) {
      mk::SyncContext& sc = pass == 0 ? fp.sync : bp.sync;
      sc.timeline = on ? timeline_slots + pass * size_t{timeline_capacity} : nullptr;
      sc.timeline_count = on ? timeline_counts + pass : nullptr;
      sc.timeline_capacity = on ? timeline_capacity : 0;
    }
  }
  std::vector<TimelineEvent> timeline() {
    synchronize();
    std::vector<TimelineEvent> events;
    if (timeline_slots == nullptr) return events;
    unsigned counts[2];
    CALICO_CUDA_CHECK(cudaMemcpy(counts, timeline_counts, sizeof(counts), cudaMemcpyDeviceToHost));
    for (int pass = 0; pass < 2; ++pass) {
      require(counts[pass] <= timeline_capacity,
              "timeline: the {} launch made {} records, more than the {} allocated (a bug in timeline_bound)",
              pass == 0 ? "forward" : "backward", counts[pass], timeline_capacity);
      std::vector<mk::TimelineSlot> slots(counts[pass]);
      if (!slots.empty())
        CALICO_CUDA_CHECK(cudaMemcpy(slots.data(), timeline_slots + pass * size_t{timeline_capacity},
                                     slots.size() * sizeof(mk::TimelineSlot), cudaMemcpyDeviceToHost));
      for (const auto& r : slots)
        events.push_back({pass, r.cta, mk::timeline_stage_name(r.stage), r.task, r.expert, r.m, r.n,
                          static_cast<int64_t>(r.start_ns), static_cast<int64_t>(r.end_ns)});
    }
    std::stable_sort(events.begin(), events.end(), [](const TimelineEvent& a, const TimelineEvent& b) {
      return a.pass != b.pass ? a.pass < b.pass : a.start_ns < b.start_ns;
    });
    return events;
  }

  void forward() {
    if (recording) CALICO_CUDA_CHECK(cudaMemsetAsync(timeline_counts, 0, sizeof(unsigned), stream));
    mk::launch_schedule(topk, rw, d.T, d.K, d.E, d.rows_cap, scratch, sch, stream);
    CALICO_CUDA_CHECK_LAUNCH();
    CALICO_CUDA_CHECK(cudaMemsetAsync(counters_fwd, 0, sizeof(int) * n_counters_fwd, stream));
    mk::launch_forward(fp, ctas, stream);
    CALICO_CUDA_CHECK_LAUNCH();
  }

  void backward() {
    if (recording) CALICO_CUDA_CHECK(cudaMemsetAsync(timeline_counts + 1, 0, sizeof(unsigned), stream));
    CALICO_CUDA_CHECK(cudaMemsetAsync(counters_bwd, 0, sizeof(int) * n_counters_bwd, stream));
    mk::launch_backward(bp, ctas, stream);
    CALICO_CUDA_CHECK_LAUNCH();
  }

  void synchronize() {
    CALICO_CUDA_CHECK(cudaStreamSynchronize(stream));
    mk::ErrorRecord rec{};
    CALICO_CUDA_CHECK(cudaMemcpy(&rec, error, sizeof(rec), cudaMemcpyDeviceToHost));
    if (rec.code != 0) {
      CALICO_CUDA_CHECK(cudaMemset(error, 0, sizeof(rec)));
      CALICO_CUDA_CHECK(cudaMemset(abort_flag, 0, sizeof(int)));
      throw Error(fmt::format(
          "megakernel: a wait timed out after {} s (rank {}, stage '{}', task {}, counter '{}' index {}, expected "
          ">= {}, seen {}, SM {}): a signal was lost or a producer stalled",
          opt.wait_timeout_s, rec.rank, stage_name(rec.stage), rec.task, counter_name(rec.counter_kind),
          rec.counter_index, rec.expected, rec.seen, rec.sm));
    }
  }

  std::vector<float> last_times, last_mhz;  // median_ms's iterations, in run order
  // The SM clock of the passes that ran since the marks were cleared: CTA 0's cycles over its nanoseconds.
  float marked_mhz() {
    unsigned long long m[8];
    CALICO_CUDA_CHECK(cudaMemcpy(m, clocks, sizeof(m), cudaMemcpyDeviceToHost));
    double cycles = 0, ns = 0;
    for (int pass = 0; pass < 2; ++pass)
      if (const unsigned long long* c = m + 4 * pass; c[3] > c[1])  // (start cycles, ns, end cycles, ns)
        cycles += static_cast<double>(c[2] - c[0]), ns += static_cast<double>(c[3] - c[1]);
    return ns > 0 ? static_cast<float>(cycles / ns * 1e3) : 0.0f;
  }
  template <class Body>
  float median_ms(int iterations, Body&& body) {
    require(iterations >= 1 && iterations <= 100000, "iterations must be in [1, 100000], got {}", iterations);
    if (!l2_flush) l2_flush = std::make_unique<DeviceBuffer<uint8_t>>(size_t{256} << 20);
    std::vector<float> ms, mhz;
    for (int i = 0; i < iterations; ++i) {
      CALICO_CUDA_CHECK(cudaMemsetAsync(l2_flush->get(), i & 0xFF, l2_flush->size(), stream));  // cold L2
      CALICO_CUDA_CHECK(cudaMemsetAsync(clocks, 0, 8 * sizeof(unsigned long long), stream));
      CALICO_CUDA_CHECK(cudaEventRecord(ev0, stream));
      body();
      CALICO_CUDA_CHECK(cudaEventRecord(ev1, stream));
      synchronize();
      float t = 0;
      CALICO_CUDA_CHECK(cudaEventElapsedTime(&t, ev0, ev1));
      ms.push_back(t);
      mhz.push_back(marked_mhz());
    }
    last_times = ms, last_mhz = mhz;
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }
};

MoeLayer::MoeLayer(const LayerSpec& spec, int64_t tokens, const MoeOptions& options)
    : impl_(std::make_unique<Impl>(spec, tokens, options)) {}
MoeLayer::~MoeLayer() = default;
void MoeLayer::set_inputs(const MoeInputs& in) { impl_->set_inputs(in); }
void MoeLayer::set_random_inputs(const int32_t* topk, const float* w, uint64_t seed) {
  impl_->set_random_inputs(topk, w, seed);
}
void MoeLayer::zero_weight_grads() { impl_->zero_weight_grads(); }
void MoeLayer::forward() { impl_->forward(); }
void MoeLayer::backward() { impl_->backward(); }
void MoeLayer::synchronize() { impl_->synchronize(); }

void MoeLayer::get_outputs(const MoeOutputs& o) {
  impl_->synchronize();
  auto& m = *impl_;
  const size_t T = m.d.T, H = m.d.H, I = m.d.I, Is = m.d.Is, E = m.d.E, K = m.d.K;
  m.download(o.out, m.out, 2 * T * H);
  m.download(o.d_x, m.d_x, 2 * T * H);
  m.download(o.d_router_weights, m.d_rw, 4 * T * K);
  m.download(o.d_w_gate, m.d_wg, 4 * E * I * H);
  m.download(o.d_w_up, m.d_wu, 4 * E * I * H);
  m.download(o.d_w_down, m.d_wd, 4 * E * H * I);
  if (Is > 0) {
    m.download(o.d_ws_gate, m.d_wsg, 4 * Is * H);
    m.download(o.d_ws_up, m.d_wsu, 4 * Is * H);
    m.download(o.d_ws_down, m.d_wsd, 4 * H * Is);
  }
}

float MoeLayer::forward_ms(int iterations) {
  return impl_->median_ms(iterations, [&] { impl_->forward(); });
}
float MoeLayer::forward_backward_ms(int iterations) {
  return impl_->median_ms(iterations, [&] {
    impl_->forward();
    impl_->backward();
  });
}
void MoeLayer::record_timeline(bool on) { impl_->record_timeline(on); }
std::vector<TimelineEvent> MoeLayer::timeline() { return impl_->timeline(); }
size_t MoeLayer::device_bytes() const { return impl_->bytes; }
std::vector<float> MoeLayer::last_times_ms() const { return impl_->last_times; }
std::vector<float> MoeLayer::last_clocks_mhz() const { return impl_->last_mhz; }

void silu_tables_for_test(float clamp_limit, std::vector<float>& silu, std::vector<float>& silu_of_pairs,
                          std::vector<float>& grad) {
  float2* pairs = nullptr;
  float* values = nullptr;
  CALICO_CUDA_CHECK(cudaMalloc(&pairs, sizeof(float2) * mk::kSiluTableSize));
  CALICO_CUDA_CHECK(cudaMalloc(&values, sizeof(float) * mk::kSiluTableSize));
  mk::build_silu_tables(pairs, values, clamp_limit, nullptr);
  std::vector<float2> host(mk::kSiluTableSize);
  silu.resize(host.size());
  cudaError_t e = cudaMemcpy(host.data(), pairs, sizeof(float2) * host.size(), cudaMemcpyDeviceToHost);
  if (e == cudaSuccess) e = cudaMemcpy(silu.data(), values, sizeof(float) * silu.size(), cudaMemcpyDeviceToHost);
  cudaFree(pairs);
  cudaFree(values);
  CALICO_CUDA_CHECK(e);
  silu_of_pairs.resize(host.size()), grad.resize(host.size());
  for (size_t i = 0; i < host.size(); ++i) silu_of_pairs[i] = host[i].x, grad[i] = host[i].y;
}

std::string MoeLayer::profile_report() {
  auto& m = *impl_;
  require(m.profile != nullptr, "profile_report: construct the layer with MoeOptions::profile = true");
  m.synchronize();
  std::vector<unsigned long long> v(2 * mk::kProfSlots);
  CALICO_CUDA_CHECK(cudaMemcpy(v.data(), m.profile, 8 * v.size(), cudaMemcpyDeviceToHost));
  std::string r;
  for (int pass = 0; pass < 2; ++pass) {
    const unsigned long long* c = v.data() + pass * mk::kProfSlots;
    const int n_comm = pass == 0 ? m.opt.comm_ctas_forward : m.opt.comm_ctas_backward, n_compute = m.ctas - n_comm;
    auto per = [](unsigned long long x, int n) { return n > 0 ? x / 1e6 / n : 0.0; };
    r += fmt::format("{} pass, Mcycles per CTA summed over all launches since construction ({} compute, {} data-movement CTAs):\n",
                     pass == 0 ? "forward" : "backward", n_compute, n_comm);
    r += fmt::format("  compute CTAs: tasks {:.2f} (main loops {:.2f}, so epilogues + task waits {:.2f}), tail {:.2f}\n",
                     per(c[mk::kProfTasks], n_compute), per(c[mk::kProfMainloop], n_compute),
                     per(c[mk::kProfTasks] - std::min(c[mk::kProfTasks], c[mk::kProfMainloop]), n_compute),
                     per(c[mk::kProfTail], n_compute));
    r += fmt::format("  of the epilogues: stores issued {:.2f}, barrier + release {:.2f}, carried-in wgrad reads {:.2f}\n",
                     per(c[mk::kProfEpilogue], n_compute), per(c[mk::kProfSignal], n_compute),
                     per(c[mk::kProfCarryIn], n_compute));
    if (pass == 0) r += fmt::format("  of which gate/up epilogues {:.2f}\n", per(c[mk::kProfEpiGateUp], n_compute));
    if (pass == 1)
      r += fmt::format("  epilogues by GEMM: d_h {:.2f}, d_x_k {:.2f}, weight gradients {:.2f}\n",
                       per(c[mk::kProfEpiDgradH], n_compute), per(c[mk::kProfEpiDgradX], n_compute),
                       per(c[mk::kProfEpiWgrad], n_compute));
    r += fmt::format("  of the epilogues, waiting for a free output strip: {:.2f}\n", per(c[mk::kProfStoreWait], n_compute));
    if (pass == 1)
      r += fmt::format("  side tasks (within tasks): router gradient {:.2f}, d_x combine {:.2f} (waiting for d_x_k {:.2f})\n",
                       per(c[mk::kProfSideRouter], n_compute), per(c[mk::kProfSideCombine], n_compute),
                       per(c[mk::kProfSideCombineWait], n_compute));
    if (pass == 1)
      r += fmt::format("  main loops by GEMM: d_h {:.2f}, d_x_k {:.2f}, weight gradients {:.2f}\n",
                       per(c[mk::kProfMainDgradH], n_compute), per(c[mk::kProfMainDgradX], n_compute),
                       per(c[mk::kProfMainWgrad], n_compute));
    // Cycles per 128 x 256 x 64 k-tile, waits for the stage included: ~1,300 is the dense rate on the H200.
    auto per_ktile = [&](int cycles_slot, int count_slot) {
      return c[count_slot] > 0 ? fmt::format("{:.0f}", static_cast<double>(c[cycles_slot]) / c[count_slot]) : std::string("-");
    };
    r += fmt::format("  cycles per k-tile in the main loops: {}", per_ktile(mk::kProfMainloop, mk::kProfKtiles));
    if (pass == 1)
      r += fmt::format(" (d_h {}, d_x_k {}, weight gradients {})", per_ktile(mk::kProfMainDgradH, mk::kProfKtilesDgradH),
                       per_ktile(mk::kProfMainDgradX, mk::kProfKtilesDgradX),
                       per_ktile(mk::kProfMainWgrad, mk::kProfKtilesWgrad));
    r += "\n";
    r += fmt::format("  of the main loops, waiting for full stages (every cycle of those waits): {:.2f}",
                     per(c[mk::kProfFullWait], n_compute));
    if (pass == 1)
      r += fmt::format(" (d_h {:.2f}, d_x_k {:.2f}, weight gradients {:.2f})", per(c[mk::kProfFullWaitDgradH], n_compute),
                       per(c[mk::kProfFullWaitDgradX], n_compute), per(c[mk::kProfFullWaitWgrad], n_compute));
    r += "\n";
    r += fmt::format("  data-movement CTAs: {:.2f}\n", per(c[mk::kProfComm], n_comm));
    for (int st = 1; st < mk::kStageCount; ++st)
      if (c[st] > 0) r += fmt::format("  waiting in '{}': {:.2f} per compute CTA\n", stage_name(st), per(c[st], n_compute));
  }
  return r;
}

std::string MoeLayer::describe() const {
  const auto& m = *impl_;
  return fmt::format(
      "megakernel sm_90a: {}/{} dispatch (forward/backward), {} CTAs x {} threads ({} forward / {} backward data-movement CTAs), tiles {}x{} "
      "(gate/up {}+{}), K stage {}, {} stages, {} KB shared memory, {:.2f} GB on the device",
      m.opt.pull_forward ? "pull" : "push", m.opt.pull_backward ? "pull" : "push", m.ctas, mk::kThreads, m.opt.comm_ctas_forward, m.opt.comm_ctas_backward, kBM, mk::kWideN, mk::kGateUpN,
      mk::kGateUpN, mk::kBK, mk::kStages, mk::gemm_smem_bytes() / 1024, m.bytes / 1e9);
}

}  // namespace calico::gpu
