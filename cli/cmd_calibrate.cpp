// `calico calibrate`: simulates the DESIGN 4 microbenchmark scenarios, fits the free parameters of a topology
// to the stored measurements, reports the error per scenario, and optionally writes the fitted topology.
#include <cstdio>
#include <fstream>

#include "calico/error.h"
#include "calico/simulator.h"
#include "calico/files.h"
#include "command.h"

namespace {

struct Options {
  std::string topology = "h200x2", measurements, write;
  bool check_only = false;
};

int run(const Options& o) {
  using namespace calico;
  const sim::Topology start = sim::load_topology(o.topology);
  const sim::CalibrationData data = sim::load_calibration(o.measurements.empty() ? start.name : o.measurements);
  std::printf("%-16s %8s %10s %10s %10s %8s\n", "scenario", "x", "measured", "before", "after", "error");
  sim::CalibrationResult fit;
  if (o.check_only) {
    fit.fitted = start;
    for (const auto& m : data.measurements) fit.predicted.push_back(sim::simulate_measurement(start, m));
  } else {
    fit = sim::calibrate(start, data);
  }
  double worst = 0;
  for (size_t i = 0; i < data.measurements.size(); ++i) {
    const auto& m = data.measurements[i];
    const double before = sim::simulate_measurement(start, m), err = fit.predicted[i] / m.value - 1.0;
    worst = std::max(worst, std::abs(err));
    const std::string name = m.scenario.rfind("hybridep", 0) == 0 ? fmt::format("{} EP{}", m.scenario, m.ranks)
                                                                  : m.scenario;
    std::printf("%-16s %8g %10.3f %10.3f %10.3f %+7.2f%%\n", name.c_str(), m.x, m.value, before,
                fit.predicted[i], 100 * err);
  }
  std::printf("max |error| %.2f%%\n", 100 * worst);
  if (!o.check_only) {
    std::printf("fitted parameters:\n");
    for (const auto& name : fit.free_parameters) {
      const auto json = sim::topology_to_json(fit.fitted);
      const auto pos = json.find("\"" + name + "\"");
      const auto v = json.find("\"value\":", pos);
      std::printf("  %-24s %s\n", name.c_str(), json.substr(v + 9, json.find(',', v) - v - 9).c_str());
    }
  }
  if (!o.write.empty()) {
    write_text_file(o.write, sim::topology_to_json(fit.fitted), "--write");  // temp + rename
    std::printf("wrote %s\n", o.write.c_str());
  }
  return 0;
}

calico::cli::Registrar calibrate(
    "calibrate", "Fit a topology's free parameters to measured microbenchmarks and report the error",
    [](CLI::App& sub) {
      auto o = std::make_shared<Options>();
      sub.footer("Scenarios: push_copy, pull_copy (GB/s vs CTAs), bidir_push, flag_round_trip (us), all_to_all (GB/s\n"
                 "vs MiB per rank); hybridep_dispatch / hybridep_combine (GB/s vs SMs at EP ranks; fits the TMA\n"
                 "NVLink parameters: --topology gb200-nvl72 --measurements gb200-hybridep).\n"
                 "Measurements: data/calibration/<topology>.json. Example:\n"
                 "  calico calibrate --topology h200x2 --write data/topologies/h200x2.json");
      sub.add_option("--topology", o->topology, "Topology to start from (name or JSON path)");
      sub.add_option("--measurements", o->measurements, "Calibration file (default data/calibration/<topology>.json)");
      sub.add_flag("--check", o->check_only, "Only simulate the scenarios with the topology as it is (no fit)");
      sub.add_option("--write", o->write, "Write the fitted topology JSON here");
      return [o] { return run(*o); };
    });

}  // namespace
