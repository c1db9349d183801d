// The megakernel MoE layer on one GPU (host API). One persistent launch per pass (forward; backward), after
// a small schedule kernel that builds the canonical expert-major order on the device; results follow the
// numerical contract bit for bit (calico/reference.h). Written for R ranks (experts split contiguously);
// this build runs R = 1. Hopper (sm_90a) runs; other devices get a clear refusal.
//
// Use: construct (validates and allocates), set_inputs, forward(), backward(), synchronize() (throws
// calico::Error naming the stage, task, counter, expected and seen value if a wait timed out), get_outputs.
// forward()/backward() only enqueue work; time them with the *_ms helpers (CUDA events).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "calico/spec.h"

namespace calico::gpu {

struct MoeOptions {
  // Dispatch (RunConfig's dispatch directions). pull: the compute CTAs gather token rows straight into their
  // shared-memory stages, with no expert-major copy and no data-movement CTA (R = 1). push: data-movement
  // CTAs write the rows into expert-major buffers first (the path peers use).
  //   pull_forward: the x rows of the forward (the gate/up tiles of column 0 also write their gathered rows
  //                 to the expert-major copy that the backward's dW_gate/dW_up read);
  //   pull_backward: the d_y = bf16(w * d_out) rows of the backward (the d_h tiles of column 0 also write
  //                  them to the expert-major copy that the later d_h columns and dW_down read).
  // Defaults: the fastest measured on the H200 (reports/megakernel-2026-12-01.md, sixth pass): push in both
  // passes, 16 data-movement CTAs each (they move rows with bulk copies, then join the compute walk).
  bool pull_forward = false, pull_backward = false;
  int comm_ctas_forward = 16;   // data-movement CTAs of the forward launch (RunConfig::comm_sms_forward), >= 1
  int comm_ctas_backward = 16;  // with push, >= 1. With the dynamic walk, data-movement CTAs join the compute
                                // walk once their dispatch is done (static walk: forward, they run the tail)
  // The task walk (moe/persistent.cuh): dynamic (a ticket counter: a CTA takes the next task when ready) or
  // static (CTA c takes tasks c, c + n, ...). Results never depend on it.
  bool dynamic_walk = true;
  // Weight gradients: true (the contract, calico/reference.h): every chain starts from the carried-in fp32
  // accumulator (d_W += ...). false: from +0, overwriting the buffers (d_W = ...), the same bits as
  // accumulating into zeroed buffers without reading them: for the first micro-batch of a step, and the
  // like-for-like benchmark against kernels that write fresh gradients.
  bool accumulate_weight_grads = true;
  int ctas = 0;                 // CTAs per launch (persistent: at most one per SM); 0 = every SM
  int combine_tokens = 16;      // tokens per combine task (the tail's granularity; results never depend on it)
#ifdef NDEBUG
  double wait_timeout_s = 10.0;  // bound of every spin-wait
#else
  double wait_timeout_s = 2.0;   // debug builds: a lost signal shows sooner
#endif
  // Debug: the compute task (index in the pass's task walk) whose completion signal is skipped; -1 = none.
  int lose_signal_forward = -1, lose_signal_backward = -1;
  // Debug: warpgroup 0 never gives warpgroup 1 its go on a staggered weight-gradient tile (overwrite mode,
  // moe/backward.cu consume_wgrad), so that wait must end in a named error.
  bool lose_wgrad_go = false;
  bool profile = false;  // sum SM cycles per stage (waits, main loops, epilogues) for profile_report()
  void validate() const;
};

// Host arrays in the layouts of calico/backend.h (bf16 as uint16 bit patterns). Shared-expert weights may be
// null when I_s = 0.
struct MoeInputs {
  const uint16_t *x = nullptr, *d_out = nullptr;
  const int32_t* topk_experts = nullptr;
  const float* router_weights = nullptr;
  const uint16_t *w_gate = nullptr, *w_up = nullptr, *w_down = nullptr;
  const uint16_t *ws_gate = nullptr, *ws_up = nullptr, *ws_down = nullptr;
};
struct MoeOutputs {  // any pointer may be null (not copied)
  uint16_t *out = nullptr, *d_x = nullptr;
  float* d_router_weights = nullptr;
  float *d_w_gate = nullptr, *d_w_up = nullptr, *d_w_down = nullptr;
  float *d_ws_gate = nullptr, *d_ws_up = nullptr, *d_ws_down = nullptr;
};

// One record of the per-task timeline (MoeLayer::record_timeline): what a CTA ran and when. Stages: forward
// dispatch, gate_up, shared_gate_up, down, shared_down, combine (the tail, one record per CTA); backward
// dispatch (d_y), d_h, d_x_k, dw_down, dw_gate, dw_up (each also shared_...), router_grad, d_x_combine.
struct TimelineEvent {
  int pass = 0;  // 0 forward, 1 backward
  int cta = 0;   // CTAs [0, comm) dispatch first, then (dynamic walk) take tasks like the others
  std::string stage;
  int task = -1;                   // index in the pass's task walk; -1 for dispatch and tail records
  int expert = -1, m = -1, n = -1;  // expert (-1: shared or none), tile row and column (side task: m = its index)
  int64_t start_ns = 0, end_ns = 0;  // the GPU's global timer (one clock for every SM): from the task's
                                     // first full stage to its stores issued
};

class MoeLayer {
 public:
  // Throws calico::Error for shapes the kernels cannot tile (naming the argument), mxfp8 (not yet on the
  // device), a missing or non-Hopper GPU, or too little device memory.
  MoeLayer(const LayerSpec& spec, int64_t tokens, const MoeOptions& options);
  ~MoeLayer();
  MoeLayer(const MoeLayer&) = delete;
  MoeLayer& operator=(const MoeLayer&) = delete;

  void set_inputs(const MoeInputs& in);  // uploads, zeroes the weight-gradient accumulators
  // Benchmarks: the routing from the host, every activation and weight drawn on the device (uniform, the
  // variance of calico/reference.h's inputs; not the reference's values), accumulators zeroed.
  void set_random_inputs(const int32_t* topk_experts, const float* router_weights, uint64_t seed);
  void zero_weight_grads();
  void forward();   // enqueue the schedule + the forward launch
  void backward();  // enqueue the backward launch (after forward)
  void synchronize();
  void get_outputs(const MoeOutputs& out);

  float forward_ms(int iterations);           // median over iterations (CUDA events, L2 flushed before each)
  float forward_backward_ms(int iterations);
  std::vector<float> last_times_ms() const;   // each iteration of the last *_ms call, in the order they ran
  std::vector<float> last_clocks_mhz() const; // and the SM clock each ran at (CTA 0's cycles per ns; power cap)
  size_t device_bytes() const;                // workspace + inputs + outputs
  std::string profile_report();               // with MoeOptions::profile: where the cycles went, per pass
  std::string describe() const;               // grid, roles, tiles
  // Per-task timeline: while on, every launch records its tasks (a timer read and an integer atomic per task;
  // the same bits); timeline() returns the last forward and backward launches' records, by pass and start.
  void record_timeline(bool on);
  std::vector<TimelineEvent> timeline();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// For tests: the SiLU lookup tables the epilogues use (gemm/epilogue.cuh), built on this GPU: entries
// [0, 65536) are calico_silu / calico_silu_grad of each bf16 bit pattern, entry 65536 is silu(clamp_limit)
// (grad: 0, never read). silu: the forward's table; silu_of_pairs and grad: the backward's (silu, grad) pairs.
void silu_tables_for_test(float clamp_limit, std::vector<float>& silu, std::vector<float>& silu_of_pairs,
                          std::vector<float>& grad);

// Timeline files (host code, no GPU needed). Both take times relative to the earliest record and throw
// calico::Error naming the record for a stage they do not know or an end before its start; the file appears
// only when complete. write_timeline_trace: a Chrome/Perfetto trace (ui.perfetto.dev), a process per pass and a
// track per CTA. write_timeline_records: the simulator's calico-timeline-v1 JSON (simulator/TRACE_FORMAT.md,
// `calico simulate --compare-timeline`), each record under the simulator's stage name; router_grad has none
// there and is left out. Returns the number of records written.
size_t write_timeline_trace(const std::string& path, const std::vector<TimelineEvent>& events, const std::string& title);
size_t write_timeline_records(const std::string& path, const std::vector<TimelineEvent>& events);
// Per pass: the launch's span, how busy its CTAs were, and per stage the records, time per CTA, per record,
// and when the stage's first record started and its last ended.
std::string timeline_summary(const std::vector<TimelineEvent>& events);
// A pass's span (us) from its first record's start to its last record's end; 0 when it has no records.
double timeline_span_us(const std::vector<TimelineEvent>& events, int pass);
// The simulator's stage (dispatch, gate_up, down, combine, shared) of a timeline stage, or "" when it has none.
std::string simulator_stage(const std::string& stage, int pass);

// Checks that the megakernel can run this layer (spec, tokens) and throws calico::Error naming what not.
void validate_megakernel_layer(const LayerSpec& spec, int64_t tokens);

}  // namespace calico::gpu
