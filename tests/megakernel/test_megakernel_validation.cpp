// The megakernel's refusals (no GPU needed): shapes it cannot tile and modes it does not run are errors that
// name the argument and the allowed values, before any device work.
#include <gtest/gtest.h>

#include <string>

#include "calico/core.h"
#include "calico/megakernel.h"

namespace calico {
namespace {

std::string error_of(const LayerSpec& s, int64_t tokens) {
  try {
    gpu::validate_megakernel_layer(s, tokens);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(MegakernelValidation, NamesTheArgument) {
#if !defined(CALICO_HAVE_CUDA)
  GTEST_SKIP() << "built without CUDA";
#endif
  LayerSpec s = load_preset("tiny");
  EXPECT_EQ(error_of(s, 64), "");
  LayerSpec bad = s;
  bad.intermediate = 88;
  EXPECT_NE(error_of(bad, 64).find("intermediate (I) must be a multiple of 16"), std::string::npos);
  bad = s;
  bad.hidden = 60;
  EXPECT_NE(error_of(bad, 64).find("hidden (H) must be a multiple of 8"), std::string::npos);
  bad = s;
  bad.shared_intermediate = 40;
  EXPECT_NE(error_of(bad, 64).find("shared_intermediate"), std::string::npos);
  bad = s;
  bad.dtype = DType::mxfp8;
  EXPECT_NE(error_of(bad, 64).find("--dtype"), std::string::npos);
  bad = s;
  bad.mma = MmaModel::blackwell_bf16;
  EXPECT_NE(error_of(bad, 64).find("--mma"), std::string::npos);
  EXPECT_NE(error_of(s, 0).find("tokens per rank must be in [1,"), std::string::npos);
  gpu::MoeOptions o;
  o.pull_forward = o.pull_backward = false;  // push dispatch needs data-movement CTAs
  o.comm_ctas_forward = 0;
  o.comm_ctas_backward = 1;
  try {
    o.validate();
    ADD_FAILURE() << "comm SMs 0 accepted with push dispatch";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("comm SMs (forward) must be in [1, 1024] for the megakernel with push"),
              std::string::npos);
  }
  o.pull_forward = true;  // pull gathers rows in the compute CTAs: none needed
  EXPECT_NO_THROW(o.validate());
  o.comm_ctas_backward = 0;  // the backward still pushes
  EXPECT_THROW(o.validate(), Error);
  o.pull_backward = true;
  EXPECT_NO_THROW(o.validate());
  o.comm_ctas_backward = -1;
  EXPECT_THROW(o.validate(), Error);
}

}  // namespace
}  // namespace calico
