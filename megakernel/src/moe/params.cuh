// What the persistent forward and backward launches are given: layer dimensions, the device-built schedule,
// buffers, counters and the TMA operands. Plain structs, passed by value as __grid_constant__ parameters.
#pragma once

#include <cstdint>

#include "gemm/sm90_tile.cuh"
#include "gemm/epilogue.cuh"
#include "gemm/tma_store.cuh"
#include "sync/bounded_wait.cuh"
#include "dispatch/router_tasks.h"

namespace calico::gpu::mk {

constexpr int kGateUpN = 128;  // gate columns per tile (and as many up columns)
constexpr int kWideN = 256;    // N of the down, dgrad and wgrad tiles

__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }
// The m-tiles the expert-major buffers hold for T tokens, top-K, E experts: every (t, k) row plus each
// expert's segment padded to kBM rows (at most kBM - 1 padding rows per expert).
__host__ __device__ constexpr int routed_mtiles_cap(int T, int K, int E) { return ceil_div(T * K + E * (kBM - 1), kBM); }

struct LayerDims {
  int T = 0, H = 0, I = 0, Is = 0, E = 0, K = 0;  // Is = 0: no shared expert
  int has_clamp = 0;
  float clamp_limit = 0.0f;
  int rows_cap = 0;    // rows of the expert-major buffers (segments padded to kBM)
  int mtiles_cap = 0;  // rows_cap / kBM
  __host__ __device__ int shared_mtiles() const { return Is > 0 ? ceil_div(T, kBM) : 0; }
};

// Built on the device from the routing (schedule/schedule.cu); the canonical order of DESIGN 2.3.
struct DeviceSchedule {
  int* counts = nullptr;       // [E] rows of each expert
  int* tile_first = nullptr;   // [E+1] first m-tile of each expert's segment (segment row = 128 * tile)
  int* tile_expert = nullptr;  // [mtiles_cap] expert of each m-tile
  int* token_row = nullptr;    // [T*K] row of (t, k) in the expert-major buffers
  int* row_token = nullptr;    // [rows_cap] token of each row, -1 for padding
  float* row_weight = nullptr;  // [rows_cap] router weight of each row's (t, k), 0 for padding
  int* totals = nullptr;       // [0] padded rows, [1] m-tiles
};

// Rows of a routed m-tile that hold real (token, k) pairs: 0..128.
__device__ __forceinline__ int routed_tile_rows(const DeviceSchedule& s, int m, int e) {
  const int r = s.counts[e] - (m - s.tile_first[e]) * kBM;
  return r < 0 ? 0 : (r > kBM ? kBM : r);
}

struct ForwardParams {
  LayerDims d;
  DeviceSchedule sch;
  SyncContext sync;
  int n_comm = 1;             // CTAs [0, n_comm) move data; the rest compute
  int pull = 0;               // 1: compute CTAs gather x rows themselves (gemm/gather.cuh); 0: comm CTAs dispatch
  int combine_tokens = 16;    // tokens per combine task
  int bulk_combine = 1;       // 1: the tail by bulk copies (combine/bulk_combine.cuh); 0: combine_tokens
  int skip_signal_task = -1;  // debug: the compute task whose release is skipped (lost-signal test)
  const uint16_t* x = nullptr;             // [T,H]
  const float* router_weights = nullptr;   // [T,K]
  uint16_t *xp = nullptr, *g = nullptr, *u = nullptr, *h = nullptr, *y = nullptr;  // expert-major rows (xp: push)
  uint16_t *gs = nullptr, *us = nullptr, *hs = nullptr, *ys = nullptr;             // shared expert, T rows
  uint16_t* out = nullptr;                 // [T,H]
  int *c_dispatched = nullptr, *c_gateup = nullptr, *c_down_total = nullptr, *c_tail = nullptr;
  int* c_task = nullptr;     // the dynamic walk's ticket counter (moe/persistent.cuh)
  int dynamic_walk = 1;      // 0: the static walk
  SiluTables silu;           // gemm/epilogue.cuh
  OpK128 tma_xp, tma_x, tma_wg, tma_wu, tma_wsg, tma_wsu, tma_h, tma_hs;
  OpK256 tma_wd, tma_wsd;
  StoreBf16Warp st_g, st_u, st_h, st_y, st_gs, st_us, st_hs, st_ys;  // the epilogues' TMA stores (16-row boxes)
};

struct BackwardParams {
  LayerDims d;
  DeviceSchedule sch;
  SyncContext sync;
  int n_comm = 1;
  int pull_dy = 0;            // 1: compute CTAs gather d_y = w * d_out rows; 0: comm CTAs dispatch them
  SiluTables silu;
  int carry_in_wgrad = 1;     // 1: weight-gradient chains start from the carried-in accumulators; 0: from +0
  int combine_tokens = 16;
  int bulk_combine = 1;       // 1: the d_x combine tasks by bulk copies in the stages they hold; 0: combine_tokens
  int router_pairs = kConsumerThreads;  // (t, k) pairs per router-gradient side task: router_task_pairs(K)
  int skip_signal_task = -1;
  int skip_wgrad_go = 0;  // debug (MoeOptions::lose_wgrad_go)
  const uint16_t* d_out = nullptr;  // [T,H]
  const uint16_t *xp = nullptr, *g = nullptr, *u = nullptr, *h = nullptr, *y = nullptr;  // from the forward
  const uint16_t *x = nullptr, *gs = nullptr, *us = nullptr, *hs = nullptr;
  uint16_t *dy = nullptr, *dg = nullptr, *du = nullptr, *dx = nullptr;  // expert-major rows
  uint16_t *dgs = nullptr, *dus = nullptr, *dxs = nullptr;              // shared expert
  uint16_t* d_x = nullptr;              // [T,H]
  float* d_router_weights = nullptr;    // [T,K]
  float *d_wg = nullptr, *d_wu = nullptr, *d_wd = nullptr;     // fp32 accumulators, carried in and out
  float *d_wsg = nullptr, *d_wsu = nullptr, *d_wsd = nullptr;
  int *c_dy = nullptr, *c_dy_expert = nullptr, *c_dh = nullptr, *c_dh_expert = nullptr, *c_dx_total = nullptr;
  int* c_task = nullptr;
  int dynamic_walk = 1;
  // dgrad: A K-major rows, B MN-major weights
  OpK128 tma_dy, tma_dout, tma_dg, tma_du, tma_dgs, tma_dus;
  OpK128 tma_g, tma_u, tma_gs, tma_us;  // the forward's g, u: the d_h tiles' epilogue stages (produce_saved_gu)
  OpMN256 tma_wd_t, tma_wsd_t, tma_wg_t, tma_wu_t, tma_wsg_t, tma_wsu_t;
  // wgrad: A and B MN-major rows (the token dimension is K)
  OpMN128 tma_dy_mn, tma_dout_mn, tma_dg_mn, tma_du_mn, tma_dgs_mn, tma_dus_mn;
  OpMN256 tma_h_mn, tma_hs_mn, tma_xp_mn, tma_x_mn;
  // the epilogues' TMA stores
  StoreBf16 st_dg, st_du, st_dx, st_dgs, st_dus, st_dxs;
  StoreF32 st_wd, st_wg, st_wu, st_wsd, st_wsg, st_wsu;
};

void launch_forward(const ForwardParams& p, int grid, cudaStream_t stream);
// The backward kernel of each weight-gradient mode, in a translation unit of its own (moe/backward.cu).
void launch_backward_overwrite(const BackwardParams& p, int grid, cudaStream_t stream);
void launch_backward_accumulate(const BackwardParams& p, int grid, cudaStream_t stream);
inline void launch_backward(const BackwardParams& p, int grid, cudaStream_t stream) {
  (p.carry_in_wgrad ? launch_backward_accumulate : launch_backward_overwrite)(p, grid, stream);
}
size_t gemm_smem_bytes();
// pairs[i] = {calico_silu, calico_silu_grad} of the bf16 i, silu[i] = calico_silu of it; [kSiluTableLimit]:
// silu(clamp_limit) (and grad 0).
void build_silu_tables(float2* pairs, float* silu, float clamp_limit, cudaStream_t stream);

}  // namespace calico::gpu::mk
