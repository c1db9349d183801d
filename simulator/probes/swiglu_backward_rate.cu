// Probe (issue 8, thirtieth pass): what the SwiGLU backward costs as element-wise work of its own, outside a GEMM
// epilogue. The d_h tiles of qwen3-30b-a3b's backward take ~56 us on an H100 against ~18 us for a d_x_k tile of
// 24 k-tiles, and earlier profiles put their epilogue (the SwiGLU backward with its SiLU lookups, run with the
// 128-register accumulator live) above their 32-k-tile main loop. If the same arithmetic runs much faster as
// a side task (d_h stored as bf16 by a plain epilogue, then d_g, d_u from d_h, g, u in rows of their own), a
// backward with SwiGLU tasks between d_h and d_x_k is worth building; if not, it is not.
//
//   nvcc -O3 -std=c++17 -fmad=false -gencode=arch=compute_90a,code=sm_90a -Icore/include -Imegakernel/src \
//     -o /tmp/sbr simulator/probes/swiglu_backward_rate.cu && /tmp/sbr
//
// The arithmetic is the megakernel's own (gemm/epilogue.cuh: silu_pair, swiglu_backward2; the clamp off), on
// qwen3's d_h shape (131072 rows x I = 768, bf16, g and u ~ N(0, 1)), each thread 8 columns per step with
// 16-byte loads and stores, 1, 2 or 4 steps' loads issued together (`steps`: the bytes in flight per thread).
// Modes: the (silu, grad) lookups from the global table (`global`), from a 16 KB
// shared window with the global table for the rest (`window`, as the d_h epilogue), or none (`nolookup`, the
// memory floor; wrong values). Grids: 132 CTAs of 256 threads (one side task per SM, the consumer warps), the
// same with the megakernel's 226 KB of shared memory taken (`smem`: its ~28 KB of L1 left for loads in flight),
// and 4 CTAs per SM. Each line: the time, the bytes moved per second (d_h, g, u read; d_g, d_u written), and
// the time one CTA of the 132 would take for one m-tile's 128 x 768 elements.
#include <cstring>
#include <vector>

#include "probe_common.cuh"
#include "gemm/epilogue.cuh"

namespace {

using calico::gpu::mk::Clamp;
using calico::gpu::mk::SiluTables;
using calico::gpu::mk::SwigluGrad2;

constexpr int kRows = 131072, kCols = 768;  // qwen3-30b-a3b T=16384, K=8: the routed rows x I
constexpr size_t kElems = static_cast<size_t>(kRows) * kCols;
constexpr int kThreads = 256;
enum Mode { kGlobal, kWindow, kNoLookup, kModes };
const char* kModeNames[kModes] = {"global", "window", "nolookup"};

__device__ uint32_t hash32(uint32_t x) {
  x ^= x >> 16, x *= 0x7feb352du, x ^= x >> 15, x *= 0x846ca68bu, x ^= x >> 16;
  return x;
}
// An approximately N(0, scale) bf16 (the sum of four uniforms, rescaled).
__device__ uint16_t normal_bf16(uint32_t seed, float scale) {
  float s = 0.0f;
  for (int k = 0; k < 4; ++k) s += static_cast<float>(hash32(seed * 4u + k) >> 8) * (1.0f / 16777216.0f);
  return calico::f32_to_bf16((s - 2.0f) * 1.7320508f * scale);
}
__global__ void fill(uint16_t* dh, uint16_t* g, uint16_t* u, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const uint32_t k = static_cast<uint32_t>(i);
    dh[i] = normal_bf16(3 * k, 0.01f), g[i] = normal_bf16(3 * k + 1, 1.0f), u[i] = normal_bf16(3 * k + 2, 1.0f);
  }
}
__global__ void build_table(float2* entries) {  // as moe/layer.cu's build_silu_tables (the clamp entry aside)
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= calico::gpu::mk::kSiluTableSize) return;
  const float x = i < 65536 ? calico::bf16_to_f32(static_cast<uint16_t>(i)) : 7.0f;
  entries[i] = make_float2(calico::calico_silu(x), calico::calico_silu_grad(x));
}

// Every thread: kSteps x 8 columns (kSteps 16-byte words of each tensor, their loads issued together) per
// iteration, grid-strided.
template <int kMode, int kSteps>
__global__ void __launch_bounds__(kThreads)
    swiglu_backward_rows(const uint4* __restrict__ dh, const uint4* __restrict__ g, const uint4* __restrict__ u,
                         uint4* __restrict__ dg, uint4* __restrict__ du, size_t n16, SiluTables t) {
  __shared__ __align__(16) float2 window[calico::gpu::mk::kSiluWindowBytes / sizeof(float2)];
  if (kMode == kWindow) {
    for (uint32_t w = threadIdx.x; w < 2 * calico::gpu::mk::kSiluWindowHalf; w += blockDim.x) {
      const uint32_t sign = w / calico::gpu::mk::kSiluWindowHalf;
      window[w] = t.entries[calico::gpu::mk::silu_window_source(sign) + w % calico::gpu::mk::kSiluWindowHalf];
    }
    __syncthreads();
  }
  const uint32_t win = smem_addr(window);
  const Clamp clamp = Clamp::of(0, 0.0f);
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i0 = blockIdx.x * blockDim.x + threadIdx.x; i0 < n16; i0 += kSteps * stride) {
    uint4 h4[kSteps], g4[kSteps], u4[kSteps];
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      const size_t i = i0 + s * stride;
      if (i < n16) h4[s] = dh[i], g4[s] = g[i], u4[s] = u[i];
    }
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      const size_t i = i0 + s * stride;
      if (i >= n16) break;
      const uint32_t hw[4] = {h4[s].x, h4[s].y, h4[s].z, h4[s].w}, gw[4] = {g4[s].x, g4[s].y, g4[s].z, g4[s].w},
                     uw[4] = {u4[s].x, u4[s].y, u4[s].z, u4[s].w};
      float2 e[4][2];
#pragma unroll
      for (int q = 0; q < 4; ++q)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint16_t bits = static_cast<uint16_t>(h ? gw[q] >> 16 : gw[q] & 0xFFFFu);
          if (kMode == kNoLookup) e[q][h] = make_float2(1.0f, 1.0f);
          else if (kMode == kGlobal) e[q][h] = __ldg(&t.entries[bits]);
          else e[q][h] = calico::gpu::mk::silu_pair(bits, false, win, t);
        }
      uint32_t og[4], ou[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const SwigluGrad2 o = calico::gpu::mk::swiglu_backward2(hw[q], gw[q], uw[q], e[q][0], e[q][1], clamp);
        og[q] = o.dg, ou[q] = o.du;
      }
      dg[i] = make_uint4(og[0], og[1], og[2], og[3]);
      du[i] = make_uint4(ou[0], ou[1], ou[2], ou[3]);
    }
  }
}

// smem: dynamic shared memory per CTA (0, or kKernelSmem: the megakernel's footprint with the static window,
// which leaves the SM the same ~28 KB of L1 for loads in flight as the kernel's side tasks have).
constexpr int kKernelSmem = 210 * 1024;  // + the 16 KB static window = the megakernel's 226 KB
template <int kMode, int kSteps>
float run(int blocks, int smem, const uint4* dh, const uint4* g, const uint4* u, uint4* dg, uint4* du, SiluTables t) {
  auto* kernel = swiglu_backward_rows<kMode, kSteps>;
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cudaEvent_t e1, e2;
  CK(cudaEventCreate(&e1));
  CK(cudaEventCreate(&e2));
  kernel<<<blocks, kThreads, smem>>>(dh, g, u, dg, du, kElems / 8, t);  // warm-up
  CK(cudaGetLastError());
  constexpr int kReps = 5;
  CK(cudaEventRecord(e1));
  for (int r = 0; r < kReps; ++r) kernel<<<blocks, kThreads, smem>>>(dh, g, u, dg, du, kElems / 8, t);
  CK(cudaEventRecord(e2));
  const float ms = time_ms(e1, e2) / kReps;
  CK(cudaEventDestroy(e1));
  CK(cudaEventDestroy(e2));
  return ms;
}
template <int kMode>
float run_steps(int steps, int blocks, int smem, const uint4* dh, const uint4* g, const uint4* u, uint4* dg, uint4* du,
                SiluTables t) {
  return steps == 1   ? run<kMode, 1>(blocks, smem, dh, g, u, dg, du, t)
         : steps == 2 ? run<kMode, 2>(blocks, smem, dh, g, u, dg, du, t)
                      : run<kMode, 4>(blocks, smem, dh, g, u, dg, du, t);
}

// The first n elements of d_g and d_u against the host's arithmetic (numerics.h's silu and silu_grad, the
// contract's d_g = bf16((d_h * u) * silu'(g)), d_u = bf16(d_h * silu(g)); the clamp off): the mismatches.
size_t check(const uint16_t* dh, const uint16_t* g, const uint16_t* u, const uint16_t* dg, const uint16_t* du,
             size_t n) {
  std::vector<uint16_t> h(n), gg(n), uu(n), og(n), ou(n);
  CK(cudaMemcpy(h.data(), dh, n * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(gg.data(), g, n * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(uu.data(), u, n * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(og.data(), dg, n * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(ou.data(), du, n * 2, cudaMemcpyDeviceToHost));
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const float x = calico::bf16_to_f32(gg[i]), d = calico::bf16_to_f32(h[i]), v = calico::bf16_to_f32(uu[i]);
    const uint16_t want_g = calico::f32_to_bf16((d * v) * calico::calico_silu_grad(x));
    const uint16_t want_u = calico::f32_to_bf16(d * calico::calico_silu(x));
    bad += (og[i] != want_g) + (ou[i] != want_u);
  }
  return bad;
}

// 0xFFFF in every output: a NaN the kernel never writes (its conversions make every NaN 0x7FFF).
void poison(uint16_t* dg, uint16_t* du) {
  CK(cudaMemset(dg, 0xFF, kElems * sizeof(uint16_t)));
  CK(cudaMemset(du, 0xFF, kElems * sizeof(uint16_t)));
}

}  // namespace

int main(int argc, char** argv) {  // argv: the modes to run (names as kModeNames), all when none given
  const ModeArgs modes{argc, argv, kModeNames, kModes};
  if (!modes.valid()) return 2;
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, 0));
  const int sms = p.multiProcessorCount;
  printf("device 0 %s SMs=%d; %d x %d bf16 (d_h, g, u -> d_g, d_u)\n", p.name, sms, kRows, kCols);
  uint16_t *dh, *g, *u, *dg, *du;
  for (uint16_t** b : {&dh, &g, &u, &dg, &du}) CK(cudaMalloc(b, kElems * sizeof(uint16_t)));
  float2* entries;
  CK(cudaMalloc(&entries, calico::gpu::mk::kSiluTableSize * sizeof(float2)));
  fill<<<sms * 8, 256>>>(dh, g, u, kElems);
  build_table<<<(calico::gpu::mk::kSiluTableSize + 255) / 256, 256>>>(entries);
  CK(cudaDeviceSynchronize());
  poison(dg, du);
  SiluTables t;
  t.entries = entries;
  const double bytes = 5.0 * kElems * sizeof(uint16_t);
  const double mtiles = static_cast<double>(kRows) / 128;  // m-tiles of 128 x 768
  int status = 0;
  printf("mode      steps  CTAs           ms    GB/s  us per m-tile per CTA (132 CTAs, one task each at a time)\n");
  for (int mode = 0; mode < kModes; ++mode) {
    if (!modes.wanted(mode)) continue;
    for (int steps : {1, 2, 4})
      for (int per_sm : {0, 1, 4}) {  // 0: one CTA per SM with the kernel's shared memory (column "smem")
        const int blocks = sms * (per_sm == 0 ? 1 : per_sm), smem = per_sm == 0 ? kKernelSmem : 0;
        const auto* a = reinterpret_cast<const uint4*>(dh);
        const auto* b = reinterpret_cast<const uint4*>(g);
        const auto* c = reinterpret_cast<const uint4*>(u);
        auto* o1 = reinterpret_cast<uint4*>(dg);
        auto* o2 = reinterpret_cast<uint4*>(du);
        const float ms = mode == kGlobal   ? run_steps<kGlobal>(steps, blocks, smem, a, b, c, o1, o2, t)
                         : mode == kWindow ? run_steps<kWindow>(steps, blocks, smem, a, b, c, o1, o2, t)
                                           : run_steps<kNoLookup>(steps, blocks, smem, a, b, c, o1, o2, t);
        // nolookup computes with silu = grad = 1, so its values must fail the check: the negative control.
        const size_t bad = check(dh, g, u, dg, du, size_t{1} << 20);
        const bool ok = mode == kNoLookup ? bad > 0 : bad == 0;
        const char* verdict = mode != kNoLookup ? (ok ? "check: 2^20 elements ok" : "CHECK FAILED")
                                                : (ok ? "negative control: differs" : "NEGATIVE CONTROL PASSED");
        printf("%-9s %5d %5d%s %6.3f %7.1f %8.2f  %s\n", kModeNames[mode], steps, blocks, smem ? " smem" : "     ", ms,
               bytes / (ms * 1e-3) / 1e9, ms * 1e3 / (mtiles / sms), verdict);
        if (!ok) status = 1;
        poison(dg, du);  // the next run's check sees its own results only
        fflush(stdout);
      }
  }
  return status;
}
