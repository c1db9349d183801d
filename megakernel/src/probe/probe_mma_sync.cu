// Probe kernel for mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: one warp per case (grid-stride),
// operands loaded straight from global memory into the fragment layout of ptx/mma_sync.cuh.
#include "../device_buffer.cuh"
#include "../ptx/mma_sync.cuh"
#include "probe_kernels.h"

namespace calico::gpu::probe {
namespace {

constexpr int kM = 16, kN = 8, kK = 16;

__global__ void mma_sync_bf16_tiles_kernel(const uint16_t* a, const uint16_t* b, const uint32_t* c, uint32_t* d,
                                           int64_t cases) {
  const int lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t cs = blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + threadIdx.x / 32; cs < cases;
       cs += warps) {
    const uint16_t* A = a + cs * kM * kK;
    const uint16_t* Bt = b + cs * kN * kK;  // row n holds B(:, n)
    const uint32_t* C = c + cs * kM * kN;
    auto pair = [](const uint16_t* p) { return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 16); };
    const uint32_t ra[4] = {pair(A + g * kK + 2 * t), pair(A + (g + 8) * kK + 2 * t), pair(A + g * kK + 2 * t + 8),
                            pair(A + (g + 8) * kK + 2 * t + 8)};
    const uint32_t rb[2] = {pair(Bt + g * kK + 2 * t), pair(Bt + g * kK + 2 * t + 8)};
    float acc[4] = {__uint_as_float(C[g * kN + 2 * t]), __uint_as_float(C[g * kN + 2 * t + 1]),
                    __uint_as_float(C[(g + 8) * kN + 2 * t]), __uint_as_float(C[(g + 8) * kN + 2 * t + 1])};
    ptx::mma_sync_m16n8k16_bf16_f32(acc, ra, rb);
    uint32_t* D = d + cs * kM * kN;
    D[g * kN + 2 * t] = __float_as_uint(acc[0]);
    D[g * kN + 2 * t + 1] = __float_as_uint(acc[1]);
    D[(g + 8) * kN + 2 * t] = __float_as_uint(acc[2]);
    D[(g + 8) * kN + 2 * t + 1] = __float_as_uint(acc[3]);
  }
}

}  // namespace

std::vector<uint32_t> launch_mma_sync_bf16_tiles(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b,
                                                 const std::vector<uint32_t>& c, int64_t cases) {
  require(cases >= 0 && a.size() == static_cast<size_t>(cases) * kM * kK * 2 &&
              b.size() == static_cast<size_t>(cases) * kN * kK * 2 && c.size() == static_cast<size_t>(cases) * kM * kN,
          "launch_mma_sync_bf16_tiles: sizes a {} b {} c {} do not fit {} cases", a.size(), b.size(), c.size(), cases);
  require_device_for(ProbeKernel::mma_sync_bf16);
  if (cases == 0) return {};
  DeviceBuffer<uint8_t> d_a(a), d_b(b);
  DeviceBuffer<uint32_t> d_c(c), d_d(c.size());
  const int threads = 256;
  const int64_t want = (cases + threads / 32 - 1) / (threads / 32);
  const int blocks = static_cast<int>(want < 4096 ? want : 4096);
  mma_sync_bf16_tiles_kernel<<<blocks, threads>>>(reinterpret_cast<const uint16_t*>(d_a.get()),
                                                  reinterpret_cast<const uint16_t*>(d_b.get()), d_c.get(), d_d.get(),
                                                  cases);
  CALICO_CUDA_CHECK_LAUNCH();
  CALICO_CUDA_CHECK(cudaDeviceSynchronize());
  return d_d.download();
}

}  // namespace calico::gpu::probe
