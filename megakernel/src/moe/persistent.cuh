// The skeleton both persistent launches share: the role split (data-movement CTAs, then per compute CTA a
// producer warpgroup and two consumer warpgroups), the fixed task walk (CTA c takes tasks c, c + n, ...) and
// the tail. A pass supplies its plan (total, decode) and the role bodies; forward.cu and backward.cu.
#pragma once

#include "gemm/sm90_tile.cuh"
#include "sync/bounded_wait.cuh"

namespace calico::gpu::mk {

// comm(): the data-movement CTA's work; produce(ps, task, id) -> bool (every thread of the producer warpgroup); consume(ps, task, id, ctid) -> bool;
// tail(ctid): the consumers' share of the tail queue.
template <class Plan, class Comm, class Produce, class Consume, class Tail>
__device__ __forceinline__ void run_persistent(const SyncContext& sync, int n_comm, GemmSmem& s, const Plan& plan,
                                               Comm&& comm, Produce&& produce, Consume&& consume, Tail&& tail) {
  if (static_cast<int>(blockIdx.x) < n_comm) {
    const long long c0 = clock64();
    comm();
    if (threadIdx.x == 0) profile_add(sync, kProfComm, clock64() - c0);
    return;
  }
  const int ci = blockIdx.x - n_comm, nc = gridDim.x - n_comm;
  if (threadIdx.x == 0) pipeline_init(s);
  __syncthreads();
  // NOTE: the role is a warp-uniform value (a shuffle), so the consumer branch is not a divergent path
  // for ptxas, which would otherwise serialise its wgmma.
  const int warpgroup = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0);
  if (warpgroup == 0) {  // producer warpgroup: thread 0 issues the TMA loads, all 128 gather rows
    cutlass::arch::warpgroup_reg_dealloc<56>();
    PipeState ps;
    for (int id = ci; id < plan.total; id += nc) {
      // NOTE: the barrier orders a task's last reads of its gathered stages (produce_tile's `after`) before
      // thread 0's first TMA of the next task into the same stages; as a vote, every thread leaves together
      // when any wait failed (each produce() returns: its waits are bounded).
      if (!producer_all(produce(ps, plan.decode(id), id))) break;
    }
    return;
  }
  cutlass::arch::warpgroup_reg_alloc<224>();
  const int ctid = threadIdx.x - 128;
  PipeState ps;
  for (int id = ci; id < plan.total; id += nc) {
    const long long c0 = clock64();
    if (!consume(ps, plan.decode(id), id, ctid)) return;
    if (ctid == 0) profile_add(sync, kProfTasks, clock64() - c0);
  }
  const long long c1 = clock64();
  tail(ctid);
  if (ctid == 0) profile_add(sync, kProfTail, clock64() - c1);
}

}  // namespace calico::gpu::mk
