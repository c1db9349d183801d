// `calico gate`: the determinism gate. Runs a matrix of configs on one global batch, N runs each, writes a
// trace per config, demands bitwise identity across runs, ranks, configs and against the baseline backend,
// and writes Markdown, HTML (with plots) and JSON reports. Exit 0 pass, 1 any difference, 2 bad input.
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "calico/harness.h"
#include "calico/megakernel.h"
#include "command.h"

namespace {

template <typename T, typename F>
std::vector<T> split_list(const std::string& text, const char* what, F parse) {
  std::vector<T> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    calico::require(!item.empty(), "{}: empty item in '{}'", what, text);
    out.push_back(parse(item));
  }
  calico::require(!out.empty(), "{}: needs at least one value", what);
  return out;
}

int parse_rank(const std::string& s) {
  try {
    size_t used = 0;
    const int v = std::stoi(s, &used);
    if (used == s.size() && v >= 1) return v;
  } catch (...) {
  }
  throw calico::Error(fmt::format("--ranks: each value must be an integer >= 1, got '{}'", s));
}

calico::cli::Registrar gate_cmd("gate", "Run the determinism gate over a matrix of configs", [](CLI::App& app) {
  struct Opts {
    std::string backends, baseline = "reference", preset = "tiny", ranks = "1,2,4,8", dtypes = "bf16,mxfp8";
    std::string routing = "uniform", matrix, tolerance = "exact", report_dir = "reports", trace_dir, name;
    int64_t tokens = 64;
    int runs = 2;
    uint64_t seed = 1;
    bool keep = false, no_plots = false, forward_only = false, quiet = false;
  };
  auto o = std::make_shared<Opts>();
  app.footer(
      "Default matrix: each --backend over --ranks (R = 1, 2, 4, 8; those not dividing E or --tokens are dropped)\n"
      "and --dtype (bf16, mxfp8), --runs 2 each, all on the same global batch of --tokens tokens. Default\n"
      "backend: reference, plus megakernel when a GPU is present and the megakernel backend is built. Test\n"
      "backends: toy, faulty-bitflip[:inner=B:run=N:tensor=NAME:token=G:column=C], faulty-order (toy with d_w_down "
      "reduced per rank).\n"
      "Per config: every run must equal run 0 bit for bit, and (per dtype) the config must equal the first\n"
      "config of the --baseline backend. --matrix FILE (JSON) lists configs explicitly: {\"preset\", \"tokens\",\n"
      "\"runs\", \"routing\", \"seed\", \"baseline\", \"configs\": [{\"backend\", \"ranks\", \"dtype\", "
      "\"minibatch\",\n"
      "\"comm_sms\", \"threads\", \"dispatch\", \"combine\"}]}. Reports: REPORT_DIR/gate-NAME.{json,md,html,*.png}.\n"
      "Exit status: 0 all identical (or within --tolerance), 1 any difference or backend error, 2 bad input.");
  app.add_option("--backend,--backends", o->backends,
                 "comma-separated backends, e.g. reference,megakernel (default: reference [+ megakernel with a GPU])");
  app.add_option("--baseline", o->baseline, "backend every config is compared with")->capture_default_str();
  app.add_option("--preset", o->preset, "model preset (calico info lists them)")->capture_default_str();
  app.add_option("--tokens", o->tokens, "global tokens R*T in [1, 2^24], the same for every config")->capture_default_str();
  app.add_option("--ranks", o->ranks, "comma-separated EP sizes, each in [1, 4096]")->capture_default_str();
  app.add_option("--dtype", o->dtypes, "comma-separated: bf16, mxfp8")->capture_default_str();
  app.add_option("--runs", o->runs, "runs per config, in [1, 1000]")->capture_default_str();
  app.add_option("--routing", o->routing, "uniform, zipf:S, adversarial or a routing .h5")->capture_default_str();
  app.add_option("--seed", o->seed, "data and routing seed")->check(calico::cli::unsigned_value())->capture_default_str();
  app.add_option("--matrix", o->matrix, "JSON matrix file (replaces the default matrix)")->check(CLI::ExistingFile);
  app.add_option("--tolerance", o->tolerance, "exact, ulp:N or rel:X")->capture_default_str();
  app.add_option("--report-dir", o->report_dir, "where reports go")->capture_default_str();
  app.add_option("--trace-dir", o->trace_dir, "where traces go (default: a temporary folder, removed on success)");
  app.add_option("--name", o->name, "report name: gate-NAME.* (default: the UTC date and time)");
  app.add_flag("--keep-traces", o->keep, "keep the traces of a passing gate");
  app.add_flag("--no-plots", o->no_plots, "skip the matplotlib plots (HTML without images)");
  app.add_flag("--forward-only", o->forward_only, "run the forward pass only");
  app.add_flag("-q,--quiet", o->quiet, "no progress output");
  return [o]() {
    using namespace calico::harness;
    GateOptions g;
    g.preset = o->preset;
    g.tokens = o->tokens;
    g.runs = o->runs;
    g.routing = o->routing;
    g.seed = o->seed;
    g.baseline = o->baseline;
    g.tolerance = Tolerance::parse(o->tolerance);
    g.report_dir = o->report_dir;
    g.trace_dir = o->trace_dir;
    g.name = o->name;
    g.keep_traces = o->keep;
    g.plots = !o->no_plots;
    g.backward = !o->forward_only;
    calico::require(o->tokens >= 1 && o->tokens <= (1 << 24), "--tokens must be in [1, {}], got {}", 1 << 24,
                    o->tokens);
    if (!o->matrix.empty()) {
      load_matrix_file(o->matrix, g);
    } else {
      std::vector<std::string> backends;
      if (!o->backends.empty()) {
        backends = split_list<std::string>(o->backends, "--backend", [](const std::string& s) { return s; });
      } else {
        backends = {"reference"};
        if (calico::gpu::device_count() > 0 && backend_available("megakernel")) backends.push_back("megakernel");
      }
      const auto spec = calico::load_preset(o->preset);
      std::vector<int> ranks;
      for (int r : split_list<int>(o->ranks, "--ranks", parse_rank))
        if (spec.experts % r == 0 && o->tokens % r == 0) ranks.push_back(r);
      calico::require(!ranks.empty(), "--ranks: none of '{}' divides E={} and --tokens={}", o->ranks, spec.experts,
                      o->tokens);
      g.configs = default_matrix(backends, ranks, split_list<calico::DType>(o->dtypes, "--dtype", calico::parse_dtype));
      // The baseline's configs come first in each dtype group so that its R=1 run is the yardstick.
      bool has_baseline = false;
      for (const auto& b : backends) has_baseline |= b == g.baseline;
      if (!has_baseline) {
        auto extra = default_matrix({g.baseline}, {ranks.front()},
                                    split_list<calico::DType>(o->dtypes, "--dtype", calico::parse_dtype));
        g.configs.insert(g.configs.begin(), extra.begin(), extra.end());
      }
    }
    {  // the report folder must exist (or be creatable) before the gate runs, not after it
      std::error_code ec;
      std::filesystem::create_directories(g.report_dir, ec);
      calico::require(std::filesystem::is_directory(g.report_dir), "--report-dir: cannot create the folder '{}'{}",
                      g.report_dir, ec ? ": " + ec.message() : "");
    }
    GateResult r = run_gate(g, o->quiet ? ProgressFn{} : terminal_progress("gate"));
    r.provenance.command_line =
        o->matrix.empty()
            ? fmt::format(
                  "calico gate --backend {} --baseline {} --preset {} --tokens {} --ranks {} --dtype {} --runs {}",
                  o->backends.empty() ? "(default)" : o->backends, o->baseline, o->preset, o->tokens, o->ranks,
                  o->dtypes, o->runs)
            : fmt::format("calico gate --matrix {}", o->matrix);
    if (calico::gpu::device_count() > 0 && !backend_available("megakernel"))
      r.notes.push_back("a GPU is present but the megakernel backend is not built yet: it is not in the matrix");
    write_gate_reports(r);
    int differing = 0;
    for (const auto& c : r.comparisons) differing += !c.diff.passes();
    for (const auto& e : r.entries)
      if (!e.error.empty()) std::printf("ERROR  %s: %s\n", e.config.label().c_str(), e.error.c_str());
    for (const auto& c : r.comparisons)
      for (const auto& d : c.diff.tensors)
        if (!d.passes())
          std::printf("DIFF   %s vs %s (%s): %s: %s\n", c.a.c_str(), c.b.c_str(), c.kind.c_str(), d.tensor.c_str(),
                      d.has_first ? d.location().c_str() : d.note.c_str());
    std::printf("gate %s: %zu configs x %d runs, %zu comparisons, %d differ\nreports: %s %s %s\n",
                r.passed() ? "PASSED" : "FAILED", r.entries.size(), g.runs, r.comparisons.size(), differing,
                r.markdown_path.c_str(), r.html_path.c_str(), r.json_path.c_str());
    return r.passed() ? 0 : 1;
  };
});
}  // namespace
