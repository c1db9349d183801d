// Calico harness: HDF5 traces of backend runs, a bitwise diff across runs, ranks and traces, and the
// determinism gate that runs a matrix of configs and writes Markdown/HTML/JSON reports (DESIGN 5).
// The trace layout is documented in harness/TRACE_FORMAT.md; h5py or h5dump read it without this code.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "calico/backend.h"
#include "calico/error.h"
#include "calico/spec.h"
#include "calico/tensor.h"

namespace calico::harness {

// ---------------------------------------------------------------------------------------------------------
// Traces
// ---------------------------------------------------------------------------------------------------------
inline constexpr int kTraceFormatVersion = 1;
inline constexpr size_t kTraceHeaderBytes = 512;  // the checksummed CALICO-TRACE header (an HDF5 user block)

// Where and with what a trace was made; stored as root attributes.
struct Provenance {
  std::string calico_version, git_commit, host, cpu, device, compiler, hdf5_version, fmt_version, json_version,
      command_line, created_utc;
};
Provenance collect_provenance(const std::string& command_line = "");

struct Trace {
  std::string backend;         // Backend::name()
  std::string routing_source;  // RoutingSource::describe() or free text
  LayerSpec spec;
  RunConfig config;  // config.seed is the data seed
  Routing routing;   // global [R*T, K]
  bool backward = true;
  Provenance provenance;
  std::vector<RunResult> runs;  // [runs]; each holds [R] TensorSets
};

// Writes `trace` to `path` through a temporary file in the same folder and an atomic rename: a crash
// leaves either the previous file or none, never half a trace. Throws calico::Error.
void write_trace(const std::string& path, const Trace& trace);
// Rewrites the header block of a trace file for its current contents (the writer's last step; also for
// tools and tests that edit a trace with the HDF5 API and want it accepted again).
void seal_trace_file(const std::string& path);
void seal_trace_image(std::vector<uint8_t>& image);  // the same for an in-memory file
// Reads and validates a whole trace (schema, shapes, types, per-tensor digests). Any problem, including a
// truncated or non-HDF5 file, is a calico::Error naming the file and the object; never a crash.
Trace read_trace(const std::string& path);
// Same, from an in-memory file image (used by the fuzz target).
Trace read_trace_image(const void* data, size_t size, const std::string& origin = "<memory>");

// Runs `backend` `runs` times on `request` and collects a trace (provenance filled in).
using ProgressFn = std::function<void(int done, int total, const std::string& what)>;
Trace run_trace(Backend& backend, const RunRequest& request, int runs, const std::string& routing_source,
                const ProgressFn& progress = {});

// How rank-local tensors combine into the global tensor (backend.h): sharded along axis 0 (most),
// replicated on every rank (shared-expert weights ws_*), or a per-rank partial sum (d_ws_*).
enum class Placement : uint8_t { sharded, replicated, partial };
Placement placement_of(const std::string& tensor_name);
// Axis names for reports: {"token","column"} for [T,H]-like tensors, {"expert","row","column"} for weights.
std::vector<std::string> axis_names(const std::string& tensor_name, size_t ndim);

// ---------------------------------------------------------------------------------------------------------
// Diff
// ---------------------------------------------------------------------------------------------------------
struct Tolerance {
  enum class Kind : uint8_t { exact, ulp, rel } kind = Kind::exact;
  double value = 0;
  static Tolerance parse(const std::string& text);  // "exact", "ulp:N" (N >= 0 integer), "rel:X" (X >= 0)
  std::string describe() const;
};

inline constexpr int kUlpBins = 66;  // 0: ulp 0; b in 1..64: ulp in [2^(b-1), 2^b); 65: NaN involved
std::string ulp_bin_label(int bin);

struct TensorDiff {
  std::string tensor, type;
  std::string a_label, b_label;  // e.g. "A run 0", "B run 1"
  int run_a = 0, run_b = 0;
  std::vector<int64_t> shape;  // global shape compared
  bool comparable = true;      // false: shapes/types differ or missing (counts as a difference)
  bool skipped = false;        // not compared by definition (partial sums across different R)
  std::string note;
  int64_t elements = 0, mismatches = 0, outside_tolerance = 0;
  uint64_t max_ulp = 0;
  double max_abs = 0, max_rel = 0;
  // First mismatch in row-major order of the global tensor, located in trace B's partition (the one tested).
  bool has_first = false;
  int first_rank = -1;
  std::vector<int64_t> first_index;  // index within that rank's tensor
  uint64_t first_bits_a = 0, first_bits_b = 0;
  std::vector<int64_t> ulp_histogram = std::vector<int64_t>(kUlpBins, 0);  // over mismatching elements
  // Where mismatches sit: global row (all axes but the last flattened) and column (last axis).
  std::map<int64_t, int64_t> by_row, by_column;
  std::vector<std::pair<int64_t, int64_t>> sample;  // first mismatches as (global row, column), capped
  int64_t rows = 0, columns = 0;

  bool equal() const { return skipped || (comparable && mismatches == 0); }
  bool passes() const { return skipped || (comparable && outside_tolerance == 0); }
  std::string location() const;  // "run 1, rank 0, token 3, column 5"
};

struct DiffReport {
  std::string a_name, b_name;
  Tolerance tolerance;
  std::vector<TensorDiff> tensors;
  bool equal() const;
  bool passes() const;
  int64_t mismatching_tensors() const;
};

// Compares run i of `a` with run i of `b` for every common tensor (global tensors: ranks concatenated, so
// traces with different R compare). Tensors present in only one trace are reported as not comparable.
DiffReport diff_traces(const Trace& a, const Trace& b, const Tolerance& tol = {}, int run_a = -1, int run_b = -1);
// Within one trace: every run against run 0, and every rank's copy of replicated tensors against rank 0's.
DiffReport diff_within(const Trace& a, const Tolerance& tol = {});
// One tensor pair (already global); `partition` = rows of axis 0 per rank, for locating mismatches.
TensorDiff compare_tensors(const Tensor& a, const Tensor& b, const Tolerance& tol,
                           const std::vector<int64_t>& partition);

std::string format_diff(const DiffReport& report, bool verbose);  // human-readable text for the CLI

// ---------------------------------------------------------------------------------------------------------
// Backends by name: "reference", "toy", "faulty-bitflip[:k=v...]", "faulty-order"
// ---------------------------------------------------------------------------------------------------------
// toy: a small self-contained MoE-shaped layer following the canonical order (fast; for harness tests).
// faulty-bitflip: wraps `inner` (default reference) and flips the lowest bit of element (token, column) of
//   `tensor` (default out) in run `run` (default 1, counting from 0); token is global (g = r*T + t).
// faulty-order: the toy layer with one reduction order changed: d_w_down summed per source rank first, then
//   over ranks (equal to the canonical order at R = 1 only). A reversed top-k order in the combine would not
//   do: the bf16 rounding of out and d_x hides it almost always; the fp32 weight gradients show it.
std::unique_ptr<Backend> make_backend(const std::string& name);
std::vector<std::string> backend_names();
bool backend_available(const std::string& name);

// ---------------------------------------------------------------------------------------------------------
// MPI: one process per EP rank (built when CMake finds MPI; CALICO_HAVE_MPI is then defined for users)
// ---------------------------------------------------------------------------------------------------------
struct MpiContext {
  int rank = 0, size = 1;
};
bool launched_by_mpi();  // the environment of mpirun (OpenMPI, PMI, PMIx)
MpiContext mpi_init();   // MPI_Init once (finalised at exit); rank and size of MPI_COMM_WORLD
// The contract reference with one rank per process: the reference's stage functions with MPI_Alltoallv
// between them. Needs R == MPI size. Rank 0 returns every rank's tensors (gathered); others return none.
RunResult mpi_run_reference(const RunRequest& request);

// ---------------------------------------------------------------------------------------------------------
// Gate
// ---------------------------------------------------------------------------------------------------------
struct GateConfig {
  std::string backend = "reference";
  int ranks = 1;
  DType dtype = DType::bf16;
  int minibatch = 0, comm_sms = 16, threads = 0;
  Direction dispatch = Direction::push, combine = Direction::push;
  std::string label() const;
};

// Documented limits of the gate (the CLI and --matrix files are held to the same ones).
constexpr int64_t kMaxGateTokens = int64_t{1} << 24;  // global tokens R*T
constexpr int kMaxGateRuns = 1000;

struct GateOptions {
  std::string preset = "tiny";
  int64_t tokens = 64;  // global tokens R*T, the same for every config
  int runs = 2;
  std::string routing = "uniform";
  uint64_t seed = 1;
  std::string baseline = "reference";  // backend whose R=1 (first) config per dtype is the baseline
  Tolerance tolerance;
  std::vector<GateConfig> configs;
  std::string report_dir = "reports", trace_dir, name;  // trace_dir empty: a temporary folder
  bool keep_traces = false, plots = true;
  std::string plot_script;  // empty: the in-tree scripts/plot_report.py
  bool backward = true;
};
// Default matrix: each backend over R = 1, 2, 4, 8 (those dividing E), BF16 and MXFP8.
std::vector<GateConfig> default_matrix(const std::vector<std::string>& backends, const std::vector<int>& ranks,
                                       const std::vector<DType>& dtypes);
// Matrix file (JSON): {"preset", "tokens", "runs", "routing", "seed", "baseline",
//   "configs": [{"backend","ranks","dtype","minibatch","comm_sms","threads","dispatch","combine"}, ...]}
void load_matrix_file(const std::string& path, GateOptions& options);

struct GateEntry {
  GateConfig config;
  std::string trace_path;
  double seconds = 0;
  std::string error;  // the backend threw: counts as a failure
};
struct GateComparison {
  std::string kind;  // "runs" (within one config), "baseline" (against the baseline)
  std::string a, b;
  DiffReport diff;
};
struct GateResult {
  GateOptions options;
  Provenance provenance;
  std::vector<GateEntry> entries;
  std::vector<GateComparison> comparisons;
  std::vector<std::string> notes;
  std::string json_path, markdown_path, html_path;
  std::vector<std::string> plot_paths;
  bool passed() const;
};

GateResult run_gate(const GateOptions& options, const ProgressFn& progress = {});
// Writes JSON and Markdown, then HTML + PNG plots through the plot script (a plain HTML without plots when
// python3/matplotlib is missing, with a note saying so).
void write_gate_reports(GateResult& result);

// Progress on stderr: a bar on a terminal, plain lines otherwise.
ProgressFn terminal_progress(const std::string& title);

}  // namespace calico::harness
