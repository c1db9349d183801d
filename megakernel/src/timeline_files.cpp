// The megakernel's per-task timeline as files: a Perfetto trace to look at, and the simulator's measured
// timeline (calico-timeline-v1) to compare a simulation with. Host code only: built with or without CUDA.
#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "calico/error.h"
#include "calico/files.h"
#include "calico/megakernel_moe.h"
#include "sync/timeline.h"

namespace calico::gpu {
namespace {

// Per device stage (sync/timeline.h, whose names these are): the passes it runs in and the simulator's stage
// for it (simulator/MODEL.md: the backward's "down" is the down projection's dgrad and wgrad, its "gate_up"
// the gate/up projections'; the SwiGLU backward runs inside the d_h tiles here). "" = the simulator has none.
struct StageMap {
  bool forward, backward;
  std::string_view simulator;
};
constexpr std::array<StageMap, mk::kTlStageCount> kStages = {{
    {true, true, "dispatch"},     // kTlDispatch
    {true, false, "gate_up"},     // kTlGateUp
    {true, false, "shared"},      // kTlSharedGateUp
    {true, false, "down"},        // kTlDown
    {true, false, "shared"},      // kTlSharedDown
    {true, false, "combine"},     // kTlCombine
    {false, true, "down"},        // kTlDh
    {false, true, "shared"},      // kTlSharedDh
    {false, true, "gate_up"},     // kTlDx
    {false, true, "shared"},      // kTlSharedDx
    {false, true, "down"},        // kTlWDown
    {false, true, "shared"},      // kTlSharedWDown
    {false, true, "gate_up"},     // kTlWGate
    {false, true, "shared"},      // kTlSharedWGate
    {false, true, "gate_up"},     // kTlWUp
    {false, true, "shared"},      // kTlSharedWUp
    {false, true, ""},            // kTlRouter
    {false, true, "combine"},     // kTlDxCombine
}};

// The stage named `stage` if it runs in `pass`, else null.
const StageMap* find_stage(const std::string& stage, int pass) {
  for (int i = 0; i < mk::kTlStageCount; ++i)
    if (stage == mk::timeline_stage_name(i)) return (pass == 0 ? kStages[i].forward : kStages[i].backward) ? &kStages[i] : nullptr;
  return nullptr;
}

// Checks every record (a known stage of its pass, a valid pass and CTA, end >= start); returns the earliest start.
int64_t check_events(const std::vector<TimelineEvent>& events, const char* what) {
  require(!events.empty(), "{}: the timeline has no records (was MoeLayer::record_timeline on?)", what);
  int64_t t0 = std::numeric_limits<int64_t>::max();
  for (size_t i = 0; i < events.size(); ++i) {
    const auto& e = events[i];
    require(e.pass == 0 || e.pass == 1, "{}: record {} has pass {}, must be 0 (forward) or 1 (backward)", what, i, e.pass);
    require(find_stage(e.stage, e.pass) != nullptr, "{}: record {} has stage '{}', not a {} stage of the megakernel",
            what, i, e.stage, e.pass == 0 ? "forward" : "backward");
    require(e.cta >= 0, "{}: record {} has CTA {}, must be >= 0", what, i, e.cta);
    require(e.end_ns >= e.start_ns, "{}: record {} ({} of CTA {}) ends at {} ns, before its start {} ns", what, i, e.stage,
            e.cta, e.end_ns, e.start_ns);
    t0 = std::min(t0, e.start_ns);
  }
  return t0;
}

}  // namespace

std::string simulator_stage(const std::string& stage, int pass) {
  const StageMap* s = find_stage(stage, pass);
  return s == nullptr ? std::string() : std::string(s->simulator);
}

size_t write_timeline_trace(const std::string& path, const std::vector<TimelineEvent>& events, const std::string& title) {
  const int64_t t0 = check_events(events, "--timeline");
  TextOutputFile file(path, "--timeline");
  std::ofstream& out = file.stream();
  out << "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"title\":" << nlohmann::json(title).dump() << "},\"traceEvents\":[\n";
  bool first = true;
  auto sep = [&] { out << (first ? "" : ",\n"), first = false; };
  std::map<int, int> ctas[2];  // per pass: CTA -> records
  for (const auto& e : events) ++ctas[e.pass][e.cta];
  for (int pass = 0; pass < 2; ++pass) {
    if (ctas[pass].empty()) continue;
    sep();
    out << fmt::format(R"({{"ph":"M","name":"process_name","pid":{},"args":{{"name":"{}"}}}})", pass + 1,
                       pass == 0 ? "forward" : "backward");
    for (const auto& [cta, n] : ctas[pass]) {
      sep();
      out << fmt::format(R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":"CTA {}"}}}})", pass + 1,
                         cta, cta);
    }
  }
  for (const auto& e : events) {
    sep();
    out << fmt::format(
        R"({{"ph":"X","name":"{}","cat":"{}","pid":{},"tid":{},"ts":{:.3f},"dur":{:.3f},"args":{{"task":{},"expert":{},"m":{},"n":{}}}}})",
        e.stage, e.pass == 0 ? "forward" : "backward", e.pass + 1, e.cta, (e.start_ns - t0) / 1e3,
        (e.end_ns - e.start_ns) / 1e3, e.task, e.expert, e.m, e.n);
  }
  out << "\n]}\n";
  file.commit();
  return events.size();
}

size_t write_timeline_records(const std::string& path, const std::vector<TimelineEvent>& events) {
  const int64_t t0 = check_events(events, "--timeline-records");
  nlohmann::ordered_json records = nlohmann::ordered_json::array();
  for (const auto& e : events) {
    const std::string stage = simulator_stage(e.stage, e.pass);
    if (stage.empty()) continue;  // router_grad: no simulator stage
    records.push_back({{"rank", 0},
                       {"sm", e.cta},
                       {"role", e.stage == "dispatch" ? "comm" : "compute"},
                       {"pass", e.pass == 0 ? "forward" : "backward"},
                       {"stage", stage},
                       {"minibatch", 0},
                       {"start_ns", e.start_ns - t0},
                       {"end_ns", e.end_ns - t0}});
  }
  require(!records.empty(), "--timeline-records: no record has a simulator stage");
  nlohmann::ordered_json j;
  j["format"] = "calico-timeline-v1";
  j["records"] = std::move(records);
  write_text_file(path, j.dump() + "\n", "--timeline-records");
  return j["records"].size();
}

double timeline_span_us(const std::vector<TimelineEvent>& events, int pass) {
  require(pass == 0 || pass == 1, "timeline_span_us: pass must be 0 (forward) or 1 (backward), got {}", pass);
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  for (const auto& e : events)
    if (e.pass == pass) lo = std::min(lo, e.start_ns), hi = std::max(hi, e.end_ns);
  return lo > hi ? 0.0 : (hi - lo) / 1e3;
}

std::string timeline_summary(const std::vector<TimelineEvent>& events) {
  check_events(events, "timeline_summary");
  std::string r;
  for (int pass = 0; pass < 2; ++pass) {
    int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
    std::map<int, int64_t> busy;  // CTA -> ns in records
    struct Row { int n = 0; int64_t ns = 0, first = 0, last = 0; };
    std::map<std::string, Row> rows;
    std::vector<std::string> order;
    for (const auto& e : events) {
      if (e.pass != pass) continue;
      lo = std::min(lo, e.start_ns), hi = std::max(hi, e.end_ns);
    }
    if (lo > hi) continue;
    for (const auto& e : events) {
      if (e.pass != pass) continue;
      busy[e.cta] += e.end_ns - e.start_ns;
      auto [it, added] = rows.try_emplace(e.stage);
      Row& w = it->second;
      if (added) order.push_back(e.stage), w.first = e.start_ns - lo;
      ++w.n, w.ns += e.end_ns - e.start_ns;
      w.first = std::min(w.first, e.start_ns - lo), w.last = std::max(w.last, e.end_ns - lo);
    }
    int64_t all = 0;
    for (const auto& [cta, ns] : busy) all += ns;
    const double span_us = (hi - lo) / 1e3;
    r += fmt::format("{} launch: {:.1f} us from the first record to the last, {} CTAs with records, busy {:.1f}% of "
                     "their time (the rest: between tasks, waiting for a task's first stage)\n",
                     pass == 0 ? "forward" : "backward", span_us, busy.size(),
                     100.0 * all / (static_cast<double>(hi - lo) * busy.size()));
    r += fmt::format("  {:<16} {:>7} {:>12} {:>10} {:>10} {:>10}\n", "stage", "records", "us per CTA", "us each",
                     "first us", "last us");
    for (const auto& name : order) {
      const Row& w = rows[name];
      r += fmt::format("  {:<16} {:>7} {:>12.1f} {:>10.2f} {:>10.1f} {:>10.1f}\n", name, w.n,
                       w.ns / 1e3 / busy.size(), w.ns / 1e3 / w.n, w.first / 1e3, w.last / 1e3);
    }
  }
  return r;
}

}  // namespace calico::gpu
