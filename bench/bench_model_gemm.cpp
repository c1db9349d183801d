// The bit-exact model GEMM (model_gemm_bf16, Hopper BF16 MMA model) against Eigen's float GEMM
// (Eigen::MatrixXf product), side by side at the same shapes and thread count. Counter "GFLOP" (a rate, GFLOP/s) counts
// 2*M*N*K per iteration for both. The scalar specification runs at a small shape for scale.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <Eigen/Dense>
#include <cstdint>
#include <random>
#include <vector>

#include "model_gemm.h"

namespace {

using calico::MmaModel;

// Activation-like A ~ N(0, 1) and weight-like B ~ N(0, 0.02), rounded to bf16 (the layer's operand ranges).
std::vector<uint16_t> random_bf16(int64_t n, float sigma, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = calico::f32_to_bf16(d(rng));
  return v;
}

void set_flops(benchmark::State& state, int64_t M, int64_t N, int64_t K) {
  state.counters["GFLOP"] = benchmark::Counter(2.0 * M * N * K * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = omp_get_max_threads();
}

void BM_ModelGemm(benchmark::State& state) {
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  const auto A = random_bf16(M * K, 1.0f, 1), B = random_bf16(N * K, 0.02f, 2);
  std::vector<float> C(M * N);
  for (auto _ : state) {
    std::fill(C.begin(), C.end(), 0.0f);
    calico::ref::model_gemm_bf16(MmaModel::hopper_bf16, M, N, K, A.data(), K, B.data(), K, C.data(), N);
    benchmark::DoNotOptimize(C.data());
  }
  set_flops(state, M, N, K);
}

void BM_ModelGemmScalarSpec(benchmark::State& state) {
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  const auto A = random_bf16(M * K, 1.0f, 1), B = random_bf16(N * K, 0.02f, 2);
  std::vector<float> C(M * N);
  for (auto _ : state) {
    std::fill(C.begin(), C.end(), 0.0f);
    calico::ref::model_gemm_bf16_scalar(MmaModel::hopper_bf16, M, N, K, A.data(), K, B.data(), K, C.data(), N);
    benchmark::DoNotOptimize(C.data());
  }
  set_flops(state, M, N, K);
}

void BM_EigenFloatGemm(benchmark::State& state) {
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  Eigen::setNbThreads(omp_get_max_threads());
  const auto a16 = random_bf16(M * K, 1.0f, 1), b16 = random_bf16(N * K, 0.02f, 2);
  Eigen::MatrixXf A(M, K), B(K, N), C(M, N);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) A(m, k) = calico::bf16_to_f32(a16[m * K + k]);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) B(k, n) = calico::bf16_to_f32(b16[n * K + k]);
  for (auto _ : state) {
    C.noalias() = A * B;
    benchmark::DoNotOptimize(C.data());
  }
  set_flops(state, M, N, K);
}

BENCHMARK(BM_ModelGemm)->Args({2048, 768, 2048})->Args({1024, 1024, 1024})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_EigenFloatGemm)->Args({2048, 768, 2048})->Args({1024, 1024, 1024})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ModelGemmScalarSpec)->Args({256, 256, 256})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ModelGemm)->Args({2048, 768, 1024})->Args({2048, 768, 512})->Args({256, 256, 256})->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
