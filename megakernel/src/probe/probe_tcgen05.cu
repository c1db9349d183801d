// Blackwell probe kernels: tcgen05.mma.cta_group::1 kind::f16 (BF16 in, F32 accumulate; M 128, N 16, K 16)
// and kind::mxf8f6f4.block_scale.scale_vec::1X (E4M3 or E5M2 in, one E8M0 scale per row of A and per column
// of B; M 128, N 16, K 32), one instruction per case, D = A B + C, exactly like launch_wgmma_tiles.
//
// Per CTA (one warpgroup): warp 0 allocates 64 TMEM columns once. Per case: all threads stage A and B in
// shared memory (no-swizzle K-major core matrices, ptx/wgmma.cuh core_matrix_offset), each warp writes C
// into its quarter of the accumulator's TMEM lanes with tcgen05.st (row i of D lives in lane i for M = 128)
// and, for block_scale, the scale factors; after wait::st, the proxy fence and a fenced barrier, thread 0
// issues the MMA with enable-input-d = 1 and commits it to an mbarrier; everyone waits on the barrier,
// reads its 32 rows back with tcgen05.ld and writes the f32 bits.
//
// TMEM columns: D 0..15, scale factors of A 32..35, of B 48..51. Scale-factor layout (PTX ISA "scale factor
// A/B layout" for M = 128, cta_group::1, as CUTLASS's tmem_sf_frg builds it): the scale of row r (of A; of
// column r for B) sits in 32-bit column (r / 32) of every lane quarter at lane 32 q + r % 32, in the byte the
// scale-factor id selects. We write it into all four quarters AND all four bytes, so a misread of the byte
// id or of which quarter serves which rows cannot change the result (PROBE.md, residual risks).
//
// Only compiled here (no Blackwell GPU): the kernels run on a B200/GB200 (sm_100a) or B300/GB300 (sm_103a).
#include <cuda_runtime.h>

#include "../device_buffer.cuh"
#include "../ptx/tcgen05.cuh"
#include "../ptx/wgmma.cuh"  // core_matrix_offset: the same operand layout as the wgmma probe
#include "probe_kernels.h"

namespace calico::gpu::probe {
namespace {

constexpr int kM = 128, kN = 16;
constexpr int kRowBytes = 32;  // K bytes per row of one instruction: 16 bf16 or 32 fp8
constexpr uint32_t kTmemColumns = 64, kColD = 0, kColSfa = 32, kColSfb = 48;
// No-swizzle K-major: core matrices adjacent in K are 128 bytes apart, the next 8 rows 8 * 32 bytes.
constexpr uint32_t kLbo = 128, kSbo = 8 * kRowBytes;

static_assert(kN % 16 == 0 && kN >= 16 && kN <= 256, "M = 128 needs N a multiple of 16 in [16, 256]");
static_assert(kColD + kN <= kColSfa && kColSfb + 4 <= kTmemColumns, "TMEM column map overlaps");

__host__ __device__ constexpr bool is_mxf8(ProbeKernel k) {
  return k == ProbeKernel::tcgen05_mxf8_e4m3 || k == ProbeKernel::tcgen05_mxf8_e5m2;
}

template <ProbeKernel K>
__host__ __device__ constexpr uint32_t instruction_descriptor() {
  if constexpr (K == ProbeKernel::tcgen05_f16) return ptx::tcgen05_idesc_bf16_f32(kM, kN);
  constexpr ptx::Tcgen05F8Format f =
      K == ProbeKernel::tcgen05_mxf8_e4m3 ? ptx::Tcgen05F8Format::e4m3 : ptx::Tcgen05F8Format::e5m2;
  return ptx::tcgen05_idesc_mxf8f6f4(kM, kN, f, f, 0, 0);
}

// Descriptor constants checked at compile time against the field layout (PTX ISA; PROBE.md lists them).
static_assert(ptx::tcgen05_idesc_bf16_f32(128, 16) == 0x08040490u, "kind::f16 instruction descriptor");
static_assert(ptx::tcgen05_idesc_mxf8f6f4(128, 16, ptx::Tcgen05F8Format::e4m3, ptx::Tcgen05F8Format::e4m3, 0, 0) ==
                  0x08840000u,
              "kind::mxf8f6f4 instruction descriptor (e4m3)");
static_assert(ptx::tcgen05_idesc_mxf8f6f4(128, 16, ptx::Tcgen05F8Format::e5m2, ptx::Tcgen05F8Format::e5m2, 0, 0) ==
                  0x08840480u,
              "kind::mxf8f6f4 instruction descriptor (e5m2)");
static_assert(ptx::tcgen05_smem_desc(0x400, 128, 256) == ((uint64_t{1} << 46) | (uint64_t{16} << 32) |
                                                           (uint64_t{8} << 16) | uint64_t{0x40}),
              "shared memory descriptor");

__device__ __forceinline__ void stage_tile(uint8_t* smem, const uint8_t* src, int rows) {
  const int chunks = rows * kRowBytes / 16;
  for (int i = threadIdx.x; i < chunks; i += blockDim.x) {
    const int row = i / (kRowBytes / 16), kb = (i % (kRowBytes / 16)) * 16;
    const uint4 v = *reinterpret_cast<const uint4*>(src + row * kRowBytes + kb);
    *reinterpret_cast<uint4*>(smem + ptx::core_matrix_offset(row, kb, kRowBytes)) = v;
  }
}

// An E8M0 scale in all four bytes of a TMEM cell (whichever byte the scale-factor id selects).
__device__ __forceinline__ uint32_t splat(uint8_t s) { return 0x01010101u * s; }

// This warp's lane quarter of the scale-factor columns: column c holds row/column 32 c + lane.
__device__ __forceinline__ void store_scales(uint32_t taddr, const uint8_t* s, int count, int lane) {
  uint32_t v[4];
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    const int r = 32 * c + lane;
    v[c] = splat(r < count ? s[r] : uint8_t{127});  // unused cells: 2^0
  }
  ptx::tmem_st_32x32b_x4(taddr, v);
}

template <ProbeKernel K>
__global__ void __launch_bounds__(128) tcgen05_tiles_kernel(const uint8_t* a, const uint8_t* b, const uint32_t* c,
                                                            const uint8_t* scale_a, const uint8_t* scale_b,
                                                            uint32_t* d, int64_t cases) {
  __shared__ alignas(1024) uint8_t sa[kM * kRowBytes];  // 4 KiB
  __shared__ alignas(1024) uint8_t sb[kN * kRowBytes];  // 512 B
  __shared__ alignas(8) uint64_t mma_done;
  __shared__ uint32_t tmem_base_slot;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  if (warp == 0) {
    ptx::tmem_alloc(&tmem_base_slot, kTmemColumns);
    ptx::tmem_relinquish_alloc_permit();
  }
  if (threadIdx.x == 0) {
    ptx::mbarrier_init(&mma_done, 1);
    ptx::fence_mbarrier_init();
  }
  ptx::tcgen05_fence_before_thread_sync();
  __syncthreads();
  ptx::tcgen05_fence_after_thread_sync();
  const uint32_t tmem = tmem_base_slot;
  const uint32_t quarter = ptx::tmem_addr(tmem, 32 * warp, 0);  // this warp's lanes 32 w .. 32 w + 31
  const uint64_t desc_a =
      ptx::tcgen05_smem_desc(static_cast<uint32_t>(__cvta_generic_to_shared(sa)), kLbo, kSbo);
  const uint64_t desc_b =
      ptx::tcgen05_smem_desc(static_cast<uint32_t>(__cvta_generic_to_shared(sb)), kLbo, kSbo);
  constexpr uint32_t idesc = instruction_descriptor<K>();
  uint32_t parity = 0;

  for (int64_t cs = blockIdx.x; cs < cases; cs += gridDim.x) {
    stage_tile(sa, a + cs * kM * kRowBytes, kM);
    stage_tile(sb, b + cs * kN * kRowBytes, kN);
    // C: thread t of warp w owns row 32 w + t of D, i.e. TMEM lane 32 w + t, columns kColD .. + 15.
    const int row = 32 * warp + lane;
    const uint4* crow = reinterpret_cast<const uint4*>(c + (cs * kM + row) * kN);
    uint32_t acc[16];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const uint4 v = crow[q];
      acc[4 * q] = v.x;
      acc[4 * q + 1] = v.y;
      acc[4 * q + 2] = v.z;
      acc[4 * q + 3] = v.w;
    }
    ptx::tmem_st_32x32b_x16(quarter + kColD, acc);
    if constexpr (is_mxf8(K)) {
      store_scales(quarter + kColSfa, scale_a + cs * kM, kM, lane);
      store_scales(quarter + kColSfb, scale_b + cs * kN, kN, lane);
    }
    ptx::tmem_wait_st();
    ptx::tcgen05_fence_proxy_async_shared();
    ptx::tcgen05_fence_before_thread_sync();
    __syncthreads();
    ptx::tcgen05_fence_after_thread_sync();
    if (threadIdx.x == 0) {
      if constexpr (is_mxf8(K))
        ptx::tcgen05_mma_mxf8f6f4(ptx::tmem_addr(tmem, 0, kColD), desc_a, desc_b, idesc,
                                  ptx::tmem_addr(tmem, 0, kColSfa), ptx::tmem_addr(tmem, 0, kColSfb), 1);
      else
        ptx::tcgen05_mma_f16(ptx::tmem_addr(tmem, 0, kColD), desc_a, desc_b, idesc, 1);
      ptx::tcgen05_commit(&mma_done);
    }
    ptx::mbarrier_wait_parity(&mma_done, parity);
    parity ^= 1u;
    ptx::tcgen05_fence_after_thread_sync();
    uint32_t out[16];
    ptx::tmem_ld_32x32b_x16(quarter + kColD, out);
    ptx::tmem_wait_ld();
    uint4* drow = reinterpret_cast<uint4*>(d + (cs * kM + row) * kN);
#pragma unroll
    for (int q = 0; q < 4; ++q) drow[q] = make_uint4(out[4 * q], out[4 * q + 1], out[4 * q + 2], out[4 * q + 3]);
    // The next case overwrites shared memory and TMEM: every read of this one must be done.
    ptx::tcgen05_fence_before_thread_sync();
    __syncthreads();
    ptx::tcgen05_fence_after_thread_sync();
  }
  if (warp == 0) ptx::tmem_dealloc(tmem, kTmemColumns);
}

// 1 when this build's image for the running device has the tcgen05 instructions (an sm_100a/sm_103a or
// sm_100f/sm_103f target), 0 when it was compiled for plain sm_100/sm_103 (the kernels would trap).
__global__ void tcgen05_build_flag_kernel(int* out) { *out = CALICO_TCGEN05_AVAILABLE; }

template <ProbeKernel K>
void launch_as(const uint8_t* a, const uint8_t* b, const uint32_t* c, const uint8_t* sa, const uint8_t* sb,
               uint32_t* d, int64_t cases) {
  const int blocks = static_cast<int>(cases < 8192 ? cases : 8192);
  tcgen05_tiles_kernel<K><<<blocks, 128>>>(a, b, c, sa, sb, d, cases);
  CALICO_CUDA_CHECK_LAUNCH();
}

}  // namespace

void require_tcgen05_device(ProbeKernel kernel) {
  int n = 0;
  const cudaError_t count_err = cudaGetDeviceCount(&n);
  if (count_err != cudaSuccess || n == 0) {
    cudaGetLastError();  // clear the sticky "no device" error
    throw Error(tcgen05_requirement(
        kernel, count_err != cudaSuccess ? fmt::format("no usable CUDA device ({})", cudaGetErrorString(count_err))
                                         : std::string("no CUDA device")));
  }
  cudaDeviceProp prop{};
  CALICO_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const std::string found = fmt::format("sm_{}{} ({})", prop.major, prop.minor, prop.name);
  if (!tcgen05_capability_ok(prop.major, prop.minor)) throw Error(tcgen05_requirement(kernel, found));
  // The device is right; does this build carry tcgen05 code for it?
  cudaFuncAttributes attr{};
  const cudaError_t img = cudaFuncGetAttributes(&attr, tcgen05_build_flag_kernel);
  if (img != cudaSuccess) {
    cudaGetLastError();
    throw Error(fmt::format(
        "probe: this build has no code for {} ({}); rebuild with -DCMAKE_CUDA_ARCHITECTURES={}{}a", found,
        cudaGetErrorString(img), prop.major, prop.minor));
  }
  DeviceBuffer<int> flag(1);
  tcgen05_build_flag_kernel<<<1, 1>>>(flag.get());
  CALICO_CUDA_CHECK_LAUNCH();
  CALICO_CUDA_CHECK(cudaDeviceSynchronize());
  require(flag.download()[0] == 1,
          "probe: this build's code for {} lacks the tcgen05 instructions (compiled for sm_{}{}, not the "
          "arch-specific sm_{}{}a); rebuild with -DCMAKE_CUDA_ARCHITECTURES={}{}a",
          found, prop.major, prop.minor, prop.major, prop.minor, prop.major, prop.minor);
}

std::vector<uint32_t> launch_tcgen05_tiles(ProbeKernel kernel, const std::vector<uint8_t>& a,
                                           const std::vector<uint8_t>& b, const std::vector<uint32_t>& c,
                                           const std::vector<uint8_t>& scale_a, const std::vector<uint8_t>& scale_b,
                                           int64_t cases) {
  require(kernel == ProbeKernel::tcgen05_f16 || is_mxf8(kernel), "launch_tcgen05_tiles: kernel {} is not a tcgen05 kernel",
          static_cast<int>(kernel));
  const size_t n = static_cast<size_t>(cases < 0 ? 0 : cases);
  require(cases >= 0 && a.size() == n * kM * kRowBytes && b.size() == n * kN * kRowBytes && c.size() == n * kM * kN &&
              (!is_mxf8(kernel) || (scale_a.size() == n * kM && scale_b.size() == n * kN)),
          "launch_tcgen05_tiles: sizes a {} b {} c {} scale_a {} scale_b {} do not fit {} cases of {}x{}x{} bytes",
          a.size(), b.size(), c.size(), scale_a.size(), scale_b.size(), cases, kM, kN, kRowBytes);
  require_device_for(kernel);
  if (cases == 0) return {};
  DeviceBuffer<uint8_t> d_a(a), d_b(b);
  DeviceBuffer<uint32_t> d_c(c), d_d(c.size());
  // kind::f16 reads no scales; pass valid (unused) pointers anyway.
  DeviceBuffer<uint8_t> d_sa(is_mxf8(kernel) ? scale_a : std::vector<uint8_t>(1, 127));
  DeviceBuffer<uint8_t> d_sb(is_mxf8(kernel) ? scale_b : std::vector<uint8_t>(1, 127));
  switch (kernel) {
    case ProbeKernel::tcgen05_f16:
      launch_as<ProbeKernel::tcgen05_f16>(d_a.get(), d_b.get(), d_c.get(), d_sa.get(), d_sb.get(), d_d.get(), cases);
      break;
    case ProbeKernel::tcgen05_mxf8_e4m3:
      launch_as<ProbeKernel::tcgen05_mxf8_e4m3>(d_a.get(), d_b.get(), d_c.get(), d_sa.get(), d_sb.get(), d_d.get(),
                                                cases);
      break;
    default:
      launch_as<ProbeKernel::tcgen05_mxf8_e5m2>(d_a.get(), d_b.get(), d_c.get(), d_sa.get(), d_sb.get(), d_d.get(),
                                                cases);
      break;
  }
  CALICO_CUDA_CHECK(cudaDeviceSynchronize());
  return d_d.download();
}

}  // namespace calico::gpu::probe
