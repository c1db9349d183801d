// Host launchers of the tensor-core probe kernels (one line each; kernels in probe_*.cu). Plain C++: the
// host side of the probe (probe_host.cpp) is compiled without nvcc and reaches the device only through these.
//
// Tiles: `cases` independent instructions. a: [case][M][K] elements, b: [case][N][K] elements (B stored
// K-major, i.e. as B^T), both as raw little-endian bytes of elem_bytes each; c: [case][M][N] f32 bit patterns.
// Returns d: [case][M][N] f32 bit patterns, D = A B + C computed by one instruction per case.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace calico::gpu::probe {

enum class ProbeKernel {
  mma_sync_bf16,
  wgmma_bf16,
  wgmma_e4m3,
  wgmma_e5m2,
  tcgen05_f16,
  tcgen05_mxf8_e4m3,
  tcgen05_mxf8_e5m2,
};

// Throws calico::Error unless device 0 can run `kernel` (e.g. wgmma needs compute capability 9.0 and an
// sm_90a build; tcgen05 needs 10.x and an sm_100a/sm_103a build).
void require_device_for(ProbeKernel kernel);

// tcgen05 (probe_tcgen05.cu): device 0 must be compute capability 10.0 (B200/GB200) or 10.3 (B300/GB300)
// and this build must carry sm_100a/sm_103a (or sm_100f/sm_103f) code for it; throws calico::Error otherwise.
void require_tcgen05_device(ProbeKernel kernel);
// Host-only helpers of that check (probe_host.cpp, also in builds without CUDA): whether a compute
// capability runs tcgen05, and the error text "probe: <instr> needs sm_100a/sm_103a ..., found <found>".
bool tcgen05_capability_ok(int major, int minor);
std::string tcgen05_requirement(ProbeKernel kernel, const std::string& found);

// mma.sync.m16n8k16 bf16 (M 16, N 8, K 16), probe_mma_sync.cu.
std::vector<uint32_t> launch_mma_sync_bf16_tiles(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b,
                                                 const std::vector<uint32_t>& c, int64_t cases);

// wgmma m64n8 (K 16 for bf16, 32 for fp8), probe_wgmma.cu.
std::vector<uint32_t> launch_wgmma_tiles(ProbeKernel kernel, const std::vector<uint8_t>& a,
                                         const std::vector<uint8_t>& b, const std::vector<uint32_t>& c,
                                         int64_t cases);

// The megakernel's K loop on one 64 x 256 tile per case: acc = 0, then for each K step in ascending order
// acc = wgmma(A[:, step], B[:, step], acc) with m64n256; a: [tile][64][k], b: [tile][256][k].
// With first_step_ignores_acc the first step runs with scale-d = 0 (D = A B), as GEMM kernels often issue it.
std::vector<uint32_t> launch_wgmma_chain(ProbeKernel kernel, const std::vector<uint8_t>& a,
                                         const std::vector<uint8_t>& b, int tiles, int k,
                                         bool first_step_ignores_acc);

// Blackwell tcgen05 (kind::f16 M 128 N 16 K 16; kind::mxf8f6f4.block_scale K 32, e4m3 or e5m2, with one
// E8M0 scale per row of A and per column of B), probe_tcgen05.cu. scale_a: [case][M], scale_b: [case][N]
// (read only by the mxf8 kernels).
std::vector<uint32_t> launch_tcgen05_tiles(ProbeKernel kernel, const std::vector<uint8_t>& a,
                                           const std::vector<uint8_t>& b, const std::vector<uint32_t>& c,
                                           const std::vector<uint8_t>& scale_a, const std::vector<uint8_t>& scale_b,
                                           int64_t cases);

}  // namespace calico::gpu::probe
