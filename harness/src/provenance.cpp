// Provenance of a trace or report (git commit, host, CPU, device, library versions) and run_trace, which
// runs a backend N times into a Trace.
#include <fmt/format.h>
#include <hdf5.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>

#include "calico/harness.h"
#include "calico/process.h"
#include "calico/megakernel.h"

namespace calico::harness {
namespace {

// git through an argument vector (no shell); the output only when git succeeded.
std::string run_command(const std::vector<std::string>& argv) {
  const ProcessResult res = run_process(argv);
  std::string out = res.ok() ? res.output : std::string();
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

}  // namespace

Provenance collect_provenance(const std::string& command_line) {
  Provenance p;
  p.calico_version = CALICO_VERSION;
  std::string commit = run_command({"git", "-C", CALICO_SOURCE_DIR, "rev-parse", "HEAD"});
  if (commit.empty())
    commit = "unknown";
  else if (!run_command({"git", "-C", CALICO_SOURCE_DIR, "status", "--porcelain", "--untracked-files=no"}).empty())
    commit += "-dirty";
  p.git_commit = commit;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  p.host = host;
  p.cpu = fmt::format("{} ({} cores online)", cpu_model(), sysconf(_SC_NPROCESSORS_ONLN));
  p.device = gpu::device_count() > 0 ? gpu::device_description() : "cpu only (" + gpu::device_description() + ")";
#if defined(__clang__)
  p.compiler = fmt::format("clang {}", __clang_version__);
#elif defined(__GNUC__)
  p.compiler = fmt::format("gcc {}", __VERSION__);
#endif
  unsigned maj = 0, min = 0, rel = 0;
  H5get_libversion(&maj, &min, &rel);
  p.hdf5_version = fmt::format("{}.{}.{}", maj, min, rel);
  p.fmt_version = fmt::format("{}", FMT_VERSION);
  p.json_version =
      fmt::format("{}.{}.{}", NLOHMANN_JSON_VERSION_MAJOR, NLOHMANN_JSON_VERSION_MINOR, NLOHMANN_JSON_VERSION_PATCH);
  p.command_line = command_line;
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  p.created_utc = stamp;
  return p;
}

Trace run_trace(Backend& backend, const RunRequest& request, int runs, const std::string& routing_source,
                const ProgressFn& progress) {
  require(runs >= 1 && runs <= 1 << 16, "--runs must be in [1, 65536], got {}", runs);
  request.spec.validate();
  request.config.validate(request.spec);
  Trace t;
  t.backend = backend.name();
  t.routing_source = routing_source;
  t.spec = request.spec;
  t.config = request.config;
  t.routing = request.routing;
  t.backward = request.backward;
  t.provenance = collect_provenance();
  for (int r = 0; r < runs; ++r) {
    if (progress) progress(r, runs, fmt::format("{} run {}", backend.name(), r));
    RunResult result = backend.run(request);
    require(static_cast<int>(result.ranks.size()) == request.config.ranks,
            "backend {} returned {} ranks, the config has R={}", backend.name(), result.ranks.size(),
            request.config.ranks);
    t.runs.push_back(std::move(result));
  }
  if (progress) progress(runs, runs, fmt::format("{} done", backend.name()));
  return t;
}

}  // namespace calico::harness
