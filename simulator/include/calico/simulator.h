// The NVLink bandwidth and signalling simulator (DESIGN 4): an event-driven, deterministic timing model of one
// MoE layer (dispatch, gate/up GEMM, SwiGLU, down GEMM, combine; forward and backward) on R GPUs.
//
// Time is an integer number of picoseconds. Communication is a fluid model: each communication task is one
// flow driven by one GPU (push: the sender stores, pull: the receiver loads) whose bytes go to all peers in
// proportion to the traffic matrix; flows share per-direction link capacity max-min fairly and are capped by
// the per-SM injection limits of the driving GPU. Compute is a tile model on the compute SMs. See
// simulator/MODEL.md for the equations and simulator/TRACE_FORMAT.md for the trace and timeline formats.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "calico/schedule.h"
#include "calico/spec.h"

namespace calico::sim {

using Time = int64_t;  // picoseconds
constexpr double kPsPerNs = 1000.0;

// A machine: GPUs, SMs, links, latencies, injection limits, memory and tensor-core rates. Loaded from
// data/topologies/NAME.json where every number carries its source.
struct Topology {
  std::string name, description, gpu;
  int max_gpus = 2;
  int sms = 132;
  int hops = 1;                   // link traversals between two GPUs (1 direct, 2 through a switch)
  double link_gbps = 450;         // raw NVLink bandwidth per direction per GPU, GB/s (1e9 B/s)
  double link_efficiency = 0.83;  // fraction of raw bandwidth SM-driven traffic reaches
  double reverse_overhead = 0.04; // bytes of acks/requests on the reverse direction per data byte
  double hop_latency_ns = 250;    // one link traversal (plus switch) one way
  double fence_ns = 60, flag_write_ns = 20, poll_ns = 100;  // signalling costs per message
  double push_store_gbps_per_sm = 190;        // store issue rate of one SM pushing to a peer
  double pull_bytes_in_flight_per_sm = 16384; // loads one SM keeps in flight (1024 threads x 16 B)
  double remote_mem_latency_ns = 600;         // remote load service time, added to the wire round trip
  double hbm_gbps = 4800, local_copy_gbps = 3900;
  double bf16_tflops = 989, gemm_efficiency = 0.77, mxfp8_speedup = 2.0;
  int tile_m = 128, tile_n = 256;
  double task_overhead_ns = 500;  // per compute task: flag acquire, tile scheduler, pipeline fill
  double kernel_launch_ns = 5000; // per kernel in the non-overlapped baseline
  double nccl_launch_ns = 6000, nccl_channel_bytes = 2097152;  // NCCL all_to_all model (MODEL.md)
  double nccl_channel_gbps = 165;  // copy rate of one NCCL channel (through its FIFO buffers)
  // --- second cut (issue 11); optional in the JSON (defaults below, recorded as such in `sources`) ---
  // Transfer engines (MODEL.md "Transfer engines"): LSU = SM load/store (push_store_gbps_per_sm and
  // pull_bytes_in_flight_per_sm above), TMA = bulk async copies, CE = the copy engine driven by the host.
  double lsu_issue_ns = 0;                     // per peer per task: address setup of a load/store loop
  double tma_push_gbps_per_sm = 600;           // bulk-store issue rate of one SM
  double tma_pull_bytes_in_flight_per_sm = 65536;  // bulk loads one SM keeps in flight
  double tma_issue_ns = 200;                   // per peer per task: descriptor + mbarrier setup
  double tma_completion_ns = 300;              // cp.async.bulk wait_group / mbarrier wait before a flag
  double ce_gbps = 395;                        // copy-engine rate per GPU (does not use SMs)
  double ce_launch_ns = 4000;                  // per peer per task: one host-issued memcpy each
  double stage_fixed_ns = 0;                   // per communication task: setup, barrier, first byte
  double sm_peer_overhead = 0;                 // per doubling of peers: fractional loss of per-SM engine rate
  double port_peer_overhead = 0;               // per doubling of peers: port bytes per data byte above 1
  double poll_lanes = 32;                      // flags one polling warp checks per poll
  // --- third cut (optional) ---
  // Rate at which one SM's GEMM tile leaves after its main loop (the epilogue's stores), GB/s; 0: not
  // priced (the tile is its main loop only). MODEL.md, "Compute".
  double epilogue_store_gbps_per_sm = 0;
  std::map<std::string, std::string> sources;  // parameter -> where its value comes from

  double link_bytes_per_ps() const { return link_gbps * link_efficiency * 1e-3; }
  double one_way_signal_ns() const { return fence_ns + flag_write_ns + hops * hop_latency_ns + poll_ns; }
  double pull_rtt_ns() const { return 2.0 * hops * hop_latency_ns + remote_mem_latency_ns; }
  void validate() const;
};

std::vector<std::string> topology_names();              // data/topologies/*.json
Topology load_topology(const std::string& name_or_path);
Topology parse_topology_json(const std::string& json_text, const std::string& origin);
std::string topology_to_json(const Topology& t);         // same format, for calibrate --write

// Per-minibatch traffic and work, derived from a Schedule (or generated for ranks that do not divide E).
// Rank r owns experts [floor(r*E/R), floor((r+1)*E/R)).
struct Traffic {
  int ranks = 0, experts = 0, minibatches = 0;
  int64_t tokens_per_rank = 0, minibatch_tokens = 0;
  std::vector<int> expert_owner;          // [E]
  std::vector<int64_t> dispatch_tokens;   // [M][R src][R dst] unique (token, destination rank) pairs
  std::vector<int64_t> combine_rows;      // [M][R owner][R home] (token, k) rows sent back
  std::vector<int64_t> expert_rows;       // [M][E]
  std::vector<int64_t> home_tokens;       // [M][R] tokens of each rank in the minibatch

  int64_t dispatch(int m, int s, int d) const { return dispatch_tokens[(size_t(m) * ranks + s) * ranks + d]; }
  int64_t combine(int m, int s, int d) const { return combine_rows[(size_t(m) * ranks + s) * ranks + d]; }
  int64_t rows(int m, int e) const { return expert_rows[size_t(m) * experts + e]; }
};

Traffic traffic_from_schedule(const Schedule& schedule, int minibatch_tokens);
// Uniform routing (each token picks K distinct experts uniformly) from a counter-based generator; any R.
Traffic traffic_uniform(const LayerSpec& spec, int ranks, int64_t tokens_per_rank, int64_t minibatch_tokens,
                        uint64_t seed);
// Any routing of the global batch (make_routing: uniform, zipf:S, adversarial, file), for any R (ownership
// floor(r*E/R) as above; no R | E requirement).
Traffic traffic_from_routing(const LayerSpec& spec, const Routing& routing, int ranks, int64_t tokens_per_rank,
                             int64_t minibatch_tokens);

enum class Pass : uint8_t { forward, backward };
// How a communication task moves bytes (MODEL.md "Transfer engines") and how its completion is signalled
// (MODEL.md "Signalling protocols").
enum class Engine : uint8_t { lsu, tma, ce };
enum class Signal : uint8_t { per_message, per_block, barrier };
const char* to_string(Engine e);
const char* to_string(Signal s);
Engine parse_engine(const std::string& s);
Signal parse_signal(const std::string& s);
struct Transfer {
  Engine engine = Engine::tma;
  Signal signal = Signal::per_block;
};
enum class Stage : uint8_t { dispatch, gate_up, swiglu, down, combine, shared };
const char* to_string(Pass p);
const char* to_string(Stage s);
Stage parse_stage(const std::string& s);

struct SimOptions {
  bool forward = true, backward = true;
  bool trace = false;  // keep per-task slices for a Perfetto trace
  double link_scale = 1.0;  // multiplies link bandwidth (what-if studies and sanity tests)
  // Engine and completion protocol per pass and stage: transfer[pass][0 dispatch, 1 combine].
  Transfer transfer[2][2];
  bool hbm_sharing = true;  // communication bytes take HBM bandwidth from the compute tasks they overlap
  void set_transfer(Transfer t) {
    for (auto& p : transfer)
      for (auto& k : p) k = t;
  }
};

// One interval of work on one GPU track (trace and timeline comparison).
struct Slice {
  int gpu;
  std::string track;  // "compute", "comm dispatch", "comm combine", "nvlink out", "nvlink in"
  Pass pass;
  Stage stage;
  int minibatch;
  Time start, end;
};

struct StageStats {
  Pass pass;
  Stage stage;
  double mean_ps = 0, max_ps = 0;  // per GPU: summed task durations (comm: ready -> delivered)
};

struct SimResult {
  Time layer_ps = 0, forward_ps = 0, backward_ps = 0;
  Time exposed_comm_ps = 0;           // per pass: pass time - busiest GPU's compute time, summed
  double remote_bytes = 0, local_bytes = 0;
  double link_util_mean = 0, link_util_max = 0;  // egress bytes / (effective capacity * layer time)
  std::vector<StageStats> stages;
  std::vector<Slice> slices;          // only with SimOptions::trace
  int64_t flow_events = 0;            // network rate recomputations (a cost measure)
};

// Checks the run against the topology (ranks <= GPUs, comm SMs < SMs, minibatch divides nothing required).
// Documented limits of a simulated run: tokens per rank and tokens over all ranks.
constexpr int kMaxSimTokensPerRank = 1 << 20;
constexpr int64_t kMaxSimTotalTokens = int64_t{1} << 24;
constexpr int64_t kMaxSimMinibatches = 4096;  // per rank and pass
void validate_run(const Topology& topo, const LayerSpec& spec, const RunConfig& config);
SimResult simulate(const Topology& topo, const LayerSpec& spec, const RunConfig& config, const Traffic& traffic,
                   const SimOptions& options = {});
// The non-overlapped reference schedule: NCCL all_to_all, then all GEMMs on all SMs, then all_to_all back,
// separate kernels with a launch each, one minibatch.
SimResult simulate_baseline(const Topology& topo, const LayerSpec& spec, const RunConfig& config,
                            const Traffic& traffic, const SimOptions& options = {});
std::string format_result(const SimResult& r, const Topology& topo);

void write_perfetto_trace(const std::string& path, const SimResult& result, const Topology& topo);

// Measured per-task timeline of the megakernel (TRACE_FORMAT.md), compared per stage with a simulation.
struct TimelineRecord {
  int rank = 0, sm = 0;
  std::string role;  // "comm" or "compute"
  Pass pass = Pass::forward;
  Stage stage = Stage::dispatch;
  int minibatch = 0;
  int64_t start_ns = 0, end_ns = 0;
};
std::vector<TimelineRecord> read_timeline(const std::string& path);
struct StageComparison {
  Pass pass;
  Stage stage;
  double predicted_us, measured_us;  // mean over ranks of summed per-minibatch spans
};
struct TimelineComparison {
  std::vector<StageComparison> stages;
  // Each pass from its first start to its last end (index: Pass): with stages that interleave (the
  // megakernel's backward walk) the stage spans overlap, and these are what compares like with like.
  double predicted_pass_us[2] = {0, 0}, measured_pass_us[2] = {0, 0};
  double predicted_layer_us = 0, measured_layer_us = 0;
};
TimelineComparison compare_timeline(const SimResult& predicted, const std::vector<TimelineRecord>& measured);
std::string format_comparison(const TimelineComparison& c);

// Calibration (DESIGN 4): microbenchmark scenarios simulated with the same network model.
struct Measurement {
  // push_copy, pull_copy, bidir_push, flag_round_trip, all_to_all (2 GPUs, LSU probes); hybridep_dispatch,
  // hybridep_combine (R GPUs: HybridEP's TMA push dispatch / TMA pull combine kernels, MODEL.md)
  std::string scenario;
  double x = 0;          // CTAs (SMs) for copies and hybridep, MiB per rank for all_to_all, unused otherwise
  double value = 0;      // GB/s, or microseconds for flag_round_trip
  std::string unit, source;
  int ranks = 2;         // EP size (hybridep scenarios)
};
struct CalibrationData {
  std::string topology;
  std::vector<Measurement> measurements;
};
CalibrationData load_calibration(const std::string& name_or_path);
double simulate_measurement(const Topology& topo, const Measurement& m);  // same unit as m.value
struct CalibrationResult {
  Topology fitted;
  std::vector<double> predicted;  // per measurement, after the fit
  double max_rel_error = 0, rms_rel_error = 0;
  std::vector<std::string> free_parameters;
};
// Fits the free parameters (link efficiency, push store rate, remote load latency, reverse overhead, hop
// latency, NCCL launch and channel size) by deterministic pattern search on the sum of squared relative errors.
CalibrationResult calibrate(const Topology& start, const CalibrationData& data);

// Sweep over the configuration space; each point is an independent deterministic simulation.
struct SweepSpace {
  std::vector<int> comm_sms, minibatches;
  std::vector<Direction> dispatch_dirs{Direction::push, Direction::pull};
  std::vector<Direction> combine_dirs{Direction::push, Direction::pull};
  Transfer transfer;            // engine and protocol for every stage
  std::string routing = "uniform";  // make_routing source (uniform uses traffic_uniform)
};
struct SweepPoint {
  int comm_sms, minibatch;
  Direction dispatch_fwd, combine_fwd, dispatch_bwd, combine_bwd;
  Time layer_ps, forward_ps, backward_ps, exposed_comm_ps;
  double link_util_mean;
};
std::vector<SweepPoint> run_sweep(const Topology& topo, const LayerSpec& spec, const RunConfig& base,
                                  const SweepSpace& space, uint64_t routing_seed,
                                  const std::function<void(size_t, size_t)>& progress = {}, size_t limit = 0);
void write_sweep_csv(const std::string& path, const std::vector<SweepPoint>& points);
// The same columns as the CSV, one 1-D dataset per column in the root group (strings fixed-length), for h5py.
void write_sweep_hdf5(const std::string& path, const std::vector<SweepPoint>& points);

}  // namespace calico::sim
