// Calico megakernel: the CUDA side. Host-callable API only; device code lives in megakernel/src.
//
// Three groups: device discovery; device evaluation of core/include/calico/numerics.h (the GPU half of the
// "same bits on host and device" test); and the tensor-core probe (`calico probe-mma`), which runs real MMA
// instructions and compares every output element with the numerics.h model bit for bit.
// Every function throws calico::Error when CUDA is missing or a CUDA call fails.
#pragma once

#include <cmath>    // NOTE: before numerics.h, whose host pass under nvcc uses std::memcpy/std::fma but
#include <cstdint>  // includes <cmath>/<cstring> only for g++
#include <cstring>
#include <string>
#include <vector>

#include "calico/numerics.h"

namespace calico::gpu {

// Number of CUDA devices this process can use; 0 when built without CUDA or when no driver/GPU is present.
int device_count();
// "NVIDIA H200, sm_90, driver 13.0, 132 SMs" or why no device is usable.
std::string device_description();
// Driver version string from the runtime ("13.0") and, when readable, the kernel driver ("580.159.04").
std::string driver_description();

// ---------------------------------------------------------------------------------------------------------
// numerics.h on the device: one output per input, computed by a kernel built with --fmad=false.
// ---------------------------------------------------------------------------------------------------------
enum class NumericsOp : int {
  bf16_to_f32,         // in: bf16 bits; out: f32 bits
  f32_to_bf16,         // in: f32 bits; out: bf16 bits
  round_bf16,          // f32 -> f32
  e4m3_to_f32,         // in: byte; out: f32 bits
  e5m2_to_f32,
  f32_to_e4m3_sat,     // in: f32 bits; out: byte
  f32_to_e4m3_nosat,
  f32_to_e5m2_sat,
  f32_to_e5m2_nosat,
  exp,                 // calico_exp, f32 -> f32
  sigmoid,
  silu,
  silu_grad,
  floor_log2,          // in: finite nonzero f32; out: int32 as bits
  significand,         // in: finite nonzero f32; out: uint32
  mx_scale_e4m3_rceil, // in: finite positive amax; out: scale exponent (int32)
  mx_scale_e4m3_ocp,
  mx_scale_e5m2_rceil,
  mx_scale_e5m2_ocp,
  mx_dequant_e4m3,     // in: element | scale << 8; out: bf16 bits
  mx_dequant_e5m2,
  count
};
const char* numerics_op_name(NumericsOp op);
std::vector<uint32_t> numerics_on_device(NumericsOp op, const std::vector<uint32_t>& in);

// The epilogues' one-instruction bf16x2 conversion (megakernel/src/gemm/epilogue.cuh) against numerics.h's
// f32_to_bf16, both on the device, over all 2^32 float bit patterns in the low half (with the complemented
// pattern in the high half, so both halves see every input): how many conversions differ and the first input
// that does (0 if none). toward_zero: the round-toward-zero instruction, the test's negative control.
struct ConversionCheck {
  uint64_t mismatches = 0;
  uint32_t first_input = 0;
};
ConversionCheck check_bf16x2_conversion(bool toward_zero);

// The forward's schedule (megakernel/src/schedule/schedule.cu) of a routing topk [T, K] (experts in [0, E)) with
// router weights [T, K], computed on the device and copied back, for tests: per expert its row count and first
// m-tile of 128 rows (tile_first has E + 1 entries, the last the m-tile count), each m-tile's expert, each
// (t, k)'s row of the expert-major order, and each row's token and weight (-1 and 0 for padding rows; rows up to
// the layer's capacity, T K + E (128 - 1) rounded up to 128).
struct RoutingSchedule {
  std::vector<int> counts, tile_first, tile_expert, token_row, row_token;
  std::vector<float> row_weight;
  int padded_rows = 0, mtiles = 0;
};
RoutingSchedule schedule_on_device(const std::vector<int>& topk, const std::vector<float>& weights, int T, int K,
                                   int E);

// mx_quantize_block on blocks of `block_size` (1..32) consecutive floats; per block 33 bytes come back:
// the 32 element bytes (unused ones 0) and the E8M0 scale.
std::vector<uint8_t> mx_quantize_on_device(const std::vector<float>& x, int block_size, Fp8Kind kind,
                                           MxScaleRule rule);

// One model step per case: mma_step_bf16 (16 a, 16 b, one c per case) and mma_step_fp8 (32 a, 32 b, one
// scale_a, scale_b and c per case).
std::vector<float> mma_step_bf16_on_device(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b,
                                           const std::vector<float>& c, MmaModel model);
std::vector<float> mma_step_fp8_on_device(const std::vector<uint8_t>& a, Fp8Kind ka,
                                          const std::vector<uint8_t>& scale_a, const std::vector<uint8_t>& b,
                                          Fp8Kind kb, const std::vector<uint8_t>& scale_b,
                                          const std::vector<float>& c, MmaModel model);

// ---------------------------------------------------------------------------------------------------------
// Tensor-core probe (issue 5; megakernel/PROBE.md)
// ---------------------------------------------------------------------------------------------------------
struct ProbeInstruction {
  std::string name;         // "mma.sync.bf16", "wgmma.bf16", "wgmma.e4m3", ...
  std::string description;  // the PTX instruction and shape
  int required_sm;          // 90 (runs on an H200) or 100 (Blackwell: tcgen05.*, needs an sm_100a/sm_103a
                            // build and a compute capability 10.0/10.3 device, else probe_mma throws)
};
std::vector<ProbeInstruction> probe_instructions();

struct ProbeMmaOptions {
  std::string instr;            // a ProbeInstruction name
  int64_t cases = 1 << 20;      // random instruction executions (each checks M*N output elements)
  uint64_t seed = 1;
  bool targeted = true;         // also run every targeted vector (PROBE.md lists them)
  int chain_tiles = 0;          // end-to-end 64 x 256 tiles chained over chain_k (wgmma instructions)
  int chain_k = 7168;
  int max_records = 200;        // mismatches kept with their inputs (all are counted)
  bool diagnose = true;         // on mismatches, search model parameters that would explain them
  // A second model counted against the same GPU outputs, per family (issue 10's negative control):
  // "old-zero-rule" (the old -126 zero rule) or "none". It never changes the exit status.
  std::string compare_model = "old-zero-rule";
  bool model_as_device = false;  // host dry run: the numerics.h model stands in for the GPU (no device used)
  void validate() const;
};

struct ProbeFamilyResult {
  std::string family;
  int64_t cases = 0, outputs = 0, mismatches = 0;
  int64_t compare_mismatches = 0;  // outputs where the compare model differs from the GPU
};

struct ProbeMismatch {
  std::string family;
  int64_t case_index = 0;
  int row = 0, col = 0, step = -1;  // step: chained K step (-1 for single-instruction cases)
  std::vector<uint32_t> a, b;       // operand bit patterns of this output element (one K step)
  uint32_t c = 0, gpu = 0, model = 0;
  uint8_t scale_a = 127, scale_b = 127;  // E8M0 block scales of this row of A / column of B (127: 2^0)
};

struct ProbeMmaReport {
  std::string instr, description, device, driver, date;
  uint64_t seed = 0;
  int tile_m = 0, tile_n = 0, tile_k = 0;
  std::vector<ProbeFamilyResult> families;
  std::vector<ProbeMismatch> records;
  std::vector<std::string> diagnosis;  // lines: which model variants explain the data
  std::string compare_model = "none";  // the compare model's name ("none": no comparison column)
  std::string compare_description;
  double seconds = 0;
  int64_t total_outputs() const;
  int64_t total_mismatches() const;
  int64_t total_compare_mismatches() const;
  std::string summary() const;        // human-readable table
  std::string to_json() const;        // everything above, mismatches with their inputs
};

ProbeMmaReport probe_mma(const ProbeMmaOptions& options);

}  // namespace calico::gpu

#include "calico/megakernel_moe.h"  // the MoE layer itself (one persistent launch per pass)
