// Event-driven simulation of one MoE layer (MODEL.md): per pass, per GPU a compute pool (non-preemptive,
// routed-expert tasks before shared-expert chunks) and two communication queues (dispatch, combine) that
// take minibatches in order and share the communication SMs; the network is the fluid model of network.h.
#include <algorithm>
#include <cmath>
#include <queue>

#include "calico/error.h"
#include "network.h"
#include "work.h"

namespace calico::sim {

namespace {

// delivered_all / deps_ready_all: one event for a fan-out to every GPU but `gpu` (all GPUs when gpu < 0), in
// GPU order. Members of a fan-out had consecutive sequence numbers, so nothing could interleave with them:
// one event per fan-out gives the same processing order with R times fewer heap operations.
enum class Ev : uint8_t {
  compute_done, comm_done, delivered, deps_ready, delivered_all, deps_ready_all, flow_start, arrived_all
};
enum Kind { kDispatch = 0, kCombine = 1 };

struct Event {
  Time t;
  int64_t seq;
  Ev type;
  int gpu, kind, mb, task;
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

struct CTask {  // a compute task waiting or running
  Stage stage;
  int mb;
  Time ready;
};

struct CommTask {
  Time start = 0, net_done = 0, local_done = 0;
  int flow = -1;
  int peers = 0;          // peers with remote rows
  int64_t rows_out = 0;   // remote rows this driver moves
  FlowSpec pending;       // the flow, until its setup time has passed
};

class PassSim {
 public:
  PassSim(const Topology& topo, const LayerSpec& spec, const RunConfig& cfg, const Traffic& tr,
          const SimOptions& opt, Pass pass, SimResult& out)
      : topo_(topo), spec_(spec), tr_(tr), opt_(opt), pass_(pass), out_(out), R_(tr.ranks), M_(tr.minibatches),
        net_(tr.ranks, topo.link_bytes_per_ps() * opt.link_scale, topo.reverse_overhead) {
    const bool fwd = pass == Pass::forward;
    comm_sms_ = fwd ? cfg.comm_sms_forward : cfg.comm_sms_backward;
    dir_[kDispatch] = fwd ? cfg.dispatch_forward : cfg.dispatch_backward;
    dir_[kCombine] = fwd ? cfg.combine_forward : cfg.combine_backward;
    xfer_[kDispatch] = opt.transfer[fwd ? 0 : 1][kDispatch];
    xfer_[kCombine] = opt.transfer[fwd ? 0 : 1][kCombine];
    ring_ = cfg.macrobatch > 0 && cfg.macrobatch < M_ ? cfg.macrobatch : 0;
    // EP = 1: nothing leaves the GPU, the GEMMs read and write their rows in place; no communication SMs.
    comm_sms_ = R_ > 1 ? comm_sms_ : 0;
    compute_sms_ = topo.sms - comm_sms_;
    row_[kDispatch] = fwd ? row_bytes(spec.dtype, spec.hidden) : 2.0 * spec.hidden;
    row_[kCombine] = 2.0 * spec.hidden;
    stages_ = fwd ? std::vector<Stage>{Stage::gate_up, Stage::swiglu, Stage::down}
                  : std::vector<Stage>{Stage::down, Stage::swiglu, Stage::gate_up};
    gpu_.resize(R_);
    running_.resize(R_);
    out_egress_.assign(R_, 0.0);
    for (auto& g : gpu_) {
      for (int k = 0; k < 2; ++k) {
        g.q[k].dep_count.assign(M_, 0);
        g.q[k].tasks.assign(M_, {});
      }
      g.arrivals[0].assign(M_, 0);
      g.arrivals[1].assign(M_, 0);
    }
    first_done_.assign(M_, 0);
    stage_done_[0].assign(M_, 0);
    stage_done_[1].assign(M_, 0);
    stage_last_[0].assign(M_, 0);
    stage_last_[1].assign(M_, 0);
  }

  Time run(Time t0) {
    t0_ = t0;
    net_advance_to(t0);
    const Time sig = ps(topo_.one_way_signal_ns() + fan_in_ns(R_ - 1));
    for (int g = 0; g < R_; ++g) {
      if (R_ == 1) {  // local rows are read and written in place: the first stage is ready at once
        for (int m = 0; m < M_; ++m) {
          gpu_[g].ready.push_back({stages_[0], m, t0});
          out_.local_bytes += double(tr_.dispatch(m, g, g)) * row_[kDispatch] + double(tr_.combine(m, g, g)) * row_[kCombine];
        }
      } else {
        // Dispatch inputs are ready at the pass start; a pull waits for the sources' ready flags.
        for (int m = 0; m < M_; ++m)
          push_event(dir_[kDispatch] == Direction::pull ? t0 + sig : t0, Ev::deps_ready, g, kDispatch, m);
      }
      if (spec_.shared_intermediate > 0)
        for (int m = 0; m < M_; ++m) gpu_[g].shared.push_back({Stage::shared, m, t0});
      try_compute(g, t0);
    }
    loop();
    Time end = t0;
    for (int g = 0; g < R_; ++g) {
      end = std::max(end, gpu_[g].end);
      require(gpu_[g].combines_done == M_, "simulator: pass ended with {} of {} combines on rank {}",
              gpu_[g].combines_done, M_, g);
    }
    Time busiest = 0;
    for (const auto& g : gpu_) busiest = std::max(busiest, g.compute_busy);
    out_.exposed_comm_ps += R_ > 1 ? std::max<Time>(0, (end - t0) - busiest) : 0;
    for (int g = 0; g < R_; ++g) out_egress_[g] = net_.egress_bytes(g);
    out_.flow_events += net_.recomputes();
    return end;
  }

  std::vector<double> out_egress_;
  std::map<std::pair<int, int>, std::vector<double>> stage_time;  // (pass, stage) -> per GPU

 private:
  struct Queue {
    int next = 0;        // next minibatch to issue
    bool busy = false;
    std::vector<int> dep_count;  // deps satisfied per minibatch (needed_deps)
    std::vector<CommTask> tasks;
  };
  struct Gpu {
    Queue q[2];
    std::vector<int> arrivals[2];  // push deliveries received per minibatch (R = complete)
    std::vector<CTask> ready, shared;
    bool computing = false;
    Time compute_busy = 0, end = 0;
    int active_flows = 0, combines_done = 0;
    std::vector<int> flows;  // active flow ids driven here
  };

  static Time ps(double ns) { return static_cast<Time>(std::llround(ns * kPsPerNs)); }
  double fan_in_ns(double n) const { return sim::fan_in_ns(topo_, n); }
  void push_event(Time t, Ev type, int gpu, int kind, int mb, int task = 0) {
    events_.push({t, seq_++, type, gpu, kind, mb, task});
  }
  void net_advance_to(Time t) {
    for (int id : net_.advance(t)) flow_done(id, t);
  }

  void loop() {
    while (true) {
      const Time tn = net_.next_completion();
      const Time te = events_.empty() ? kNever : events_.top().t;
      if (tn == kNever && te == kNever) break;
      const Time t = std::min(tn, te);
      net_advance_to(t);
      while (!events_.empty() && events_.top().t == t) {
        const Event e = events_.top();
        events_.pop();
        handle(e);
      }
    }
  }

  void handle(const Event& e) {
    switch (e.type) {
      case Ev::compute_done: compute_done(e.gpu, e.t); break;
      case Ev::comm_done: comm_done(e.gpu, e.kind, e.mb, e.t); break;
      case Ev::delivered: delivered(e.gpu, e.kind, e.mb, e.t); break;
      case Ev::deps_ready: deps_ready(e.gpu, e.kind, e.mb, e.t); break;
      case Ev::delivered_all:
        for (int d = 0; d < R_; ++d)
          if (d != e.gpu) delivered(d, e.kind, e.mb, e.t);
        break;
      case Ev::deps_ready_all:
        for (int d = 0; d < R_; ++d)
          if (d != e.gpu) deps_ready(d, e.kind, e.mb, e.t);
        break;
      case Ev::flow_start: flow_start(e.gpu, e.kind, e.mb, e.t); break;
      case Ev::arrived_all:
        for (int d = 0; d < R_; ++d) arrived(d, e.kind, e.mb, e.t);
        break;
    }
  }
  void deps_ready(int g, int kind, int m, Time t) {
    ++gpu_[g].q[kind].dep_count[m];
    try_comm(g, kind, t);
  }
  // Event `type` for GPU g at t and for every other GPU at t + lat (the *_all form of `type` as one event).
  void fan_out(Time t, Time lat, Ev type, Ev all, int g, int kind, int m) {
    if (lat == 0) {
      push_event(t, all, -1, kind, m);
    } else {
      push_event(t, type, g, kind, m);
      if (R_ > 1) push_event(t + lat, all, g, kind, m);  // no empty event: it would add a network step
    }
  }

  // --- compute pool ---
  void make_ready(int g, Stage s, int m, Time t) {
    gpu_[g].ready.push_back({s, m, t});
    try_compute(g, t);
  }
  void try_compute(int g, Time t) {
    Gpu& G = gpu_[g];
    if (G.computing) return;
    std::vector<CTask>* from = !G.ready.empty() ? &G.ready : (!G.shared.empty() ? &G.shared : nullptr);
    if (!from) return;
    // Routed work first: earliest ready, then minibatch, then stage order.
    auto it = std::min_element(from->begin(), from->end(), [](const CTask& a, const CTask& b) {
      return a.ready != b.ready ? a.ready < b.ready : a.mb != b.mb ? a.mb < b.mb : a.stage < b.stage;
    });
    const CTask task = *it;
    from->erase(it);
    // HBM sharing (MODEL.md): the bytes this GPU's links move while the task runs are read from or written
    // to its HBM. At the current rate r the task's HBM floor becomes bytes / (hbm - r); the extra time is
    // those comm bytes / hbm, at most the bytes the active flows still have to move here.
    Time d = task_duration(topo_, spec_, tr_, pass_, task.stage, g, task.mb, compute_sms_);
    if (opt_.hbm_sharing && R_ > 1 && net_.active() > 0) {
      const double hbm = topo_.hbm_gbps * 1e-3;  // bytes/ps
      const double rate = std::min(net_.data_rate_at(g), 0.9 * hbm);
      if (rate > 0) {
        const Time shared = task_duration(topo_, spec_, tr_, pass_, task.stage, g, task.mb, compute_sms_,
                                          (hbm - rate) * 1e3);
        const Time cap = static_cast<Time>(std::llround(net_.data_remaining_at(g) / hbm));
        d += std::min(shared - d, cap);
      }
    }
    G.computing = true;
    G.compute_busy += d;
    running_[g] = task;
    record(g, "compute", task.stage, task.mb, t, t + d);
    push_event(t + d, Ev::compute_done, g, 0, task.mb);
  }
  void compute_done(int g, Time t) {
    Gpu& G = gpu_[g];
    G.computing = false;
    G.end = std::max(G.end, t);
    const CTask task = running_[g];
    if (task.stage == Stage::combine) {  // EP = 1's local combine (expert_outputs_ready)
      ++G.combines_done;
    } else if (task.stage != Stage::shared) {
      const auto pos = std::find(stages_.begin(), stages_.end(), task.stage) - stages_.begin();
      if (pos == 0) first_stage_done(task.mb, t);
      if (pos + 1 < static_cast<long>(stages_.size())) {
        make_ready(g, stages_[pos + 1], task.mb, t);
      } else {
        expert_outputs_ready(g, task.mb, t);
      }
    }
    try_compute(g, t);
  }
  // Macrobatch ring (RunConfig::macrobatch slots of one minibatch each): dispatch m + slots may start once
  // every GPU has consumed minibatch m from its ring (its first stage ran) and the credit flag arrived.
  void first_stage_done(int m, Time t) {
    if (!ring_ || R_ == 1) return;
    if (++first_done_[m] == R_ && m + ring_ < M_)
      push_event(t + ps(topo_.one_way_signal_ns() + fan_in_ns(R_ - 1)), Ev::deps_ready_all, -1, kDispatch, m + ring_);
  }
  void expert_outputs_ready(int g, int m, Time t) {
    if (R_ == 1) {  // the outputs are already at home: the weighted sums read them in place (work.cpp)
      make_ready(g, Stage::combine, m, t);
      return;
    }
    if (dir_[kCombine] == Direction::push) {
      push_event(t, Ev::deps_ready, g, kCombine, m);
    } else if (xfer_[kCombine].signal == Signal::barrier) {  // one barrier: all owners done, then everyone pulls
      barrier_done(kCombine, m, t, /*ready=*/true);
    } else {  // each home pulls once every owner's ready flag has arrived
      const Time sig = ps(topo_.one_way_signal_ns());
      fan_out(t, sig, Ev::deps_ready, Ev::deps_ready_all, g, kCombine, m);
    }
  }

  // --- communication ---
  int needed_deps(int kind, int m) const {
    if (kind == kCombine) return dir_[kCombine] == Direction::pull && xfer_[kCombine].signal != Signal::barrier ? R_ : 1;
    return 1 + (ring_ && m >= ring_ ? 1 : 0);
  }
  int64_t count(int kind, int m, int s, int d) const {
    return kind == kDispatch ? tr_.dispatch(m, s, d) : tr_.combine(m, s, d);
  }
  double cap(const Gpu& G, int kind, int peers) const {
    const double sms = double(comm_sms_) / std::max(1, G.active_flows);
    return engine_cap(topo_, xfer_[kind].engine, dir_[kind] == Direction::pull, sms, peers, opt_.link_scale);
  }
  void update_caps(int g) {
    Gpu& G = gpu_[g];
    for (int id : G.flows) net_.set_cap(id, cap(G, flow_kind_[id], flow_peers_[id]));
  }
  void try_comm(int g, int kind, Time t) {
    Gpu& G = gpu_[g];
    Queue& q = G.q[kind];
    if (q.busy || q.next >= M_ || q.dep_count[q.next] < needed_deps(kind, q.next)) return;
    const int m = q.next++;
    q.busy = true;
    CommTask& task = q.tasks[m];
    task.start = t;
    // Bytes this driver moves: push sends its row of the matrix, pull fetches its column.
    const bool pull = dir_[kind] == Direction::pull;
    std::vector<double> w(R_, 0.0);
    double remote = 0, local = 0;
    for (int p = 0; p < R_; ++p) {
      const int64_t rows = pull ? count(kind, m, p, g) : count(kind, m, g, p);
      const double b = double(rows) * row_[kind];
      if (p == g) {
        local += b;
      } else {
        remote += b;
        w[p] = b;
        task.rows_out += rows;
        task.peers += rows > 0;
      }
    }
    out_.remote_bytes += remote;
    out_.local_bytes += local;
    // Local rows go through HBM (read + write), in parallel with the remote flow.
    task.local_done = t + static_cast<Time>(std::llround(2.0 * local / (topo_.local_copy_gbps * 1e-3)));
    if (remote > 0) {
      for (double& x : w) x /= remote;
      task.pending = FlowSpec{g, pull, remote, 0.0, std::move(w), port_overhead(topo_, task.peers)};
      push_event(t + ps(setup_ns(topo_, xfer_[kind].engine, task.peers, comm_sms_)), Ev::flow_start, g, kind, m);
    } else {
      task.net_done = t;
      finish_comm(g, kind, m, t + ps(topo_.stage_fixed_ns));
    }
  }

  void flow_start(int g, int kind, int m, Time t) {
    Gpu& G = gpu_[g];
    CommTask& task = G.q[kind].tasks[m];
    ++G.active_flows;
    task.flow = net_.add(std::move(task.pending), t);
    flow_kind_.push_back(kind);  // flow ids are dense and increasing
    flow_owner_.push_back({g, m});
    flow_peers_.push_back(task.peers);
    G.flows.push_back(task.flow);
    update_caps(g);
  }

  void flow_done(int id, Time t) {
    const auto [g, m] = flow_owner_[id];
    const int kind = flow_kind_[id];
    Gpu& G = gpu_[g];
    G.flows.erase(std::find(G.flows.begin(), G.flows.end(), id));
    --G.active_flows;
    update_caps(g);
    CommTask& task = G.q[kind].tasks[m];
    task.net_done = t;
    record(g, dir_[kind] == Direction::push ? "nvlink out" : "nvlink in",
           kind == kDispatch ? Stage::dispatch : Stage::combine, m, task.start, t);
    // A pull's last loads return one round trip after the fluid transfer drains.
    const Time tail = dir_[kind] == Direction::pull ? ps(topo_.pull_rtt_ns()) : 0;
    finish_comm(g, kind, m, t + tail);
  }

  // MODEL.md "Signalling protocols"; a pull moves no data flags (its loads completing is the completion)
  // but releases the sources' buffers the same way.
  double signal_ns(int g, int kind, const CommTask& task) const {
    const double sms = std::max(1, comm_sms_ / std::max(1, gpu_[g].active_flows + 1));
    return sender_signal_ns(topo_, xfer_[kind].engine, xfer_[kind].signal, task.rows_out, task.peers, sms);
  }

  void finish_comm(int g, int kind, int m, Time data_done) {
    CommTask& task = gpu_[g].q[kind].tasks[m];
    push_event(std::max(data_done, task.local_done) + ps(signal_ns(g, kind, task)), Ev::comm_done, g, kind, m);
  }

  void comm_done(int g, int kind, int m, Time t) {
    Gpu& G = gpu_[g];
    G.q[kind].busy = false;
    G.end = std::max(G.end, t);
    record(g, kind == kDispatch ? "comm dispatch" : "comm combine", kind == kDispatch ? Stage::dispatch : Stage::combine,
           m, G.q[kind].tasks[m].start, t);
    if (dir_[kind] == Direction::pull) {
      arrived(g, kind, m, t);
    } else if (xfer_[kind].signal == Signal::barrier) {
      barrier_done(kind, m, t, /*ready=*/false);
    } else {  // the flags reach each destination after the wire latency and a poll
      const Time lat = ps(topo_.hops * topo_.hop_latency_ns + topo_.poll_ns);
      fan_out(t, lat, Ev::delivered, Ev::delivered_all, g, kind, m);
    }
    try_comm(g, kind, t);
  }

  // One barrier per stage and minibatch: when the last of the R ranks reaches it, everyone learns after a
  // gather (one-way signal, fan-in of R-1 flags at the root) and a release (one-way signal). ready = the
  // barrier releases pull tasks (deps) instead of delivering pushed data.
  void barrier_done(int kind, int m, Time t, bool ready) {
    stage_last_[kind][m] = std::max(stage_last_[kind][m], t);
    if (++stage_done_[kind][m] < R_) return;
    const Time at = stage_last_[kind][m] + ps(2 * topo_.one_way_signal_ns() + fan_in_ns(R_ - 1));
    push_event(at, ready ? Ev::deps_ready_all : Ev::arrived_all, -1, kind, m);
  }

  // Receiver fan-in: a push destination checks one flag (per_block: counter) per source, or one per row.
  void delivered(int d, int kind, int m, Time t) {
    if (++gpu_[d].arrivals[kind][m] < R_) return;
    int64_t msgs = R_ - 1;
    if (xfer_[kind].signal == Signal::per_message) {
      msgs = 0;
      for (int s = 0; s < R_; ++s)
        if (s != d) msgs += count(kind, m, s, d);
      msgs = (msgs + std::max(1, comm_sms_) - 1) / std::max(1, comm_sms_);  // the comm SMs poll in parallel
    }
    arrived(d, kind, m, t + ps(fan_in_ns(double(msgs))));
  }

  void arrived(int d, int kind, int m, Time t) {
    Gpu& G = gpu_[d];
    G.end = std::max(G.end, t);
    if (kind == kDispatch) {
      make_ready(d, stages_[0], m, t);
    } else {
      ++G.combines_done;
    }
  }

  void record(int g, const char* track, Stage s, int m, Time a, Time b) {
    auto& v = stage_time[{int(pass_), int(s)}];
    if (v.empty()) v.assign(R_, 0.0);
    if (std::string_view(track) != "nvlink out" && std::string_view(track) != "nvlink in") v[g] += double(b - a);
    if (opt_.trace) out_.slices.push_back({g, track, pass_, s, m, a, b});
  }

  const Topology& topo_;
  const LayerSpec& spec_;
  const Traffic& tr_;
  const SimOptions& opt_;
  Pass pass_;
  SimResult& out_;
  int R_, M_;
  Network net_;
  int comm_sms_ = 0, compute_sms_ = 0, ring_ = 0;
  Direction dir_[2];
  Transfer xfer_[2];
  double row_[2];
  std::vector<Stage> stages_;
  std::vector<Gpu> gpu_;
  std::vector<CTask> running_;
  std::vector<int> flow_kind_, flow_peers_;
  std::vector<std::pair<int, int>> flow_owner_;
  std::vector<int> first_done_, stage_done_[2];
  std::vector<Time> stage_last_[2];
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  int64_t seq_ = 0;
  Time t0_ = 0;
};

void finish_stats(SimResult& r, const std::map<std::pair<int, int>, std::vector<double>>& st) {
  for (const auto& [key, v] : st) {
    StageStats s{Pass(key.first), Stage(key.second), 0, 0};
    for (double x : v) {
      s.mean_ps += x / v.size();
      s.max_ps = std::max(s.max_ps, x);
    }
    r.stages.push_back(s);
  }
}

}  // namespace

const char* to_string(Pass p) { return p == Pass::forward ? "forward" : "backward"; }
const char* to_string(Stage s) {
  switch (s) {
    case Stage::dispatch: return "dispatch";
    case Stage::gate_up: return "gate_up";
    case Stage::swiglu: return "swiglu";
    case Stage::down: return "down";
    case Stage::combine: return "combine";
    case Stage::shared: return "shared";
  }
  return "?";
}
const char* to_string(Engine e) { return e == Engine::lsu ? "lsu" : e == Engine::tma ? "tma" : "ce"; }
const char* to_string(Signal s) {
  return s == Signal::per_message ? "per_message" : s == Signal::per_block ? "per_block" : "barrier";
}
Engine parse_engine(const std::string& s) {
  for (Engine e : {Engine::lsu, Engine::tma, Engine::ce})
    if (s == to_string(e)) return e;
  throw Error(fmt::format("engine must be one of lsu, tma, ce, got '{}'", s));
}
Signal parse_signal(const std::string& s) {
  for (Signal x : {Signal::per_message, Signal::per_block, Signal::barrier})
    if (s == to_string(x)) return x;
  throw Error(fmt::format("signal must be one of per_message, per_block, barrier, got '{}'", s));
}
Stage parse_stage(const std::string& s) {
  for (Stage x : {Stage::dispatch, Stage::gate_up, Stage::swiglu, Stage::down, Stage::combine, Stage::shared})
    if (s == to_string(x)) return x;
  throw Error(fmt::format("stage must be one of dispatch, gate_up, swiglu, down, combine, shared, got '{}'", s));
}

void validate_run(const Topology& topo, const LayerSpec& spec, const RunConfig& c) {
  spec.validate();
  require(c.ranks >= 1 && c.ranks <= topo.max_gpus, "--ranks must be in [1, {}] for topology {}, got {}",
          topo.max_gpus, topo.name, c.ranks);
  require(c.ranks <= spec.experts, "--ranks must be <= experts (E={}), got {}", spec.experts, c.ranks);
  // Bounded (issue 9): the simulation's time and memory grow with R*T.
  require(c.tokens_per_rank >= 1 && c.tokens_per_rank <= kMaxSimTokensPerRank, "--tokens must be in [1, {}], got {}",
          kMaxSimTokensPerRank, c.tokens_per_rank);
  require(int64_t{c.ranks} * c.tokens_per_rank <= kMaxSimTotalTokens,
          "--ranks x --tokens must be <= {} tokens in all, got {} x {}", kMaxSimTotalTokens, c.ranks,
          c.tokens_per_rank);
  require(c.minibatch >= 0 && c.minibatch <= c.tokens_per_rank,
          "--minibatch must be in [0, tokens={}] (0 = all), got {}", c.tokens_per_rank, c.minibatch);
  const int64_t minibatches = (int64_t{c.tokens_per_rank} + c.minibatch_tokens() - 1) / c.minibatch_tokens();
  require(minibatches <= kMaxSimMinibatches, "--minibatch {} gives {} minibatches per rank; at most {} (T={})",
          c.minibatch, minibatches, kMaxSimMinibatches, c.tokens_per_rank);
  for (int sms : {c.comm_sms_forward, c.comm_sms_backward})
    require(sms >= 1 && sms < topo.sms, "--comm-sms must be in [1, {}] for topology {}, got {}", topo.sms - 1,
            topo.name, sms);
}

static void check_traffic(const RunConfig& c, const LayerSpec& spec, const Traffic& tr) {
  require(tr.ranks == c.ranks && tr.tokens_per_rank == c.tokens_per_rank && tr.experts == spec.experts &&
              tr.minibatch_tokens == c.minibatch_tokens(),
          "simulate: traffic (R={}, T={}, E={}, minibatch={}) does not match the run (R={}, T={}, E={}, minibatch={})",
          tr.ranks, tr.tokens_per_rank, tr.experts, tr.minibatch_tokens, c.ranks, c.tokens_per_rank, spec.experts,
          c.minibatch_tokens());
}

static void finish_result(SimResult& r, const Topology& topo, const SimOptions& opt, const std::vector<double>& egress) {
  r.layer_ps = r.forward_ps + r.backward_ps;
  const double cap = topo.link_bytes_per_ps() * opt.link_scale * double(std::max<Time>(1, r.layer_ps));
  for (double e : egress) {
    r.link_util_mean += e / cap / egress.size();
    r.link_util_max = std::max(r.link_util_max, e / cap);
  }
}

SimResult simulate(const Topology& topo, const LayerSpec& spec, const RunConfig& config, const Traffic& traffic,
                   const SimOptions& options) {
  validate_run(topo, spec, config);
  check_traffic(config, spec, traffic);
  SimResult r;
  std::vector<double> egress(config.ranks, 0.0);
  std::map<std::pair<int, int>, std::vector<double>> st;
  Time t = 0;
  for (Pass p : {Pass::forward, Pass::backward}) {
    if ((p == Pass::forward && !options.forward) || (p == Pass::backward && !options.backward)) continue;
    PassSim sim(topo, spec, config, traffic, options, p, r);
    const Time end = sim.run(t);
    (p == Pass::forward ? r.forward_ps : r.backward_ps) = end - t;
    t = end;
    for (int g = 0; g < config.ranks; ++g) egress[g] += sim.out_egress_[g];
    for (auto& [k, v] : sim.stage_time) st[k] = v;
  }
  finish_stats(r, st);
  finish_result(r, topo, options, egress);
  return r;
}

}  // namespace calico::sim
