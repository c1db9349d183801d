// Release/acquire integer counters between tasks of a persistent launch, and the bounded waits on them and on
// the shared-memory pipeline's mbarriers. NOTE: every wait in the megakernel goes through this file: it
// times out after a configurable bound, records (stage, task, counter, expected, seen, SM, rank) into the
// device error slot, raises the abort flag so every other CTA leaves its loop too, and returns false. A hang
// is a bug; the host turns the record into a calico::Error (moe/layer.cu).
#pragma once

#include <cstdint>

#include "sync/timeline.h"

namespace calico::gpu::mk {

// Stages named in error records (stage_name() in layer.cu prints them).
enum Stage : int {
  kStageNone = 0,
  kStageDispatch,       // forward: x rows into the expert-major buffer
  kStageGateUp,         // forward: gate/up GEMM + SwiGLU
  kStageDown,           // forward: down GEMM
  kStageCombine,        // forward: weighted sum of y_k (+ y_s)
  kStageDyDispatch,     // backward: d_y = bf16(w_k d_out) rows
  kStageRouterGrad,     // backward: d_router_weights
  kStageDgradH,         // backward: d_h GEMM + SwiGLU backward
  kStageDgradX,         // backward: d_x_k GEMM
  kStageWgradDown,      // backward: d_W_down
  kStageWgradGate,      // backward: d_W_gate
  kStageWgradUp,        // backward: d_W_up
  kStageCombineBwd,     // backward: d_x sum
  kStagePipelineFull,   // consumer waiting for a TMA stage
  kStagePipelineEmpty,  // producer waiting for a free stage
  kStageCount
};

// Which counter array a record names (counter_name() in layer.cu).
enum CounterKind : int {
  kCounterNone = 0,
  kCounterDispatched,   // per routed m-tile: rows written (1 when done)
  kCounterGateUpDone,   // per m-tile: gate/up n-tiles done
  kCounterDownTotal,    // down tiles done, whole pass
  kCounterDyDone,       // per routed m-tile: d_y rows written
  kCounterDyExpert,     // per expert: d_y m-tiles written
  kCounterDhDone,       // per m-tile: d_h n-tiles done
  kCounterDhExpert,     // per expert: d_h tiles done
  kCounterDxTotal,      // d_x_k tiles done, whole pass
  kCounterMbarFull,
  kCounterMbarEmpty,
  kCounterBulkLoad,     // a data-movement CTA's bulk row load (dispatch/bulk_rows.cuh); index: the row
  kCounterWgradGo,      // warpgroup 1 waiting for warpgroup 0's go on a weight-gradient tile (moe/backward.cu)
};

struct ErrorRecord {
  int code;  // 0 none, 1 timeout
  int stage, task, counter_kind, counter_index, expected, seen, sm, rank;
};

// Optional profile (calico bench --profile): SM cycles summed per slot with integer atomics; never part of
// a result. Slots [0, kStageCount): time spent waiting, by the stage whose wait it was (pipeline waits
// counted by one thread per warpgroup); the slots below: consumer main loops, epilogues, tasks, tails.
enum ProfileSlot : int {
  kProfMainloop = kStageCount,
  kProfEpilogue,  // consumers: after the main loop until the stores are issued
  kProfSignal,    // consumers: the barrier + fence + counter release after the stores
  kProfCarryIn,   // consumers: reading the carried-in weight-gradient accumulator
  kProfMainDgradH, kProfMainDgradX, kProfMainWgrad,  // backward main loops by GEMM kind
  kProfEpiGateUp,  // forward: the gate/up epilogues (SwiGLU + three stores) within kProfEpilogue
  kProfTasks,
  kProfTail,
  kProfComm,
  // k-tiles run by the main loops above (counts, not cycles): cycles per k-tile = a main-loop slot / its count
  kProfKtiles, kProfKtilesDgradH, kProfKtilesDgradX, kProfKtilesWgrad,
  // consumers: every cycle of the main loops' full-barrier waits, the first try_wait's own suspension included
  // (the pipeline-wait slots above count only the waits that outlast it)
  kProfFullWait, kProfFullWaitDgradH, kProfFullWaitDgradX, kProfFullWaitWgrad,
  kProfEpiDgradH, kProfEpiDgradX, kProfEpiWgrad,  // backward epilogues by GEMM kind (within kProfEpilogue)
  kProfStoreWait,  // consumer thread 0 waiting for an epilogue strip to be free again (gemm/tma_store.cuh)
  kProfSideRouter, kProfSideCombine, kProfSideCombineWait,  // backward side tasks (moe/backward.cu)
  kProfSlots
};

struct SyncContext {
  ErrorRecord* error;      // device error slot (one per launch)
  int* abort_flag;         // set once by the first timeout
  uint64_t timeout_ns;     // bound of one wait
  int rank;
  unsigned long long* profile;  // [kProfSlots] or null
  // [4] or null: CTA 0 thread 0's SM clock and global timer (ns) at its start and its end, so the host can
  // tell the SM clock of each launch (the H200 lowers it under its power cap: calico bench records it).
  unsigned long long* clocks;
  // The per-task timeline (sync/timeline.h), or null: records taken in order of completion from a counter.
  TimelineSlot* timeline;
  unsigned* timeline_count;  // records wanted so far (more than the capacity: the host reports the overflow)
  unsigned timeline_capacity;
};

__device__ __forceinline__ void profile_add(const SyncContext& s, int slot, long long cycles) {
  if (s.profile != nullptr) atomicAdd(&s.profile[slot], static_cast<unsigned long long>(cycles));
}
__device__ __forceinline__ uint64_t global_timer_ns();
// A timeline record's start (0 when not recording: no timer read), and the record itself, from start to now.
// kTimeline: the kernel's instantiation (moe/persistent.cuh), launched only with s.timeline set; without it both
// are nothing, so a launch that does not record runs the kernel the timeline never touched.
template <bool kTimeline>
__device__ __forceinline__ unsigned long long timeline_start(const SyncContext&) {
  if constexpr (!kTimeline) return 0;
  return global_timer_ns();
}
template <bool kTimeline>
__device__ __forceinline__ void timeline_add(const SyncContext& s, int stage, int task, int expert, int m, int n,
                                             unsigned long long start) {
  if constexpr (!kTimeline) return;
  const unsigned i = atomicAdd(s.timeline_count, 1u);
  if (i < s.timeline_capacity)
    s.timeline[i] = TimelineSlot{static_cast<int>(blockIdx.x), stage, task, expert, m, n, start, global_timer_ns()};
}
// CTA 0 thread 0: the clock pair at its start (end = 0) or its end (end = 1).
__device__ __forceinline__ void clock_mark(const SyncContext& s, int end) {
  if (s.clocks != nullptr && blockIdx.x == 0 && threadIdx.x == 0) {
    s.clocks[2 * end] = static_cast<unsigned long long>(clock64());
    s.clocks[2 * end + 1] = global_timer_ns();
  }
}
// Consumer thread 0's share of the epilogue slots: cycles from `from` to now into `slot`; returns now.
__device__ __forceinline__ long long profile_lap(const SyncContext& s, int slot, long long from, int ctid) {
  const long long now = clock64();
  if (ctid == 0) profile_add(s, slot, now - from);
  return now;
}

__device__ __forceinline__ int ld_acquire_gpu(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Called by one thread after a CTA barrier that ordered the task's stores: the fence makes them (and, by
// cumulativity, the other threads' stores the barrier ordered) visible at GPU scope before the increment.
__device__ __forceinline__ void signal_add(int* p, int v) {
  asm volatile("fence.acq_rel.gpu;\n" ::: "memory");
  asm volatile("red.relaxed.gpu.global.add.s32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

// Generic-proxy writes seen through an acquire become visible to this thread's later TMA (async-proxy) reads.
__device__ __forceinline__ void fence_proxy_async_global() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
#endif
}

__device__ __forceinline__ uint64_t global_timer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
  return t;
}

__device__ __forceinline__ int sm_id() {
  int s;
  asm volatile("mov.u32 %0, %%smid;\n" : "=r"(s));
  return s;
}

__device__ __forceinline__ bool aborted(const SyncContext& s) {
  return *reinterpret_cast<volatile int*>(s.abort_flag) != 0;
}

// NOTE: inline, never a call: a call inside the consumers' wait path makes ptxas wait for every wgmma (C7518).
static __device__ __forceinline__ void record_timeout(const SyncContext& s, int stage, int task, int counter_kind,
                                            int counter_index, int expected, int seen) {
  if (atomicCAS(&s.error->code, 0, 1) == 0) {
    s.error->stage = stage;
    s.error->task = task;
    s.error->counter_kind = counter_kind;
    s.error->counter_index = counter_index;
    s.error->expected = expected;
    s.error->seen = seen;
    s.error->sm = sm_id();
    s.error->rank = s.rank;
    __threadfence();
  }
  atomicExch(s.abort_flag, 1);
}

// Waits until *counter >= expected (acquire). False on timeout or when another CTA aborted the launch.
__device__ __forceinline__ bool wait_counter(const SyncContext& s, const int* counter, int expected, int stage,
                                             int task, int counter_kind, int counter_index) {
  int seen = ld_acquire_gpu(counter);
  if (seen >= expected) return true;
  const uint64_t start = global_timer_ns();
  const long long c0 = clock64();
  for (;;) {
    __nanosleep(128);
    seen = ld_acquire_gpu(counter);
    if (seen >= expected) {
      profile_add(s, stage, clock64() - c0);
      return true;
    }
    if (aborted(s)) return false;
    if (global_timer_ns() - start > s.timeout_ns) {
      record_timeout(s, stage, task, counter_kind, counter_index, expected, seen);
      return false;
    }
  }
}

// Waits until the shared-memory word *p >= expected (acquire at CTA scope): one CTA's warpgroups among
// themselves. False on timeout or when another CTA aborted the launch.
__device__ __forceinline__ bool wait_shared_at_least(const SyncContext& s, const int* p, int expected, int stage,
                                                     int task, int counter_kind, int counter_index) {
  auto load = [&] {
    int v;
    const auto addr = static_cast<uint32_t>(__cvta_generic_to_shared(p));
    asm volatile("ld.acquire.cta.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr) : "memory");
    return v;
  };
  int seen = load();
  if (seen >= expected) return true;
  const uint64_t start = global_timer_ns();
  const long long c0 = clock64();
  for (;;) {
    seen = load();
    if (seen >= expected) {
      if (threadIdx.x % 128 == 0) profile_add(s, stage, clock64() - c0);
      return true;
    }
    if (aborted(s)) return false;
    if (global_timer_ns() - start > s.timeout_ns) {
      record_timeout(s, stage, task, counter_kind, counter_index, expected, seen);
      return false;
    }
  }
}

// The end-of-pass waits (the combine tails on "all tiles done") are entered early and depend on everything:
// they get twice the bound, so that a lost signal is reported by the wait that depends on it directly.
__device__ __forceinline__ bool wait_all(const SyncContext& s, const int* counter, int expected, int stage, int task,
                                         int counter_kind, int counter_index) {
  SyncContext twice = s;
  twice.timeout_ns = 2 * s.timeout_ns;
  return wait_counter(twice, counter, expected, stage, task, counter_kind, counter_index);
}

// ---- shared-memory mbarriers (the TMA -> wgmma pipeline) ------------------------------------------------
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}

// Expects `bytes` more on the barrier's current phase without arriving (a thread whose own bulk copies
// complete on a barrier it arrives on later: the count never runs ahead of the copies).
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
}

__device__ __forceinline__ bool mbar_try_wait(uint64_t* bar, uint32_t parity) {
  uint32_t ok;
  asm volatile(
      "{\n.reg .pred p;\n"
      "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(ok)
      : "r"(smem_addr(bar)), "r"(parity)
      : "memory");
  return ok != 0;
}

// Bounded wait for the phase with the given parity to complete, called by whole warps (consumers) or by one
// thread (the producer, full_warp = false). NOTE: for warps every decision is a warp vote or a broadcast, so the
// compiler sees no divergent path around the wgmma that follow: a divergent spin loop makes ptxas serialise
// every wgmma (C7518), measured as one HGMMA in flight at a time.
__device__ __forceinline__ bool mbar_wait(const SyncContext& s, uint64_t* bar, uint32_t parity, int stage, int task,
                                          int counter_kind, int counter_index, bool full_warp = true) {
  const unsigned mask = full_warp ? 0xffffffffu : __activemask();
  if (__all_sync(mask, mbar_try_wait(bar, parity))) return true;
  const uint64_t start = global_timer_ns();
  const long long c0 = clock64();
  for (int it = 0;; ++it) {
    if (__all_sync(mask, mbar_try_wait(bar, parity))) {
      if (threadIdx.x % 128 == 0) profile_add(s, stage, clock64() - c0);
      return true;
    }
    if ((it & 63) == 63) {
      int verdict = 0;  // 1: aborted elsewhere, 2: timed out here
      if (aborted(s)) verdict = 1;
      else if (global_timer_ns() - start > s.timeout_ns) verdict = 2;
      verdict = __shfl_sync(mask, verdict, __ffs(mask) - 1);
      if (verdict == 2 && (threadIdx.x % 32) == static_cast<unsigned>(__ffs(mask) - 1))
        record_timeout(s, stage, task, counter_kind, counter_index, static_cast<int>(parity), -1);
      if (verdict != 0) return false;
    }
  }
}

// Arrive on `bar` from the threads where `pred` holds, as one predicated instruction (no branch).
__device__ __forceinline__ void mbar_arrive_if(uint64_t* bar, bool pred) {
  asm volatile(
      "{\n.reg .pred p;\n"
      "setp.ne.b32 p, %1, 0;\n"
      "@p mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];\n}\n" ::"r"(smem_addr(bar)),
      "r"(static_cast<int>(pred))
      : "memory");
}

}  // namespace calico::gpu::mk
