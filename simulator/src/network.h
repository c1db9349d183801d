// Fluid network model shared by the layer simulation and the calibration scenarios: flows driven by one GPU,
// spread over peers by fixed fractions, sharing per-direction GPU port capacity max-min fairly (progressive
// filling), each capped by its driver's injection limit. Integer picosecond clock; deterministic.
#pragma once

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
// 1/rate = 1/(sms * store rate) + 1/link (MODEL.md; fits the measured push curve within 2%).
inline double push_cap(const Topology& t, double sms, double link_scale, double gbps_per_sm = 0) {
  const double issue = sms * (gbps_per_sm > 0 ? gbps_per_sm : t.push_store_gbps_per_sm) * 1e-3;
  return 1.0 / (1.0 / issue + 1.0 / (t.link_bytes_per_ps() * link_scale));
}
// Injection cap of a pull (load) flow: Little's law, bytes in flight over the round trip.
inline double pull_cap(const Topology& t, double sms) {
  return sms * t.pull_bytes_in_flight_per_sm / (t.pull_rtt_ns() * kPsPerNs);
}
// NCCL all_to_all of rows[src*ranks+dst] rows of `row` bytes, starting at t0; returns its end (baseline.cpp).
Time nccl_all_to_all(const Topology& topo, double link_scale, int ranks, const std::vector<int64_t>& rows, double row,
                     Time t0, std::vector<double>* egress, double* remote_bytes, double* local_bytes);

}  // namespace calico::sim
