// `calico diff A.h5 [B.h5]`: bitwise comparison of traces (every common tensor, run by run, ranks
// concatenated so traces with different R compare), or of the runs and rank replicas inside one trace.
// Exit 0 only when equal (or within the tolerance asked for), 1 when different, 2 on bad input.
#include <cstdio>
#include <fstream>

#include "calico/harness.h"
#include "command.h"

namespace {
calico::cli::Registrar diff_cmd("diff", "Compare traces bit for bit (runs, ranks, tensors)", [](CLI::App& app) {
  struct Opts {
    std::vector<std::string> files;
    std::string tolerance = "exact";
    bool verbose = false;
  };
  auto o = std::make_shared<Opts>();
  app.footer(
      "With one trace: every run is compared with run 0, and every rank's copy of the replicated shared-expert\n"
      "weights with rank 0's. With two: run i of A with run i of B for every common tensor; ranks are\n"
      "concatenated along axis 0 first, so traces made with different EP sizes R compare (the shared expert's\n"
      "per-rank partial weight gradients d_ws_* are skipped when R differs). For each differing tensor it prints\n"
      "the mismatch count, max ULP distance, max abs/rel error, the first mismatch as (run, rank, token,\n"
      "column) with both bit patterns, and a ULP histogram (bins 0, 1, 2-3, 4-7, ...; NaN).\n"
      "Exit status: 0 equal (or within --tolerance), 1 different, 2 bad input or unreadable trace.");
  app.add_option("traces", o->files, "A.h5 [B.h5]")->required()->expected(1, 2)->check(CLI::ExistingFile);
  app.add_option("--tolerance", o->tolerance,
                 "exact (default), ulp:N (max ULP distance) or rel:X (max relative error)");
  app.add_flag("-v,--verbose", o->verbose, "also list equal and skipped tensors");
  return [o]() {
    using namespace calico::harness;
    const Tolerance tol = Tolerance::parse(o->tolerance);
    const Trace a = read_trace(o->files[0]);
    DiffReport rep;
    if (o->files.size() == 1) {
      rep = diff_within(a, tol);
    } else {
      const Trace b = read_trace(o->files[1]);
      rep = diff_traces(a, b, tol);
    }
    std::printf("A: %s (%s, %s, %zu runs)\n", o->files[0].c_str(), a.backend.c_str(), a.config.describe().c_str(),
                a.runs.size());
    if (o->files.size() == 2) std::printf("B: %s\n", o->files[1].c_str());
    std::fputs(format_diff(rep, o->verbose).c_str(), stdout);
    return rep.passes() ? 0 : 1;
  };
});
}  // namespace
