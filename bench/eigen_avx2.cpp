// Eigen's float GEMM compiled for AVX2 (this file is built with -mno-avx512f on AVX-512 hosts), beside the
// native (AVX-512) Eigen of bench_model_gemm.cpp, so the AVX2 model kernel is compared with an AVX2 Eigen in
// the same run. Eigen's namespace is renamed for this translation unit: its templates then get their own
// symbols and cannot be merged with the AVX-512 instantiations (an ODR clash the linker would resolve silently).
#if defined(__AVX512F__)
#error "eigen_avx2.cpp must be compiled with -mno-avx512f"
#endif
#define Eigen calico_eigen_avx2
#include <Eigen/Dense>

#include "eigen_avx2.h"

void eigen_avx2_product(const float* A, const float* B, float* C, long M, long N, long K, int threads) {
  calico_eigen_avx2::setNbThreads(threads);
  using Mat = calico_eigen_avx2::Matrix<float, calico_eigen_avx2::Dynamic, calico_eigen_avx2::Dynamic>;
  calico_eigen_avx2::Map<const Mat> a(A, M, K), b(B, K, N);
  calico_eigen_avx2::Map<Mat> c(C, M, N);
  c.noalias() = a * b;
}
