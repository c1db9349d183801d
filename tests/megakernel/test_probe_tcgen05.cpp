// The host side of the Blackwell (tcgen05) probe, on the CPU: the instructions are listed, the device rule
// accepts exactly compute capability 10.0 and 10.3, and on a machine without a Blackwell GPU (no GPU, no
// CUDA, or a Hopper) `probe_mma` refuses a tcgen05 instruction with a calico::Error that names the
// instruction, what it needs and what it found, before generating any input (no crash, no launch).
#include <gtest/gtest.h>

#include <string>

#include "calico/error.h"
#include "calico/megakernel.h"
#include "probe/probe_kernels.h"
#include "test_util.h"

namespace calico::gpu {
namespace {

bool blackwell_present() {
  const std::string d = device_description();
  return device_count() > 0 && (d.find("sm_100") != std::string::npos || d.find("sm_103") != std::string::npos);
}

TEST(ProbeTcgen05, InstructionsAreListedAsBlackwell) {
  for (const char* name : {"tcgen05.bf16", "tcgen05.mxf8.e4m3", "tcgen05.mxf8.e5m2"}) {
    bool found = false;
    for (const auto& i : probe_instructions())
      if (i.name == name) {
        found = true;
        EXPECT_EQ(i.required_sm, 100) << name;
        EXPECT_NE(i.description.find("tcgen05.mma.cta_group::1"), std::string::npos) << name;
      }
    EXPECT_TRUE(found) << name;
  }
}

TEST(ProbeTcgen05, CapabilityRuleIsB200OrB300) {
  EXPECT_TRUE(probe::tcgen05_capability_ok(10, 0));   // B200, GB200 (sm_100a)
  EXPECT_TRUE(probe::tcgen05_capability_ok(10, 3));   // B300, GB300 (sm_103a)
  EXPECT_FALSE(probe::tcgen05_capability_ok(9, 0));   // H100/H200
  EXPECT_FALSE(probe::tcgen05_capability_ok(12, 0));  // RTX Blackwell: no tcgen05
  EXPECT_FALSE(probe::tcgen05_capability_ok(11, 0));
  EXPECT_FALSE(probe::tcgen05_capability_ok(10, 1));
  EXPECT_FALSE(probe::tcgen05_capability_ok(8, 0));
}

TEST(ProbeTcgen05, RequirementNamesInstructionAndDevice) {
  const std::string m = probe::tcgen05_requirement(probe::ProbeKernel::tcgen05_f16, "sm_90 (NVIDIA H200)");
  EXPECT_NE(m.find("tcgen05.bf16 needs sm_100a/sm_103a, found sm_90 (NVIDIA H200)"), std::string::npos) << m;
  const std::string e = probe::tcgen05_requirement(probe::ProbeKernel::tcgen05_mxf8_e5m2, "no CUDA device");
  EXPECT_NE(e.find("tcgen05.mxf8.e5m2 needs sm_100a/sm_103a, found no CUDA device"), std::string::npos) << e;
}

TEST(ProbeTcgen05, RefusedWithoutBlackwellBeforeAnyWork) {
  if (blackwell_present()) GTEST_SKIP() << "a Blackwell GPU is present: the probe would run";
  for (const char* name : {"tcgen05.bf16", "tcgen05.mxf8.e4m3", "tcgen05.mxf8.e5m2", "tcgen05.f16"}) {
    ProbeMmaOptions o;
    o.instr = name;
    o.cases = int64_t{1} << 30;  // would take hours if inputs were generated before the check
    const std::string m = test_util::error_of([&] { (void)probe_mma(o); });
    EXPECT_NE(m.find(std::string("probe: ") + (std::string(name) == "tcgen05.f16" ? "tcgen05.bf16" : name) +
                     " needs sm_100a/sm_103a, found "),
              std::string::npos)
        << m;
    if (device_count() > 0) EXPECT_NE(m.find("found sm_"), std::string::npos) << m;  // names the GPU's arch
    else EXPECT_NE(m.find("found no usable CUDA device"), std::string::npos) << m;
  }
}

TEST(ProbeTcgen05, ChainTilesAreRejectedForTcgen05) {
  ProbeMmaOptions o;
  o.instr = "tcgen05.bf16";
  o.chain_tiles = 1;
  const std::string m = test_util::error_of([&] { (void)probe_mma(o); });
  EXPECT_NE(m.find("--chain-tiles"), std::string::npos) << m;
}

}  // namespace
}  // namespace calico::gpu
