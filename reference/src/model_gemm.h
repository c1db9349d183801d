// Bit-exact GEMM through the tensor-core MMA model (DESIGN 2.2): every output element is one chain along K,
// in steps of the instruction's L (16 for bf16), ascending, zero-padded at the end, starting from C's value.
#pragma once

#include <cstdint>

#include "calico/numerics.h"

namespace calico::ref {

// C[M,N] <- chain over K of A[m,:] . B[n,:], starting from C (the fp32 accumulator carried in).
// A: [M,K] bf16 bits with row stride lda; B: [N,K] bf16 bits with row stride ldb; C: [M,N] f32, stride ldc.
// OpenMP parallelism over output elements only: the result does not depend on the thread count.
void model_gemm_bf16(MmaModel model, int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
                     const uint16_t* B, int64_t ldb, float* C, int64_t ldc);

// The same chain written directly with mma_step_bf16, one element at a time: the specification the fast
// model_gemm_bf16 is tested against.
void model_gemm_bf16_scalar(MmaModel model, int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
                            const uint16_t* B, int64_t ldb, float* C, int64_t ldc);

}  // namespace calico::ref
