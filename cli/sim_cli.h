// Options shared by `calico simulate` and `calico sweep`: the problem (topology, preset, ranks, tokens) and
// the traffic it implies (uniform routing from the simulator's generator for any R, or any other routing
// source through make_routing + build_schedule, which needs R to divide E).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "command.h"

#include "calico/data.h"
#include "calico/error.h"
#include "calico/schedule.h"
#include "calico/simulator.h"
#include "calico/spec.h"

namespace calico::cli {

struct SimProblem {
  std::string topology, preset, routing = "uniform", dtype = "bf16";
  int ranks = 0;
  int tokens = 0;
  uint64_t seed = 1;

  void add(CLI::App& sub) {
    sub.add_option("--topology", topology, "Topology name in data/topologies (or a JSON path)")->required();
    sub.add_option("--preset", preset, "Model preset (data/presets), e.g. deepseek-v3")->required();
    sub.add_option("--ranks", ranks, "EP ranks R (<= the topology's GPUs)")->required();
    sub.add_option("--tokens", tokens, "Tokens per rank T, in [1, 2^20], with R*T <= 2^24")->required();
    sub.add_option("--routing", routing,
                   "uniform (default), zipf:S, adversarial or FILE.h5 (any R; rank r owns experts [rE/R, (r+1)E/R))");
    sub.add_option("--dtype", dtype, "bf16 or mxfp8 (wire and GEMM format of the routed experts)");
    sub.add_option("--seed", seed, "Routing seed")->check(calico::cli::unsigned_value());
  }
  LayerSpec spec() const {
    LayerSpec s = load_preset(preset);
    s.dtype = parse_dtype(dtype);
    return s;
  }
  sim::Traffic traffic(const LayerSpec& spec, const RunConfig& cfg) const {
    if (routing == "uniform")
      return sim::traffic_uniform(spec, cfg.ranks, cfg.tokens_per_rank, cfg.minibatch_tokens(), seed);
    const Routing r = make_routing(spec, cfg.total_tokens(), RoutingSource::parse(routing), seed);
    return sim::traffic_from_routing(spec, r, cfg.ranks, cfg.tokens_per_rank, cfg.minibatch_tokens());
  }
};

// --engine / --signal: the transfer engine and completion protocol of every communication stage.
struct TransferOptions {
  std::string engine = "tma", signal = "per_block";
  void add(CLI::App& sub) {
    sub.add_option("--engine", engine, "Transfer engine of every stage: tma (default), lsu or ce (MODEL.md)");
    sub.add_option("--signal", signal, "Completion protocol: per_block (default), per_message or barrier");
  }
  sim::Transfer get() const { return {sim::parse_engine(engine), sim::parse_signal(signal)}; }
};

inline Direction direction_option(const std::string& s, const char* flag) {
  if (s == "push") return Direction::push;
  if (s == "pull") return Direction::pull;
  throw Error(fmt::format("{} must be push or pull, got '{}'", flag, s));
}

}  // namespace calico::cli
