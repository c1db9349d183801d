// Max-min fair sharing by progressive filling: all unfrozen flows grow at one rate until a port saturates or
// a flow reaches its injection cap; flows touching a saturated port freeze; repeat. A push flow from g uses
// g's egress (1) and each peer's ingress (weight), plus `reverse` of that on the opposite directions (acks);
// a pull flow mirrors it (requests go out, data comes in).
//
// Speed (the layer simulation makes ~10^4 rate recomputations and ~10^5 clock advances): per-port sums over
// flows are computed port-block by port-block with the block in registers, flows in the same order as a plain
// flow-by-flow loop, so every sum is bit-identical to it; scratch vectors are reused, not reallocated.
#include "network.h"

#include <algorithm>
#include <cmath>

namespace calico::sim {

namespace {

// Eight doubles as one value (GCC/Clang vector extension; one AVX-512 or two AVX2 registers): element-wise
// IEEE adds and multiplies, exactly the scalar operations (no contraction: -ffp-contract=off), but a block of
// ports stays in registers while the loop runs over the flows instead of a load and store per flow.
// Vectors go by reference only: by value their ABI depends on -march (GCC warns, -Wpsabi).
typedef double Vec8 __attribute__((vector_size(64)));
inline void load8(Vec8& v, const double* p) { __builtin_memcpy(&v, p, sizeof v); }
inline void store8(double* p, const Vec8& v) { __builtin_memcpy(p, &v, sizeof v); }

// Ports [j, j+8NV) of accumulate_rows below.
template <int NV, bool kScaled>
void block(const std::vector<const double*>& rows, const double* scale, int j, double* out) {
  Vec8 acc[NV];
  for (int v = 0; v < NV; ++v) {
    acc[v] = Vec8{};
    if constexpr (kScaled) load8(acc[v], out + j + 8 * v);
  }
  const size_t n = rows.size();
  for (size_t i = 0; i < n; ++i) {
    const double* r = rows[i] + j;
    for (int v = 0; v < NV; ++v) {
      Vec8 x;
      load8(x, r + 8 * v);
      if constexpr (kScaled) {
        acc[v] += scale[i] * x;
      } else {
        acc[v] += x;
      }
    }
  }
  for (int v = 0; v < NV; ++v) store8(out + j + 8 * v, acc[v]);
}

// kScaled false: out[j] = ((0 + rows[0][j]) + rows[1][j]) + ...; true: out[j] += scale[i] * rows[i][j] for
// i in order. The same additions in the same order as adding the rows one after the other, per port j.
template <bool kScaled>
void accumulate_rows(const std::vector<const double*>& rows, const double* scale, int len, double* out) {
  int j = 0;
  for (; j + 32 <= len; j += 32) block<4, kScaled>(rows, scale, j, out);
  for (; j + 8 <= len; j += 8) block<1, kScaled>(rows, scale, j, out);
  for (; j < len; ++j) {
    double acc = kScaled ? out[j] : 0.0;
    for (size_t i = 0; i < rows.size(); ++i) acc += kScaled ? scale[i] * rows[i][j] : rows[i][j];
    out[j] = acc;
  }
}

}  // namespace

Network::Network(int gpus, double capacity, double reverse)
    : gpus_(gpus), capacity_(capacity), reverse_(reverse), egress_bytes_(gpus, 0.0), used_(2 * gpus),
      coef_(2 * gpus), unit_(size_t(gpus) * gpus, 0.0) {
  for (int g = 0; g < gpus; ++g) unit_[size_t(g) * gpus + g] = 1.0;
}

// Per-port usage of a flow per unit rate, egress [0, gpus) then ingress [gpus, 2*gpus). A push flow from g
// puts 1 on g's egress, w_p on each peer's ingress, and reverse (times that) on the opposite directions; a
// pull flow mirrors it. The driver's entries are exactly what adding its own terms to its zero weight gives
// (0 + 1 = 1, 0 + reverse = reverse), so summing these rows equals adding the terms one by one.
static std::vector<double> usage_row(const FlowSpec& s, double reverse, int gpus) {
  std::vector<double> u(2 * size_t(gpus));
  double* peer_in = u.data() + (s.pull ? 0 : gpus);   // the peers' data direction
  double* peer_rev = u.data() + (s.pull ? gpus : 0);
  for (int p = 0; p < gpus; ++p) {
    peer_in[p] = s.weights[p];
    peer_rev[p] = reverse * s.weights[p];
  }
  peer_rev[s.driver] += 1.0;      // the driver's data direction
  peer_in[s.driver] += reverse;   // and its reverse direction
  if (s.overhead != 1.0)
    for (double& x : u) x *= s.overhead;
  return u;
}

int Network::add(FlowSpec spec, Time now) {
  Flow f;
  f.remaining = spec.bytes;
  f.usage = usage_row(spec, reverse_, gpus_);
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

// A flow touches port j (either direction of GPU j % gpus) if it drives that GPU or sends it bytes.
static inline bool touches_saturated(const FlowSpec& s, int gpus, const std::vector<int>& saturated) {
  for (int j : saturated) {
    const int p = j < gpus ? j : j - gpus;
    if (p == s.driver || s.weights[p] > 0) return true;
  }
  return false;
}

void Network::recompute() {
  ++recomputes_;
  std::fill(used_.begin(), used_.end(), 0.0);
  std::vector<int>& open = open_;
  open.assign(active_.begin(), active_.end());
  for (int id : open) flows_[id].rate = 0;
  const double eps = capacity_ * 1e-12;
  while (!open.empty()) {
    double inc = std::numeric_limits<double>::infinity();
    rows_.clear();
    for (int id : open) {
      rows_.push_back(flows_[id].usage.data());
      inc = std::min(inc, flows_[id].spec.cap - flows_[id].rate);
    }
    accumulate_rows<false>(rows_, nullptr, 2 * gpus_, coef_.data());
    for (int j = 0; j < 2 * gpus_; ++j)
      if (coef_[j] > 0) inc = std::min(inc, (capacity_ - used_[j]) / coef_[j]);
    inc = std::max(inc, 0.0);
    saturated_list_.clear();
    for (int j = 0; j < 2 * gpus_; ++j) {
      used_[j] += inc * coef_[j];
      if (coef_[j] > 0 && capacity_ - used_[j] <= eps) saturated_list_.push_back(j);
    }
    std::vector<int>& still = still_;
    still.clear();
    for (int id : open) {
      Flow& f = flows_[id];
      f.rate += inc;
      if (f.spec.cap - f.rate > eps && !touches_saturated(f.spec, gpus_, saturated_list_)) still.push_back(id);
    }
    // NOTE: progress is guaranteed: the minimum above saturates a port or caps a flow every round.
    if (still.size() == open.size()) break;
    open.swap(still);
  }
  for (int id : active_) {
    Flow& f = flows_[id];
    // Saturating: a finish time past kNever is kNever (no signed overflow for tiny rates, issue 9).
    const double dt = f.rate > 0 ? std::ceil(f.remaining / f.rate) : HUGE_VAL;
    f.finish = dt < static_cast<double>(kNever - now_) ? now_ + static_cast<Time>(dt) : kNever;
  }
  dirty_ = false;
}

double Network::data_rate_at(int gpu) {
  if (dirty_) recompute();
  double r = 0;
  for (int id : active_) {
    const Flow& f = flows_[id];
    if (f.spec.driver == gpu) r += f.rate;
    else r += f.rate * f.spec.weights[gpu];
  }
  return r;
}

double Network::data_remaining_at(int gpu) const {
  double r = 0;
  for (int id : active_) {
    const Flow& f = flows_[id];
    r += f.remaining * (f.spec.driver == gpu ? 1.0 : f.spec.weights[gpu]);
  }
  return r;
}

Time Network::next_completion() {
  if (dirty_) recompute();
  Time t = kNever;
  for (int id : active_) t = std::min(t, flows_[id].finish);
  return t;
}

const std::vector<int>& Network::advance(Time t) {
  if (dirty_) recompute();
  const double dt = static_cast<double>(t - now_);
  std::vector<int>& done = done_;
  std::vector<int>& still = still_;
  done.clear();
  still.clear();
  rows_.clear();
  moved_.clear();
  for (int id : active_) {
    Flow& f = flows_[id];
    // Snap: a flow within 0.05% of its elapsed time from the end finishes with this batch (fewer events).
    const bool finished = f.finish <= t + (t - f.start) / 2000;
    const double moved = finished ? f.remaining : std::min(f.remaining, f.rate * dt);
    f.remaining -= moved;
    // Egress bytes: a pull's data leaves the peers by weight, a push's leaves the driver (its unit row: the
    // zero entries add exactly +0.0). moved == 0 would add +0.0 everywhere: skipped.
    if (moved != 0) {
      rows_.push_back(f.spec.pull ? f.spec.weights.data() : unit_.data() + size_t(f.spec.driver) * gpus_);
      moved_.push_back(moved);
    }
    if (finished) std::vector<double>().swap(f.usage);  // no longer summed: free it (long passes)
    (finished ? done : still).push_back(id);
  }
  accumulate_rows<true>(rows_, moved_.data(), gpus_, egress_bytes_.data());
  now_ = t;
  if (!done.empty()) {
    active_.swap(still);
    dirty_ = true;
  }
  return done;
}

}  // namespace calico::sim
