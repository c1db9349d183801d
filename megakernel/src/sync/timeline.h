// The per-task timeline (calico bench --timeline; MoeLayer::record_timeline): what each CTA ran and when,
// on the GPU's global timer. Shared by the device (the records) and the host (their names). Never part of a
// result: recording changes no bit (test_megakernel_gpu).
#pragma once

#include <cstdint>

namespace calico::gpu::mk {

// What a record is. Forward: the data-movement CTAs' dispatch, the GEMM tiles, the combine tail (one record
// per CTA). Backward: the d_y dispatch, the GEMM tiles and the two side tasks.
enum TimelineStage : int {
  kTlDispatch,
  kTlGateUp, kTlSharedGateUp, kTlDown, kTlSharedDown, kTlCombine,
  kTlDh, kTlSharedDh, kTlDx, kTlSharedDx,
  kTlWDown, kTlSharedWDown, kTlWGate, kTlSharedWGate, kTlWUp, kTlSharedWUp,
  kTlRouter, kTlDxCombine,
  kTlStageCount
};

inline const char* timeline_stage_name(int stage) {
  static constexpr const char* kNames[kTlStageCount] = {
      "dispatch", "gate_up", "shared_gate_up", "down", "shared_down", "combine", "d_h", "shared_d_h", "d_x_k",
      "shared_d_x_k", "dw_down", "shared_dw_down", "dw_gate", "shared_dw_gate", "dw_up", "shared_dw_up",
      "router_grad", "d_x_combine"};
  return stage >= 0 && stage < kTlStageCount ? kNames[stage] : "unknown";
}

// One record (40 bytes). task: the index in the pass's walk (-1 for a dispatch or tail record); expert -1 for
// the shared expert or none; m, n: the tile (a side task's m is its index), -1 where none.
struct TimelineSlot {
  int cta, stage, task, expert, m, n;
  unsigned long long start_ns, end_ns;
};

}  // namespace calico::gpu::mk
