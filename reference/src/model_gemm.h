// Bit-exact GEMM through the tensor-core MMA model (DESIGN 2.2): every output element is one chain along K,
// in steps of the instruction's L (16 for bf16), ascending, zero-padded at the end, starting from C's value.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "calico/numerics.h"

namespace calico::ref {

// The implementations of the bf16 model GEMM in this binary, all with the same bits. avx512 / avx2: the vector
// kernels (an AVX-512 build carries the AVX2 one too); scalar: the specification. `best` is the first of
// model_gemm_kernels(), unless the environment variable CALICO_MODEL_GEMM_KERNEL names another
// (avx512 | avx2 | scalar), which then runs the whole reference layer.
enum class GemmKernel { best, avx512, avx2, scalar };
const char* to_string(GemmKernel k);
std::vector<GemmKernel> model_gemm_kernels();  // the kernels of this build, fastest first, scalar last
GemmKernel model_gemm_default_kernel();         // what `best` resolves to

// C[M,N] <- chain over K of A[m,:] . B[n,:], starting from C (the fp32 accumulator carried in).
// A: [M,K] bf16 bits with row stride lda; B: [N,K] bf16 bits with row stride ldb; C: [M,N] f32, stride ldc.
// OpenMP parallelism over output elements only: the result does not depend on the thread count.
void model_gemm_bf16(MmaModel model, int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
                     const uint16_t* B, int64_t ldb, float* C, int64_t ldc, GemmKernel kernel = GemmKernel::best);

// A bf16 operand of a batched GEMM, addressed by (row, k): element (row, k) is p[row * row_stride + k * k_stride]
// for k < k_split and p2[row * row_stride + (k - k_split) * k_stride] from k_split on (a concatenation along K
// of two matrices with the same strides). k_stride = 1 is a row-major [rows, K] matrix; row_stride = 1 is its
// transpose read in place. Only the addressing differs: the chain of each output element is the same one.
struct GemmOperand {
  const uint16_t* p = nullptr;
  int64_t row_stride = 0, k_stride = 1;
  const uint16_t* p2 = nullptr;
  int64_t k_split = std::numeric_limits<int64_t>::max();
  uint16_t at(int64_t row, int64_t k) const {
    return k < k_split ? p[row * row_stride + k * k_stride] : p2[row * row_stride + (k - k_split) * k_stride];
  }
};

// One GEMM of a batch: C[M,N] (stride ldc) <- chain over K of A(m,:) . B(n,:), starting from C.
struct GemmJob {
  int64_t M = 0, N = 0, K = 0;
  GemmOperand A, B;
  float* C = nullptr;
  int64_t ldc = 0;
};

// Every job of the batch, with the bits of model_gemm_bf16 on the same operands (and of the scalar
// specification). The jobs' C ranges must be disjoint and no job may read another's C. The work of all
// jobs is one parallel loop over (job, row tile, column panel) items, operands packed once per batch
// (identical operands are packed once); groups of jobs bound the packed bytes. Each output element's chain
// runs in one item in K order, so neither the grouping nor the thread count changes a bit.
void model_gemm_bf16_batch(MmaModel model, const std::vector<GemmJob>& jobs, GemmKernel kernel = GemmKernel::best);

// The same chain written directly with mma_step_bf16, one element at a time: the specification the fast
// model_gemm_bf16 is tested against.
void model_gemm_bf16_scalar(MmaModel model, int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
                            const uint16_t* B, int64_t ldb, float* C, int64_t ldc);

// The Blackwell MXFP8 GEMM (tcgen05.mma kind::mxf8f6f4.block_scale, scale_vec::1X, block 32): per output
// element one chain over the K blocks in ascending order, acc = mma_step_blackwell_mxfp8(A block, its E8M0
// scale, B block, its scale, acc), starting from C; the fp32 accumulator is carried across blocks, no
// dequantisation. A: [M][blocks * 32] e4m3 bytes (a short last block zero-padded) with scales SA [M][blocks];
// B: [N][blocks * 32] with SB [N][blocks]; C: [M,N] f32 with stride ldc. OpenMP over output elements only.
void model_gemm_mxfp8_blackwell(int64_t M, int64_t N, int64_t blocks, const uint8_t* A, const uint8_t* SA,
                                const uint8_t* B, const uint8_t* SB, float* C, int64_t ldc);

// The same chain written directly with mma_step_blackwell_mxfp8: the specification model_gemm_mxfp8_blackwell
// (operands decoded once, the step inlined) is tested against bit for bit.
void model_gemm_mxfp8_blackwell_scalar(int64_t M, int64_t N, int64_t blocks, const uint8_t* A, const uint8_t* SA,
                                       const uint8_t* B, const uint8_t* SB, float* C, int64_t ldc);

}  // namespace calico::ref
