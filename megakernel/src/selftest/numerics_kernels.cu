// numerics.h evaluated on the device, for the bit-for-bit host/device test (tests/megakernel). Each kernel
// is followed by its host launcher; nvcc compiles this file with --fmad=false (megakernel/CMakeLists.txt),
// the device side of the contract's "no contraction" rule.
#include <cuda_runtime.h>

#include "calico/megakernel.h"
#include "calico/numerics.h"
#include "device_buffer.cuh"
#include "gemm/epilogue.cuh"
#include "selftest/numerics_ops.h"

namespace calico::gpu {
namespace {

constexpr int kThreads = 256;

int blocks_for(size_t n) { return static_cast<int>((n + kThreads - 1) / kThreads); }


__global__ void numerics_unary_kernel(NumericsOp op, const uint32_t* in, uint32_t* out, size_t n) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = numerics_apply(op, in[i]);
}

__global__ void mx_quantize_kernel(const float* x, int block_size, size_t blocks, Fp8Kind kind, MxScaleRule rule,
                                   uint8_t* out) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i >= blocks) return;
  uint8_t elements[kMxBlock] = {};
  const uint8_t scale = mx_quantize_block(x + i * block_size, block_size, kind, rule, elements);
  for (int j = 0; j < kMxBlock; ++j) out[i * 33 + j] = elements[j];
  out[i * 33 + 32] = scale;
}

__global__ void mma_step_bf16_kernel(const uint16_t* a, const uint16_t* b, const float* c, size_t n, MmaModel model,
                                     float* out) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = mma_step_bf16(a + i * 16, b + i * 16, c[i], model);
}

__global__ void mma_step_fp8_kernel(const uint8_t* a, Fp8Kind ka, const uint8_t* sa, const uint8_t* b, Fp8Kind kb,
                                    const uint8_t* sb, const float* c, size_t n, MmaModel model, float* out) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = mma_step_fp8(a + i * 32, ka, sa[i], b + i * 32, kb, sb[i], c[i], model);
}

// Every float bit pattern x, grid-stride: the pair (lo = x, hi = ~x) converted by the epilogues' instruction
// against numerics.h's f32_to_bf16 of each; counts (integer atomics) the conversions that differ.
template <bool kTowardZero>
__global__ void bf16x2_check_kernel(unsigned long long* mismatches, unsigned int* first) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  unsigned long long bad = 0;
  for (uint64_t x = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; x < (1ull << 32); x += stride) {
    const uint32_t lo = static_cast<uint32_t>(x), hi = ~lo;
    const uint32_t w = mk::bf16x2_from_f32<kTowardZero>(bits_f32(lo), bits_f32(hi));
    const bool lo_differs = (w & 0xFFFFu) != f32_to_bf16(bits_f32(lo));
    const bool hi_differs = (w >> 16) != f32_to_bf16(bits_f32(hi));
    if (lo_differs || hi_differs) {
      bad += static_cast<unsigned long long>(lo_differs) + hi_differs;
      atomicMin(first, lo_differs ? lo : hi);
    }
  }
  if (bad != 0) atomicAdd(mismatches, bad);
}

}  // namespace

ConversionCheck check_bf16x2_conversion(bool toward_zero) {
  DeviceBuffer<unsigned long long> d_bad(std::vector<unsigned long long>(1, 0));
  DeviceBuffer<unsigned int> d_first(std::vector<unsigned int>(1, 0xFFFFFFFFu));
  if (toward_zero)
    bf16x2_check_kernel<true><<<4096, kThreads>>>(d_bad.get(), d_first.get());
  else
    bf16x2_check_kernel<false><<<4096, kThreads>>>(d_bad.get(), d_first.get());
  CALICO_CUDA_CHECK_LAUNCH();
  ConversionCheck r;
  r.mismatches = d_bad.download()[0];
  r.first_input = r.mismatches == 0 ? 0 : d_first.download()[0];
  return r;
}

const char* numerics_op_name(NumericsOp op) {
  static const char* const names[] = {
      "bf16_to_f32", "f32_to_bf16", "round_bf16", "e4m3_to_f32", "e5m2_to_f32", "f32_to_e4m3_sat",
      "f32_to_e4m3_nosat", "f32_to_e5m2_sat", "f32_to_e5m2_nosat", "exp", "sigmoid", "silu", "silu_grad",
      "floor_log2", "significand", "mx_scale_e4m3_rceil", "mx_scale_e4m3_ocp", "mx_scale_e5m2_rceil",
      "mx_scale_e5m2_ocp", "mx_dequant_e4m3", "mx_dequant_e5m2"};
  static_assert(sizeof(names) / sizeof(names[0]) == static_cast<size_t>(NumericsOp::count));
  const int i = static_cast<int>(op);
  require(i >= 0 && i < static_cast<int>(NumericsOp::count), "numerics op {} out of range [0, {})", i,
          static_cast<int>(NumericsOp::count));
  return names[i];
}

std::vector<uint32_t> numerics_on_device(NumericsOp op, const std::vector<uint32_t>& in) {
  numerics_op_name(op);  // validates op
  if (in.empty()) return {};
  DeviceBuffer<uint32_t> d_in(in), d_out(in.size());
  numerics_unary_kernel<<<blocks_for(in.size()), kThreads>>>(op, d_in.get(), d_out.get(), in.size());
  CALICO_CUDA_CHECK_LAUNCH();
  return d_out.download();
}

std::vector<uint8_t> mx_quantize_on_device(const std::vector<float>& x, int block_size, Fp8Kind kind,
                                           MxScaleRule rule) {
  require(block_size >= 1 && block_size <= kMxBlock, "mx_quantize_on_device: block_size {} not in [1, 32]",
          block_size);
  require(x.size() % block_size == 0, "mx_quantize_on_device: {} values is not a multiple of block_size {}",
          x.size(), block_size);
  const size_t blocks = x.size() / block_size;
  if (blocks == 0) return {};
  DeviceBuffer<float> d_x(x);
  DeviceBuffer<uint8_t> d_out(blocks * 33);
  mx_quantize_kernel<<<blocks_for(blocks), kThreads>>>(d_x.get(), block_size, blocks, kind, rule, d_out.get());
  CALICO_CUDA_CHECK_LAUNCH();
  return d_out.download();
}

std::vector<float> mma_step_bf16_on_device(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b,
                                           const std::vector<float>& c, MmaModel model) {
  const size_t n = c.size();
  require(a.size() == n * 16 && b.size() == n * 16, "mma_step_bf16_on_device: a/b hold {}/{} values, need 16 * {}",
          a.size(), b.size(), n);
  if (n == 0) return {};
  DeviceBuffer<uint16_t> d_a(a), d_b(b);
  DeviceBuffer<float> d_c(c), d_out(n);
  mma_step_bf16_kernel<<<blocks_for(n), kThreads>>>(d_a.get(), d_b.get(), d_c.get(), n, model, d_out.get());
  CALICO_CUDA_CHECK_LAUNCH();
  return d_out.download();
}

std::vector<float> mma_step_fp8_on_device(const std::vector<uint8_t>& a, Fp8Kind ka,
                                          const std::vector<uint8_t>& scale_a, const std::vector<uint8_t>& b,
                                          Fp8Kind kb, const std::vector<uint8_t>& scale_b,
                                          const std::vector<float>& c, MmaModel model) {
  const size_t n = c.size();
  require(a.size() == n * 32 && b.size() == n * 32, "mma_step_fp8_on_device: a/b hold {}/{} values, need 32 * {}",
          a.size(), b.size(), n);
  require(scale_a.size() == n && scale_b.size() == n, "mma_step_fp8_on_device: {}/{} scales for {} cases",
          scale_a.size(), scale_b.size(), n);
  if (n == 0) return {};
  DeviceBuffer<uint8_t> d_a(a), d_b(b), d_sa(scale_a), d_sb(scale_b);
  DeviceBuffer<float> d_c(c), d_out(n);
  mma_step_fp8_kernel<<<blocks_for(n), kThreads>>>(d_a.get(), ka, d_sa.get(), d_b.get(), kb, d_sb.get(), d_c.get(),
                                                   n, model, d_out.get());
  CALICO_CUDA_CHECK_LAUNCH();
  return d_out.download();
}

}  // namespace calico::gpu
