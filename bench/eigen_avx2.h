// Eigen float GEMM C[M,N] = A[M,K] B[K,N] (column-major) built for AVX2 (eigen_avx2.cpp).
#pragma once
void eigen_avx2_product(const float* A, const float* B, float* C, long M, long N, long K, int threads);
