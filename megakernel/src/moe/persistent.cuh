// The skeleton both persistent launches share: the role split (data-movement CTAs, then per compute CTA a
// producer warpgroup and two consumer warpgroups), the task walk and the tail. A pass supplies its plan
// (total, decode) and the role bodies; forward.cu and backward.cu.
//
// The walk: one order of tasks per pass, each waiting only on earlier ones. Dynamic (the default): a compute
// CTA's producer takes the next task from a global ticket counter (integer atomic) when it is ready for one
// and logs it in the CTA's task ring (global memory, kTaskRing entries) before publishing the task's first
// stage; a consumer reads its next task from the ring once that stage is full (the full barrier's
// release/acquire orders the entry). A CTA slowed by its tiles takes fewer tasks. Static: CTA c takes tasks c, c + n, c + 2n, ... Neither can
// deadlock (the earliest unfinished task waits on finished ones only), and neither changes a bit: every
// output element is computed by one task whatever CTA runs it.
#pragma once

#include "gemm/sm90_tile.cuh"
#include "gemm/tma_store.cuh"

#include <cstring>
#include <type_traits>
#include "moe/params.cuh"
#include "sync/bounded_wait.cuh"

namespace calico::gpu::mk {

// Barrier among the producer warpgroup's threads (named barrier 2).
__device__ __forceinline__ void producer_barrier() {
  asm volatile("bar.sync 2, %0;\n" ::"n"(kProducerThreads) : "memory");
}

// NOTE: the producer is at most kStages stages ahead of the consumers and every logged task has a stage, so
// an entry is rewritten (kTaskRing tasks later) only after every consumer warp has read it and released the
// stage after (the empty barrier's release/acquire); kTaskRing > kStages.
static_assert(kTaskRing > kStages);

// A ring entry: the task index and the decoded task, so the consumers start their main loop without the
// decode's dependent global loads (the schedule's tile and expert tables), which cost thousands of cycles
// per task with the tensor cores idle.
template <class Task>
__device__ __forceinline__ void ring_write(GemmSmem& s, int j, int id, const Task& task) {
  static_assert(sizeof(Task) <= sizeof(int) * (kRingInts - 1) && std::is_trivially_copyable_v<Task>);
  int* e = s.ring[j % kTaskRing];
  e[0] = id;
  int words[kRingInts - 1] = {};
  memcpy(words, &task, sizeof(Task));
#pragma unroll
  for (int i = 0; i < kRingInts - 1; ++i) e[1 + i] = words[i];
}
// Lane 0 of each warp reads, the warp shares it (the empty arrive of the same lane orders the read).
template <class Task>
__device__ __forceinline__ int ring_read(const GemmSmem& s, int j, Task& task) {
  const bool lane0 = (threadIdx.x % 32) == 0;
  int words[kRingInts];
#pragma unroll
  for (int i = 0; i < kRingInts; ++i) words[i] = __shfl_sync(0xffffffffu, lane0 ? s.ring[j % kTaskRing][i] : 0, 0);
  memcpy(&task, words + 1, sizeof(Task));
  return words[0];
}

// One stage published empty (every producer thread arrives, as for a stage without gathered rows; no bytes
// are expected): a task without a K loop (a side task, the walk's end) still passes one stage, which carries
// its ring entry to the consumers. `before()`: thread 0, once the stage is free. False if the wait failed.
template <class Before>
__device__ __forceinline__ bool publish_empty_stage(const SyncContext& sc, GemmSmem& s, PipeState& ps, int ptid,
                                                    int task, Before&& before) {
  if (!mbar_wait(sc, &s.empty[ps.stage], ps.phase ^ 1u, kStagePipelineEmpty, task, kCounterMbarEmpty, ps.stage))
    return false;
  if (ptid == 0) {
    before();
    mbar_arrive(&s.full[ps.stage]);  // in place of thread 0's arrive.expect_tx
  }
  mbar_arrive(&s.full[ps.stage]);
  ps.advance();
  return true;
}
// The consumers' side of such a stage: wait for it, release it (release_stage, after the ring read).
__device__ __forceinline__ bool consume_empty_stage(const SyncContext& sc, GemmSmem& s, PipeState& ps, int task) {
  if (!mbar_wait(sc, &s.full[ps.stage], ps.phase, kStagePipelineFull, task, kCounterMbarFull, ps.stage)) return false;
  release_stage(s, ps.stage);
  ps.advance();
  return true;
}

// The producer's end of a dynamic walk: kNoTask logged in one more, empty stage.
__device__ __forceinline__ void publish_end(const SyncContext& sc, GemmSmem& s, PipeState& ps, int ptid, int j) {
  publish_empty_stage(sc, s, ps, ptid, kNoTask, [&] { s.ring[j % kTaskRing][0] = kNoTask; });
}

// comm(with_tail): the data-movement CTA's dispatch, then the tail queue if with_tail; produce(ps, task, id) -> bool (every thread of the producer warpgroup); consume(ps, release, task, id, ctid) -> bool (release: gemm/tma_store.cuh's DeferredRelease);
// tail(ctid): the consumers' share of the tail queue. ticket: the pass's task counter (zeroed before the
// launch); dynamic: take tasks from the ticket (else the static walk).
// plan.timeline_stage(task), plan.tail_timeline_stage() (-1: no tail): what the timeline calls them (sync/timeline.h).
// plan.has_stages(task): false for a task with nothing to do (a weight gradient of an expert without rows: its
// accumulator stays as it is), which the dynamic walk skips. A side task (no K loop) passes one empty stage
// (publish_empty_stage / consume_empty_stage), which carries its ring entry.
// kTimeline: this instantiation records the timeline; the launchers pick it only for a recording launch (one
// with sync.timeline set), so the timeline costs the kernels that do not record nothing (scripts/sass_audit.sh:
// their SASS is the one before the timeline existed).
template <bool kTimeline, class Plan, class Comm, class Produce, class Consume, class Tail>
__device__ __forceinline__ void run_persistent(const SyncContext& sync, int n_comm, GemmSmem& s, const Plan& plan,
                                               int* ticket, bool dynamic, Comm&& comm,
                                               Produce&& produce, Consume&& consume, Tail&& tail) {
  if (static_cast<int>(blockIdx.x) < n_comm) {
    // Data-movement CTA: its dispatch, then (dynamic walk) it joins the compute walk, taking tasks from the
    // ticket like any compute CTA (the walk needs no CTA index), or (static walk) the tail queue.
    const long long c0 = clock64();
    const unsigned long long t0 = timeline_start<kTimeline>(sync);
    comm(/*with_tail=*/!dynamic);
    if (threadIdx.x == 0) {
      profile_add(sync, kProfComm, clock64() - c0);
      timeline_add<kTimeline>(sync, kTlDispatch, -1, -1, -1, -1, t0);
    }
    if (!dynamic) return;
    __syncthreads();  // the dispatch is done with shared memory before the pipeline's barriers are set up
  }
  const int ci = blockIdx.x - n_comm, nc = gridDim.x - n_comm;
  if (threadIdx.x == 0) pipeline_init(s), s.wgrad_go = -1;
  __syncthreads();
  // NOTE: the role is a warp-uniform value (a shuffle), so the consumer branch is not a divergent path
  // for ptxas, which would otherwise serialise its wgmma.
  const int warpgroup = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0);
  if (warpgroup == 0) {  // producer warpgroup: thread 0 issues the TMA loads, all 128 gather rows
    cutlass::arch::warpgroup_reg_dealloc<56>();
    const int ptid = threadIdx.x;
    PipeState ps;
    int logged = 0;  // tasks logged in the ring
    for (int j = 0;; ++j) {
      int id = ci + j * nc;
      if (dynamic) {
        if (ptid == 0) s.next_task = atomicAdd(ticket, 1);
        producer_barrier();
        id = s.next_task;
        producer_barrier();  // every thread has read it before thread 0 writes the next one
      }
      if (id >= plan.total) break;
      const auto task = plan.decode(id);
      if (dynamic) {
        if (!plan.has_stages(task)) continue;  // (every thread: the same id)
        if (ptid == 0) ring_write(s, logged, id, task);
        ++logged;
      }
      // NOTE: the vote is also the barrier that orders a task's last reads of its gathered stages (produce_tile's
      // `after`) before thread 0's first TMA of the next task into the same stages; every thread leaves together
      // when any wait failed (each produce() returns: its waits are bounded).
      if (!producer_all(produce(ps, task, id))) return;
    }
    if (dynamic) publish_end(sync, s, ps, ptid, logged);
    return;
  }
  cutlass::arch::warpgroup_reg_alloc<224>();
  const int ctid = threadIdx.x - 128;
  // Who holds releases and issues stores: lane 0 of every consumer warp (the forward, Plan::kReleasesByWarp:
  // store_rounds_per_warp), or consumer thread 0 (and 128 for warpgroup 1's weight-gradient stores).
  const bool holder = Plan::kReleasesByWarp ? ctid % 32 == 0 : ctid == 0;
  PipeState ps;
  DeferredRelease release;  // the holder's (gemm/tma_store.cuh)
  for (int j = 0;; ++j) {
    // The next task's first stage: if it is not there yet, its producer may be waiting on the release thread 0
    // holds (the previous tile's counter), so that one goes first. (A stage that is there already belongs to a
    // task past its counter waits; the release follows after its k-tile kFlushKTile.)
    if (holder && release.pending() && !mbar_try_wait(&s.full[ps.stage], ps.phase)) release.flush();
    int id = ci + j * nc;
    decltype(plan.decode(0)) task;
    if (dynamic) {  // task j's first stage is the next one (its full wait repeats at once in consume())
      if (!mbar_wait(sync, &s.full[ps.stage], ps.phase, kStagePipelineFull, kNoTask, kCounterMbarFull, ps.stage))
        return;
      id = ring_read(s, j, task);
      if (id == kNoTask) break;
    } else if (id >= plan.total) {
      break;
    } else {
      task = plan.decode(id);
    }
    const long long c0 = clock64();
    if constexpr (kTimeline)
      if (ctid == 0) s.timeline_task_start = global_timer_ns();  // first stage is full
    if (!consume(ps, release, task, id, ctid)) {
      // the epilogue strips stay in use until their stores are done
      if (Plan::kReleasesByWarp ? ctid % 32 == 0 : ctid % 128 == 0) bulk_wait_all_written();
      return;
    }
    if (ctid == 0) {
      profile_add(sync, kProfTasks, clock64() - c0);
      timeline_add<kTimeline>(sync, plan.timeline_stage(task), id, task.e, task.m, task.n, s.timeline_task_start);
    }
  }
  // The last tile's releases and every store of the holders (and of thread 128: warpgroup 1's weight-gradient
  // stores, consume_wgrad).
  if (holder) release.flush();
  if (holder || (!Plan::kReleasesByWarp && ctid == 128)) bulk_wait_all_written();
  const long long c1 = clock64();
  const unsigned long long t1 = timeline_start<kTimeline>(sync);
  tail(ctid);
  if (ctid == 0) {
    profile_add(sync, kProfTail, clock64() - c1);
    if (plan.tail_timeline_stage() >= 0) timeline_add<kTimeline>(sync, plan.tail_timeline_stage(), -1, -1, -1, -1, t1);
  }
}

}  // namespace calico::gpu::mk
