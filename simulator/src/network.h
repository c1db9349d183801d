// Fluid network model shared by the layer simulation and the calibration scenarios: flows driven by one GPU,
// spread over peers by fixed fractions, sharing per-direction GPU port capacity max-min fairly (progressive
// filling), each capped by its driver's injection limit. Integer picosecond clock; deterministic.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "calico/simulator.h"

namespace calico::sim {

constexpr Time kNever = std::numeric_limits<Time>::max();

struct FlowSpec {
  int driver = 0;
  bool pull = false;            // pull: data moves peers -> driver; push: driver -> peers
  double bytes = 0;             // remote bytes
  double cap = 0;               // injection limit, bytes/ps
  std::vector<double> weights;  // [gpus] fraction of the bytes per peer, 0 at the driver, sums to 1
  double overhead = 1.0;        // port bytes per data byte (per-peer queue contention, MODEL.md)
};

class Network {
 public:
  // capacity: bytes/ps per direction per GPU; reverse: reverse-direction bytes per data byte.
  Network(int gpus, double capacity, double reverse);
  int add(FlowSpec spec, Time now);        // returns the flow id
  void set_cap(int id, double cap);
  int active() const { return static_cast<int>(active_.size()); }
  // Earliest time a flow finishes (kNever if none). Recomputes rates first if the flow set changed.
  Time next_completion();
  // Moves the clock to t (<= next_completion()) and returns the flows that finished, in id order (valid until
  // the next call).
  const std::vector<int>& advance(Time t);
  double rate(int id) const { return flows_[id].rate; }
  double egress_bytes(int gpu) const { return egress_bytes_[gpu]; }
  // Data bytes/ps leaving plus entering `gpu` at the current rates (its HBM reads and writes for
  // communication). Recomputes rates first if the flow set changed.
  double data_rate_at(int gpu);
  // Data bytes still to leave or enter `gpu` over the active flows.
  double data_remaining_at(int gpu) const;
  int64_t recomputes() const { return recomputes_; }
  Time now() const { return now_; }

 private:
  struct Flow {
    FlowSpec spec;
    std::vector<double> usage;  // [2*gpus] port usage per unit rate (network.cpp, usage_row)
    double remaining = 0, rate = 0;
    Time start = 0, finish = kNever;
  };
  void recompute();
  int gpus_;
  double capacity_, reverse_;
  std::vector<Flow> flows_;
  std::vector<int> active_;
  std::vector<double> egress_bytes_;
  bool dirty_ = false;
  Time now_ = 0;
  int64_t recomputes_ = 0;
  // scratch, sized 2*gpus: egress [0, gpus), ingress [gpus, 2*gpus); saturated_list_ holds port indices
  std::vector<double> used_, coef_;
  std::vector<double> unit_;  // [gpus][gpus] identity: a push flow's egress row
  std::vector<int> open_, still_, saturated_list_, done_;  // reused every call: no allocation per event
  std::vector<const double*> rows_;
  std::vector<double> moved_;
};

// Injection cap of a push (store) flow driven by `sms` SMs: store issue and link drain do not overlap, so
// 1/rate = 1/(sms * store rate) + overhead/link (MODEL.md; fits the measured push curve within 2%).
inline double push_cap(const Topology& t, double sms, double link_scale, double gbps_per_sm = 0,
                       double overhead = 1.0) {
  const double issue = sms * (gbps_per_sm > 0 ? gbps_per_sm : t.push_store_gbps_per_sm) * 1e-3;
  return 1.0 / (1.0 / issue + overhead / (t.link_bytes_per_ps() * link_scale));
}
// Injection cap of a pull (load) flow: Little's law, bytes in flight over the round trip.
inline double pull_cap(const Topology& t, double sms, double bytes_in_flight_per_sm = 0) {
  return sms * (bytes_in_flight_per_sm > 0 ? bytes_in_flight_per_sm : t.pull_bytes_in_flight_per_sm) /
         (t.pull_rtt_ns() * kPsPerNs);
}
// Per-peer contention (MODEL.md): a flow to P peers runs its SMs at 1/(1 + sm_peer_overhead log2 P) of the
// one-peer rate and takes 1 + port_peer_overhead log2 P port bytes per data byte (log2 1 = 0: one peer is
// the calibrated 2-GPU case; the logarithm saturates as per-peer queues fill, and fits HybridEP's EP8-36
// as well as a linear form while falling 19-23% from EP8 to EP64, the order of other public data).
inline double peer_log(int peers) { return peers > 1 ? std::log2(double(peers)) : 0.0; }
inline double sm_peer_factor(const Topology& t, int peers) { return 1.0 / (1.0 + t.sm_peer_overhead * peer_log(peers)); }
inline double port_overhead(const Topology& t, int peers) { return 1.0 + t.port_peer_overhead * peer_log(peers); }
// Injection cap of one flow by engine: LSU and TMA as above with their own per-SM figures (times the peer
// factor), the copy engine at its fixed rate whatever the SMs.
inline double engine_cap(const Topology& t, Engine e, bool pull, double sms, int peers, double link_scale) {
  const double f = sm_peer_factor(t, peers), o = port_overhead(t, peers);
  switch (e) {
    case Engine::lsu:
      return pull ? pull_cap(t, sms * f) : push_cap(t, sms * f, link_scale, 0, o);
    case Engine::tma:
      return pull ? pull_cap(t, sms * f, t.tma_pull_bytes_in_flight_per_sm)
                  : push_cap(t, sms * f, link_scale, t.tma_push_gbps_per_sm, o);
    case Engine::ce:
      return t.ce_gbps * 1e-3 * link_scale;
  }
  return 0;
}
// A receiver checking n flags: one warp per poll checks poll_lanes of them.
inline double fan_in_ns(const Topology& t, double n) {
  return n > 0 ? std::ceil(n / t.poll_lanes) * t.poll_ns : 0.0;
}
// Per-task setup before the first byte (MODEL.md): the stage's fixed cost, plus per-peer issue (descriptors,
// address setup) spread over the task's SMs, or one host-issued copy per peer for the copy engine.
inline double setup_ns(const Topology& t, Engine e, int peers, double sms) {
  sms = std::max(1.0, sms);
  switch (e) {
    case Engine::lsu: return t.stage_fixed_ns + std::ceil(peers / sms) * t.lsu_issue_ns;
    case Engine::tma: return t.stage_fixed_ns + std::ceil(peers / sms) * t.tma_issue_ns;
    case Engine::ce: return t.stage_fixed_ns + peers * t.ce_launch_ns;
  }
  return 0;
}
// Sender-side completion cost (MODEL.md "Signalling protocols"): wait for the engine's writes, then
//   per_message: one release flag per remote row (fence + write each), spread over the task's SMs;
//   per_block:   each block fences once and bumps one counter per peer (a warp writes poll_lanes at once);
//   barrier:     one fence, then the stage barrier.
// The copy engine's completion is a host-observed event plus a host flag write.
inline double sender_signal_ns(const Topology& t, Engine e, Signal s, int64_t rows_out, int peers, double sms) {
  sms = std::max(1.0, sms);
  if (e == Engine::ce) return t.ce_launch_ns;
  const double wait = e == Engine::tma ? t.tma_completion_ns : 0.0;
  switch (s) {
    case Signal::per_message: return wait + std::ceil(double(rows_out) / sms) * (t.fence_ns + t.flag_write_ns);
    case Signal::per_block: return wait + t.fence_ns + std::ceil(peers / t.poll_lanes) * t.flag_write_ns;
    case Signal::barrier: return wait + t.fence_ns;
  }
  return 0;
}

// NCCL all_to_all of rows[src*ranks+dst] rows of `row` bytes, starting at t0; returns its end (baseline.cpp).
Time nccl_all_to_all(const Topology& topo, double link_scale, int ranks, const std::vector<int64_t>& rows, double row,
                     Time t0, std::vector<double>* egress, double* remote_bytes, double* local_bytes);

}  // namespace calico::sim
