// The bit-exact model GEMM (model_gemm_bf16, Hopper BF16 MMA model) against Eigen's float GEMM
// (Eigen::MatrixXf product), side by side at the same shapes and thread count, on EVERY kernel of the build:
// an AVX-512 build carries the AVX2 kernel too (GemmKernel), so one run measures avx512, avx2 and Eigen.
// Counter "GFLOP" (a rate, GFLOP/s) counts 2*M*N*K per iteration for all. The scalar specification runs at a
// small shape for scale. BM_ExpertBatch/* are the reference's expert phases at deepseek-v3's per-expert shape
// (64 rows, H=7168, I=2048, a few experts in one model_gemm_bf16_batch). At the end a summary prints the
// ratio model / Eigen per kernel and shape (the issue-12 goal: >= 0.3).
#include <benchmark/benchmark.h>
#include <omp.h>

#include <Eigen/Dense>
#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "model_gemm.h"
#if defined(CALICO_BENCH_EIGEN_AVX2)
#include "eigen_avx2.h"
#endif

namespace {

using calico::MmaModel;
using calico::ref::GemmKernel;

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

void BM_ModelGemm(benchmark::State& state, GemmKernel kernel) {
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  const auto A = random_bf16(M * K, 1.0f, 1), B = random_bf16(N * K, 0.02f, 2);
  std::vector<float> C(M * N);
  for (auto _ : state) {
    std::fill(C.begin(), C.end(), 0.0f);
    calico::ref::model_gemm_bf16(MmaModel::hopper_bf16, M, N, K, A.data(), K, B.data(), K, C.data(), N, kernel);
    benchmark::DoNotOptimize(C.data());
  }
  set_flops(state, M, N, K);
}

// One expert phase of the reference for `experts` experts of deepseek-v3's per-expert shape (n = 64 rows,
// H = 7168, I = 2048), operands laid out as ffn.cpp passes them: 0 gate+up, 1 down, 2 d_h (Wd^T in place),
// 3 d_x ([d_g | d_u] x [Wg^T | Wu^T], one chain over 2I), 4 the three weight gradients (K = n).
void BM_ExpertBatch(benchmark::State& state, GemmKernel kernel, int phase) {
  const int64_t n = 64, H = 7168, I = 2048, E = state.range(0);
  const auto x = random_bf16(E * n * H, 1.0f, 3), dy = random_bf16(E * n * H, 0.05f, 4);
  const auto h = random_bf16(E * n * I, 0.5f, 5), dgu = random_bf16(E * n * 2 * I, 0.01f, 6);
  const auto wg = random_bf16(E * I * H, 0.02f, 7), wu = random_bf16(E * I * H, 0.02f, 8), wd = random_bf16(E * H * I, 0.02f, 9);
  const int64_t out_per = phase == 4 ? 3 * I * H : (phase == 0 ? 2 * n * I : (phase == 2 ? n * I : n * H));
  std::vector<float> C(static_cast<size_t>(E * out_per));
  std::vector<calico::ref::GemmJob> jobs;
  double flops = 0;
  auto job = [&](int64_t M, int64_t N, int64_t K, calico::ref::GemmOperand a, calico::ref::GemmOperand b, float* c, int64_t ldc) {
    calico::ref::GemmJob j;
    j.M = M, j.N = N, j.K = K, j.A = a, j.B = b, j.C = c, j.ldc = ldc;
    jobs.push_back(j);
    flops += 2.0 * M * N * K;
  };
  for (int64_t e = 0; e < E; ++e) {
    float* c = C.data() + e * out_per;
    const uint16_t *X = x.data() + e * n * H, *DY = dy.data() + e * n * H, *Hh = h.data() + e * n * I;
    const uint16_t *DG = dgu.data() + e * n * 2 * I, *Wg = wg.data() + e * I * H, *Wu = wu.data() + e * I * H,
                   *Wd = wd.data() + e * H * I;
    switch (phase) {
      case 0: job(n, I, H, {X, H, 1}, {Wg, H, 1}, c, I), job(n, I, H, {X, H, 1}, {Wu, H, 1}, c + n * I, I); break;
      case 1: job(n, H, I, {Hh, I, 1}, {Wd, I, 1}, c, H); break;
      case 2: job(n, I, H, {DY, H, 1}, {Wd, 1, I}, c, I); break;
      case 3: job(n, H, 2 * I, {DG, 2 * I, 1}, {Wg, 1, H, Wu, I}, c, H); break;
      default:
        job(H, I, n, {DY, 1, H}, {Hh, 1, I}, c, I);
        job(I, H, n, {DG, 1, 2 * I}, {X, 1, H}, c + H * I, H);
        job(I, H, n, {DG + I, 1, 2 * I}, {X, 1, H}, c + 2 * H * I, H);
    }
  }
  for (auto _ : state) {
    state.PauseTiming();  // the accumulators' zero-fill is not the GEMM's (the reference zeroes them once)
    std::fill(C.begin(), C.end(), 0.0f);
    state.ResumeTiming();
    calico::ref::model_gemm_bf16_batch(MmaModel::hopper_bf16, jobs, kernel);
    benchmark::DoNotOptimize(C.data());
  }
  state.counters["GFLOP"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = omp_get_max_threads();
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

#if defined(CALICO_BENCH_EIGEN_AVX2)
// Eigen's float GEMM built for AVX2 (the AVX2 model kernel's yardstick on this AVX-512 host).
void BM_EigenFloatGemmAvx2(benchmark::State& state) {
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  const auto a16 = random_bf16(M * K, 1.0f, 1), b16 = random_bf16(N * K, 0.02f, 2);
  std::vector<float> A(M * K), B(K * N), C(M * N);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) A[k * M + m] = calico::bf16_to_f32(a16[m * K + k]);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) B[n * K + k] = calico::bf16_to_f32(b16[n * K + k]);
  for (auto _ : state) {
    eigen_avx2_product(A.data(), B.data(), C.data(), M, N, K, omp_get_max_threads());
    benchmark::DoNotOptimize(C.data());
  }
  set_flops(state, M, N, K);
}
#endif

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

// Shapes of the model / Eigen comparison: the issue-12 pair, a square one, and a forward expert GEMM of
// deepseek-v3 (64 rows x I x H).
const std::vector<std::vector<int64_t>> kCompareShapes = {{2048, 768, 2048}, {1024, 1024, 1024}, {64, 2048, 7168}};

// Console output as usual; also keeps each run's GFLOP/s for the summary.
class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  // Tabular counters; colour only on a terminal (a custom display reporter does not get the flags' options).
  SummaryReporter() : ConsoleReporter(isatty(fileno(stdout)) ? OO_ColorTabular : OO_Tabular) {}
  std::map<std::string, double> gflops;
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      const auto it = r.counters.find("GFLOP");
      if (it != r.counters.end() && r.run_type == Run::RT_Iteration) gflops[r.benchmark_name()] = it->second.value;
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<GemmKernel> kernels = calico::ref::model_gemm_kernels();
  kernels.pop_back();  // the scalar specification has its own small benchmark
  auto shape_name = [](const std::vector<int64_t>& s) {
    return std::to_string(s[0]) + "/" + std::to_string(s[1]) + "/" + std::to_string(s[2]);
  };
  for (const auto& shape : kCompareShapes) {
    for (GemmKernel k : kernels)
      benchmark::RegisterBenchmark((std::string("BM_ModelGemm_") + calico::ref::to_string(k)).c_str(), BM_ModelGemm, k)
          ->Args(shape)->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark("BM_EigenFloatGemm", BM_EigenFloatGemm)->Args(shape)->Unit(benchmark::kMillisecond)->UseRealTime();
#if defined(CALICO_BENCH_EIGEN_AVX2)
    benchmark::RegisterBenchmark("BM_EigenFloatGemmAvx2", BM_EigenFloatGemmAvx2)->Args(shape)
        ->Unit(benchmark::kMillisecond)->UseRealTime();
#endif
  }
  benchmark::RegisterBenchmark("BM_ModelGemmScalarSpec", BM_ModelGemmScalarSpec)->Args({256, 256, 256})
      ->Unit(benchmark::kMillisecond)->UseRealTime();
  const char* phases[] = {"gate_up", "down", "d_h", "d_x", "dW"};
  for (int phase = 0; phase < 5; ++phase)
    for (GemmKernel k : kernels)
      benchmark::RegisterBenchmark((std::string("BM_ExpertBatch_") + phases[phase] + "_" + calico::ref::to_string(k)).c_str(),
                                   BM_ExpertBatch, k, phase)
          ->Arg(4)->Unit(benchmark::kMillisecond)->UseRealTime();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  SummaryReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  std::printf("\nsummary: model GEMM / Eigen float GFLOP/s, %d threads (issue 12 goal >= 0.30)\n", omp_get_max_threads());
  for (const auto& shape : kCompareShapes) {
    const std::string suffix = "/" + shape_name(shape) + "/real_time";
    const auto eigen = reporter.gflops.find("BM_EigenFloatGemm" + suffix);
    if (eigen == reporter.gflops.end() || eigen->second <= 0) continue;
    // The AVX2 kernel is compared with the AVX2 Eigen when the build has one (and with the native Eigen too).
    const auto eigen2 = reporter.gflops.find("BM_EigenFloatGemmAvx2" + suffix);
    std::printf("  %-16s eigen %6.1f", shape_name(shape).c_str(), eigen->second);
    if (eigen2 != reporter.gflops.end()) std::printf("  eigen-avx2 %6.1f", eigen2->second);
    std::printf(" GFLOP/s |");
    for (GemmKernel k : kernels) {
      const auto m = reporter.gflops.find(std::string("BM_ModelGemm_") + calico::ref::to_string(k) + suffix);
      if (m == reporter.gflops.end()) continue;
      std::printf("  %s %6.1f = %.2fx eigen", calico::ref::to_string(k), m->second, m->second / eigen->second);
      if (k == GemmKernel::avx2 && eigen2 != reporter.gflops.end() && eigen2->second > 0)
        std::printf(" (%.2fx eigen-avx2)", m->second / eigen2->second);
    }
    std::printf("\n");
  }
  benchmark::Shutdown();
  return 0;
}
