// Perfetto / Chrome trace output (one process per GPU, one thread per role or link direction) and the
// measured-timeline ingest and per-stage comparison (TRACE_FORMAT.md).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "calico/error.h"
#include "calico/files.h"
#include "calico/json_fields.h"
#include "calico/simulator.h"

namespace calico::sim {

namespace {

const char* kTracks[] = {"compute", "comm dispatch", "comm combine", "nvlink out", "nvlink in"};

int track_id(const std::string& track) {
  for (int i = 0; i < 5; ++i)
    if (track == kTracks[i]) return i + 1;
  return 9;
}

Pass parse_pass(const std::string& s) {
  if (s == "forward" || s == "fwd") return Pass::forward;
  if (s == "backward" || s == "bwd") return Pass::backward;
  throw Error(fmt::format("timeline: pass must be forward or backward, got '{}'", s));
}

// Per (pass, stage): mean over ranks of the summed per-minibatch spans (first start to last end).
template <typename Rec>
std::map<std::pair<int, int>, double> stage_spans(const std::vector<Rec>& recs, int ranks) {
  std::map<std::tuple<int, int, int, int>, std::pair<double, double>> span;  // pass, stage, rank, mb
  for (const auto& r : recs) {
    auto key = std::make_tuple(int(r.pass), int(r.stage), r.rank, r.mb);
    auto it = span.find(key);
    if (it == span.end()) {
      span[key] = {r.a, r.b};
    } else {
      it->second.first = std::min(it->second.first, r.a);
      it->second.second = std::max(it->second.second, r.b);
    }
  }
  std::map<std::pair<int, int>, double> out;
  for (const auto& [k, v] : span) out[{std::get<0>(k), std::get<1>(k)}] += (v.second - v.first) / ranks;
  return out;
}

struct Rec {
  Pass pass;
  Stage stage;
  int rank, mb;
  double a, b;  // us
};

}  // namespace

void write_perfetto_trace(const std::string& path, const SimResult& result, const Topology& topo) {
  TextOutputFile file(path, "--trace");  // appears only when complete (issue 9)
  std::ofstream& out = file.stream();
  int gpus = 0;
  for (const auto& s : result.slices) gpus = std::max(gpus, s.gpu + 1);
  out << "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"topology\":" << nlohmann::json(topo.name).dump()
      << "},\"traceEvents\":[\n";
  bool first = true;
  auto sep = [&] { out << (first ? "" : ",\n"); first = false; };
  for (int g = 0; g < gpus; ++g) {
    sep();
    out << fmt::format(R"({{"ph":"M","name":"process_name","pid":{},"args":{{"name":"GPU {}"}}}})", g, g);
    for (int i = 0; i < 5; ++i) {
      sep();
      out << fmt::format(R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":"{}"}}}})", g, i + 1,
                         kTracks[i]);
    }
  }
  for (const auto& s : result.slices) {
    sep();
    out << fmt::format(
        R"({{"ph":"X","name":"{} {} mb{}","cat":"{}","pid":{},"tid":{},"ts":{:.6f},"dur":{:.6f},"args":{{"pass":"{}","stage":"{}","minibatch":{}}}}})",
        s.pass == Pass::forward ? "fwd" : "bwd", to_string(s.stage), s.minibatch, s.track, s.gpu, track_id(s.track),
        s.start / 1e6, (s.end - s.start) / 1e6, to_string(s.pass), to_string(s.stage), s.minibatch);
  }
  out << "\n]}\n";
  file.commit();
}

std::vector<TimelineRecord> read_timeline(const std::string& path) {
  // Checked numbers (issue 9): integers integral and in range, unknown keys an error, CSV numbers whole.
  constexpr int64_t kMaxNs = int64_t{1} << 52;  // ~52 days: far beyond any run, far from overflow in ps
  std::ifstream in(path, std::ios::binary);
  require(bool(in), "--compare-timeline: cannot open {}", path);
  std::stringstream ss;
  ss << in.rdbuf();
  require(!in.bad(), "--compare-timeline: cannot read {} (is it a folder?)", path);
  const std::string text = ss.str();
  std::vector<TimelineRecord> recs;
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && (text[first] == '{' || text[first] == '[')) {
    const auto j = parse_json_text(text, "--compare-timeline " + path);
    const nlohmann::json* arr = &j;
    if (!j.is_array()) {
      JsonFields top(j, path);
      top.string("format", "calico-timeline-v1");
      arr = &top.array("records");
      top.finish();
    }
    for (size_t i = 0; i < arr->size(); ++i) {
      JsonFields r((*arr)[i], fmt::format("{}: records[{}]", path, i));
      TimelineRecord t;
      t.rank = static_cast<int>(r.integer("rank", 0, 1 << 20));
      t.sm = static_cast<int>(r.integer("sm", 0, 1 << 20, 0));
      t.role = r.string("role", "");
      t.pass = parse_pass(r.string("pass", "forward"));
      t.stage = parse_stage(r.string("stage"));
      t.minibatch = static_cast<int>(r.integer("minibatch", 0, 1 << 24));
      t.start_ns = r.integer("start_ns", -kMaxNs, kMaxNs);
      t.end_ns = r.integer("end_ns", -kMaxNs, kMaxNs);
      r.finish();
      recs.push_back(t);
    }
  } else {  // CSV: rank,sm,role,pass,stage,minibatch,start_ns,end_ns with a header line
    std::istringstream lines(text);
    std::string line;
    std::getline(lines, line);
    int n = 1;
    auto whole = [&](const std::string& x, const char* field, int64_t lo, int64_t hi) -> int64_t {
      int64_t v = 0;
      size_t used = 0;
      try {
        v = std::stoll(x, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      require(used == x.size() && !x.empty() && v >= lo && v <= hi, "{}:{}: {} must be an integer in [{}, {}], got '{}'",
              path, n, field, lo, hi, x);
      return v;
    };
    while (std::getline(lines, line)) {
      ++n;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty()) continue;
      std::vector<std::string> f;
      std::stringstream ls(line);
      for (std::string x; std::getline(ls, x, ',');) f.push_back(x);
      require(f.size() == 8, "{}:{}: expected 8 CSV fields (rank,sm,role,pass,stage,minibatch,start_ns,end_ns), got {}",
              path, n, f.size());
      TimelineRecord t;
      t.rank = static_cast<int>(whole(f[0], "rank", 0, 1 << 20));
      t.sm = static_cast<int>(whole(f[1], "sm", 0, 1 << 20));
      t.role = f[2];
      t.pass = parse_pass(f[3]);
      t.stage = parse_stage(f[4]);
      t.minibatch = static_cast<int>(whole(f[5], "minibatch", 0, 1 << 24));
      t.start_ns = whole(f[6], "start_ns", -kMaxNs, kMaxNs);
      t.end_ns = whole(f[7], "end_ns", -kMaxNs, kMaxNs);
      recs.push_back(t);
    }
  }
  for (const auto& r : recs)
    require(r.end_ns >= r.start_ns && r.rank >= 0 && r.minibatch >= 0,
            "{}: record (rank {}, stage {}, minibatch {}) must have rank, minibatch >= 0 and end_ns >= start_ns", path,
            r.rank, to_string(r.stage), r.minibatch);
  require(!recs.empty(), "{}: timeline has no records", path);
  return recs;
}

TimelineComparison compare_timeline(const SimResult& predicted, const std::vector<TimelineRecord>& measured) {
  require(!predicted.slices.empty(), "compare_timeline: the simulation must keep slices (SimOptions::trace)");
  std::vector<Rec> p, m;
  int ranks = 0, mranks = 0;
  for (const auto& s : predicted.slices) {
    if (s.track == "nvlink out" || s.track == "nvlink in") continue;
    p.push_back({s.pass, s.stage, s.gpu, s.minibatch, s.start / 1e6, s.end / 1e6});
    ranks = std::max(ranks, s.gpu + 1);
  }
  double lo = 1e300, hi = -1e300;
  for (const auto& r : measured) {
    m.push_back({r.pass, r.stage, r.rank, r.minibatch, r.start_ns / 1e3, r.end_ns / 1e3});
    mranks = std::max(mranks, r.rank + 1);
    lo = std::min(lo, r.start_ns / 1e3);
    hi = std::max(hi, r.end_ns / 1e3);
  }
  require(mranks == ranks, "--compare-timeline: the timeline has {} ranks, the simulation {}", mranks, ranks);
  const auto ps = stage_spans(p, ranks), ms = stage_spans(m, mranks);
  TimelineComparison c;
  std::map<std::pair<int, int>, int> keys;
  for (const auto& [k, v] : ps) keys[k];
  for (const auto& [k, v] : ms) keys[k];
  for (const auto& [k, v] : keys) {
    const auto a = ps.find(k), b = ms.find(k);
    c.stages.push_back({Pass(k.first), Stage(k.second), a == ps.end() ? 0.0 : a->second, b == ms.end() ? 0.0 : b->second});
  }
  for (const auto* recs : {&p, &m}) {
    double first[2] = {1e300, 1e300}, last[2] = {-1e300, -1e300};
    for (const auto& r : *recs) {
      const int k = static_cast<int>(r.pass);
      first[k] = std::min(first[k], r.a), last[k] = std::max(last[k], r.b);
    }
    double* span = recs == &p ? c.predicted_pass_us : c.measured_pass_us;
    for (int k = 0; k < 2; ++k) span[k] = last[k] >= first[k] ? last[k] - first[k] : 0.0;
  }
  c.predicted_layer_us = predicted.layer_ps / 1e6;
  c.measured_layer_us = hi - lo;
  return c;
}

std::string format_comparison(const TimelineComparison& c) {
  std::string s = fmt::format("{:<9} {:<9} {:>14} {:>14} {:>9}\n", "pass", "stage", "predicted us", "measured us",
                              "pred/meas");
  auto ratio = [](double a, double b) { return b > 0 ? fmt::format("{:.3f}", a / b) : std::string("-"); };
  for (const auto& x : c.stages)
    s += fmt::format("{:<9} {:<9} {:>14.2f} {:>14.2f} {:>9}\n", to_string(x.pass), to_string(x.stage), x.predicted_us,
                     x.measured_us, ratio(x.predicted_us, x.measured_us));
  for (Pass pass : {Pass::forward, Pass::backward})
    s += fmt::format("{:<19} {:>14.2f} {:>14.2f} {:>9}\n", fmt::format("{} pass", to_string(pass)),
                     c.predicted_pass_us[int(pass)], c.measured_pass_us[int(pass)],
                     ratio(c.predicted_pass_us[int(pass)], c.measured_pass_us[int(pass)]));
  s += fmt::format("{:<19} {:>14.2f} {:>14.2f} {:>9}\n", "layer", c.predicted_layer_us, c.measured_layer_us,
                   ratio(c.predicted_layer_us, c.measured_layer_us));
  return s;
}

}  // namespace calico::sim
