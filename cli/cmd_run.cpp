// `calico run`: one MoE layer (forward + backward) on a backend, printing the spec, the config, the time per
// stage and a digest per output tensor. The option set and the request building are plain functions so
// other subcommands (trace writing, gates) can reuse them.
#include <cstdio>
#include <future>
#include <iterator>
#include <vector>

#include "calico/core.h"
#include "calico/files.h"
#include "calico/harness.h"
#include "calico/reference.h"
#include "command.h"

namespace calico::cli {

namespace {

// `calico run` without --preset: the tiny CI shape, embedded so it works without the data directory.
constexpr const char* kEmbeddedTiny = R"({"name": "tiny", "hidden": 64, "intermediate": 96, "experts": 16,
  "top_k": 4, "shared_intermediate": 32})";

struct RunOptions {
  std::string backend = "reference";
  std::string preset;  // empty: embedded tiny
  int tokens = 64;     // per rank
  int ranks = 1;
  std::string dtype = "bf16";
  std::string routing = "uniform";
  uint64_t seed = 1;
  std::string mode = "contract";
  int threads = 0;
  double capacity = 0.0;
  std::string mma = "hopper-bf16";
  std::string scale_rule = "rceil";
  double clamp = 0.0;
  bool forward_only = false;
  int minibatch = 0;    // tokens per rank per minibatch (0 = all)
  int comm_sms = 16;    // communication (data-movement) SMs, forward and backward
  std::string dispatch = "push";  // dispatch (and combine) direction of both passes
  std::string weight_grads = "accumulate";  // megakernel: accumulate | overwrite (same bits, other kernel path)
  int runs = 1;         // runs written to --out (harness)
  std::string out;      // HDF5 trace path (harness/TRACE_FORMAT.md); empty = none
};

void add_run_options(CLI::App& sub, RunOptions& o) {
  sub.add_option("--backend", o.backend, "Backend that runs the layer: reference | megakernel (one GPU, R = 1)")
      ->capture_default_str();
  sub.add_option("--preset", o.preset, "Model preset from data/presets (default: the embedded 'tiny' shape)");
  sub.add_option("--tokens", o.tokens, "Tokens per rank T, in [1, 2^24]")->capture_default_str();
  sub.add_option("--ranks", o.ranks, "Expert-parallel ranks R in [1, 4096] (must divide E; emulated in-process)")
      ->capture_default_str();
  sub.add_option("--dtype", o.dtype,
                 "bf16 or mxfp8 (GEMM operands quantised to MXFP8; Hopper path unless --mma blackwell-mxfp8)")
      ->capture_default_str();
  sub.add_option("--routing", o.routing, "uniform | zipf:S (S > 0) | adversarial | FILE.h5 (/routing/...)")
      ->capture_default_str();
  sub.add_option("--seed", o.seed, "Seed of the routing and the layer inputs")->check(calico::cli::unsigned_value())->capture_default_str();
  sub.add_option("--mode", o.mode, "contract (bit-exact numerical contract) or float64 (real-number check)")
      ->capture_default_str();
  sub.add_option("--threads", o.threads, "OpenMP threads in [0, 1024] (0 = runtime default); results do not depend on it")
      ->capture_default_str();
  sub.add_option("--capacity", o.capacity,
                 "Capacity factor in [0, 4096]: rows per rank = ceil(F*T*K); 0 = fit the routing")
      ->capture_default_str();
  sub.add_option("--mma", o.mma,
                 "Tensor-core model of the GEMMs: hopper-bf16 | blackwell-bf16 | blackwell-mxfp8 (with --dtype\n"
                 "mxfp8: the Blackwell MXFP8 path, e4m3 + E8M0 scales straight into tcgen05 kind::mxf8f6f4's model)")
      ->capture_default_str();
  sub.add_option("--scale-rule", o.scale_rule, "MXFP8 scale rule: rceil | ocp-floor")->capture_default_str();
  sub.add_option("--clamp", o.clamp, "SwiGLU clamp limit L > 0 (0 = the preset's, none for most)");
  sub.add_flag("--forward-only", o.forward_only, "Skip the backward pass");
  sub.add_option("--minibatch", o.minibatch, "Tokens per rank per minibatch in [0, T] (0 = all T); results do not depend on it")
      ->capture_default_str();
  sub.add_option("--comm-sms", o.comm_sms, "Communication SMs per GPU in [1, 1024], both passes (megakernel: data-movement CTAs)")
      ->capture_default_str();
  sub.add_option("--dispatch", o.dispatch,
                 "Dispatch direction push | pull, both passes (megakernel at R = 1: pull = the compute CTAs gather "
                 "token rows themselves, no data-movement CTAs; push = --comm-sms CTAs dispatch first); results do "
                 "not depend on it")
      ->capture_default_str();
  sub.add_option("--weight-grads", o.weight_grads,
                 "Megakernel weight-gradient path: accumulate (read the zeroed accumulators) | overwrite (chains\n"
                 "from +0, the staggered epilogues); results do not depend on it")
      ->capture_default_str();
  sub.add_option("--runs", o.runs, "Runs recorded in the --out trace, in [1, 10000] (each one a full layer run)")->capture_default_str();
  sub.add_option("--out", o.out, "Write an HDF5 trace of every run, rank and tensor (harness/TRACE_FORMAT.md)");
  sub.footer(
      "Example: calico run --preset qwen3-30b-a3b --tokens 4096 --ranks 1 --threads 2\n"
      "The global batch (R*T tokens), its routing and every input are functions of the seed alone, so the\n"
      "global digests of out, d_x, d_router_weights and d_w_* are the same for every --ranks and --threads.\n"
      "--out FILE.h5 writes every run's inputs and outputs per rank as an HDF5 trace (compare with calico diff).\n"
      "Under mpirun -np R each process runs one rank (MPI_Alltoallv between the stages); rank 0 writes --out.");
}

RunRequest make_request(const RunOptions& o) {
  RunRequest req;
  req.spec = o.preset.empty() ? parse_layer_spec_json(kEmbeddedTiny, "embedded tiny") : load_preset(o.preset);
  req.spec.dtype = parse_dtype(o.dtype);
  req.spec.mma = parse_mma_model(o.mma);
  req.spec.scale_rule = parse_scale_rule(o.scale_rule);
  require(o.clamp >= 0.0, "--clamp must be >= 0 (0 = none), got {}", o.clamp);
  if (o.clamp > 0) req.spec.swiglu_limit = static_cast<float>(o.clamp);
  req.spec.validate();
  req.config.ranks = o.ranks;
  req.config.tokens_per_rank = o.tokens;
  req.config.capacity_factor = o.capacity;
  req.config.seed = o.seed;
  req.config.minibatch = o.minibatch;
  req.config.comm_sms_forward = req.config.comm_sms_backward = o.comm_sms;
  require(o.dispatch == "push" || o.dispatch == "pull", "--dispatch must be push or pull, got '{}'", o.dispatch);
  req.config.dispatch_forward = req.config.dispatch_backward = parse_direction(o.dispatch);
  require(o.weight_grads == "accumulate" || o.weight_grads == "overwrite",
          "--weight-grads must be accumulate or overwrite, got '{}'", o.weight_grads);
  req.config.overwrite_weight_grads = o.weight_grads == "overwrite";
  require(o.tokens >= 1, "--tokens must be >= 1, got {}", o.tokens);
  require(o.ranks >= 1, "--ranks must be >= 1, got {}", o.ranks);
  require(req.spec.experts % o.ranks == 0, "--ranks must divide the preset's experts E={}, got {}",
          req.spec.experts, o.ranks);
  req.config.validate(req.spec);
  req.routing = make_routing(req.spec, req.config.total_tokens(), RoutingSource::parse(o.routing), o.seed);
  req.backward = !o.forward_only;
  req.threads = o.threads;
  return req;
}

// FNV-1a over the rank-concatenated bytes: the digest of the global tensor (same as calico::digest of it).
uint64_t global_digest(const RunResult& r, const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const auto& set : r.ranks)
    for (uint8_t b : set.find(name)->bytes) {
      h ^= b;
      h *= 0x100000001b3ull;
    }
  return h;
}

// --out: the run above is run 0; runs 1..N-1 go through the same backend; one trace, written atomically.
void write_run_trace(const RunOptions& o, const RunRequest& req, ref::ReferenceMode mode, const RunResult& first) {
  auto backend = ref::make_reference_backend(mode);
  const std::string routing = RoutingSource::parse(o.routing).describe();
  harness::Trace trace;
  if (o.runs > 1) {
    trace = harness::run_trace(*backend, req, o.runs - 1, routing, harness::terminal_progress("runs"));
  } else {
    trace = harness::Trace{backend->name(), routing, req.spec, req.config, req.routing, req.backward,
                           harness::collect_provenance(), {}};
  }
  trace.runs.insert(trace.runs.begin(), first);
  trace.provenance.command_line = fmt::format("calico run --preset {} --tokens {} --ranks {} --dtype {} --mma {} "
                                              "--scale-rule {} --routing {} --seed {} --mode {} --runs {}",
                                              o.preset.empty() ? "(embedded tiny)" : o.preset, o.tokens, o.ranks,
                                              o.dtype, o.mma, o.scale_rule, o.routing, o.seed, o.mode, o.runs);
  harness::write_trace(o.out, trace);
  std::printf("trace:   %s (%d runs x %d ranks)\n", o.out.c_str(), o.runs, req.config.ranks);
}

#if defined(CALICO_HAVE_MPI)
// Under `mpirun -np R`: one process per rank (harness MPI driver: the reference's stage functions with
// MPI_Alltoallv between them); rank 0 gathers every rank's tensors, prints the summary and writes --out.
int run_mpi(RunOptions o) {
  const harness::MpiContext mc = harness::mpi_init();
  require(o.ranks == 1 || o.ranks == mc.size, "--ranks must equal mpirun -np ({}) or be left at 1, got {}", mc.size,
          o.ranks);
  require(o.mode == "contract", "under mpirun only --mode contract runs, got '{}'", o.mode);
  o.ranks = mc.size;
  const RunRequest req = make_request(o);
  harness::Trace trace{"reference-contract(mpi)", RoutingSource::parse(o.routing).describe(), req.spec, req.config,
                       req.routing, req.backward, harness::collect_provenance(), {}};
  for (int run = 0; run < o.runs; ++run) {
    RunResult r = harness::mpi_run_reference(req);
    if (mc.rank == 0) trace.runs.push_back(std::move(r));
  }
  if (mc.rank != 0) return 0;
  std::printf("spec:    %s\nconfig:  %s\nbackend: reference-contract over MPI, %d processes, %d runs\n",
              req.spec.describe().c_str(), req.config.describe().c_str(), mc.size, o.runs);
  for (const char* name : {"out", "d_x", "d_router_weights", "d_w_gate", "d_w_up", "d_w_down"})
    if (trace.runs[0].ranks[0].find(name))
      std::printf("%-18s %016llx\n", name, static_cast<unsigned long long>(global_digest(trace.runs[0], name)));
  if (!o.out.empty()) {
    harness::write_trace(o.out, trace);
    std::printf("trace:   %s (%d runs x %d ranks)\n", o.out.c_str(), o.runs, mc.size);
  }
  return 0;
}
#endif

void print_digests(const RunResult& result) {
  std::printf("\noutput             type  global shape        digest (FNV-1a of the rank-concatenated bytes)\n");
  static const char* kOutputs[] = {"out",      "d_x",       "d_router_weights", "d_w_gate", "d_w_up",
                                   "d_w_down", "d_ws_gate", "d_ws_up",          "d_ws_down"};
  // FNV-1a is one serial chain per tensor (about 1 ns per byte): the tensors are hashed concurrently, one
  // thread each (at deepseek-v3's size 45 GB of weight gradients in 9 tensors of which 3 hold 15 GB each).
  std::vector<std::future<uint64_t>> digests;
  for (const char* name : kOutputs)
    digests.push_back(result.ranks[0].find(name) ? std::async(std::launch::async, [&result, name] {
      return global_digest(result, name);
    }) : std::future<uint64_t>{});
  for (size_t i = 0; i < std::size(kOutputs); ++i) {
    const char* name = kOutputs[i];
    const Tensor* t = result.ranks[0].find(name);
    if (!t) continue;
    std::string shape = std::to_string(t->shape[0] * static_cast<int64_t>(result.ranks.size()));
    for (size_t i = 1; i < t->shape.size(); ++i) shape += "x" + std::to_string(t->shape[i]);
    std::printf("%-18s %-5s %-19s %016llx%s\n", name, to_string(t->type), shape.c_str(),
                static_cast<unsigned long long>(digests[i].get()),
                is_partition_invariant(name) ? "" : "  (per-rank partial sums: depends on R)");
  }
}

// Any backend other than the reference (the megakernel): the same request, digests and trace.
int run_backend_command(const RunOptions& o) {
  require(o.mode == "contract", "--mode {} is a reference mode; --backend {} computes the contract", o.mode, o.backend);
  const RunRequest req = make_request(o);
  auto backend = harness::make_backend(o.backend);
  std::printf("spec:    %s\nconfig:  %s\nrouting: %s\nbackend: %s\n", req.spec.describe().c_str(),
              req.config.describe().c_str(), RoutingSource::parse(o.routing).describe().c_str(),
              backend->name().c_str());
  const std::string routing = RoutingSource::parse(o.routing).describe();
  harness::Trace trace = harness::run_trace(*backend, req, o.runs, routing, harness::terminal_progress("runs"));
  print_digests(trace.runs.front());
  if (!o.out.empty()) {
    trace.provenance.command_line =
        fmt::format("calico run --backend {} --preset {} --tokens {} --routing {} --seed {} --runs {}", o.backend,
                    o.preset.empty() ? "(embedded tiny)" : o.preset, o.tokens, o.routing, o.seed, o.runs);
    harness::write_trace(o.out, trace);
    std::printf("trace:   %s (%d runs x %d ranks)\n", o.out.c_str(), o.runs, req.config.ranks);
  }
  return 0;
}

int run_command(const RunOptions& o) {
  require(o.runs >= 1 && o.runs <= 10000, "--runs must be in [1, 10000], got {}", o.runs);
#if defined(CALICO_HAVE_MPI)
  if (harness::launched_by_mpi()) return run_mpi(o);
#endif
  if (o.backend != "reference") return run_backend_command(o);
  const ref::ReferenceMode mode = ref::parse_reference_mode(o.mode);
  if (!o.out.empty()) check_output_path(o.out, "--out");  // before the work, not after it
  const RunRequest req = make_request(o);
  std::printf("spec:    %s\nconfig:  %s\nrouting: %s\nbackend: reference-%s, threads %d\n", req.spec.describe().c_str(),
              req.config.describe().c_str(), RoutingSource::parse(o.routing).describe().c_str(), ref::to_string(mode),
              o.threads);
  ref::StageTimes times;
  const RunResult result = ref::run_reference(req, mode, &times);
  if (!o.out.empty()) write_run_trace(o, req, mode, result);
  double total = 0;
  std::printf("\nstage                      seconds\n");
  for (const auto& [stage, s] : times) {
    std::printf("%-26s %8.3f\n", stage.c_str(), s);
    total += s;
  }
  std::printf("%-26s %8.3f\n", "total", total);
  print_digests(result);
  return 0;
}

Registrar run("run", "Run one MoE layer (forward + backward) on a backend and print digests", [](CLI::App& sub) {
  auto o = std::make_shared<RunOptions>();
  add_run_options(sub, *o);
  return [o] { return run_command(*o); };
});

}  // namespace

}  // namespace calico::cli
