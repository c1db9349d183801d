// Run under `mpirun -np R`: the MPI driver (one process per rank, MPI_Alltoallv between the reference's stage
// functions) must produce, in one trace written by rank 0, exactly the tensors of the in-process reference
// at the same R, and the same global outputs as the in-process reference at R = 1.
// Usage: mpirun -np R mpi_trace_check OUT.h5     (exit 0 = identical)
#include <cstdio>

#include "calico/data.h"
#include "calico/harness.h"
#include "calico/reference.h"

int main(int argc, char** argv) {
  using namespace calico;
  using namespace calico::harness;
  if (argc != 2) {
    std::fprintf(stderr, "usage: mpirun -np R %s OUT.h5\n", argv[0]);
    return 2;
  }
  try {
    const MpiContext mc = mpi_init();
    RunRequest q;
    q.spec = load_preset("tiny");
    q.config.ranks = mc.size;
    q.config.tokens_per_rank = 16 / mc.size;
    q.config.seed = 5;
    q.routing = make_routing(q.spec, 16, RoutingSource::parse("uniform"), q.config.seed);
    RunResult mpi = mpi_run_reference(q);
    if (mc.rank != 0) return 0;
    Trace t{"reference-contract(mpi)", "uniform", q.spec, q.config, q.routing, true, collect_provenance(), {mpi}};
    write_trace(argv[1], t);
    const Trace got = read_trace(argv[1]);
    auto in_process = [&](int ranks) {
      RunRequest r = q;
      r.config.ranks = ranks;
      r.config.tokens_per_rank = 16 / ranks;
      auto b = ref::make_reference_backend(ref::ReferenceMode::contract);
      return run_trace(*b, r, 1, "uniform");
    };
    const DiffReport same_r = diff_traces(in_process(mc.size), got), r1 = diff_traces(in_process(1), got);
    std::printf("MPI (%d processes) vs in-process R=%d:\n%s", mc.size, mc.size, format_diff(same_r, false).c_str());
    std::printf("MPI (%d processes) vs in-process R=1:\n%s", mc.size, format_diff(r1, false).c_str());
    int compared = 0;
    for (const auto& d : same_r.tensors) compared += !d.skipped && d.comparable;
    std::printf("%d tensors compared at equal R\n", compared);
    return same_r.equal() && r1.equal() && compared >= 19 ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "mpi_trace_check: error: %s\n", e.what());
    return 2;
  }
}
