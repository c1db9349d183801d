// Presets load from data/ and bad layer specs are rejected with messages that name the argument.
#include <gtest/gtest.h>

#include "calico/core.h"

using namespace calico;

TEST(Presets, AllDesignPresetsLoadAndValidate) {
  for (const char* name : {"qwen3-30b-a3b", "qwen3-235b-a22b", "deepseek-v3", "kimi-k2", "gpt-oss-120b",
                           "mixtral-8x7b", "mok-bench", "tiny"}) {
    const LayerSpec s = load_preset(name);
    EXPECT_EQ(s.name, name);
    EXPECT_NO_THROW(s.validate());
  }
  const LayerSpec ds = load_preset("deepseek-v3");
  EXPECT_EQ(ds.hidden, 7168);
  EXPECT_EQ(ds.experts, 256);
  EXPECT_EQ(ds.shared_intermediate, 2048);
  EXPECT_EQ(load_preset("tiny").experts % 8, 0);
}

TEST(Presets, UnknownPresetNamesItAndListsKnownOnes) {
  try {
    load_preset("no-such-model");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown preset 'no-such-model'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("qwen3-30b-a3b"), std::string::npos) << e.what();
  }
}
