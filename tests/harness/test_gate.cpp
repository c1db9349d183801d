// Gate tests on the toy backend (fast): a clean matrix passes; a one-bit flip and a changed reduction order
// fail, and the JSON/Markdown reports name run, rank, tensor, token and column.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "harness_test_util.h"

namespace calico::harness {
namespace {

GateOptions toy_gate(const testing::TempDir& dir, const std::string& backend, const std::string& name) {
  GateOptions o;
  o.preset = "tiny";
  o.tokens = 16;
  o.runs = 2;
  o.baseline = "toy";
  o.configs = default_matrix({backend}, {1, 2, 4}, {DType::bf16});
  if (backend != "toy") {
    auto base = default_matrix({"toy"}, {1}, {DType::bf16});
    o.configs.insert(o.configs.begin(), base.begin(), base.end());
  }
  o.report_dir = dir.path.string();
  o.trace_dir = dir.file("traces");
  o.name = name;
  o.plots = false;
  return o;
}

nlohmann::json load_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(Gate, CleanToyMatrixPasses) {
  testing::TempDir dir("gate-clean");
  GateResult r = run_gate(toy_gate(dir, "toy", "clean"));
  write_gate_reports(r);
  EXPECT_TRUE(r.passed());
  EXPECT_EQ(r.entries.size(), 3u);
  EXPECT_EQ(r.comparisons.size(), 3u + 2u);  // runs x3, baseline x2 (R=2, R=4 against R=1)
  const auto j = load_json(r.json_path);
  EXPECT_TRUE(j["passed"].get<bool>());
  EXPECT_TRUE(j["failures"].empty());
  EXPECT_TRUE(std::filesystem::exists(r.markdown_path));
  EXPECT_TRUE(std::filesystem::exists(r.html_path));
  EXPECT_NE(slurp(r.markdown_path).find("PASSED"), std::string::npos);
}

TEST(Gate, SeededBitflipFailsAndTheReportNamesTheElement) {
  testing::TempDir dir("gate-bitflip");
  // Global token 13 of 16: rank 0 token 13 at R=1, rank 1 token 5 at R=2, rank 3 token 1 at R=4.
  GateResult r = run_gate(toy_gate(dir, "faulty-bitflip:inner=toy:run=1:tensor=out:token=13:column=7", "flip"));
  write_gate_reports(r);
  EXPECT_FALSE(r.passed());
  const auto j = load_json(r.json_path);
  EXPECT_FALSE(j["passed"].get<bool>());
  std::set<std::string> locations;
  for (const auto& f : j["failures"]) {
    EXPECT_EQ(f["tensor"], "out");
    EXPECT_EQ(f["mismatches"], 1);
    EXPECT_EQ(f["max_ulp"], 1);
    locations.insert(f["location"].get<std::string>());
  }
  EXPECT_TRUE(locations.count("run 1, rank 0, token 13, column 7"));
  EXPECT_TRUE(locations.count("run 1, rank 1, token 5, column 7"));
  EXPECT_TRUE(locations.count("run 1, rank 3, token 1, column 7"));
  // The structured first mismatch too, and the Markdown names it.
  bool found = false;
  for (const auto& c : j["comparisons"])
    for (const auto& d : c["differences"])
      if (d["first_mismatch"]["rank"] == 1 && d["first_mismatch"]["index"]["token"] == 5 &&
          d["first_mismatch"]["index"]["column"] == 7 && d["first_mismatch"]["run"] == 1)
        found = true;
  EXPECT_TRUE(found);
  EXPECT_NE(slurp(r.markdown_path).find("run 1, rank 1, token 5, column 7"), std::string::npos);
}

TEST(Gate, ChangedReductionOrderFailsAgainstTheBaseline) {
  testing::TempDir dir("gate-order");
  GateResult r = run_gate(toy_gate(dir, "faulty-order", "order"));
  EXPECT_FALSE(r.passed());
  std::set<std::string> failing;
  for (const auto& c : r.comparisons) {
    if (c.kind == "runs") {  // deterministic: every run agrees with itself
      EXPECT_TRUE(c.diff.passes());
    }
    if (!c.diff.passes()) {
      failing.insert(c.b);
      for (const auto& d : c.diff.tensors) EXPECT_EQ(d.equal(), d.tensor != "d_w_down") << d.tensor;
    }
  }
  // R=1 reduces in the canonical order; R=2 and R=4 do not.
  EXPECT_EQ(failing, (std::set<std::string>{"faulty-order R=2 bf16", "faulty-order R=4 bf16"}));
}

TEST(Gate, BackendErrorsAndBadMatrixFilesAreReported) {
  testing::TempDir dir("gate-errors");
  GateOptions o = toy_gate(dir, "toy", "errors");
  o.configs[1].backend = "faulty-bitflip:inner=toy:token=999";  // token beyond the batch: the backend throws
  GateResult r = run_gate(o);
  EXPECT_FALSE(r.passed());
  EXPECT_NE(r.entries[1].error.find("token 999"), std::string::npos) << r.entries[1].error;

  std::ofstream(dir.file("m.json")) << R"({"configs": []})";
  EXPECT_THROW(load_matrix_file(dir.file("m.json"), o), Error);
  std::ofstream(dir.file("n.json")) << R"({"configs": [{"backend": "toy", "dtype": "fp4"}]})";
  EXPECT_THROW(load_matrix_file(dir.file("n.json"), o), Error);
  std::ofstream(dir.file("ok.json")) << R"({"tokens": 8, "configs": [{"backend": "toy", "ranks": 2}]})";
  load_matrix_file(dir.file("ok.json"), o);
  EXPECT_EQ(o.tokens, 8);
  ASSERT_EQ(o.configs.size(), 1u);
  EXPECT_EQ(o.configs[0].ranks, 2);
}

// Issue 9: matrix numbers are checked (ranks 0 was a SIGFPE, 64.5 became 64, misspelt keys were ignored),
// and a config that reaches run_gate with R = 0 is an error, not a division by zero.
TEST(Gate, MatrixNumbersAndKeysAreChecked) {
  testing::TempDir dir("gate-matrix");
  GateOptions o = toy_gate(dir, "toy", "matrix");
  const std::pair<const char*, const char*> bad[] = {
      {R"({"configs": [{"backend": "toy", "ranks": 0}]})", "configs[0].ranks must be an integer in [1, 4096], got 0"},
      {R"({"tokens": 64.5, "configs": [{"backend": "toy"}]})", "tokens must be an integer, got 64.5"},
      {R"({"tokens": 33554432, "configs": [{"backend": "toy"}]})", "tokens must be an integer in [1, 16777216]"},
      {R"({"configs": [{"backend": "toy", "rank": 2}]})", "unknown key 'rank'"},
      {R"({"token": 16, "configs": [{"backend": "toy"}]})", "unknown key 'token'"},
      {R"({"configs": [{"backend": "toy", "ranks": 4294967298}]})", "ranks must be an integer in"},
  };
  for (const auto& [text, want] : bad) {
    std::ofstream(dir.file("m.json")) << text;
    try {
      load_matrix_file(dir.file("m.json"), o);
      ADD_FAILURE() << "accepted " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
  GateOptions z = toy_gate(dir, "toy", "zero");
  z.configs[1].ranks = 0;
  GateResult r = run_gate(z);
  EXPECT_FALSE(r.passed());
  EXPECT_NE(r.entries[1].error.find("ranks must be in [1, 4096], got 0"), std::string::npos) << r.entries[1].error;
}

}  // namespace
}  // namespace calico::harness
