// The bit-exact CPU reference MoE layer (DESIGN 2.1-2.2), forward and backward, and a float64 check mode.
//
// Structure: rank-local STAGE FUNCTIONS exchange plain row buffers; a driver moves the buffers between ranks.
// run_reference() is the in-process driver (it emulates R ranks one after another); an MPI driver calls the
// same stage functions with MPI_Alltoallv in between. Every rank holds the global Routing and the Schedule
// built from it (the "plan"); the exchanged buffers carry only activations.
//
// Buffer layouts (all bf16 bit patterns, row-major, H columns; lists defined by the Schedule alone):
//  - dispatch buffer src -> dst: one row per token of home rank src that has >= 1 expert on dst, ascending
//    global token g (dispatch_list). Forward: x rows; backward: d_out rows. Row count =
//    Schedule::dispatch_tokens[src*R + dst].
//  - combine buffer src -> dst: one row per (token, k) computed on owner rank src for home rank dst,
//    ascending (g, k) (combine_list). Forward: y_k rows; backward: d_x_k rows. Row count =
//    Schedule::combine_rows[src*R + dst].
//  The receiver of a stage gets a vector of R buffers indexed by the sending rank.
//
// MXFP8 mode (LayerSpec::dtype == mxfp8), the Hopper path of DESIGN 2.6: EVERY GEMM operand (activations and
// weights, forward, dgrad and wgrad alike) is quantised to MXFP8 (e4m3 elements, one E8M0 scale per 32
// consecutive elements along that GEMM's contraction dimension, the spec's scale rule, blocks starting at
// contraction index 0, a short last block treated as zero-padded) and dequantised back to bf16 exactly
// (mx_dequantize_to_bf16), then the GEMM runs through the BF16 MMA model. So a weight is quantised along H
// for the forward gate/up GEMMs and along I for dgrad, and wgrad operands are quantised along the token
// (row) dimension in canonical row order. Non-GEMM arithmetic (SwiGLU, combine, router grads) is identical
// to bf16 mode. The wire carries bf16 rows in the reference (quantisation is a per-row function of the
// same bits, so quantising before or after the exchange gives the same result for the dispatch of x).
// MXFP8 on Blackwell (dtype mxfp8 with LayerSpec::mma == blackwell_mxfp8, `--mma blackwell-mxfp8`): the same
// quantisation of every GEMM operand (same axes, blocks and scale rule), but no dequantisation: each GEMM is
// what tcgen05.mma kind::mxf8f6f4.block_scale (block 32, E8M0 scales) computes: per output element one chain
// over the 32-element K blocks in ascending order, acc = mma_step_blackwell_mxfp8(e4m3 block of A, its scale,
// e4m3 block of B, its scale, acc), the fp32 accumulator carried across blocks, a short last block
// zero-padded. Everything outside the GEMMs is as in the other modes. (The reference requires a bf16 model
// or, with dtype mxfp8, blackwell_mxfp8; hopper_fp8 has no layer path.)
//
// float64 mode: the same layer as real-number math in double on the same bf16 inputs: no intermediate
// rounding, no MMA model, libm exp, no MXFP8 quantisation (dtype is ignored). Outputs have the same names
// and shapes, stored as f64. It is the yardstick the contract mode is checked against, not a contract.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "calico/backend.h"
#include "calico/buffer.h"
#include "calico/schedule.h"
#include "calico/spec.h"

namespace calico::ref {

// ---------------------------------------------------------------------------------------------------------
// THE BACKWARD CONTRACT (and the forward one), written down once. Notation: bf16(v) is RNE rounding of an
// fp32 value; gemm(A[M,K], B[N,K]) is model_gemm_bf16 (DESIGN 2.2: per output one MMA-model chain along K
// in steps of 16 ascending, zero-padded at the end, starting from the accumulator given); fp32 ops are
// single IEEE operations in the order written. L is the optional SwiGLU clamp limit.
//
// Forward, one expert over its rows in canonical order (X [n,H]; weights Wg,Wu [I,H], Wd [H,I]):
//   g = bf16(gemm(X, Wg)), u = bf16(gemm(X, Wu))                                       [n,I], from 0
//   g' = (g > L) ? L : g;  u' = (u > L) ? L : ((u < -L) ? -L : u)   (no clamp: g' = g, u' = u; NaN passes)
//   h = bf16(calico_silu(g') * u')
//   y = bf16(gemm(h, Wd))                                                              [n,H]
// Shared expert: the same with Ws* over the home rank's T tokens (in local order).
// Combine (home rank, per token, per column c): acc = y_s[c] (or +0); for k = 0..K-1: acc = fmaf(w_k,
//   y_k[c], acc); out[c] = bf16(acc).
// Backward, given d_out [T,H] bf16:
//   d_router_weights[t,k] = fp32 chain over c = 0..H-1 ascending: acc = 0; acc = fmaf(d_out[c], y_k[c], acc)
//     (computed on the home rank from the y_k rows it received in the forward combine).
//   d_y_k = bf16(w_k * d_out[c])   (owner rank, fp32 multiply); shared expert: d_y_s = d_out.
//   d_h = bf16(gemm(d_y, Wd^T))                                                        [n,I], K = H
//   s = calico_silu(g'), ds = calico_silu_grad(g')  (recomputed from the saved bf16 g, u)
//   d_u = (clamp and |u| > L) ? +0 : bf16(d_h * s)
//   d_g = (clamp and g > L)   ? +0 : bf16((d_h * u') * ds)
//   d_x_k = bf16(gemm([d_g | d_u], [Wg^T | Wu^T]))   ONE chain over the 2I concatenated columns (d_g's first)
//   d_x[c] = bf16(acc), acc = d_x_s[c] (or +0); for k = 0..K-1: acc = acc + d_x_k[c]   (fp32 adds, home rank)
//   Weight gradients, fp32 accumulators carried in and out, never rounded; K = the expert's rows in
//   canonical global order (ascending g), steps of 16 from row 0:
//     d_Wd += gemm(d_y^T, h^T) [H,I];  d_Wg += gemm(d_g^T, X^T) [I,H];  d_Wu += gemm(d_u^T, X^T) [I,H]
//   The shared expert's d_Ws* are this rank's partial sums over its T tokens in local order.
// NOTE: a chain step whose 16 products are all zero leaves the accumulator unchanged except that -0 becomes
// +0; a backend that pads segments beyond the next multiple of 16 rows must skip such steps. The same holds
// for the Blackwell MXFP8 path's 32-element steps (zero terms at -133 carry no scale exponents, issue 10).
// ---------------------------------------------------------------------------------------------------------

enum class ReferenceMode : uint8_t { contract, float64 };
const char* to_string(ReferenceMode m);
ReferenceMode parse_reference_mode(const std::string& s);  // "contract" | "float64"; error names --mode

// The reference backend (calico::Backend): tensors as listed in calico/backend.h. Inputs (x, d_out, weights)
// are generated from RunConfig::seed by layer_input (below); float64 mode stores its outputs as f64.
std::unique_ptr<Backend> make_reference_backend(ReferenceMode mode);

// Wall time per stage, summed over the emulated ranks, in the order the stages ran.
using StageTimes = std::vector<std::pair<std::string, double>>;

// The in-process driver: validates, builds the schedule, generates the inputs, runs all stages.
RunResult run_reference(const RunRequest& request, ReferenceMode mode, StageTimes* times = nullptr);

// ---------------------------------------------------------------------------------------------------------
// Deterministic layer inputs: global values from (seed, tensor, global index), the same for every R.
//   x, d_out: N(0,1) at index g*H + c;  w_gate/w_up of expert e: N(0,1)/sqrt(H) at j*H + c;
//   w_down of expert e: N(0,1)/sqrt(I) at c*I + j;  shared: N(0,1)/sqrt(H), N(0,1)/sqrt(I_s).
// ---------------------------------------------------------------------------------------------------------
enum class InputTensor : uint32_t { x = 1, d_out, w_gate, w_up, w_down, ws_gate, ws_up, ws_down };
// rows [row0, row0 + rows) of the tensor (expert index for routed weights, ignored otherwise), bf16 bits.
void layer_input(const LayerSpec& spec, uint64_t seed, InputTensor which, int expert, int64_t row0, int64_t rows,
                 uint16_t* out);

// ---------------------------------------------------------------------------------------------------------
// Buffer lists (the layout contract above)
// ---------------------------------------------------------------------------------------------------------
std::vector<int64_t> dispatch_list(const Schedule& s, int src, int dst);  // global token ids, ascending

struct CombineEntry {
  int64_t token;       // global g
  int32_t k;           // top-k slot
  int32_t expert;      // global expert id
  int64_t expert_row;  // row in the expert's canonical segment
};
std::vector<CombineEntry> combine_list(const Schedule& s, int src, int dst);  // ascending (g, k)

// ---------------------------------------------------------------------------------------------------------
// Rank-local stage functions (contract mode). Pointers are bf16 bit patterns unless noted.
// ---------------------------------------------------------------------------------------------------------
// [rows, H]. Not zero-filled on resize (calico/buffer.h): every stage writes all rows of its buffers.
using RowBuffer = UninitVector<uint16_t>;

struct ExpertWeights {  // this rank's experts, layouts of calico/backend.h
  const uint16_t* w_gate = nullptr;  // [E/R, I, H]
  const uint16_t* w_up = nullptr;    // [E/R, I, H]
  const uint16_t* w_down = nullptr;  // [E/R, H, I]
  const uint16_t* ws_gate = nullptr;  // [I_s, H] (shared expert, I_s > 0)
  const uint16_t* ws_up = nullptr;
  const uint16_t* ws_down = nullptr;  // [H, I_s]
};

struct ExpertGrads {  // fp32 accumulators, carried in and out (same layouts)
  float* d_w_gate = nullptr;
  float* d_w_up = nullptr;
  float* d_w_down = nullptr;
  float* d_ws_gate = nullptr;
  float* d_ws_up = nullptr;
  float* d_ws_down = nullptr;
};

// What the forward keeps for the backward: per local expert (or the shared expert) its rows' bf16 X, g, u.
struct FfnSaved {
  int64_t rows = 0;
  UninitVector<uint16_t> x, g, u, h;  // [rows, H], [rows, I] x3 (written in full by the forward)
};

// Forward 1 (home rank): x [T,H] -> R dispatch buffers. Backward 1 uses it for d_out.
std::vector<RowBuffer> dispatch_pack(const Schedule& s, int rank, int hidden, const uint16_t* x);

// Forward 2 (owner rank): received dispatch buffers -> R combine buffers of y rows; fills saved[E/R].
std::vector<RowBuffer> expert_forward(const LayerSpec& spec, const Schedule& s, int rank,
                                      const std::vector<RowBuffer>& received, const ExpertWeights& w,
                                      std::vector<FfnSaved>& saved);

// Forward 2' (home rank, I_s > 0): y_s [T,H] of the shared expert; fills saved.
RowBuffer shared_forward(const LayerSpec& spec, int64_t tokens, const uint16_t* x, const ExpertWeights& w,
                         FfnSaved& saved);

// Forward 3 (home rank): received combine buffers (+ y_s, may be empty) -> out [T,H].
void combine(const LayerSpec& spec, const Schedule& s, const Routing& routing, int rank,
             const std::vector<RowBuffer>& received, const RowBuffer& y_shared, uint16_t* out);

// Backward 0 (home rank): d_router_weights [T,K] f32 from d_out and the forward combine's received y rows.
void router_grad(const LayerSpec& spec, const Schedule& s, int rank, const uint16_t* d_out,
                 const std::vector<RowBuffer>& received_y, float* d_router_weights);

// Backward 2 (owner rank): received d_out dispatch buffers -> R combine buffers of d_x_k rows; accumulates
// the routed weight gradients of this rank's experts.
std::vector<RowBuffer> expert_backward(const LayerSpec& spec, const Schedule& s, const Routing& routing, int rank,
                                       const std::vector<RowBuffer>& received, const ExpertWeights& w,
                                       const std::vector<FfnSaved>& saved, const ExpertGrads& grads);

// Backward 2' (home rank, I_s > 0): d_x_s [T,H]; accumulates the shared expert's weight gradients.
RowBuffer shared_backward(const LayerSpec& spec, int64_t tokens, const uint16_t* d_out, const ExpertWeights& w,
                          const FfnSaved& saved, const ExpertGrads& grads);

// Backward 3 (home rank): received d_x_k buffers (+ d_x_s, may be empty) -> d_x [T,H].
void backward_combine(const LayerSpec& spec, const Schedule& s, int rank, const std::vector<RowBuffer>& received,
                      const RowBuffer& dx_shared, uint16_t* d_x);

// ---------------------------------------------------------------------------------------------------------
// float64 mode on explicit real-valued inputs (used by the backend and by finite-difference tests).
// ---------------------------------------------------------------------------------------------------------
struct F64Layer {
  LayerSpec spec;
  int64_t tokens = 0;  // N = R*T
  std::vector<int32_t> topk_experts;  // [N,K]
  std::vector<double> router_weights;  // [N,K]
  std::vector<double> x, d_out;        // [N,H]
  std::vector<double> w_gate, w_up, w_down;   // [E,I,H], [E,I,H], [E,H,I]
  std::vector<double> ws_gate, ws_up, ws_down;  // [I_s,H], [I_s,H], [H,I_s]
};
struct F64Grads {
  std::vector<double> out, d_x, d_router_weights;
  std::vector<double> d_w_gate, d_w_up, d_w_down;    // all experts
  std::vector<double> d_ws_gate, d_ws_up, d_ws_down;  // [R, ...]: partial sums over each rank's T tokens
};
// tokens_per_rank splits the shared expert's weight gradient into per-rank partial sums.
F64Grads layer_f64(const F64Layer& layer, int64_t tokens_per_rank, bool backward = true);

}  // namespace calico::ref
