// `calico probe-mma`: run a tensor-core instruction on the GPU for many generated inputs and compare every
// output element with the numerics.h model bit for bit (megakernel/PROBE.md). Exit 0 when all match, 1 on
// any mismatch, 2 on bad input.
#include <cstdio>
#include <fstream>
#include <string>

#include "calico/error.h"
#include "calico/megakernel.h"
#include "calico/files.h"
#include "command.h"

namespace {

std::string instruction_help() {
  std::string s = "Instruction to probe:";
  for (const auto& i : calico::gpu::probe_instructions())
    s += "\n  " + i.name + (i.required_sm >= 100 ? "  [Blackwell]" : "") + ": " + i.description;
  return s;
}

calico::cli::Registrar probe_mma(
    "probe-mma", "Check a tensor-core instruction against the numerics.h model, bit for bit", [](CLI::App& sub) {
      auto o = std::make_shared<calico::gpu::ProbeMmaOptions>();
      auto json = std::make_shared<std::string>();
      auto no_targeted = std::make_shared<bool>(false);
      sub.footer(
          "Families of random cases (case i is family i % 9): random_bits, random_finite, wide_spread,\n"
          "cancellation, c_zero, near_underflow, overflow, carry, zero_rows; then every targeted vector (alignment\n"
          "width, rounding direction, carries, zero-term exponent, signed zeros, NaN/inf, overflow, subnormals,\n"
          "every operand code, and the edge_* families: zero rows/columns against large/small/subnormal C,\n"
          "all-zero products, underflow, huge+tiny, MX scales with zero operands, inf/NaN in one lane, the\n"
          "H200 cases of issue 10); then --chain-tiles 64x256 tiles chained over --chain-k (wgmma.* only).\n"
          "Each family row also counts the outputs where --compare-model (default old-zero-rule: the old -126\n"
          "zero rule) differs from the GPU: the negative control (megakernel/PROBE.md).\n"
          "Example: calico probe-mma --instr wgmma.e4m3 --cases 1000000 --chain-tiles 4 --json out.json\n"
          "Blackwell (tcgen05.*: a B200/GB200 or B300/GB300 and a build with CMAKE_CUDA_ARCHITECTURES 100a/103a;\n"
          "elsewhere they stop at once with an error): calico probe-mma --instr tcgen05.mxf8.e4m3 --cases 1000000;\n"
          "the tcgen05.mxf8.* cases also draw random E8M0 scales per row of A and column of B.");
      sub.add_option("--instr", o->instr, instruction_help())->required();
      sub.add_option("--cases", o->cases, "Random instruction executions (each checks M*N outputs)")
          ->capture_default_str();
      sub.add_option("--seed", o->seed, "Seed of the input generator")->check(calico::cli::unsigned_value())->capture_default_str();
      sub.add_option("--chain-tiles", o->chain_tiles, "End-to-end 64x256 tiles chained over --chain-k")
          ->capture_default_str();
      sub.add_option("--chain-k", o->chain_k, "K of the chained tiles (multiple of 128)")->capture_default_str();
      sub.add_option("--max-records", o->max_records, "Mismatches kept with their inputs, per family")
          ->capture_default_str();
      sub.add_flag("--no-targeted", *no_targeted, "Skip the targeted vectors");
      sub.add_option("--compare-model", o->compare_model,
                     "Second model counted per family against the GPU (never changes the exit status): "
                     "old-zero-rule | flat-126 (zero terms at -126) | none")
          ->capture_default_str();
      sub.add_flag("--model-as-device", o->model_as_device,
                   "Host dry run without a GPU: the numerics.h model stands in for the device (checks the\n"
                   "generator and the compare column; says nothing about hardware)");
      sub.add_option("--json", *json, "Also write the full report (mismatches with inputs) as JSON to this file");
      return [o, json, no_targeted] {
        o->targeted = !*no_targeted;
        const calico::gpu::ProbeMmaReport rep = calico::gpu::probe_mma(*o);
        std::fputs(rep.summary().c_str(), stdout);
        if (!json->empty()) {
          calico::write_text_file(*json, rep.to_json() + "\n", "--json");  // temp + rename
        }
        return rep.total_mismatches() == 0 ? 0 : 1;
      };
    });

}  // namespace
