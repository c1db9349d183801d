// The layer simulator: calibration scenarios against the stored H200 measurements, the sanity properties of
// issue 4, schedules built by hand, determinism, traces and the measured-timeline comparison.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "calico/data.h"
#include "calico/error.h"
#include "calico/schedule.h"
#include "calico/simulator.h"
#include "sim_test_util.h"

namespace calico::sim {
namespace {


SimResult sim(const Topology& t, const LayerSpec& s, const RunConfig& r, SimOptions o = {}) {
  return simulate(t, s, r, traffic_uniform(s, r.ranks, r.tokens_per_rank, r.minibatch_tokens(), 7), o);
}

// --- calibration ---

constexpr double kHeldOutTolerance = 0.10;

TEST(Calibration, ShippedH200TopologyReproducesEveryScenarioWithin5Percent) {
  const Topology t = load_topology("h200x2");
  const CalibrationData d = load_calibration("h200x2");
  ASSERT_GE(d.measurements.size(), 16u);
  for (const auto& m : d.measurements) {
    const double p = simulate_measurement(t, m);
    EXPECT_NEAR(p / m.value, 1.0, 0.05) << m.scenario << " x=" << m.x << " measured " << m.value << " simulated " << p;
  }
}

// h200x2 with its fitted parameters moved far away: the start of the calibration tests.
Topology perturbed_h200x2() {
  Topology t = load_topology("h200x2");
  t.link_efficiency = 0.6;
  t.push_store_gbps_per_sm = 80;
  t.remote_mem_latency_ns = 900;
  t.reverse_overhead = 0.15;
  t.hop_latency_ns = 150;
  t.nccl_launch_ns = 20000;
  t.nccl_channel_bytes = 1e5;
  t.nccl_channel_gbps = 60;
  return t;
}

TEST(Calibration, FitFromAPerturbedStartReachesWithin5Percent) {
  // Start far from the shipped fit: the fit must find its way back from the data alone.
  Topology t = perturbed_h200x2();
  const CalibrationData d = load_calibration("h200x2");
  const CalibrationResult r = calibrate(t, d);
  ASSERT_EQ(r.predicted.size(), d.measurements.size());
  for (size_t i = 0; i < d.measurements.size(); ++i)
    EXPECT_NEAR(r.predicted[i] / d.measurements[i].value, 1.0, 0.05) << d.measurements[i].scenario << " x="
                                                                      << d.measurements[i].x;
  EXPECT_LT(r.max_rel_error, 0.05);
}

// Held-out check (issue 9: the fit used to be judged only on the data it was fitted to): fit from the
// perturbed start on all measurements but one per curve, then predict the held-out ones.
TEST(Calibration, FitPredictsHeldOutMeasurements) {
  Topology t = perturbed_h200x2();
  const CalibrationData all = load_calibration("h200x2");
  CalibrationData train = all, held;
  train.measurements.clear();
  for (const auto& m : all.measurements)
    ((m.scenario == "push_copy" && m.x == 32) || (m.scenario == "pull_copy" && m.x == 32) ||
             (m.scenario == "all_to_all" && m.x == 256)
         ? held
         : train)
        .measurements.push_back(m);
  ASSERT_EQ(held.measurements.size(), 3u);
  const CalibrationResult r = calibrate(t, train);
  for (const auto& m : held.measurements) {
    const double p = simulate_measurement(r.fitted, m);
    EXPECT_NEAR(p / m.value, 1.0, kHeldOutTolerance) << m.scenario << " x=" << m.x << " measured " << m.value
                                                     << " predicted " << p;
  }
}

TEST(Calibration, PushSaturatesSoonerThanPullAtFewSMs) {
  const Topology t = load_topology("h200x2");
  const double push8 = simulate_measurement(t, {"push_copy", 8, 0, "", ""});
  const double pull8 = simulate_measurement(t, {"pull_copy", 8, 0, "", ""});
  EXPECT_GT(push8, 2 * pull8);  // Little's law limits a few pulling SMs; stores are fire-and-forget
}

// --- sanity properties ---

TEST(Sanity, DoublingLinkBandwidthNeverSlowsALayer) {
  const LayerSpec s = load_preset("qwen3-30b-a3b");
  for (const char* topo : {"h200x2", "hgx-h200-8"}) {
    const Topology t = load_topology(topo);
    for (Direction d : {Direction::push, Direction::pull})
      for (Direction c : {Direction::push, Direction::pull})
        for (int mb : {128, 512}) {
          const RunConfig r = run(t.max_gpus, 512, mb, 16, d, c);
          SimOptions fast;
          fast.link_scale = 2.0;
          const SimResult a = sim(t, s, r), b = sim(t, s, r, fast);
          EXPECT_LE(b.layer_ps, a.layer_ps) << topo << " " << to_string(d) << "/" << to_string(c) << " mb " << mb;
          EXPECT_LE(b.forward_ps, a.forward_ps);
        }
  }
}

TEST(Sanity, MoreTokensNeverTakeLessTime) {
  const LayerSpec s = load_preset("qwen3-30b-a3b");
  const Topology t = load_topology("hgx-h200-8");
  for (Direction d : {Direction::push, Direction::pull}) {
    Time last = 0;
    for (int tokens : {64, 128, 256, 512, 1024, 2048}) {
      const SimResult r = sim(t, s, run(8, tokens, 0, 16, d, d));
      EXPECT_GE(r.layer_ps, last) << "T=" << tokens << " " << to_string(d);
      last = r.layer_ps;
    }
  }
}

TEST(Sanity, PushAndPullMoveTheSameBytes) {
  const LayerSpec s = load_preset("deepseek-v3");
  const Topology t = load_topology("gb300-nvl72");
  const SimResult push = sim(t, s, run(8, 256, 64, 16, Direction::push, Direction::push));
  const SimResult pull = sim(t, s, run(8, 256, 64, 16, Direction::pull, Direction::pull));
  const SimResult mixed = sim(t, s, run(8, 256, 64, 16, Direction::push, Direction::pull));
  EXPECT_GT(push.remote_bytes, 0);
  EXPECT_EQ(push.remote_bytes, pull.remote_bytes);
  EXPECT_EQ(push.remote_bytes, mixed.remote_bytes);
  EXPECT_EQ(push.local_bytes, pull.local_bytes);
}

TEST(Sanity, OneRankMovesNoBytesOverLinks) {
  const LayerSpec s = load_preset("qwen3-30b-a3b");
  const Topology t = load_topology("h200x2");
  for (Direction d : {Direction::push, Direction::pull}) {
    const SimResult r = sim(t, s, run(1, 256, 64, 16, d, d));
    EXPECT_EQ(r.remote_bytes, 0.0);
    EXPECT_EQ(r.link_util_max, 0.0);
    EXPECT_GT(r.local_bytes, 0.0);
    EXPECT_GT(r.layer_ps, 0);
  }
}

TEST(Sanity, BytesOverLinksMatchTheTrafficMatrix) {
  // Independent count: dispatch bytes = off-diagonal unique (token, rank) pairs * 2H, combine = rows * 2H,
  // each twice (forward and backward).
  const LayerSpec s = load_preset("qwen3-30b-a3b");
  const Topology t = load_topology("hgx-h200-8");
  const RunConfig r = run(8, 256, 128, 16, Direction::push, Direction::pull);
  const Traffic tr = traffic_uniform(s, 8, 256, 128, 7);
  double expect = 0;
  for (int m = 0; m < tr.minibatches; ++m)
    for (int a = 0; a < 8; ++a)
      for (int b = 0; b < 8; ++b)
        if (a != b) expect += 2.0 * (tr.dispatch(m, a, b) + tr.combine(m, a, b)) * 2.0 * s.hidden;
  EXPECT_EQ(simulate(t, s, r, tr).remote_bytes, expect);
}

TEST(Simulator, IsDeterministic) {
  const LayerSpec s = load_preset("qwen3-235b-a22b");
  const Topology t = load_topology("gb200-nvl72");
  const RunConfig r = run(16, 512, 128, 20, Direction::pull, Direction::push);
  const SimResult a = sim(t, s, r), b = sim(t, s, r);
  EXPECT_EQ(a.layer_ps, b.layer_ps);
  EXPECT_EQ(a.exposed_comm_ps, b.exposed_comm_ps);
  EXPECT_EQ(a.remote_bytes, b.remote_bytes);
}

TEST(Simulator, RejectsBadRuns) {
  const LayerSpec s = load_preset("qwen3-30b-a3b");
  const Topology t = load_topology("h200x2");
  EXPECT_THROW(sim(t, s, run(3, 256, 0, 16, Direction::push, Direction::push)), Error);   // 3 > 2 GPUs
  EXPECT_THROW(sim(t, s, run(2, 256, 0, 132, Direction::push, Direction::push)), Error);  // no compute SMs
  EXPECT_THROW(load_topology("no-such-topology"), Error);
}

// --- schedules built by hand ---

Schedule hand_schedule() {
  // 2 ranks x 2 tokens, 4 experts (rank 0 owns 0-1, rank 1 owns 2-3), K = 2.
  // token 0 (rank 0) -> experts 0, 2; token 1 (rank 0) -> 2, 3; token 2 (rank 1) -> 1, 3; token 3 (rank 1) -> 0, 1.
  Schedule s;
  s.ranks = 2;
  s.experts = 4;
  s.experts_per_rank = 2;
  s.top_k = 2;
  s.tokens_per_rank = 2;
  s.expert_rows = {{{0, 0}, {3, 0}}, {{2, 0}, {3, 1}}, {{0, 1}, {1, 0}}, {{1, 1}, {2, 1}}};
  return s;
}

TEST(Traffic, FromAHandBuiltSchedule) {
  const Traffic t = traffic_from_schedule(hand_schedule(), 0);
  ASSERT_EQ(t.minibatches, 1);
  // Rank 0's tokens: token 0 goes to ranks 0 and 1, token 1 to rank 1 only (two experts, one copy).
  EXPECT_EQ(t.dispatch(0, 0, 0), 1);
  EXPECT_EQ(t.dispatch(0, 0, 1), 2);
  // Rank 1's tokens: token 2 to ranks 0 and 1, token 3 to rank 0 only.
  EXPECT_EQ(t.dispatch(0, 1, 0), 2);
  EXPECT_EQ(t.dispatch(0, 1, 1), 1);
  // Combine rows go back per (token, k): rank 1 returns 3 rows to rank 0 (token 0 k1, token 1 k0, k1).
  EXPECT_EQ(t.combine(0, 1, 0), 3);
  EXPECT_EQ(t.combine(0, 0, 0), 1);
  EXPECT_EQ(t.combine(0, 0, 1), 3);
  EXPECT_EQ(t.rows(0, 0), 2);
  EXPECT_EQ(t.rows(0, 3), 2);
}

TEST(Traffic, MinibatchesSplitTokensInOrder) {
  const Traffic t = traffic_from_schedule(hand_schedule(), 1);
  ASSERT_EQ(t.minibatches, 2);
  EXPECT_EQ(t.dispatch(0, 0, 1), 1);  // token 0
  EXPECT_EQ(t.dispatch(1, 0, 1), 1);  // token 1
  EXPECT_EQ(t.dispatch(1, 1, 0), 1);  // token 3
  EXPECT_EQ(t.dispatch(1, 1, 1), 0);
}

TEST(Traffic, UniformRoutingConservesRows) {
  const LayerSpec s = load_preset("deepseek-v3");
  const Traffic t = traffic_uniform(s, 72, 128, 64, 3);  // R does not divide E = 256
  int64_t rows = 0, combine = 0;
  for (int m = 0; m < t.minibatches; ++m) {
    for (int e = 0; e < t.experts; ++e) rows += t.rows(m, e);
    for (int a = 0; a < 72; ++a)
      for (int b = 0; b < 72; ++b) combine += t.combine(m, a, b);
  }
  EXPECT_EQ(rows, 72LL * 128 * 8);
  EXPECT_EQ(combine, rows);
  int owned_by_last = 0;
  for (int e = 0; e < 256; ++e) owned_by_last += t.expert_owner[e] == 71;
  EXPECT_EQ(owned_by_last, 256 - 256 * 71 / 72);
}

TEST(Traffic, AgreesWithBuildSchedulesOwnMatrices) {
  // Two independent counts of the same traffic: build_schedule's matrices and ours from its expert rows.
  const LayerSpec s = load_preset("qwen3-30b-a3b");
  RunConfig r = run(8, 64, 0, 16, Direction::push, Direction::push);
  // An error here is a failure, not a skip (issue 9: the test used to turn any error into a skip).
  const Schedule sch = build_schedule(s, r, make_routing(s, r.total_tokens(), RoutingSource::parse("zipf:1.2"), 5));
  const Traffic t = traffic_from_schedule(sch, 0);
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b) {
      EXPECT_EQ(t.dispatch(0, a, b), sch.dispatch_tokens[a * 8 + b]) << a << "->" << b;
      EXPECT_EQ(t.combine(0, a, b), sch.combine_rows[a * 8 + b]) << a << "->" << b;
    }
}

TEST(Simulator, RunsOnAHandBuiltSchedule) {
  LayerSpec s;
  s.name = "hand";
  s.hidden = 256;
  s.intermediate = 128;
  s.experts = 4;
  s.top_k = 2;
  const Topology t = load_topology("h200x2");
  RunConfig r = run(2, 2, 0, 8, Direction::push, Direction::push);
  const SimResult res = simulate(t, s, r, traffic_from_schedule(hand_schedule(), 0));
  // Off-diagonal: dispatch 2 + 2 tokens, combine 3 + 3 rows, 512 bytes per row, forward and backward.
  EXPECT_EQ(res.remote_bytes, 2.0 * (4 + 6) * 512);
  EXPECT_GT(res.layer_ps, 0);
}

// --- EP = 1: the epilogue stores and the local combine (MODEL.md, "Compute") ---

// Sum of the compute slices of (pass, stage) on GPU 0, in ps.
Time compute_time(const SimResult& r, Pass pass, Stage stage) {
  Time sum = 0;
  for (const auto& s : r.slices)
    if (s.track == "compute" && s.pass == pass && s.stage == stage) sum += s.end - s.start;
  return sum;
}

TEST(OneGpu, EpilogueStoresAddTheirTimeToEveryTileWave) {
  // qwen3 at R = 1, one minibatch: the forward down stage is tensor-bound, so its duration is waves x tile
  // time; an epilogue rate adds waves x (128 x 256 bf16 / rate). The waves are counted here from the
  // traffic's rows, independently of work.cpp.
  const LayerSpec s = load_preset("qwen3-30b-a3b");
  Topology t = load_topology("h200x2");
  const RunConfig r = run(1, 4096, 0, 16, Direction::push, Direction::push);
  const Traffic tr = traffic_uniform(s, 1, 4096, r.minibatch_tokens(), 7);
  int64_t tiles = 0;
  for (int e = 0; e < tr.experts; ++e) tiles += (tr.rows(0, e) + t.tile_m - 1) / t.tile_m * ((s.hidden + t.tile_n - 1) / t.tile_n);
  const int64_t waves = (tiles + t.sms - 1) / t.sms;  // EP = 1: every SM computes
  SimOptions o;
  o.trace = true;
  t.epilogue_store_gbps_per_sm = 0;
  const SimResult free_stores = simulate(t, s, r, tr, o);
  t.epilogue_store_gbps_per_sm = 25;
  const SimResult priced = simulate(t, s, r, tr, o);
  const double per_tile_ps = 2.0 * t.tile_m * t.tile_n / (25 * 1e-3);
  const double added = double(compute_time(priced, Pass::forward, Stage::down) - compute_time(free_stores, Pass::forward, Stage::down));
  EXPECT_NEAR(added, double(waves) * per_tile_ps, 2.0);  // (the task's rounding to whole ps)
  // The weight gradients' fp32 tiles cost twice a bf16 tile's epilogue: the backward grows by more than the
  // forward (negative control: the same rate cannot leave both passes alike).
  EXPECT_GT(priced.backward_ps - free_stores.backward_ps, priced.forward_ps - free_stores.forward_ps);
  t.epilogue_store_gbps_per_sm = 0;
  EXPECT_EQ(simulate(t, s, r, tr, o).layer_ps, free_stores.layer_ps);
}

TEST(OneGpu, TheLocalCombineReadsEveryRowAtTheLocalCopyRate) {
  // At R = 1 each pass ends with the weighted sums of every token's K rows: (T K + T) rows of 2H bytes
  // through HBM at local_copy_gbps (read and write counted), one task per minibatch after its last stage.
  const LayerSpec s = load_preset("qwen3-30b-a3b");
  const Topology t = load_topology("h200x2");
  SimOptions o;
  o.trace = true;
  const int64_t T = 2048, mb = 512;
  const SimResult r = sim(t, s, run(1, T, mb, 16, Direction::push, Direction::push), o);
  for (Pass pass : {Pass::forward, Pass::backward}) {
    int tasks = 0;
    Time last_down_or_gate_up = 0, first_combine = std::numeric_limits<Time>::max();
    for (const auto& x : r.slices)
      if (x.track == "compute" && x.pass == pass) {
        if (x.stage == Stage::combine) ++tasks, first_combine = std::min(first_combine, x.start);
        if (x.stage == (pass == Pass::forward ? Stage::down : Stage::gate_up) && x.minibatch == 0)
          last_down_or_gate_up = std::max(last_down_or_gate_up, x.end);
      }
    EXPECT_EQ(tasks, T / mb);
    EXPECT_GE(first_combine, last_down_or_gate_up);  // minibatch 0's combine after its last stage
    const double bytes = 2.0 * s.hidden * double(T * s.top_k + T);
    const double expect_ps = bytes / (t.local_copy_gbps * 1e-3) + (T / mb) * t.task_overhead_ns * kPsPerNs;
    EXPECT_NEAR(double(compute_time(r, pass, Stage::combine)), expect_ps, double(T / mb));
  }
  // Negative control: two ranks combine over the links, not as compute tasks.
  const SimResult two = sim(t, s, run(2, T, mb, 16, Direction::push, Direction::push), o);
  EXPECT_EQ(compute_time(two, Pass::forward, Stage::combine), 0);
}

// --- trace and timeline ---

TEST(Trace, PerfettoJsonHasOneTrackPerRoleAndLink) {
  const LayerSpec s = load_preset("qwen3-30b-a3b");
  const Topology t = load_topology("h200x2");
  SimOptions o;
  o.trace = true;
  const SimResult r = sim(t, s, run(2, 256, 64, 16, Direction::push, Direction::pull), o);
  const auto path = std::filesystem::temp_directory_path() / "calico_sim_trace_test.json";
  write_perfetto_trace(path.string(), r, t);
  std::ifstream in(path);
  const auto j = nlohmann::json::parse(in);
  std::set<std::pair<int, int>> tracks;
  size_t slices = 0;
  for (const auto& e : j.at("traceEvents"))
    if (e.at("ph") == "X") {
      ++slices;
      tracks.insert({e.at("pid").get<int>(), e.at("tid").get<int>()});
      EXPECT_GE(e.at("dur").get<double>(), 0.0);
    }
  EXPECT_EQ(slices, r.slices.size());
  EXPECT_EQ(tracks.size(), 2u * 5u);  // 2 GPUs x (compute, dispatch, combine, nvlink out, nvlink in)
  std::filesystem::remove(path);
}

TEST(Timeline, SyntheticMeasurementComparesPerStage) {
  const LayerSpec s = load_preset("qwen3-30b-a3b");
  const Topology t = load_topology("h200x2");
  SimOptions o;
  o.trace = true;
  const SimResult r = sim(t, s, run(2, 256, 64, 16, Direction::push, Direction::push), o);
  // A synthetic "measured" timeline: the simulated tasks split over 2 SMs each, 1.5x slower, as CSV and JSON.
  const auto csv = std::filesystem::temp_directory_path() / "calico_timeline_test.csv";
  const auto js = std::filesystem::temp_directory_path() / "calico_timeline_test.json";
  {
    std::ofstream c(csv);
    c << "rank,sm,role,pass,stage,minibatch,start_ns,end_ns\n";
    nlohmann::json recs = nlohmann::json::array();
    for (const auto& sl : r.slices) {
      if (sl.track == "nvlink out" || sl.track == "nvlink in") continue;
      const int64_t a = sl.start * 3 / 2000, b = sl.end * 3 / 2000;  // ps -> ns, x1.5
      for (int sm = 0; sm < 2; ++sm) {
        c << sl.gpu << ',' << sm << ',' << (sl.track == "compute" ? "compute" : "comm") << ',' << to_string(sl.pass)
          << ',' << to_string(sl.stage) << ',' << sl.minibatch << ',' << a << ',' << b << '\n';
        recs.push_back({{"rank", sl.gpu}, {"sm", sm}, {"role", "compute"}, {"pass", to_string(sl.pass)},
                        {"stage", to_string(sl.stage)}, {"minibatch", sl.minibatch}, {"start_ns", a}, {"end_ns", b}});
      }
    }
    std::ofstream(js) << nlohmann::json{{"format", "calico-timeline-v1"}, {"records", recs}}.dump();
  }
  for (const auto& path : {csv, js}) {
    const auto c = compare_timeline(r, read_timeline(path.string()));
    ASSERT_FALSE(c.stages.empty());
    for (const auto& st : c.stages) {
      ASSERT_GT(st.predicted_us, 0) << to_string(st.stage);
      EXPECT_NEAR(st.measured_us / st.predicted_us, 1.5, 0.01) << to_string(st.pass) << " " << to_string(st.stage);
    }
    EXPECT_NEAR(c.measured_layer_us / c.predicted_layer_us, 1.5, 0.01);
    for (Pass pass : {Pass::forward, Pass::backward}) {
      ASSERT_GT(c.predicted_pass_us[int(pass)], 0) << to_string(pass);
      EXPECT_NEAR(c.measured_pass_us[int(pass)] / c.predicted_pass_us[int(pass)], 1.5, 0.01) << to_string(pass);
    }
    // Negative control: the backward pass is its own span, not the layer's.
    EXPECT_LT(c.predicted_pass_us[int(Pass::backward)], 0.99 * c.predicted_layer_us);
    std::filesystem::remove(path);
  }
}

TEST(Timeline, RejectsBadRecords) {
  const auto p = std::filesystem::temp_directory_path() / "calico_timeline_bad.json";
  std::ofstream(p) << R"({"records":[{"rank":0,"stage":"gate_up","minibatch":0,"start_ns":10,"end_ns":5}]})";
  EXPECT_THROW(read_timeline(p.string()), Error);
  std::ofstream(p) << R"({"records":[{"rank":0,"stage":"bogus","minibatch":0,"start_ns":1,"end_ns":5}]})";
  EXPECT_THROW(read_timeline(p.string()), Error);
  std::filesystem::remove(p);
}

// --- baseline ---

TEST(Baseline, IsSerialAllToAllThenComputeThenAllToAll) {
  const LayerSpec s = load_preset("qwen3-235b-a22b");
  const Topology t = load_topology("gb300-nvl72");
  RunConfig r = run(8, 2048, 0, 24, Direction::push, Direction::push);
  const SimResult b = simulate_baseline(t, s, r, traffic_uniform(s, 8, 2048, 2048, 7));
  double comm = 0;
  for (const auto& st : b.stages)
    if (st.stage == Stage::dispatch || st.stage == Stage::combine) comm += st.max_ps;
  EXPECT_EQ(double(b.exposed_comm_ps), comm);  // nothing overlaps communication
  EXPECT_GT(b.layer_ps, b.exposed_comm_ps);
  // With the links 4x faster only the all_to_all phases shrink.
  SimOptions fast;
  fast.link_scale = 4;
  const SimResult f = simulate_baseline(t, s, r, traffic_uniform(s, 8, 2048, 2048, 7), fast);
  EXPECT_LT(f.exposed_comm_ps, b.exposed_comm_ps);
  EXPECT_EQ(f.layer_ps - f.exposed_comm_ps, b.layer_ps - b.exposed_comm_ps);
}

}  // namespace
}  // namespace calico::sim

namespace calico::sim {
namespace {

// Issue 9: a bad comm-SM value in a sweep is an Error before the parallel loop (it used to be thrown inside
// the OpenMP region and end in std::terminate), and simulated runs have bounded sizes.
TEST(Sweep, BadCommSmsIsAnErrorNotATerminate) {
  const Topology t = load_topology("h200x2");
  const LayerSpec s = load_preset("tiny");
  SweepSpace space;
  space.minibatches = {64};
  for (const std::vector<int>& sms : {std::vector<int>{8, 0}, std::vector<int>{-8}, std::vector<int>{8, 500}}) {
    space.comm_sms = sms;
    EXPECT_THROW(run_sweep(t, s, run(2, 64, 0, 16, Direction::push, Direction::push), space, 1, {}, 0), Error);
  }
  space.comm_sms = {8};
  EXPECT_EQ(run_sweep(t, s, run(2, 64, 0, 16, Direction::push, Direction::push), space, 1, {}, 0).size(), 16u);
}

TEST(Simulate, RunSizesAreBounded) {
  const Topology t = load_topology("h200x2");
  const LayerSpec s = load_preset("tiny");
  EXPECT_THROW(validate_run(t, s, run(2, 2147483647, 0, 16, Direction::push, Direction::push)), Error);
  EXPECT_THROW(validate_run(t, s, run(2, 65536, 1, 16, Direction::push, Direction::push)), Error);  // 65536 minibatches
  EXPECT_NO_THROW(validate_run(t, s, run(2, 65536, 16, 16, Direction::push, Direction::push)));
}

}  // namespace
}  // namespace calico::sim
