// `calico sweep`: explores communication SMs x minibatch x push/pull per stage and pass, prints the best
// configurations (overall and per pass), writes the whole table as CSV and a plot (scripts/plot_sweep.py).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "calico/files.h"
#include "calico/process.h"
#include "command.h"
#include "sim_cli.h"

namespace {

struct Options {
  calico::cli::SimProblem problem;
  std::vector<int> comm_sms{8, 16, 24, 32, 48, 64};
  std::vector<int> minibatches;
  std::string out = "sweep.csv", plot, hdf5;
  calico::cli::TransferOptions transfer;
  bool no_plot = false, baseline = false;
  size_t limit = 0;
};

std::string point_str(const calico::sim::SweepPoint& p) {
  using calico::to_string;
  return fmt::format("comm_sms={:<3} minibatch={:<5} fwd dispatch={} combine={}  bwd dispatch={} combine={}", p.comm_sms,
                     p.minibatch, to_string(p.dispatch_fwd), to_string(p.combine_fwd), to_string(p.dispatch_bwd),
                     to_string(p.combine_bwd));
}

int run(const Options& o) {
  using namespace calico;
  check_output_path(o.out, "--out");  // before the work, not after it
  if (!o.no_plot && !o.plot.empty()) check_output_path(o.plot, "--plot");
  const sim::Topology topo = sim::load_topology(o.problem.topology);
  const LayerSpec spec = o.problem.spec();
  RunConfig base;
  base.ranks = o.problem.ranks;
  base.tokens_per_rank = o.problem.tokens;
  sim::SweepSpace space;
  space.routing = o.problem.routing;
  space.transfer = o.transfer.get();
  space.comm_sms = o.comm_sms;
  space.minibatches = o.minibatches;
  if (space.minibatches.empty())  // T, T/2, ... down to 64 tokens
    for (int mb = o.problem.tokens; mb >= 64 && space.minibatches.size() < 7; mb /= 2) space.minibatches.push_back(mb);
  if (space.minibatches.empty()) space.minibatches.push_back(o.problem.tokens);
  std::printf("sweep %s / %s, R=%d, T=%d: %zu comm-SM x %zu minibatch x 16 direction choices\n", topo.name.c_str(),
              spec.name.c_str(), base.ranks, base.tokens_per_rank, space.comm_sms.size(), space.minibatches.size());
  auto points = sim::run_sweep(topo, spec, base, space, o.problem.seed, [](size_t done, size_t total) {
    std::fprintf(stderr, "\r  pass simulations %zu / %zu", done, total);
    if (done == total) std::fprintf(stderr, "\n");
  }, o.limit);
  sim::write_sweep_csv(o.out, points);
  std::printf("table: %s (%zu configurations)\n", o.out.c_str(), points.size());
  if (!o.hdf5.empty()) {
    sim::write_sweep_hdf5(o.hdf5, points);
    std::printf("hdf5: %s (one dataset per CSV column)\n", o.hdf5.c_str());
  }
  auto by = [&](auto key) {
    return *std::min_element(points.begin(), points.end(), [&](const auto& a, const auto& b) { return key(a) < key(b); });
  };
  std::vector<sim::SweepPoint> sorted = points;
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.layer_ps < b.layer_ps; });
  std::printf("best configurations (layer = forward + backward):\n");
  for (size_t i = 0; i < std::min<size_t>(5, sorted.size()); ++i)
    std::printf("  %8.2f us  (fwd %.2f, bwd %.2f, exposed comm %.2f)  %s\n", sorted[i].layer_ps / 1e6,
                sorted[i].forward_ps / 1e6, sorted[i].backward_ps / 1e6, sorted[i].exposed_comm_ps / 1e6,
                point_str(sorted[i]).c_str());
  const auto f = by([](const auto& p) { return p.forward_ps; });
  const auto b = by([](const auto& p) { return p.backward_ps; });
  std::printf("best forward  %.2f us: comm_sms=%d minibatch=%d dispatch=%s combine=%s\n", f.forward_ps / 1e6,
              f.comm_sms, f.minibatch, to_string(f.dispatch_fwd), to_string(f.combine_fwd));
  std::printf("best backward %.2f us: comm_sms=%d minibatch=%d dispatch=%s combine=%s\n", b.backward_ps / 1e6,
              b.comm_sms, b.minibatch, to_string(b.dispatch_bwd), to_string(b.combine_bwd));
  if (o.baseline) {
    RunConfig c = base;
    c.minibatch = 0;
    const auto tr = o.problem.traffic(spec, c);
    const auto r = sim::simulate_baseline(topo, spec, c, tr);
    std::printf("non-overlapped all_to_all + GEMM baseline: %.2f us; best speedup %.3fx\n", r.layer_ps / 1e6,
                double(r.layer_ps) / double(sorted[0].layer_ps));
  }
  if (!o.no_plot) {
    const std::string png = o.plot.empty() ? std::filesystem::path(o.out).replace_extension(".png").string() : o.plot;
    const auto script = std::filesystem::path(scripts_dir()) / "plot_sweep.py";
    // An argument vector, never a shell line: file and topology names are data (issue 9).
    const std::vector<std::string> argv{"/usr/bin/python3", script.string(),
                                        fmt::format("--title={} {} R={} T={}", topo.name, spec.name, base.ranks,
                                                    base.tokens_per_rank),
                                        "--", o.out, png};
    const ProcessResult rc = run_process(argv, /*capture=*/true);
    require(rc.ok(), "sweep: plotting '{}' failed ({}); use --no-plot to skip\n{}", png,
            rc.error.empty() ? fmt::format("exit {}", rc.exit_code) : rc.error, rc.output);
    std::printf("plot: %s\n", png.c_str());
  }
  return 0;
}

calico::cli::Registrar sweep(
    "sweep", "Explore communication SMs x minibatch x push/pull on the simulator; CSV table + plot",
    [](CLI::App& sub) {
      auto o = std::make_shared<Options>();
      sub.footer("Example: calico sweep --topology gb300-nvl72 --preset deepseek-v3 --ranks 72 --tokens 4096 \\\n"
                 "           --out sweep.csv --baseline\n"
                 "Each point is forward + backward; directions vary per stage and pass (16 combinations). Runs\n"
                 "on OMP_NUM_THREADS threads; results do not depend on the thread count.");
      o->problem.add(sub);
      sub.add_option("--comm-sms", o->comm_sms, "Communication SM counts to try, each in [1, SMs-1]")->delimiter(',');
      sub.add_option("--minibatches", o->minibatches, "Minibatch sizes (default T, T/2, ... >= 64)")->delimiter(',');
      sub.add_option("--out", o->out, "CSV output path");
      sub.add_option("--hdf5", o->hdf5, "Also write the table as HDF5 (the CSV's columns, one dataset each)");
      o->transfer.add(sub);
      sub.add_option("--plot", o->plot, "PNG output path (default: the CSV path with .png)");
      sub.add_flag("--no-plot", o->no_plot, "Do not plot");
      sub.add_flag("--baseline", o->baseline, "Also report the speedup over the non-overlapped schedule");
      sub.add_option("--limit", o->limit, "Stop after this many configurations (0 = all)")->check(calico::cli::unsigned_value());
      return [o] { return run(*o); };
    });

}  // namespace
