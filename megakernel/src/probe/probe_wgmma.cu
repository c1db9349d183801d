// Probe kernels for Hopper wgmma (sm_90a): single m64n8 steps (BF16 k16, FP8 e4m3/e5m2 k32), one warpgroup
// per case, and the chained m64n256 tile over a long K, issued the way a GEMM main loop issues it. Operands
// are staged in shared memory in the no-swizzle K-major layout of ptx/wgmma.cuh; a row of one K step is
// 32 bytes for every type here (16 bf16 or 32 fp8).
#include <cuda_runtime.h>

#include "../device_buffer.cuh"
#include "../ptx/wgmma.cuh"
#include "probe_kernels.h"

namespace calico::gpu::probe {
namespace {

constexpr int kStepBytes = 32;  // bytes of K per row per wgmma step
constexpr int kTileM = 64, kTileN = 8, kChainN = 256;
constexpr int kChunkBytes = 128;  // K bytes staged per chain iteration (4 steps)

template <ProbeKernel K>
__device__ __forceinline__ void wgmma_step_n8(float (&d)[4], uint64_t da, uint64_t db, int scale_d) {
  if constexpr (K == ProbeKernel::wgmma_bf16) ptx::wgmma_m64n8k16_bf16(d, da, db, scale_d);
  else if constexpr (K == ProbeKernel::wgmma_e4m3) ptx::wgmma_m64n8k32_e4m3(d, da, db, scale_d);
  else ptx::wgmma_m64n8k32_e5m2(d, da, db, scale_d);
}

template <ProbeKernel K>
__device__ __forceinline__ void wgmma_step_n256(float (&d)[128], uint64_t da, uint64_t db, int scale_d) {
  if constexpr (K == ProbeKernel::wgmma_bf16) ptx::wgmma_m64n256k16_bf16(d, da, db, scale_d);
  else if constexpr (K == ProbeKernel::wgmma_e4m3) ptx::wgmma_m64n256k32_e4m3(d, da, db, scale_d);
  else ptx::wgmma_m64n256k32_e5m2(d, da, db, scale_d);
}

// Copies rows x row_bytes (global, row-major with stride src_stride bytes) into the core-matrix layout,
// 16 bytes per thread per iteration.
__device__ __forceinline__ void stage_k_major(uint8_t* smem, const uint8_t* src, int rows, int row_bytes,
                                              int64_t src_stride) {
  const int chunks = rows * row_bytes / 16;
  for (int i = threadIdx.x; i < chunks; i += blockDim.x) {
    const int row = i / (row_bytes / 16), kb = (i % (row_bytes / 16)) * 16;
    const uint4 v = *reinterpret_cast<const uint4*>(src + row * src_stride + kb);
    *reinterpret_cast<uint4*>(smem + ptx::core_matrix_offset(row, kb, row_bytes)) = v;
  }
}

template <ProbeKernel K>
__global__ void __launch_bounds__(128) wgmma_tiles_kernel(const uint8_t* a, const uint8_t* b, const uint32_t* c,
                                                          uint32_t* d, int64_t cases) {
  __shared__ alignas(128) uint8_t sa[kTileM * kStepBytes];
  __shared__ alignas(128) uint8_t sb[kTileN * kStepBytes];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int64_t cs = blockIdx.x; cs < cases; cs += gridDim.x) {
    stage_k_major(sa, a + cs * kTileM * kStepBytes, kTileM, kStepBytes, kStepBytes);
    stage_k_major(sb, b + cs * kTileN * kStepBytes, kTileN, kStepBytes, kStepBytes);
    ptx::fence_proxy_async_shared();
    __syncthreads();
    const uint32_t* C = c + cs * kTileM * kTileN;
    const int r0 = 16 * warp + lane / 4, c0 = 2 * (lane % 4);
    float acc[4] = {__uint_as_float(C[r0 * kTileN + c0]), __uint_as_float(C[r0 * kTileN + c0 + 1]),
                    __uint_as_float(C[(r0 + 8) * kTileN + c0]), __uint_as_float(C[(r0 + 8) * kTileN + c0 + 1])};
    const uint64_t da = ptx::make_smem_desc(sa, 128, 8 * kStepBytes);
    const uint64_t db = ptx::make_smem_desc(sb, 128, 8 * kStepBytes);
    ptx::fence_registers(acc);
    ptx::wgmma_fence();
    wgmma_step_n8<K>(acc, da, db, 1);
    ptx::wgmma_commit_group();
    ptx::wgmma_wait_group<0>();
    ptx::fence_registers(acc);
    uint32_t* D = d + cs * kTileM * kTileN;
    D[r0 * kTileN + c0] = __float_as_uint(acc[0]);
    D[r0 * kTileN + c0 + 1] = __float_as_uint(acc[1]);
    D[(r0 + 8) * kTileN + c0] = __float_as_uint(acc[2]);
    D[(r0 + 8) * kTileN + c0 + 1] = __float_as_uint(acc[3]);
    __syncthreads();  // the next case overwrites shared memory
  }
}

// One CTA (one warpgroup) per 64 x 256 tile; K staged 128 bytes per row at a time (4 wgmma steps), each
// chunk waited for before the next overwrites it: the order of the K steps is the only thing that matters.
template <ProbeKernel K>
__global__ void __launch_bounds__(128) wgmma_chain_kernel(const uint8_t* a, const uint8_t* b, uint32_t* d,
                                                          int k_bytes, int first_step_ignores_acc) {
  __shared__ alignas(128) uint8_t sa[kTileM * kChunkBytes];   // 8 KiB
  __shared__ alignas(128) uint8_t sb[kChainN * kChunkBytes];  // 32 KiB
  const int64_t tile = blockIdx.x;
  const uint8_t* A = a + tile * kTileM * static_cast<int64_t>(k_bytes);
  const uint8_t* B = b + tile * kChainN * static_cast<int64_t>(k_bytes);
  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
  int step = 0;
  for (int k0 = 0; k0 < k_bytes; k0 += kChunkBytes) {
    stage_k_major(sa, A + k0, kTileM, kChunkBytes, k_bytes);
    stage_k_major(sb, B + k0, kChainN, kChunkBytes, k_bytes);
    ptx::fence_proxy_async_shared();
    __syncthreads();
    ptx::fence_registers(acc);
    ptx::wgmma_fence();
#pragma unroll
    for (int s = 0; s < kChunkBytes / kStepBytes; ++s) {
      // Step s starts 2 core matrices (256 bytes) further along K; LBO 128, SBO = 8 rows * 128 bytes.
      const uint64_t da = ptx::make_smem_desc(sa + s * 256, 128, 8 * kChunkBytes);
      const uint64_t db = ptx::make_smem_desc(sb + s * 256, 128, 8 * kChunkBytes);
      const int scale_d = (step == 0 && first_step_ignores_acc) ? 0 : 1;
      wgmma_step_n256<K>(acc, da, db, scale_d);
      ++step;
    }
    ptx::wgmma_commit_group();
    ptx::wgmma_wait_group<0>();
    ptx::fence_registers(acc);
    __syncthreads();
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  uint32_t* D = d + tile * kTileM * kChainN;
#pragma unroll
  for (int j = 0; j < kChainN / 8; ++j) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int row = 16 * warp + lane / 4 + 8 * h, col = 8 * j + 2 * (lane % 4) + i;
        D[row * kChainN + col] = __float_as_uint(acc[4 * j + 2 * h + i]);
      }
    }
  }
}

int elem_bytes(ProbeKernel kernel) { return kernel == ProbeKernel::wgmma_bf16 ? 2 : 1; }

template <ProbeKernel K>
void launch_tiles_as(const uint8_t* a, const uint8_t* b, const uint32_t* c, uint32_t* d, int64_t cases) {
  const int blocks = static_cast<int>(cases < 8192 ? cases : 8192);
  wgmma_tiles_kernel<K><<<blocks, 128>>>(a, b, c, d, cases);
  CALICO_CUDA_CHECK_LAUNCH();
}

template <ProbeKernel K>
void launch_chain_as(const uint8_t* a, const uint8_t* b, uint32_t* d, int tiles, int k_bytes, int first_zero) {
  wgmma_chain_kernel<K><<<tiles, 128>>>(a, b, d, k_bytes, first_zero);
  CALICO_CUDA_CHECK_LAUNCH();
}

void require_wgmma_kernel(ProbeKernel kernel) {
  require(kernel == ProbeKernel::wgmma_bf16 || kernel == ProbeKernel::wgmma_e4m3 || kernel == ProbeKernel::wgmma_e5m2,
          "wgmma probe: kernel {} is not a wgmma kernel", static_cast<int>(kernel));
}

}  // namespace

std::vector<uint32_t> launch_wgmma_tiles(ProbeKernel kernel, const std::vector<uint8_t>& a,
                                         const std::vector<uint8_t>& b, const std::vector<uint32_t>& c,
                                         int64_t cases) {
  require_wgmma_kernel(kernel);
  require(cases >= 0 && a.size() == static_cast<size_t>(cases) * kTileM * kStepBytes &&
              b.size() == static_cast<size_t>(cases) * kTileN * kStepBytes &&
              c.size() == static_cast<size_t>(cases) * kTileM * kTileN,
          "launch_wgmma_tiles: sizes a {} b {} c {} do not fit {} cases", a.size(), b.size(), c.size(), cases);
  require_device_for(kernel);
  if (cases == 0) return {};
  DeviceBuffer<uint8_t> d_a(a), d_b(b);
  DeviceBuffer<uint32_t> d_c(c), d_d(c.size());
  switch (kernel) {
    case ProbeKernel::wgmma_bf16: launch_tiles_as<ProbeKernel::wgmma_bf16>(d_a.get(), d_b.get(), d_c.get(), d_d.get(), cases); break;
    case ProbeKernel::wgmma_e4m3: launch_tiles_as<ProbeKernel::wgmma_e4m3>(d_a.get(), d_b.get(), d_c.get(), d_d.get(), cases); break;
    default: launch_tiles_as<ProbeKernel::wgmma_e5m2>(d_a.get(), d_b.get(), d_c.get(), d_d.get(), cases); break;
  }
  CALICO_CUDA_CHECK(cudaDeviceSynchronize());
  return d_d.download();
}

std::vector<uint32_t> launch_wgmma_chain(ProbeKernel kernel, const std::vector<uint8_t>& a,
                                         const std::vector<uint8_t>& b, int tiles, int k,
                                         bool first_step_ignores_acc) {
  require_wgmma_kernel(kernel);
  const int k_bytes = k * elem_bytes(kernel);
  require(k > 0 && k_bytes % kChunkBytes == 0, "launch_wgmma_chain: k {} must be a positive multiple of {}", k,
          kChunkBytes / elem_bytes(kernel));
  require(tiles >= 0 && a.size() == static_cast<size_t>(tiles) * kTileM * k_bytes &&
              b.size() == static_cast<size_t>(tiles) * kChainN * k_bytes,
          "launch_wgmma_chain: sizes a {} b {} do not fit {} tiles of k {}", a.size(), b.size(), tiles, k);
  require_device_for(kernel);
  if (tiles == 0) return {};
  DeviceBuffer<uint8_t> d_a(a), d_b(b);
  DeviceBuffer<uint32_t> d_d(static_cast<size_t>(tiles) * kTileM * kChainN);
  const int fz = first_step_ignores_acc ? 1 : 0;
  switch (kernel) {
    case ProbeKernel::wgmma_bf16: launch_chain_as<ProbeKernel::wgmma_bf16>(d_a.get(), d_b.get(), d_d.get(), tiles, k_bytes, fz); break;
    case ProbeKernel::wgmma_e4m3: launch_chain_as<ProbeKernel::wgmma_e4m3>(d_a.get(), d_b.get(), d_d.get(), tiles, k_bytes, fz); break;
    default: launch_chain_as<ProbeKernel::wgmma_e5m2>(d_a.get(), d_b.get(), d_d.get(), tiles, k_bytes, fz); break;
  }
  CALICO_CUDA_CHECK(cudaDeviceSynchronize());
  return d_d.download();
}

void require_device_for(ProbeKernel kernel) {
  int n = 0;
  require(cudaGetDeviceCount(&n) == cudaSuccess && n > 0, "probe: no CUDA device is usable");
  cudaDeviceProp prop{};
  CALICO_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const bool hopper = prop.major == 9 && prop.minor == 0;
  switch (kernel) {
    case ProbeKernel::mma_sync_bf16:
      require(prop.major >= 8, "probe: mma.sync bf16 needs compute capability >= 8.0, device is {}.{}", prop.major,
              prop.minor);
      break;
    case ProbeKernel::wgmma_bf16:
    case ProbeKernel::wgmma_e4m3:
    case ProbeKernel::wgmma_e5m2:
      require(hopper, "probe: wgmma needs a compute capability 9.0 device (sm_90a build), device is {}.{}", prop.major,
              prop.minor);
      break;
    case ProbeKernel::tcgen05_f16:
    case ProbeKernel::tcgen05_mxf8_e4m3:
    case ProbeKernel::tcgen05_mxf8_e5m2:
      require_tcgen05_device(kernel);  // probe_tcgen05.cu: device 10.0/10.3 and a build with tcgen05 code
      break;
  }
}

}  // namespace calico::gpu::probe
