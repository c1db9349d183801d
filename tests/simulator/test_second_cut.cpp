// The simulator's second cut (issue 11): transfer engines, the HybridEP comparison, signalling protocols,
// fixed per-stage costs, per-peer contention, EP = 1 without communication, HBM sharing, ring back-pressure,
// and the sanity properties of "What it must show", each a test that can fail.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "calico/data.h"
#include "calico/error.h"
#include "calico/simulator.h"
#include "sim_test_util.h"
#include "network.h"

namespace calico::sim {
namespace {


Traffic zipf_traffic(const LayerSpec& s, const RunConfig& r, double skew, uint64_t seed = 3) {
  if (skew == 0) return traffic_uniform(s, r.ranks, r.tokens_per_rank, r.minibatch_tokens(), seed);
  const Routing routing = make_routing(s, r.total_tokens(), RoutingSource::parse(fmt::format("zipf:{}", skew)), seed);
  return traffic_from_routing(s, routing, r.ranks, r.tokens_per_rank, r.minibatch_tokens());
}

double stage_mean(const SimResult& r, Pass p, Stage s) {
  for (const auto& st : r.stages)
    if (st.pass == p && st.stage == s) return st.mean_ps;
  return 0;
}

// --- the HybridEP comparison (the table) ---

// The published HybridEP GB200 NVL72 rows (data/calibration/gb200-hybridep.json), simulated on the shipped
// gb200-nvl72 topology. Tolerance: 10% per row (issue 11); the shipped fit reaches 3.4%.
TEST(HybridEP, GB200RowsReproducedWithin10Percent) {
  const Topology t = load_topology("gb200-nvl72");
  const CalibrationData d = load_calibration("gb200-hybridep");
  ASSERT_EQ(d.measurements.size(), 10u);
  std::string table = "kernel     EP  SMs  measured  simulated  error\n";
  double worst = 0;
  for (const auto& m : d.measurements) {
    const double p = simulate_measurement(t, m);
    const double e = p / m.value - 1.0;
    worst = std::max(worst, std::abs(e));
    table += fmt::format("{:<10} {:>2} {:>4} {:>9.0f} {:>10.1f} {:>+6.1f}%\n", m.scenario.substr(9), m.ranks, m.x,
                         m.value, p, 100 * e);
    EXPECT_NEAR(p / m.value, 1.0, 0.10) << m.scenario << " EP" << m.ranks << " " << m.x << " SMs";
  }
  std::printf("%s(worst %.2f%%)\n", table.c_str(), 100 * worst);
}

TEST(HybridEP, GB300InheritsTheGB200NVLinkFit) {
  const Topology a = load_topology("gb200-nvl72"), b = load_topology("gb300-nvl72");
  EXPECT_EQ(a.link_efficiency, b.link_efficiency);
  EXPECT_EQ(a.tma_pull_bytes_in_flight_per_sm, b.tma_pull_bytes_in_flight_per_sm);
  EXPECT_EQ(a.tma_push_gbps_per_sm, b.tma_push_gbps_per_sm);
  EXPECT_EQ(a.sm_peer_overhead, b.sm_peer_overhead);
  EXPECT_EQ(a.port_peer_overhead, b.port_peer_overhead);
  for (const char* k : {"tma_pull_bytes_in_flight_per_sm", "stage_fixed_ns", "port_peer_overhead"})
    EXPECT_FALSE(b.sources.at(k).empty()) << k;
}

TEST(HybridEP, FitFromAPerturbedStartReachesWithin10Percent) {
  Topology t = load_topology("gb200-nvl72");
  t.tma_pull_bytes_in_flight_per_sm = 16384;  // the LSU figure the first cut used
  t.sm_peer_overhead = t.port_peer_overhead = 0.05;
  t.link_efficiency = 0.6;
  const CalibrationResult r = calibrate(t, load_calibration("gb200-hybridep"));
  EXPECT_LT(r.max_rel_error, 0.10);
  EXPECT_GT(r.fitted.tma_pull_bytes_in_flight_per_sm, 2 * 16384.0);  // a TMA pull keeps several times more
}

// --- transfer engines ---

TEST(Engines, TmaPullKeepsSeveralTimesTheLsuBytesInFlight) {
  const Topology t = load_topology("gb200-nvl72");
  const double lsu = engine_cap(t, Engine::lsu, true, 16, 7, 1.0), tma = engine_cap(t, Engine::tma, true, 16, 7, 1.0);
  EXPECT_GT(tma, 3 * lsu);
  // The first cut's complaint: a 16-SM LSU pull on NVL72 reaches only ~150 GB/s.
  EXPECT_LT(lsu * 1e3, 200.0);
  EXPECT_GT(tma * 1e3, 550.0);
}

TEST(Engines, CopyEngineRateDoesNotDependOnSMsButPaysAHostLaunchPerPeer) {
  const Topology t = load_topology("h200x2");
  EXPECT_EQ(engine_cap(t, Engine::ce, false, 1, 1, 1.0), engine_cap(t, Engine::ce, false, 64, 1, 1.0));
  EXPECT_NEAR(engine_cap(t, Engine::ce, true, 8, 1, 1.0) * 1e3, 395.0, 1e-9);  // DESIGN 4's copy engine
  EXPECT_GT(setup_ns(t, Engine::ce, 7, 16), setup_ns(t, Engine::tma, 7, 16) + 6 * t.ce_launch_ns);
}

TEST(Engines, EngineChoiceIsAnInputPerStage) {
  const LayerSpec s = load_preset("qwen3-235b-a22b");
  const Topology t = load_topology("gb300-nvl72");
  const RunConfig r = run(8, 1024, 256, 16, Direction::pull, Direction::pull);
  const Traffic tr = traffic_uniform(s, 8, 1024, 256, 7);
  SimOptions lsu, tma, mixed;
  lsu.set_transfer({Engine::lsu, Signal::per_block});
  tma.set_transfer({Engine::tma, Signal::per_block});
  mixed.set_transfer({Engine::tma, Signal::per_block});
  mixed.transfer[0][1].engine = Engine::lsu;  // forward combine only
  const SimResult a = simulate(t, s, r, tr, lsu), b = simulate(t, s, r, tr, tma), c = simulate(t, s, r, tr, mixed);
  // 16 LSU SMs pull ~8 GB/s each on NVL72; TMA pulls are in-flight rich: every pull stage is faster.
  EXPECT_LT(stage_mean(b, Pass::forward, Stage::dispatch), stage_mean(a, Pass::forward, Stage::dispatch));
  EXPECT_LT(stage_mean(b, Pass::forward, Stage::combine), 0.6 * stage_mean(a, Pass::forward, Stage::combine));
  EXPECT_EQ(stage_mean(c, Pass::forward, Stage::dispatch), stage_mean(b, Pass::forward, Stage::dispatch));
  EXPECT_GT(stage_mean(c, Pass::forward, Stage::combine), stage_mean(b, Pass::forward, Stage::combine));
}

// --- sanity properties ("What it must show") ---

TEST(Sanity, EP1HasNoExposedCommunication) {
  const LayerSpec s = load_preset("qwen3-30b-a3b");
  for (const char* topo : {"h200x2", "gb300-nvl72"}) {
    const Topology t = load_topology(topo);
    for (Direction d : {Direction::push, Direction::pull})
      for (Engine e : {Engine::lsu, Engine::tma, Engine::ce})
        for (int mb : {64, 256}) {
          SimOptions o;
          o.set_transfer({e, Signal::barrier});
          const RunConfig r = run(1, 1024, mb, 16, d, d);
          const SimResult res = simulate(t, s, r, traffic_uniform(s, 1, 1024, mb, 7), o);
          EXPECT_EQ(res.exposed_comm_ps, 0) << topo << " " << to_string(d) << " " << to_string(e) << " mb " << mb;
          EXPECT_EQ(res.remote_bytes, 0.0);
          EXPECT_GT(res.local_bytes, 0.0);
          EXPECT_EQ(stage_mean(res, Pass::forward, Stage::dispatch), 0.0);  // no communication task at all
          // All SMs compute: the layer equals the same layer's compute with the topology's full SM count.
          RunConfig more = r;
          more.comm_sms_forward = more.comm_sms_backward = 1;
          EXPECT_EQ(simulate(t, s, more, traffic_uniform(s, 1, 1024, mb, 7), o).layer_ps, res.layer_ps);
        }
  }
}

TEST(Sanity, MoreTokensNeverFaster) {
  const LayerSpec s = load_preset("qwen3-235b-a22b");
  const Topology t = load_topology("gb300-nvl72");
  for (int R : {8, 36})
    for (Direction d : {Direction::push, Direction::pull})
      for (double skew : {0.0, 1.2}) {
        Time last = 0;
        for (int tokens : {128, 256, 512, 1024, 2048}) {
          const RunConfig r = run(R, tokens, 0, 24, d, d);
          const SimResult res = simulate(t, s, r, zipf_traffic(s, r, skew));
          EXPECT_GE(res.layer_ps, last) << "R=" << R << " T=" << tokens << " " << to_string(d) << " zipf " << skew;
          last = res.layer_ps;
        }
      }
}

// More SMs never slow a transfer down, up to saturation (where adding SMs changes nothing), for every
// engine and direction: the HybridEP kernels on R GPUs and the 2-GPU copies.
TEST(Sanity, MoreSMsNeverSlowerUpToSaturation) {
  const Topology g = load_topology("gb200-nvl72"), h = load_topology("h200x2");
  for (const char* sc : {"hybridep_dispatch", "hybridep_combine"})
    for (int R : {8, 36}) {
      double last = 0;
      for (int sms : {2, 4, 8, 16, 32, 64, 128}) {
        const double v = simulate_measurement(g, {sc, double(sms), 0, "", "", R});
        EXPECT_GE(v, last * (1 - 1e-12)) << sc << " EP" << R << " " << sms << " SMs";
        last = v;
      }
      // Saturated: the port, not the SMs, sets the rate.
      EXPECT_NEAR(simulate_measurement(g, {sc, 128, 0, "", "", R}) / simulate_measurement(g, {sc, 140, 0, "", "", R}),
                  1.0, 0.01);
    }
  for (const char* sc : {"push_copy", "pull_copy"}) {
    double last = 0;
    for (int sms : {1, 2, 4, 8, 16, 32, 66, 132}) {
      const double v = simulate_measurement(h, {sc, double(sms), 0, "", ""});
      EXPECT_GE(v, last) << sc << " " << sms;
      last = v;
    }
  }
  // In a layer: the dispatch stage's time never grows with the communication SMs.
  const LayerSpec s = load_preset("deepseek-v3");
  const Topology t = load_topology("gb300-nvl72");
  for (Direction d : {Direction::push, Direction::pull}) {
    double last = 1e300;
    for (int sms : {4, 8, 16, 32, 64}) {
      const RunConfig r = run(8, 1024, 0, sms, d, d);
      SimOptions o;
      o.backward = false;
      const double v = stage_mean(simulate(t, s, r, traffic_uniform(s, 8, 1024, 1024, 7), o), Pass::forward,
                                  Stage::dispatch);
      EXPECT_LE(v, last) << to_string(d) << " " << sms;
      last = v;
    }
  }
}

// Pull beats push when (the model's conditions): routing is skewed (some ranks receive far more rows than
// others), the engine keeps enough bytes in flight that a pull is not round-trip bound (TMA, >= 16 SMs on
// NVL72), and one looks at the dispatch stage. Why: a push source interleaves its tokens over every
// destination, so all sources slow to the hottest destination's ingress share; each puller is limited only
// by its own ingress, so the cold receivers finish early. Under balanced routing they tie, and with an LSU
// engine at few SMs push wins (Little's law bounds the pull).
TEST(Sanity, PullBeatsPushUnderTheConditionsTheModelStates) {
  const LayerSpec s = load_preset("deepseek-v3");
  const Topology t = load_topology("gb300-nvl72");
  SimOptions fwd;
  fwd.backward = false;
  for (int R : {8, 36}) {
    const RunConfig push = run(R, 2048, 1024, 32, Direction::push, Direction::push);
    const RunConfig pull = run(R, 2048, 1024, 32, Direction::pull, Direction::push);
    const Traffic skewed = zipf_traffic(s, push, 1.2);
    const double a = stage_mean(simulate(t, s, push, skewed, fwd), Pass::forward, Stage::dispatch);
    const double b = stage_mean(simulate(t, s, pull, skewed, fwd), Pass::forward, Stage::dispatch);
    EXPECT_LT(b, 0.92 * a) << "R=" << R << ": skewed, TMA, 32 SMs: pull dispatch should win by > 8%";
    const Traffic flat = zipf_traffic(s, push, 0.0);
    const double c = stage_mean(simulate(t, s, push, flat, fwd), Pass::forward, Stage::dispatch);
    const double d = stage_mean(simulate(t, s, pull, flat, fwd), Pass::forward, Stage::dispatch);
    // Balanced routing still has statistical per-destination imbalance (a few % at 2048 tokens): pull
    // gains at most a little there, and less than under skew.
    EXPECT_GT(d / c, 0.85) << "R=" << R;
    EXPECT_LT(d / c, 1.05) << "R=" << R;
    EXPECT_LT(b / a, d / c) << "R=" << R << ": pull's gain grows with the skew";
    SimOptions lsu = fwd;
    lsu.set_transfer({Engine::lsu, Signal::per_block});
    const RunConfig push8 = run(R, 2048, 1024, 8, Direction::push, Direction::push);
    const RunConfig pull8 = run(R, 2048, 1024, 8, Direction::pull, Direction::push);
    const double e = stage_mean(simulate(t, s, push8, flat, lsu), Pass::forward, Stage::dispatch);
    const double f = stage_mean(simulate(t, s, pull8, flat, lsu), Pass::forward, Stage::dispatch);
    EXPECT_LT(e, 0.5 * f) << "R=" << R << ": LSU at 8 SMs: push should win by 2x";
  }
}

// --- signalling protocols, fixed costs, peers ---

TEST(Signalling, PerMessageFlagsCostMoreThanPerBlockCountersForPush) {
  const LayerSpec s = load_preset("deepseek-v3");
  const Topology t = load_topology("gb300-nvl72");
  const RunConfig r = run(36, 2048, 512, 16, Direction::push, Direction::push);
  const Traffic tr = traffic_uniform(s, 36, 2048, 512, 7);
  SimOptions msg, blk;
  msg.backward = blk.backward = false;
  msg.set_transfer({Engine::tma, Signal::per_message});
  blk.set_transfer({Engine::tma, Signal::per_block});
  const double a = stage_mean(simulate(t, s, r, tr, msg), Pass::forward, Stage::dispatch);
  const double b = stage_mean(simulate(t, s, r, tr, blk), Pass::forward, Stage::dispatch);
  // One release flag per row: 512 tokens x ~7 destinations / 16 SMs x (fence + write) ~ 18 us per minibatch.
  EXPECT_GT(a, b + 4 * 10e6);
}

TEST(Signalling, ABarrierCouplesRanksUnderSkew) {
  const LayerSpec s = load_preset("qwen3-235b-a22b");
  const Topology t = load_topology("gb300-nvl72");
  const RunConfig r = run(8, 2048, 512, 24, Direction::push, Direction::push);
  const Traffic skewed = zipf_traffic(s, r, 1.2);
  SimOptions bar, blk;
  bar.set_transfer({Engine::tma, Signal::barrier});
  const SimResult a = simulate(t, s, r, skewed, bar), b = simulate(t, s, r, skewed, blk);
  EXPECT_GT(a.layer_ps, b.layer_ps);
  // Fan-in: a barrier's root checks R-1 flags; at R = 72 that is 3 polls, at R = 8 one.
  EXPECT_GT(fan_in_ns(t, 71), fan_in_ns(t, 7));
}

TEST(Stage, FixedCostIsPaidPerCommunicationTask) {
  const LayerSpec s = load_preset("qwen3-235b-a22b");
  Topology t = load_topology("gb300-nvl72");
  ASSERT_GE(t.stage_fixed_ns, 15000.0);  // issue 11: 15-19 us measured per dispatch or combine
  const RunConfig r = run(8, 1024, 64, 16, Direction::push, Direction::push);  // 16 minibatches
  const Traffic tr = traffic_uniform(s, 8, 1024, 64, 7);
  SimOptions o;
  o.backward = false;
  const SimResult with = simulate(t, s, r, tr, o);
  EXPECT_GE(stage_mean(with, Pass::forward, Stage::dispatch), 16 * t.stage_fixed_ns * kPsPerNs);
  t.stage_fixed_ns = 0;
  const SimResult without = simulate(t, s, r, tr, o);
  EXPECT_GT(with.forward_ps, without.forward_ps);
  EXPECT_LT(stage_mean(without, Pass::forward, Stage::dispatch), 16 * 15000.0 * kPsPerNs);
}

TEST(Peers, RateFallsAsEPGrows) {
  const Topology t = load_topology("gb200-nvl72");
  for (const char* sc : {"hybridep_dispatch", "hybridep_combine"}) {
    const double r8 = simulate_measurement(t, {sc, 16, 0, "", "", 8});
    const double r16 = simulate_measurement(t, {sc, 16, 0, "", "", 16});
    const double r64 = simulate_measurement(t, {sc, 16, 0, "", "", 64});
    EXPECT_GT(r8, r16) << sc;
    EXPECT_GT(r16, r64) << sc;
    // Public data: on the order of 10-20% from EP8 to EP64; the fit (EP8-36 only) extrapolates to 19-23%.
    EXPECT_GT(r64 / r8, 0.72) << sc;
    EXPECT_LT(r64 / r8, 0.88) << sc;
  }
}

// --- HBM sharing and ring back-pressure ---

TEST(Hbm, CommunicationTrafficSlowsTheTasksSharingHbm) {
  const LayerSpec s = load_preset("qwen3-235b-a22b");
  const Topology t = load_topology("gb300-nvl72");
  const RunConfig r = run(8, 2048, 256, 32, Direction::push, Direction::push);
  const Traffic tr = traffic_uniform(s, 8, 2048, 256, 7);
  SimOptions on, off;
  off.hbm_sharing = false;
  const SimResult a = simulate(t, s, r, tr, on), b = simulate(t, s, r, tr, off);
  double ca = 0, cb = 0;
  for (Stage st : {Stage::gate_up, Stage::swiglu, Stage::down, Stage::shared}) {
    ca += stage_mean(a, Pass::forward, st) + stage_mean(a, Pass::backward, st);
    cb += stage_mean(b, Pass::forward, st) + stage_mean(b, Pass::backward, st);
  }
  EXPECT_GT(ca, cb);                       // compute tasks take longer while links move bytes through HBM
  EXPECT_LT(ca, cb * 1.5);                 // ...but by a bounded amount
  EXPECT_GE(a.layer_ps, b.layer_ps);
}

// The ring holds `macrobatch` minibatches: dispatch m may start only after every GPU has run the first
// stage of minibatch m - slots (its ring slot is free again), plus the credit flag. Checked on the trace.
TEST(Ring, MacrobatchSlotsApplyBackPressure) {
  const LayerSpec s = load_preset("qwen3-235b-a22b");
  const Topology t = load_topology("gb300-nvl72");
  RunConfig r = run(8, 2048, 128, 32, Direction::push, Direction::push);
  const Traffic tr = traffic_uniform(s, 8, 2048, 128, 7);
  SimOptions o;
  o.backward = false;
  o.trace = true;
  for (int slots : {1, 2, 4}) {
    r.macrobatch = slots;
    const SimResult res = simulate(t, s, r, tr, o);
    std::map<int, Time> first_end, dispatch_start;
    for (const auto& sl : res.slices) {
      if (sl.track == "compute" && sl.stage == Stage::gate_up)
        first_end[sl.minibatch] = std::max(first_end[sl.minibatch], sl.end);
      if (sl.track == "comm dispatch")
        dispatch_start[sl.minibatch] = dispatch_start.count(sl.minibatch)
                                           ? std::min(dispatch_start[sl.minibatch], sl.start)
                                           : sl.start;
    }
    ASSERT_EQ(dispatch_start.size(), 16u);
    int bound = 0;
    for (int m = slots; m < 16; ++m) {
      EXPECT_GT(dispatch_start[m], first_end[m - slots]) << "slots " << slots << " minibatch " << m;
      bound += dispatch_start[m] < first_end[m - slots] + 2 * t.one_way_signal_ns() * kPsPerNs;
    }
    if (slots == 1) {  // one slot: the credit is what starts some dispatches
      EXPECT_GT(bound, 0);
    }
  }
  r.macrobatch = 0;
  o.trace = false;
  const SimResult free = simulate(t, s, r, tr, o);
  r.macrobatch = 16;  // as many slots as minibatches: no back-pressure
  EXPECT_EQ(simulate(t, s, r, tr, o).forward_ps, free.forward_ps);
}

// --- sweep output ---

TEST(Sweep, HdfHoldsTheCsvColumns) {
  const LayerSpec s = load_preset("qwen3-30b-a3b");
  const Topology t = load_topology("hgx-h200-8");
  RunConfig base = run(8, 256, 0, 16, Direction::push, Direction::push);
  SweepSpace space;
  space.comm_sms = {8, 16};
  space.minibatches = {256, 128};
  space.routing = "zipf:1.1";
  const auto pts = run_sweep(t, s, base, space, 1);
  ASSERT_EQ(pts.size(), 2u * 2u * 16u);
  const auto dir = std::filesystem::temp_directory_path();
  const std::string csv = (dir / "calico_sweep_test.csv").string(), h5 = (dir / "calico_sweep_test.h5").string();
  write_sweep_csv(csv, pts);
  write_sweep_hdf5(h5, pts);
  std::ifstream in(csv);
  std::string header;
  std::getline(in, header);
  std::vector<std::string> cols;
  std::stringstream hs(header);
  for (std::string c; std::getline(hs, c, ',');) cols.push_back(c);
  ASSERT_EQ(cols.size(), 11u);
  const hid_t f = H5Fopen(h5.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  for (const auto& c : cols) {
    ASSERT_GT(H5Lexists(f, c.c_str(), H5P_DEFAULT), 0) << c;
    const hid_t d = H5Dopen2(f, c.c_str(), H5P_DEFAULT);
    const hid_t sp = H5Dget_space(d);
    EXPECT_EQ(H5Sget_simple_extent_npoints(sp), hssize_t(pts.size())) << c;
    H5Sclose(sp);
    H5Dclose(d);
  }
  std::vector<double> layer(pts.size());
  const hid_t d = H5Dopen2(f, "layer_us", H5P_DEFAULT);
  H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, layer.data());
  H5Dclose(d);
  H5Fclose(f);
  std::string line;
  for (size_t i = 0; std::getline(in, line); ++i) {
    std::vector<std::string> v;
    std::stringstream ls(line);
    for (std::string x; std::getline(ls, x, ',');) v.push_back(x);
    ASSERT_EQ(v.size(), cols.size());
    EXPECT_EQ(std::stod(v[6]), layer[i]) << "row " << i;
  }
  std::filesystem::remove(csv);
  std::filesystem::remove(h5);
}

}  // namespace
}  // namespace calico::sim
