// The determinism gate: runs a matrix of configs (backend x R x dtype x ...) N times each on the same global
// batch, writes and re-reads each config's trace, and demands bitwise identity across runs, ranks, configs
// and against the baseline backend (DESIGN 2.3, 5).
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "calico/data.h"
#include "calico/json_fields.h"
#include "calico/harness.h"
#include "schema.h"

namespace calico::harness {

std::string GateConfig::label() const {
  // The backend's base name only: parameters of test backends (faulty-bitflip:...) would swamp every table.
  std::string s = fmt::format("{} R={} {}", backend.substr(0, backend.find(':')), ranks, to_string(dtype));
  if (minibatch) s += fmt::format(" mb={}", minibatch);
  if (comm_sms != 16) s += fmt::format(" sms={}", comm_sms);
  if (dispatch != Direction::push || combine != Direction::push)
    s += fmt::format(" {}/{}", to_string(dispatch), to_string(combine));
  if (threads) s += fmt::format(" threads={}", threads);
  return s;
}

bool GateResult::passed() const {
  for (const auto& e : entries)
    if (!e.error.empty()) return false;
  for (const auto& c : comparisons)
    if (!c.diff.passes()) return false;
  return !entries.empty();
}

std::vector<GateConfig> default_matrix(const std::vector<std::string>& backends, const std::vector<int>& ranks,
                                       const std::vector<DType>& dtypes) {
  std::vector<GateConfig> m;
  for (DType d : dtypes)
    for (const auto& b : backends)
      for (int r : ranks) {
        // The megakernel runs bf16 at R = 1 for now; on one GPU it is varied over SM splits instead.
        if (b == "megakernel" && (r != 1 || d != DType::bf16)) continue;
        GateConfig c;
        c.backend = b;
        c.ranks = r;
        c.dtype = d;
        m.push_back(c);
      }
  return m;
}

void load_matrix_file(const std::string& path, GateOptions& o) {
  // Every field through the checked accessor: integral and in range, unknown keys an error (issue 9).
  const nlohmann::json j = parse_json_file(path, "--matrix");
  JsonFields top(j, fmt::format("--matrix '{}'", path));
  o.preset = top.string("preset", o.preset);
  o.tokens = top.integer("tokens", 1, kMaxGateTokens, o.tokens);
  o.runs = static_cast<int>(top.integer("runs", 1, kMaxGateRuns, o.runs));
  o.routing = top.string("routing", o.routing);
  o.seed = static_cast<uint64_t>(top.integer("seed", 0, INT64_MAX, static_cast<int64_t>(o.seed)));
  o.baseline = top.string("baseline", o.baseline);
  const auto& configs = top.array("configs");
  top.finish();
  o.configs.clear();
  for (size_t i = 0; i < configs.size(); ++i) {
    JsonFields c(configs[i], fmt::format("--matrix '{}': configs[{}]", path, i));
    GateConfig g;
    g.backend = c.string("backend", g.backend);
    g.ranks = static_cast<int>(c.integer("ranks", 1, 4096, g.ranks));
    g.dtype = parse_dtype(c.string("dtype", "bf16"));
    g.minibatch = static_cast<int>(c.integer("minibatch", 0, kMaxGateTokens, 0));
    g.comm_sms = static_cast<int>(c.integer("comm_sms", 1, 1024, 16));
    g.threads = static_cast<int>(c.integer("threads", 0, 1024, 0));
    g.dispatch = parse_direction(c.string("dispatch", "push"));
    g.combine = parse_direction(c.string("combine", "push"));
    c.finish();
    o.configs.push_back(g);
  }
  require(!o.configs.empty(), "--matrix '{}': \"configs\" must list at least one config", path);
}

namespace {

RunRequest make_request(const GateOptions& o, const GateConfig& c, const LayerSpec& base, const Routing& routing) {
  RunRequest q;
  q.spec = base;
  q.spec.dtype = c.dtype;
  q.spec.validate();
  q.config.ranks = c.ranks;
  require(c.ranks >= 1 && c.ranks <= 4096, "gate: ranks must be in [1, 4096], got {}", c.ranks);
  require(o.tokens % c.ranks == 0, "gate: global tokens ({}) must be divisible by R={}", o.tokens, c.ranks);
  q.config.tokens_per_rank = static_cast<int>(o.tokens / c.ranks);
  q.config.minibatch = c.minibatch;
  q.config.comm_sms_forward = q.config.comm_sms_backward = c.comm_sms;
  q.config.dispatch_forward = q.config.dispatch_backward = c.dispatch;
  q.config.combine_forward = q.config.combine_backward = c.combine;
  q.config.seed = o.seed;
  q.config.validate(q.spec);
  q.routing = routing;
  q.backward = o.backward;
  q.threads = c.threads;
  return q;
}

std::string safe_name(std::string s) {
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '.') ch = '_';
  return s;
}

}  // namespace

GateResult run_gate(const GateOptions& options, const ProgressFn& progress) {
  namespace fs = std::filesystem;
  GateResult res;
  res.options = options;
  res.provenance = collect_provenance();
  require(options.runs >= 1 && options.runs <= kMaxGateRuns, "--runs must be in [1, {}], got {}", kMaxGateRuns,
          options.runs);
  require(options.tokens >= 1 && options.tokens <= kMaxGateTokens, "--tokens must be in [1, {}], got {}",
          kMaxGateTokens, options.tokens);
  require(!options.configs.empty(), "gate: the matrix is empty");
  for (const auto& c : options.configs) make_backend(c.backend);  // bad names and parameters: an error, now
  const LayerSpec base = load_preset(options.preset);
  const Routing routing = make_routing(base, options.tokens, RoutingSource::parse(options.routing), options.seed);
  const std::string routing_text = RoutingSource::parse(options.routing).describe();

  std::string trace_dir = options.trace_dir;
  if (trace_dir.empty()) trace_dir = (fs::temp_directory_path() / fmt::format("calico-gate-{}", getpid())).string();
  fs::create_directories(trace_dir);

  // Baseline per dtype: the first config of the baseline backend (the matrix lists R=1 first by default).
  std::map<DType, size_t> baseline_index;
  for (size_t i = 0; i < options.configs.size(); ++i)
    if (options.configs[i].backend == options.baseline && !baseline_index.count(options.configs[i].dtype))
      baseline_index[options.configs[i].dtype] = i;
  for (DType d : {DType::bf16, DType::mxfp8})
    for (const auto& c : options.configs)
      if (c.dtype == d && !baseline_index.count(d)) {
        res.notes.push_back(
            fmt::format("no {} config of the baseline backend '{}' in the matrix: {} configs are only "
                        "compared with each other",
                        to_string(d), options.baseline, to_string(d)));
        break;
      }

  const int total = static_cast<int>(options.configs.size()) * options.runs;
  std::map<size_t, Trace> traces;
  std::map<DType, size_t> first_of_dtype;
  for (size_t i = 0; i < options.configs.size(); ++i) {
    const GateConfig& c = options.configs[i];
    GateEntry entry;
    entry.config = c;
    entry.trace_path = (fs::path(trace_dir) / (safe_name(c.label()) + fmt::format("-{}.h5", i))).string();
    const auto t0 = std::chrono::steady_clock::now();
    try {
      auto backend = make_backend(c.backend);
      const RunRequest q = make_request(options, c, base, routing);
      const int done0 = static_cast<int>(i) * options.runs;
      Trace t = run_trace(*backend, q, options.runs, routing_text, [&](int d, int, const std::string&) {
        if (progress && d < options.runs) progress(done0 + d, total, fmt::format("{} run {}", c.label(), d));
      });
      for (size_t r = 0; r < t.runs.size(); ++r)
        for (size_t k = 0; k < t.runs[r].ranks.size(); ++k)
          for (const auto& tensor : t.runs[r].ranks[k].tensors)
            check_tensor_schema(tensor, q.spec, q.config, fmt::format("{} run {} rank {}", c.label(), r, k));
      write_trace(entry.trace_path, t);
      traces[i] = read_trace(entry.trace_path);  // what is compared is what the trace holds
    } catch (const Error& e) {
      entry.error = e.what();
    }
    entry.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    res.entries.push_back(entry);
    if (!traces.count(i)) continue;
    const Trace& t = traces[i];
    res.comparisons.push_back({"runs", c.label(), c.label(), diff_within(t, options.tolerance)});
    // Against the baseline of its dtype (or, without one, the first config of that dtype).
    auto bi =
        baseline_index.count(c.dtype) ? baseline_index.at(c.dtype) : first_of_dtype.emplace(c.dtype, i).first->second;
    if (bi != i && traces.count(bi)) {
      GateComparison cmp{"baseline", options.configs[bi].label(), c.label(),
                         diff_traces(traces[bi], t, options.tolerance)};
      res.comparisons.push_back(std::move(cmp));
    }
  }
  if (progress) progress(total, total, "done");
  if (!options.keep_traces && options.trace_dir.empty() && res.passed()) {
    std::error_code ec;
    fs::remove_all(trace_dir, ec);
    for (auto& e : res.entries) e.trace_path += " (removed)";
  }
  return res;
}

ProgressFn terminal_progress(const std::string& title) {
  const bool tty = isatty(STDERR_FILENO);
  return [tty, title, last = -1](int done, int total, const std::string& what) mutable {
    if (done == last && tty) return;
    last = done;
    if (tty) {
      const int width = 30, fill = total > 0 ? done * width / total : width;
      std::fprintf(stderr, "\r%s [%s%s] %d/%d %-40.40s", title.c_str(), std::string(fill, '#').c_str(),
                   std::string(width - fill, '.').c_str(), done, total, what.c_str());
      if (done >= total) std::fprintf(stderr, "\n");
    } else {
      std::fprintf(stderr, "%s: %d/%d %s\n", title.c_str(), done, total, what.c_str());
    }
    std::fflush(stderr);
  };
}

}  // namespace calico::harness
