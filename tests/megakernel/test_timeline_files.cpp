// The megakernel's timeline files (megakernel/src/timeline_files.cpp), no GPU needed: the simulator's own
// reader takes the calico-timeline-v1 file, the Perfetto trace is valid JSON with a slice per record, every
// stage the kernel can record has a name the writers know, and bad records are errors naming them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "calico/error.h"
#include "calico/megakernel_moe.h"
#include "calico/simulator.h"
#include "sync/timeline.h"

namespace calico {
namespace {

namespace fs = std::filesystem;
using gpu::TimelineEvent;

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("calico-test-timeline-" + std::to_string(::getpid()) + "-" + name)).string();
}

std::vector<TimelineEvent> sample() {
  // Times as a GPU's global timer gives them: large, not starting at 0.
  const int64_t t = 1'700'000'000'000;
  return {
      {0, 0, "dispatch", -1, -1, -1, -1, t + 0, t + 5'000},
      {0, 3, "gate_up", 0, 2, 0, 1, t + 1'000, t + 21'000},
      {0, 3, "shared_down", 9, -1, 1, 0, t + 22'000, t + 30'500},
      {0, 3, "combine", -1, -1, -1, -1, t + 31'000, t + 32'000},
      {1, 0, "dispatch", -1, -1, -1, -1, t + 40'000, t + 44'000},
      {1, 3, "d_h", 0, 1, 0, 0, t + 41'000, t + 60'000},
      {1, 3, "router_grad", 5, -1, 2, 0, t + 60'500, t + 61'000},
      {1, 3, "dw_up", 17, 1, 0, 3, t + 61'000, t + 70'000},
      {1, 4, "d_x_combine", 20, -1, 0, 0, t + 70'000, t + 71'000},
  };
}

TEST(TimelineFiles, SimulatorReadsTheRecords) {
  const std::string path = temp_path("records.json");
  const auto events = sample();
  EXPECT_EQ(gpu::write_timeline_records(path, events), events.size() - 1);  // router_grad has no simulator stage
  const auto recs = sim::read_timeline(path);
  ASSERT_EQ(recs.size(), events.size() - 1);
  const int64_t t0 = events[0].start_ns;
  size_t i = 0;
  for (const auto& e : events) {
    if (e.stage == "router_grad") continue;
    const auto& r = recs[i++];
    EXPECT_EQ(r.sm, e.cta) << e.stage;
    EXPECT_EQ(r.pass, e.pass == 0 ? sim::Pass::forward : sim::Pass::backward) << e.stage;
    EXPECT_EQ(sim::to_string(r.stage), gpu::simulator_stage(e.stage, e.pass)) << e.stage;
    EXPECT_EQ(r.start_ns, e.start_ns - t0) << e.stage;
    EXPECT_EQ(r.end_ns, e.end_ns - t0) << e.stage;
    EXPECT_EQ(r.role, e.stage == "dispatch" ? "comm" : "compute") << e.stage;
  }
  // The mapping the simulator's model implies (simulator/MODEL.md): the backward's down = d_h + dW_down.
  EXPECT_EQ(gpu::simulator_stage("d_h", 1), "down");
  EXPECT_EQ(gpu::simulator_stage("dw_down", 1), "down");
  EXPECT_EQ(gpu::simulator_stage("d_x_k", 1), "gate_up");
  EXPECT_EQ(gpu::simulator_stage("shared_gate_up", 0), "shared");
  EXPECT_EQ(gpu::simulator_stage("router_grad", 1), "");
  fs::remove(path);
}

TEST(TimelineFiles, PerfettoTraceHasASlicePerRecord) {
  const std::string path = temp_path("trace.json");
  const auto events = sample();
  EXPECT_EQ(gpu::write_timeline_trace(path, events, "tiny T=64"), events.size());
  std::ifstream in(path);
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["otherData"]["title"], "tiny T=64");
  size_t slices = 0;
  std::set<std::string> names;
  double first_ts = 1e300;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M") {
      names.insert(e["args"]["name"].get<std::string>());
      continue;
    }
    ASSERT_EQ(e["ph"], "X");
    const auto& want = events[slices++];
    EXPECT_EQ(e["name"], want.stage);
    EXPECT_EQ(e["pid"], want.pass + 1);
    EXPECT_EQ(e["tid"], want.cta);
    EXPECT_DOUBLE_EQ(e["dur"].get<double>(), (want.end_ns - want.start_ns) / 1e3);
    EXPECT_EQ(e["args"]["task"], want.task);
    first_ts = std::min(first_ts, e["ts"].get<double>());
  }
  EXPECT_EQ(slices, events.size());
  EXPECT_EQ(first_ts, 0.0);
  for (const char* n : {"forward", "backward", "CTA 0", "CTA 3", "CTA 4"}) EXPECT_TRUE(names.count(n)) << n;
  fs::remove(path);
}

// Every stage the device can record (sync/timeline.h) is one the writers accept in some pass: the device's
// names and the host's table cannot drift apart.
TEST(TimelineFiles, EveryDeviceStageHasAName) {
  for (int s = 0; s < gpu::mk::kTlStageCount; ++s) {
    const std::string name = gpu::mk::timeline_stage_name(s);
    ASSERT_NE(name, "unknown") << s;
    bool accepted = false;
    for (int pass = 0; pass < 2; ++pass) {
      TimelineEvent e{pass, 0, name, 0, 0, 0, 0, 10, 20};
      try {
        gpu::timeline_summary({e});
        accepted = true;
      } catch (const Error&) {
      }
    }
    EXPECT_TRUE(accepted) << name;
  }
  EXPECT_STREQ(gpu::mk::timeline_stage_name(gpu::mk::kTlStageCount), "unknown");  // negative control
}

TEST(TimelineFiles, BadRecordsAreErrorsAndWriteNoFile) {
  const std::string path = temp_path("bad.json");
  auto expect_error = [&](std::vector<TimelineEvent> events, const std::string& words) {
    try {
      gpu::write_timeline_records(path, events);
      ADD_FAILURE() << "no error for: " << words;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
    EXPECT_THROW(gpu::write_timeline_trace(path, events, "x"), Error) << words;
    EXPECT_FALSE(fs::exists(path)) << words;
  };
  auto events = sample();
  events[2].end_ns = events[2].start_ns - 1;
  expect_error(events, "before its start");
  events = sample();
  events[1].stage = "gate_upp";
  expect_error(events, "'gate_upp'");
  events = sample();
  events[5].stage = "gate_up";  // a forward stage in the backward
  expect_error(events, "not a backward stage");
  events = sample();
  events[0].pass = 2;
  expect_error(events, "pass 2");
  expect_error({}, "no records");
  // Only the simulator's file needs a stage it knows: a trace of router-gradient tasks alone is fine.
  const std::vector<TimelineEvent> router_only = {{1, 0, "router_grad", 0, 0, 0, 0, 1, 2}};
  EXPECT_THROW(gpu::write_timeline_records(path, router_only), Error);
  EXPECT_FALSE(fs::exists(path));
  EXPECT_EQ(gpu::write_timeline_trace(path, router_only, "x"), 1u);
  fs::remove(path);
}

TEST(TimelineFiles, SummaryCountsBusyTime) {
  // CTA 3's forward: 20 + 8.5 + 1 us of records in a 32 us launch; CTA 0's 5 us.
  const std::string s = gpu::timeline_summary(sample());
  EXPECT_NE(s.find("forward launch: 32.0 us"), std::string::npos) << s;
  EXPECT_NE(s.find("busy 53.9%"), std::string::npos) << s;  // (5 + 29.5) / (2 x 32)
  EXPECT_NE(s.find("backward launch: 31.0 us"), std::string::npos) << s;
}

TEST(TimelineFiles, SpanIsFirstStartToLastEndOfThePass) {
  EXPECT_DOUBLE_EQ(gpu::timeline_span_us(sample(), 0), 32.0);  // forward: t + 0 .. t + 32'000 ns
  EXPECT_DOUBLE_EQ(gpu::timeline_span_us(sample(), 1), 31.0);  // backward: t + 40'000 .. t + 71'000 ns
  std::vector<TimelineEvent> forward_only = sample();
  forward_only.resize(4);
  EXPECT_DOUBLE_EQ(gpu::timeline_span_us(forward_only, 1), 0.0);  // no backward records
  EXPECT_THROW(gpu::timeline_span_us(sample(), 2), Error);
}

}  // namespace
}  // namespace calico
