// Inline-PTX wrappers for Blackwell's fifth-generation tensor cores (tcgen05, sm_100a/sm_103a and the
// sm_100f/sm_103f families): tensor-memory (TMEM) allocation, the shared-memory matrix descriptor and the
// 32-bit instruction descriptors, tcgen05.mma cta_group::1 (kind::f16 and kind::mxf8f6f4.block_scale),
// tcgen05.commit to an mbarrier, tcgen05.ld / tcgen05.st and the fences between them.
//
// Sources: PTX ISA 8.7+ "Tensor Core 5th Generation Family Instructions" (tcgen05): "Matrix Descriptors"
// (shared memory descriptor, instruction descriptor for .kind::f16/.kind::f8f6f4 and for the block-scaled
// kinds), "Tensor Memory" (addresses: lane in bits 31..16, column in bits 15..0), "Data path layout" (M = 128,
// cta_group::1: row i of D in TMEM lane i, column j in TMEM column j, 32-bit cells) and "Scale factor layout".
// Bit positions cross-checked against NVIDIA CUTLASS (cute/arch/mma_sm100_desc.hpp, read, not copied).
//
// Operands use the same no-swizzle K-major core-matrix layout as the wgmma probe (ptx/wgmma.cuh,
// core_matrix_offset): 8 rows x 16 bytes per core matrix, LBO = byte distance of core matrices adjacent in K,
// SBO = of core matrices adjacent in M/N.
//
// Off the tcgen05 targets (the sm_90a build) every wrapper compiles to a trap; the host launcher checks the
// device and the build (require_device_for) before launching.
#pragma once

#include <cstdint>

#if defined(__CUDA_ARCH__) &&                                                                             \
    (defined(__CUDA_ARCH_FEAT_SM100_ALL) || defined(__CUDA_ARCH_FEAT_SM103_ALL) ||                        \
     (defined(__CUDA_ARCH_FAMILY_SPECIFIC__) && (__CUDA_ARCH_FAMILY_SPECIFIC__ == 1000 ||                 \
                                                 __CUDA_ARCH_FAMILY_SPECIFIC__ == 1030)))
#define CALICO_TCGEN05_AVAILABLE 1
#else
#define CALICO_TCGEN05_AVAILABLE 0
#endif

#if CALICO_TCGEN05_AVAILABLE
#define CALICO_TCGEN05_ASM(...) asm volatile(__VA_ARGS__)
#else
// Not a tcgen05 target: the host launcher never gets here (it checks the device and the build first).
#define CALICO_TCGEN05_ASM(...) __trap()
#endif

namespace calico::gpu::ptx {

// ---------------------------------------------------------------------------------------------------------
// Descriptors (plain integer arithmetic: host-testable)
// ---------------------------------------------------------------------------------------------------------

// Shared memory descriptor, tcgen05 format: bits 0-13 start address >> 4, 16-29 LBO >> 4, 32-45 SBO >> 4,
// 46-48 the fixed value 0b001 (the "version" that tells it from Hopper's wgmma descriptor), 49-51 base
// offset 0 (no swizzle), 52 LBO mode 0 (relative byte offsets), 61-63 swizzle mode 0 (none).
__host__ __device__ constexpr uint64_t tcgen05_smem_desc(uint32_t smem_addr, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((smem_addr >> 4) & 0x3FFFu) | (static_cast<uint64_t>((lbo >> 4) & 0x3FFFu) << 16) |
         (static_cast<uint64_t>((sbo >> 4) & 0x3FFFu) << 32) | (uint64_t{1} << 46);
}

// Instruction descriptor for .kind::f16 with BF16 A and B, F32 D, both operands K-major, dense, no negation:
// bits 0-2 sparsity 0, 3 saturate 0, 4-5 D format (1 = F32), 7-9 A format (1 = BF16), 10-12 B format
// (1 = BF16), 13/14 negate A/B 0, 15/16 transpose (major) A/B 0 = K-major, 17-22 N >> 3, 24-28 M >> 4,
// 30-31 max shift 0 (only for .ws).
__host__ __device__ constexpr uint32_t tcgen05_idesc_bf16_f32(uint32_t m, uint32_t n) {
  return (1u << 4) | (1u << 7) | (1u << 10) | ((n >> 3) << 17) | ((m >> 4) << 24);
}

// F8F6F4 operand format codes of the instruction descriptor.
enum class Tcgen05F8Format : uint32_t { e4m3 = 0, e5m2 = 1 };

// Instruction descriptor for .kind::mxf8f6f4.block_scale (D is always F32), both operands K-major, dense:
// bits 4-5 B scale-factor id (byte of the 32-bit TMEM cell that holds B's scale), 7-9 A format, 10-12 B
// format, 15/16 major 0 = K-major, 17-22 N >> 3, 23 scale format (1 = UE8M0), 24-28 M >> 4, 29-30 A
// scale-factor id, 31 K size 0 (dense K = 32).
__host__ __device__ constexpr uint32_t tcgen05_idesc_mxf8f6f4(uint32_t m, uint32_t n, Tcgen05F8Format a,
                                                              Tcgen05F8Format b, uint32_t sf_id_a,
                                                              uint32_t sf_id_b) {
  return ((sf_id_b & 3u) << 4) | (static_cast<uint32_t>(a) << 7) | (static_cast<uint32_t>(b) << 10) |
         ((n >> 3) << 17) | (1u << 23) | ((m >> 4) << 24) | ((sf_id_a & 3u) << 29);
}

// TMEM address of (lane, column): lane in bits 31-16, column in bits 15-0.
__host__ __device__ constexpr uint32_t tmem_addr(uint32_t base, uint32_t lane, uint32_t column) {
  return base + (lane << 16) + column;
}

// ---------------------------------------------------------------------------------------------------------
// Tensor memory allocation (one full warp executes each of these)
// ---------------------------------------------------------------------------------------------------------

// Allocates `columns` TMEM columns (a power of two >= 32) x 128 lanes; the base address is written to the
// shared-memory word `dst` (read it after a barrier).
__device__ __forceinline__ void tmem_alloc(uint32_t* dst, uint32_t columns) {
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  CALICO_TCGEN05_ASM("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;\n" ::"r"(d), "r"(columns)
                     : "memory");
}

// This CTA will allocate no more: other CTAs on the SM may get columns without waiting for it to exit.
__device__ __forceinline__ void tmem_relinquish_alloc_permit() {
  CALICO_TCGEN05_ASM("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void tmem_dealloc(uint32_t base, uint32_t columns) {
  CALICO_TCGEN05_ASM("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;\n" ::"r"(base), "r"(columns) : "memory");
}

// ---------------------------------------------------------------------------------------------------------
// Fences and the mbarrier that tcgen05.commit arrives on
// ---------------------------------------------------------------------------------------------------------

// Orders this thread's earlier tcgen05 operations before a following thread barrier...
__device__ __forceinline__ void tcgen05_fence_before_thread_sync() {
  CALICO_TCGEN05_ASM("tcgen05.fence::before_thread_sync;\n" ::: "memory");
}
// ...and, after the barrier, other threads' tcgen05 operations before this thread's next ones.
__device__ __forceinline__ void tcgen05_fence_after_thread_sync() {
  CALICO_TCGEN05_ASM("tcgen05.fence::after_thread_sync;\n" ::: "memory");
}

// Generic-proxy stores to shared memory become visible to the async proxy (the tensor core's operand reads).
__device__ __forceinline__ void tcgen05_fence_proxy_async_shared() {
  CALICO_TCGEN05_ASM("fence.proxy.async.shared::cta;\n" ::: "memory");
}

__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t arrivals) {
  const uint32_t b = static_cast<uint32_t>(__cvta_generic_to_shared(bar));
  CALICO_TCGEN05_ASM("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(b), "r"(arrivals) : "memory");
}

// The initialised barrier becomes visible to the async proxy (tcgen05.commit arrives through it).
__device__ __forceinline__ void fence_mbarrier_init() {
  CALICO_TCGEN05_ASM("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// Spins until the barrier's phase with parity `parity` has completed.
__device__ __forceinline__ void mbarrier_wait_parity(uint64_t* bar, uint32_t parity) {
  const uint32_t b = static_cast<uint32_t>(__cvta_generic_to_shared(bar));
  CALICO_TCGEN05_ASM(
      "{\n.reg .pred done;\n"
      "WAIT:\n"  // PTX labels are scoped by the braces: every inlined copy has its own
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n}\n" ::"r"(b),
      "r"(parity)
      : "memory");
}

// The mbarrier tracks completion of every tcgen05.mma/cp this thread issued before (one arrival when done).
__device__ __forceinline__ void tcgen05_commit(uint64_t* bar) {
  const uint32_t b = static_cast<uint32_t>(__cvta_generic_to_shared(bar));
  CALICO_TCGEN05_ASM("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];\n" ::"r"(b)
                     : "memory");
}

// ---------------------------------------------------------------------------------------------------------
// MMA (issued by one thread)
// ---------------------------------------------------------------------------------------------------------

// D[tmem] = A B + (enable_input_d ? D : 0); A, B from shared memory descriptors, BF16/F16 inputs.
__device__ __forceinline__ void tcgen05_mma_f16(uint32_t d_tmem, uint64_t desc_a, uint64_t desc_b, uint32_t idesc,
                                                uint32_t enable_input_d) {
  CALICO_TCGEN05_ASM(
      "{\n.reg .pred p;\n"
      "setp.ne.b32 p, %4, 0;\n"
      "tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p;\n}\n" ::"r"(d_tmem),
      "l"(desc_a), "l"(desc_b), "r"(idesc), "r"(enable_input_d)
      : "memory");
}

// D[tmem] = (A * 2^sfa) (B * 2^sfb) + (enable_input_d ? D : 0) with one E8M0 scale per row of A and per
// column of B per 32 K (scale_vec::1X), the scales read from TMEM at sfa_tmem / sfb_tmem.
__device__ __forceinline__ void tcgen05_mma_mxf8f6f4(uint32_t d_tmem, uint64_t desc_a, uint64_t desc_b,
                                                     uint32_t idesc, uint32_t sfa_tmem, uint32_t sfb_tmem,
                                                     uint32_t enable_input_d) {
  CALICO_TCGEN05_ASM(
      "{\n.reg .pred p;\n"
      "setp.ne.b32 p, %6, 0;\n"
      "tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X [%0], %1, %2, %3, [%4], [%5], p;\n}\n" ::"r"(
          d_tmem),
      "l"(desc_a), "l"(desc_b), "r"(idesc), "r"(sfa_tmem), "r"(sfb_tmem), "r"(enable_input_d)
      : "memory");
}

// ---------------------------------------------------------------------------------------------------------
// TMEM <-> registers (warp-wide; a warp reaches only its lane quarter 32 (warp id % 4) .. + 31)
// ---------------------------------------------------------------------------------------------------------

// 32x32b.x16: thread t of the warp reads lane (lane of taddr) + t, columns (column of taddr) .. + 15.
__device__ __forceinline__ void tmem_ld_32x32b_x16(uint32_t taddr, uint32_t (&v)[16]) {
  CALICO_TCGEN05_ASM(
      "tcgen05.ld.sync.aligned.32x32b.x16.b32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, "
      "%15}, [%16];\n"
      : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]), "=r"(v[4]), "=r"(v[5]), "=r"(v[6]), "=r"(v[7]), "=r"(v[8]),
        "=r"(v[9]), "=r"(v[10]), "=r"(v[11]), "=r"(v[12]), "=r"(v[13]), "=r"(v[14]), "=r"(v[15])
      : "r"(taddr)
      : "memory");
}

// Registers of tcgen05.ld are valid only after this.
__device__ __forceinline__ void tmem_wait_ld() { CALICO_TCGEN05_ASM("tcgen05.wait::ld.sync.aligned;\n" ::: "memory"); }

// 32x32b.x16 store: thread t writes lane (lane of taddr) + t, columns .. + 15.
__device__ __forceinline__ void tmem_st_32x32b_x16(uint32_t taddr, const uint32_t (&v)[16]) {
  CALICO_TCGEN05_ASM(
      "tcgen05.st.sync.aligned.32x32b.x16.b32 [%0], {%1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, "
      "%15, %16};\n" ::"r"(taddr),
      "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3]), "r"(v[4]), "r"(v[5]), "r"(v[6]), "r"(v[7]), "r"(v[8]), "r"(v[9]),
      "r"(v[10]), "r"(v[11]), "r"(v[12]), "r"(v[13]), "r"(v[14]), "r"(v[15])
      : "memory");
}

// 32x32b.x4 store: thread t writes lane (lane of taddr) + t, columns .. + 3.
__device__ __forceinline__ void tmem_st_32x32b_x4(uint32_t taddr, const uint32_t (&v)[4]) {
  CALICO_TCGEN05_ASM("tcgen05.st.sync.aligned.32x32b.x4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(taddr), "r"(v[0]),
                     "r"(v[1]), "r"(v[2]), "r"(v[3])
                     : "memory");
}

// Stores of tcgen05.st are complete (visible to a following tcgen05.mma after a fenced barrier) after this.
__device__ __forceinline__ void tmem_wait_st() { CALICO_TCGEN05_ASM("tcgen05.wait::st.sync.aligned;\n" ::: "memory"); }

}  // namespace calico::gpu::ptx
