// Max-min fair sharing by progressive filling: all unfrozen flows grow at one rate until a port saturates or
// a flow reaches its injection cap; flows touching a saturated port freeze; repeat. A push flow from g uses
// g's egress (1) and each peer's ingress (weight), plus `reverse` of that on the opposite directions (acks);
// a pull flow mirrors it (requests go out, data comes in).
#include "network.h"

#include <algorithm>
#include <cmath>

namespace calico::sim {

Network::Network(int gpus, double capacity, double reverse)
    : gpus_(gpus), capacity_(capacity), reverse_(reverse), egress_bytes_(gpus, 0.0), used_(2 * gpus),
      coef_(2 * gpus), saturated_(2 * gpus) {}

int Network::add(FlowSpec spec, Time now) {
  Flow f;
  f.remaining = spec.bytes;
  f.spec = std::move(spec);
  f.start = now;
  flows_.push_back(std::move(f));
  active_.push_back(static_cast<int>(flows_.size()) - 1);
  dirty_ = true;
  return static_cast<int>(flows_.size()) - 1;
}

void Network::set_cap(int id, double cap) {
  if (flows_[id].spec.cap != cap) {
    flows_[id].spec.cap = cap;
    dirty_ = true;
  }
}

// Adds `scale` times flow f's per-port usage coefficients into `out`.
static inline void add_usage(const FlowSpec& s, double scale, double reverse, int gpus, double* out) {
  double* own_out = out + (s.pull ? gpus : 0);   // the driver's data direction
  double* peer_in = out + (s.pull ? 0 : gpus);   // the peers' data direction
  double* own_rev = out + (s.pull ? 0 : gpus);
  double* peer_rev = out + (s.pull ? gpus : 0);
  own_out[s.driver] += scale;
  own_rev[s.driver] += scale * reverse;
  const double* w = s.weights.data();
  const double sr = scale * reverse;
  for (int p = 0; p < gpus; ++p) {
    peer_in[p] += scale * w[p];
    peer_rev[p] += sr * w[p];
  }
}

static inline bool touches_saturated(const FlowSpec& s, int gpus, const char* sat) {
  const char* own_out = sat + (s.pull ? gpus : 0);
  const char* peer_in = sat + (s.pull ? 0 : gpus);
  const char* own_rev = sat + (s.pull ? 0 : gpus);
  const char* peer_rev = sat + (s.pull ? gpus : 0);
  if (own_out[s.driver] || own_rev[s.driver]) return true;
  for (int p = 0; p < gpus; ++p)
    if (s.weights[p] > 0 && (peer_in[p] || peer_rev[p])) return true;
  return false;
}

void Network::recompute() {
  ++recomputes_;
  std::fill(used_.begin(), used_.end(), 0.0);
  std::vector<int> open = active_;
  for (int id : open) flows_[id].rate = 0;
  const double eps = capacity_ * 1e-12;
  while (!open.empty()) {
    std::fill(coef_.begin(), coef_.end(), 0.0);
    double inc = std::numeric_limits<double>::infinity();
    for (int id : open) {
      add_usage(flows_[id].spec, 1.0, reverse_, gpus_, coef_.data());
      inc = std::min(inc, flows_[id].spec.cap - flows_[id].rate);
    }
    for (int j = 0; j < 2 * gpus_; ++j)
      if (coef_[j] > 0) inc = std::min(inc, (capacity_ - used_[j]) / coef_[j]);
    inc = std::max(inc, 0.0);
    for (int j = 0; j < 2 * gpus_; ++j) {
      used_[j] += inc * coef_[j];
      saturated_[j] = coef_[j] > 0 && capacity_ - used_[j] <= eps;
    }
    std::vector<int> still;
    for (int id : open) {
      Flow& f = flows_[id];
      f.rate += inc;
      if (f.spec.cap - f.rate > eps && !touches_saturated(f.spec, gpus_, saturated_.data())) still.push_back(id);
    }
    // NOTE: progress is guaranteed: the minimum above saturates a port or caps a flow every round.
    if (still.size() == open.size()) break;
    open.swap(still);
  }
  for (int id : active_) {
    Flow& f = flows_[id];
    f.finish = f.rate > 0 ? now_ + static_cast<Time>(std::ceil(f.remaining / f.rate)) : kNever;
  }
  dirty_ = false;
}

Time Network::next_completion() {
  if (dirty_) recompute();
  Time t = kNever;
  for (int id : active_) t = std::min(t, flows_[id].finish);
  return t;
}

std::vector<int> Network::advance(Time t) {
  if (dirty_) recompute();
  const double dt = static_cast<double>(t - now_);
  std::vector<int> done, still;
  for (int id : active_) {
    Flow& f = flows_[id];
    // Snap: a flow within 0.05% of its elapsed time from the end finishes with this batch (fewer events).
    const bool finished = f.finish <= t + (t - f.start) / 2000;
    const double moved = finished ? f.remaining : std::min(f.remaining, f.rate * dt);
    f.remaining -= moved;
    if (f.spec.pull) {
      for (int p = 0; p < gpus_; ++p) egress_bytes_[p] += moved * f.spec.weights[p];
    } else {
      egress_bytes_[f.spec.driver] += moved;
    }
    (finished ? done : still).push_back(id);
  }
  now_ = t;
  if (!done.empty()) {
    active_.swap(still);
    dirty_ = true;
  }
  return done;
}

}  // namespace calico::sim
