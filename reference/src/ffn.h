// Internal: the one expert FFN (forward and backward) of the contract, and its GEMM wrapper, shared by the
// routed experts and the shared expert. The arithmetic follows "the backward contract" in calico/reference.h.
#pragma once

#include <cstdint>
#include <vector>

#include "calico/reference.h"

namespace calico::ref::detail {

// C[M,N] <- chain over K of A[m,:] . B[n,:] starting from C (model_gemm_bf16). A [M,K] and B [N,K] are bf16
// bits, contiguous along K. In mxfp8 mode both operands are first quantised along K; the Hopper path (mma a
// bf16 model) dequantises them to bf16 for the BF16 model, the Blackwell path (mma blackwell_mxfp8) feeds
// the e4m3 elements and E8M0 scales to model_gemm_mxfp8_blackwell.
void gemm(const LayerSpec& spec, int64_t M, int64_t N, int64_t K, const uint16_t* A, const uint16_t* B, float* C);

// MXFP8 quantisation of each row of a [rows, cols] bf16 matrix along cols (blocks of 32 from column 0, the
// spec's scale rule): elems [rows][blocks * 32] e4m3 (a short last block zero-padded), scales [rows][blocks].
struct MxRows {
  int64_t rows = 0, blocks = 0;
  std::vector<uint8_t> elems, scales;
};
MxRows mx_quantize_rows(const uint16_t* a, int64_t rows, int64_t cols, MxScaleRule rule);

// [cols, rows] copy of a [rows, cols] bf16 matrix with row stride lda.
std::vector<uint16_t> transpose(const uint16_t* a, int64_t rows, int64_t cols, int64_t lda);

// MXFP8 quantise-dequantise of each row of a [rows, cols] matrix along cols: mx_quantize_rows, then each
// element exactly back to bf16 (mx_dequantize_to_bf16).
std::vector<uint16_t> mx_qdq_rows(const uint16_t* a, int64_t rows, int64_t cols, MxScaleRule rule);

// Forward over n rows X [n,H] with weights Wg, Wu [I,H], Wd [H,I]: fills saved (x, g, u, h) and y [n,H].
void ffn_forward(const LayerSpec& spec, int inter, int64_t n, const uint16_t* X, const uint16_t* Wg,
                 const uint16_t* Wu, const uint16_t* Wd, FfnSaved& saved, uint16_t* y);

// Backward from d_y [n,H]: d_x [n,H] and the weight gradients accumulated into dWg, dWu [I,H], dWd [H,I].
void ffn_backward(const LayerSpec& spec, int inter, const FfnSaved& saved, const uint16_t* d_y, const uint16_t* Wg,
                  const uint16_t* Wu, const uint16_t* Wd, uint16_t* d_x, float* dWg, float* dWu, float* dWd);

// Many independent FFNs (the local experts of a rank, or one shared expert) at once: the same bits as
// ffn_forward / ffn_backward on each task. In bf16 every GEMM phase (gate+up; down; d_h; d_x with the
// three weight gradients) is one model_gemm_bf16_batch over all tasks, i.e. one parallel loop over
// (expert, output tile) items, and the transposed operands are read in place; mxfp8 runs the tasks one
// after another (each GEMM threaded inside). Tasks must not share outputs.
struct FfnForwardTask {
  int inter = 0;
  int64_t n = 0;
  const uint16_t *X = nullptr, *Wg = nullptr, *Wu = nullptr, *Wd = nullptr;
  FfnSaved* saved = nullptr;
  uint16_t* y = nullptr;
};
void ffn_forward_batch(const LayerSpec& spec, const std::vector<FfnForwardTask>& tasks);

struct FfnBackwardTask {
  int inter = 0;
  const FfnSaved* saved = nullptr;
  const uint16_t *d_y = nullptr, *Wg = nullptr, *Wu = nullptr, *Wd = nullptr;
  uint16_t* d_x = nullptr;
  float *dWg = nullptr, *dWu = nullptr, *dWd = nullptr;
};
void ffn_backward_batch(const LayerSpec& spec, const std::vector<FfnBackwardTask>& tasks);

}  // namespace calico::ref::detail
