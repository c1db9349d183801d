// Bit-exact model GEMM. (First version: the scalar chain; a vectorised kernel replaces model_gemm_bf16.)
#include "model_gemm.h"

#include <algorithm>
#include <vector>

namespace calico::ref {

void model_gemm_bf16_scalar(MmaModel model, int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
                            const uint16_t* B, int64_t ldb, float* C, int64_t ldc) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      float acc = C[m * ldc + n];
      for (int64_t k0 = 0; k0 < K; k0 += 16) {
        uint16_t a[16] = {}, b[16] = {};
        const int64_t len = std::min<int64_t>(16, K - k0);
        std::copy_n(A + m * lda + k0, len, a);
        std::copy_n(B + n * ldb + k0, len, b);
        acc = mma_step_bf16(a, b, acc, model);
      }
      C[m * ldc + n] = acc;
    }
  }
}

void model_gemm_bf16(MmaModel model, int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
                     const uint16_t* B, int64_t ldb, float* C, int64_t ldc) {
  model_gemm_bf16_scalar(model, M, N, K, A, lda, B, ldb, C, ldc);
}

}  // namespace calico::ref
