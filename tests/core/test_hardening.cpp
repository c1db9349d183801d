// Issue 9 hardening in core: checked JSON accessors, output files that appear only when complete (and leave
// nothing behind on error or on SIGTERM), and child processes started from an argument vector, never a shell.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "calico/error.h"
#include "calico/files.h"
#include "calico/json_fields.h"
#include "calico/process.h"
#include "calico/spec.h"

namespace calico {
namespace {

namespace fs = std::filesystem;

struct Dir {
  fs::path path = fs::temp_directory_path() / ("calico-test-hardening-" + std::to_string(getpid()));
  Dir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~Dir() { fs::remove_all(path); }
  std::string file(const std::string& n) const { return (path / n).string(); }
  size_t entries() const { return static_cast<size_t>(std::distance(fs::directory_iterator(path), {})); }
};

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(JsonFields, IntegersMustBeIntegralAndInRange) {
  const auto j = nlohmann::json::parse(R"({"a": 64.7, "b": 4294967360, "c": 64, "d": 64.0, "e": "64", "f": -1})");
  JsonFields f(j, "x.json");
  EXPECT_NE(message_of([&] { f.integer("a", 1, 1 << 20); }).find("x.json.a must be an integer, got 64.7"),
            std::string::npos);
  EXPECT_NE(message_of([&] { f.integer("b", 1, 1 << 20); }).find("x.json.b must be an integer in [1, 1048576]"),
            std::string::npos);
  EXPECT_EQ(f.integer("c", 1, 1 << 20), 64);
  EXPECT_EQ(f.integer("d", 1, 1 << 20), 64);
  EXPECT_THROW(f.integer("e", 1, 1 << 20), Error);
  EXPECT_THROW(f.integer("f", 0, 10), Error);
  EXPECT_EQ(f.integer("missing", 0, 10, 7), 7);
  EXPECT_THROW(f.integer("missing2", 0, 10), Error);
}

TEST(JsonFields, NumbersFiniteAndInRangeAndUnknownKeysNamed) {
  const auto j = nlohmann::json::parse(R"({"x": 1e300, "y": 2.5, "typo": 1})");
  JsonFields f(j, "t.json");
  EXPECT_THROW(f.number("x", 0, 1e9), Error);
  EXPECT_EQ(f.number("y", 0, 1e9), 2.5);
  EXPECT_NE(message_of([&] { f.finish(); }).find("t.json: unknown key 'typo'"), std::string::npos);
  f.allow("typo");
  EXPECT_NO_THROW(f.finish());
}

TEST(JsonFields, PresetNumbersAreChecked) {
  const std::string ok = R"({"hidden": 64, "intermediate": 96, "experts": 16, "top_k": 4})";
  EXPECT_EQ(parse_layer_spec_json(ok, "p").hidden, 64);
  EXPECT_THROW(parse_layer_spec_json(R"({"hidden": 64.7, "intermediate": 96, "experts": 16, "top_k": 4})", "p"),
               Error);
  EXPECT_THROW(parse_layer_spec_json(R"({"hidden": 4294967360, "intermediate": 96, "experts": 16, "top_k": 4})", "p"),
               Error);
  EXPECT_THROW(parse_layer_spec_json(R"({"hidden": 64, "intermediate": 96, "experts": 16, "top_k": 4, "hiden": 1})",
                                     "p"),
               Error);
}

TEST(RunConfig, CapacityFactorIsBounded) {
  const LayerSpec s = parse_layer_spec_json(R"({"hidden": 64, "intermediate": 96, "experts": 16, "top_k": 4})", "p");
  RunConfig c;
  c.tokens_per_rank = 8;
  c.capacity_factor = 1e300;
  EXPECT_NE(message_of([&] { c.validate(s); }).find("capacity factor (--capacity) must be in [0, 4096]"),
            std::string::npos);
  c.capacity_factor = 4096;
  EXPECT_NO_THROW(c.validate(s));
}

TEST(OutputFile, AppearsOnlyOnCommitAndLeavesNothingOnError) {
  Dir d;
  {
    TextOutputFile f(d.file("a.txt"), "--out");
    f.stream() << "half";
    EXPECT_FALSE(fs::exists(d.file("a.txt")));
  }  // no commit: as if an error was thrown
  EXPECT_EQ(d.entries(), 0u);
  EXPECT_EQ(pending_temp_files(), 0);
  write_text_file(d.file("a.txt"), "whole\n", "--out");
  std::ifstream in(d.file("a.txt"));
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "whole");
  EXPECT_EQ(d.entries(), 1u);
}

TEST(OutputFile, FoldersAndMissingParentsAreBadInput) {
  Dir d;
  fs::create_directories(d.file("sub"));
  EXPECT_NE(message_of([&] { check_output_path(d.file("sub"), "--out"); }).find("--out: '" + d.file("sub") + "' is a folder"),
            std::string::npos);
  EXPECT_NE(message_of([&] { check_output_path(d.file("no/x.csv"), "--out"); }).find("does not exist"),
            std::string::npos);
  std::ofstream(d.file("plain")) << "x";
  EXPECT_NE(message_of([&] { check_output_path(d.file("plain/x.csv"), "--out"); }).find("is not a folder"),
            std::string::npos);
}

TEST(OutputFile, SigtermRemovesTheTemporaryFile) {
  Dir d;
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // child: open an output file, say so, then wait to be killed mid-write
    TextOutputFile f(d.file("t.json"), "--trace");
    f.stream() << "partial" << std::flush;
    const char c = 1;
    if (write(ready[1], &c, 1) != 1) _exit(3);
    for (;;) pause();
  }
  close(ready[1]);
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  EXPECT_EQ(d.entries(), 1u);  // the temporary file exists while the write is under way
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
  EXPECT_EQ(d.entries(), 0u) << "a killed write left its temporary file";
}

TEST(RunProcess, ArgumentsAreDataNeverShellCode) {
  Dir d;
  const std::string evil = d.file("x';touch INJECTED;'$(touch INJECTED2)");
  const ProcessResult r = run_process({"touch", evil});
  EXPECT_TRUE(r.ok()) << r.error << r.output;
  EXPECT_TRUE(fs::exists(evil));  // the name was used literally
  EXPECT_FALSE(fs::exists("INJECTED"));
  EXPECT_FALSE(fs::exists(d.file("INJECTED")));
  EXPECT_FALSE(fs::exists("INJECTED2"));
  const ProcessResult e = run_process({"sh", "-c", "echo out; echo err >&2; exit 5"});
  EXPECT_EQ(e.exit_code, 5);
  EXPECT_EQ(e.output, "out\nerr\n");
  const ProcessResult missing = run_process({"/no/such/program"});
  EXPECT_FALSE(missing.ok());
  EXPECT_FALSE(missing.error.empty());
}

}  // namespace
}  // namespace calico
