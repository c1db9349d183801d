// Compute work of one task (tile model): GEMM tiles on the compute SMs, bounded below by the HBM traffic.
#pragma once

#include "calico/simulator.h"

namespace calico::sim {

// Wire bytes of one token row of width `hidden` in a dtype (bf16: 2H; mxfp8: H + H/32 scales).
inline double row_bytes(DType d, int hidden) { return d == DType::bf16 ? 2.0 * hidden : hidden + hidden / 32.0; }

// Duration in ps of (pass, stage) for GPU `gpu` and minibatch `mb` with `sms` compute SMs. `hbm_gbps` is
// the HBM bandwidth left to the task (0 = the topology's; less while communication reads/writes HBM).
Time task_duration(const Topology& topo, const LayerSpec& spec, const Traffic& tr, Pass pass, Stage stage, int gpu,
                   int mb, int sms, double hbm_gbps = 0);

}  // namespace calico::sim
