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
  std::ofstream out(path);
  require(bool(out), "--trace: cannot write {}", path);
  int gpus = 0;
  for (const auto& s : result.slices) gpus = std::max(gpus, s.gpu + 1);
  out << "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"topology\":\"" << topo.name << "\"},\"traceEvents\":[\n";
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
  require(bool(out), "--trace: error writing {}", path);
}

std::vector<TimelineRecord> read_timeline(const std::string& path) {
  std::ifstream in(path);
  require(bool(in), "--compare-timeline: cannot open {}", path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::vector<TimelineRecord> recs;
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && (text[first] == '{' || text[first] == '[')) {
    try {
      const auto j = nlohmann::json::parse(text);
      const auto& arr = j.is_array() ? j : j.at("records");
      for (const auto& r : arr) {
        TimelineRecord t;
        t.rank = r.at("rank").get<int>();
        t.sm = r.value("sm", 0);
        t.role = r.value("role", "");
        t.pass = parse_pass(r.value("pass", std::string("forward")));
        t.stage = parse_stage(r.at("stage").get<std::string>());
        t.minibatch = r.at("minibatch").get<int>();
        t.start_ns = r.at("start_ns").get<int64_t>();
        t.end_ns = r.at("end_ns").get<int64_t>();
        recs.push_back(t);
      }
    } catch (const nlohmann::json::exception& e) {
      throw Error(fmt::format("{}: bad timeline JSON: {}", path, e.what()));
    }
  } else {  // CSV: rank,sm,role,pass,stage,minibatch,start_ns,end_ns with a header line
    std::istringstream lines(text);
    std::string line;
    std::getline(lines, line);
    int n = 1;
    while (std::getline(lines, line)) {
      ++n;
      if (line.empty()) continue;
      std::vector<std::string> f;
      std::stringstream ls(line);
      for (std::string x; std::getline(ls, x, ',');) f.push_back(x);
      require(f.size() == 8, "{}:{}: expected 8 CSV fields (rank,sm,role,pass,stage,minibatch,start_ns,end_ns), got {}",
              path, n, f.size());
      TimelineRecord t;
      t.rank = std::stoi(f[0]);
      t.sm = std::stoi(f[1]);
      t.role = f[2];
      t.pass = parse_pass(f[3]);
      t.stage = parse_stage(f[4]);
      t.minibatch = std::stoi(f[5]);
      t.start_ns = std::stoll(f[6]);
      t.end_ns = std::stoll(f[7]);
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
  s += fmt::format("{:<19} {:>14.2f} {:>14.2f} {:>9}\n", "layer", c.predicted_layer_us, c.measured_layer_us,
                   ratio(c.predicted_layer_us, c.measured_layer_us));
  return s;
}

}  // namespace calico::sim
