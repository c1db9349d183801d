// Probe (issue 8): what a megakernel main loop shares with an epilogue running beside it on the same SM.
// The twelfth pass (reports/megakernel-2026-12-01.md) staggered the two consumer warpgroups so one's epilogue
// ran beside the other's wgmma: the epilogues shrank by what the main loops grew (1,055 -> 1,125 cycles per
// 128 x 256 x 64 k-tile), and the full-stage waits grew. Which resource is shared? Candidates: the shared
// memory's bandwidth (a k-tile moves ~128 KB through it: 80 KB of wgmma operand reads, 48 KB of TMA writes),
// the TMA unit (loads and stores), the SM's path to L2 (loads in, stores out).
//
// This probe runs the kernel's main loop alone (a producer thread bulk-loading 48 KB stages from an L2-resident
// set into a 4-stage ring, two consumer warpgroups issuing m64n256k16 bf16 wgmma from 128-byte-swizzled
// K-major stages, one batch in flight, stages released per warp), then the same with ONE kind of side
// traffic from the producer warpgroup's three other warps until the main loop ends:
//   none       the main loop alone
//   smem       st.shared.v4 + ld.shared.v4 of a 32 KB side area (shared-memory bandwidth only)
//   tma-store  bulk stores (cp.async.bulk.global.shared) of 16 KB from the side area, 2 in flight (the TMA
//              engine and the SM's write path, no fill)
//   epilogue   the side warps fill a 16 KB strip (st.shared), fence, and one thread bulk-stores it, 2 strips
//              in flight (the kernel's epilogue rounds: both of the above)
//   st.global  st.global.v4 of registers (the write path without shared memory or the TMA engine)
//   ld.global  ld.global.v4 from the L2-resident set (the read path beside the TMA loads)
//   solo       no side traffic, and only consumer warpgroup 0 issues wgmma (half the MACs per k-tile): can one
//              warpgroup alone keep the tensor cores busy, as a staggered tile assumes while the other one is
//              in its epilogue? (~half of `none`'s cycles if it can)
// Then the modes none, tma-store and epilogue again with the B operand shared by a 2-CTA cluster (`+mc`):
// each CTA loads its own A (16 KB) and one half of the pair's B (16 KB), multicast into both CTAs' stages,
// so a pair reads 64 KB of L2 per k-tile instead of 96 (the lever the thirteenth pass names: at 132 CTAs the
// loop alone is at the L2's aggregate read rate, and the epilogues' stores take from it); each consumer warp
// releases a stage in both CTAs (a remote mbarrier arrive), as a multicast into a stage needs both free.
// Last, the tile shape itself (`tile128` / `tile192`, no side traffic): every consumer warpgroup holds 128
// accumulator registers per thread (m64n256), and ptxas allocates one register count for the whole kernel
// (setmaxnreg does not raise it), so a third consumer warpgroup beside a producer warpgroup (512 threads, 128
// registers) cannot compile. Without the producer warpgroup, 3 x 128 threads at 168 registers can: thread 0
// issues the stage loads between its own k-tiles (the pre-warp-specialised Hopper GEMM). A 192 x 256 tile
// reads 56 KB per 64-deep k-tile for 1.5x the MACs of a 128 x 256 one (48 KB): 29% more MACs per byte that
// crosses the SMs' L2 path, which every SM running the 128-row loop (the rows above) already fills.
// Per mode and CTA count: the main loop's cycles per k-tile (mean over CTAs) and the side traffic's bytes per
// clock per SM. Data values are not meaningful (the operands are whatever the set holds): only rates are.
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/mlc simulator/probes/mainloop_contention.cu
//   /tmp/mlc            # one H200, a few seconds
#include <cstring>
#include <vector>

#include "../../megakernel/src/ptx/wgmma.cuh"
#include "probe_common.cuh"

namespace {

using calico::gpu::ptx::wgmma_m64n256k16_bf16;

constexpr int kThreads = 384;                 // producer warpgroup (thread 0 + 3 side warps) + 2 consumer warpgroups
constexpr int kStages = 4;
constexpr int kABytes = 128 * 64 * 2, kBBytes = 256 * 64 * 2;  // 16 KB + 32 KB per stage, as the kernel's
constexpr int kStageBytes = kABytes + kBBytes;
constexpr int kSideBytes = 32 * 1024;
constexpr int kSmemBytes = 1024 + kStages * kStageBytes + kSideBytes + 256;
constexpr int kKtiles = 512;                  // per CTA: ~0.3 ms at the dense rate
constexpr size_t kSetBytes = 8u << 20;        // the loads' L2-resident set (one expert's weights, say)
constexpr size_t kStoreBytesPerCta = 8u << 20;

enum Mode { kNone, kSmem, kTmaStore, kEpilogue, kStGlobal, kLdGlobal, kSolo, kModes };
const char* kModeNames[kModes] = {"none", "smem", "tma-store", "epilogue", "st.global", "ld.global", "solo"};

struct Args {
  const uint8_t* set;  // kSetBytes
  uint8_t* dst;        // kStoreBytesPerCta per CTA
  int mode;
  int multicast;  // 1: a 2-CTA cluster shares B by TMA multicast (launched with a cluster dimension of 2)
  unsigned long long* stats;  // per CTA: main-loop cycles, side bytes, side cycles, ns, cycles
};
constexpr int kStatWords = 5;

__device__ __forceinline__ void mbar_init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count));
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// The barrier at the same offset in CTA `rank` of the cluster.
__device__ __forceinline__ void mbar_arrive_in(uint64_t* bar, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(smem_addr(bar)), "r"(rank));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");  // (release at CTA scope, as CUTLASS)
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done)
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done)
                 : "r"(smem_addr(bar)), "r"(parity)
                 : "memory");
}
__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
// A 128-byte-swizzled K-major operand (rows of 64 bf16 = 128 B, 8-row atoms 1024 B apart), as CuTe's
// Layout_K_SW128 in the kernel: layout type 1 (bits 62-63), SBO 1024, LBO unused; the k16 step kb starts 32 B
// further along the row.
__device__ __forceinline__ uint64_t sw128_desc(const uint8_t* base, int kb) {
  const uint32_t addr = smem_addr(base) + 32u * static_cast<uint32_t>(kb);
  uint64_t d = static_cast<uint64_t>((addr >> 4) & 0x3FFFu);
  d |= static_cast<uint64_t>(1u) << 16;
  d |= static_cast<uint64_t>(1024u >> 4) << 32;
  d |= static_cast<uint64_t>(1u) << 62;
  return d;
}
// One k-tile of a consumer warpgroup: its 64 A rows at `a`, all 256 B rows at `b`, four m64n256k16 steps, the
// batch before it completed when this returns (one batch in flight, as the kernel's).
__device__ __forceinline__ void mma_k_tile(float (&acc)[128], const uint8_t* a, const uint8_t* b) {
  calico::gpu::ptx::wgmma_fence();
#pragma unroll
  for (int kb = 0; kb < 4; ++kb) wgmma_m64n256k16_bf16(acc, sw128_desc(a, kb), sw128_desc(b, kb), 1);
  calico::gpu::ptx::wgmma_commit_group();
  calico::gpu::ptx::wgmma_wait_group<1>();
}
__device__ __forceinline__ void clear_acc(float (&acc)[128]) {
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
}
// Keeps the accumulators (and so the wgmma) alive: their values are not meaningful.
__device__ __forceinline__ void keep_acc(const float (&acc)[128], unsigned long long* sink) {
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < 128; ++i) sum += acc[i];
  if (sum == 1.2345f) *sink = 1;
}

__device__ __forceinline__ void bulk_store(void* gmem, const void* smem, int bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(gmem), "r"(smem_addr(smem)),
               "r"(bytes)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
__device__ __forceinline__ void bulk_wait_read_1() { asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory"); }
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }
__device__ __forceinline__ void side_barrier() { asm volatile("bar.sync 1, 96;" ::: "memory"); }

// The side warps' traffic until *done (warps 1-3 of the producer warpgroup, st = 0..95). Returns the bytes
// this thread moved. `stop`: the epilogue mode's exit decision, read by thread 0 and shared through a barrier
// (so all 96 threads leave at the same barrier). Threads without work leave at once (a spin on *done would be
// shared-memory traffic of its own).
__device__ unsigned long long side_traffic(const Args& a, uint8_t* side, volatile int* done, int* stop, int st) {
  if ((a.mode == kTmaStore && st != 0) || a.mode == kNone || a.mode == kSolo) return 0;
  unsigned long long bytes = 0;
  uint8_t* dst = a.dst + static_cast<size_t>(blockIdx.x) * kStoreBytesPerCta;
  size_t off = 0;
  uint32_t sink = 0;
  int slot = 0;
  const int4 v = make_int4(st, 1, 2, 3);
  // (epilogue mode: the loop ends only through `stop`, so no thread leaves at a different iteration)
  while (a.mode == kEpilogue || !*done) {
    switch (a.mode) {
      case kSmem:  // 16 KB written and 16 KB read per pass of the 96 threads
        for (int i = st; i < 1024; i += 96) {
          asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(smem_addr(side) + 16u * i), "r"(v.x), "r"(v.y),
                       "r"(v.z), "r"(v.w)
                       : "memory");
          int4 r;
          asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
                       : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                       : "r"(smem_addr(side) + 16384u + 16u * i)
                       : "memory");
          sink ^= r.x;
          bytes += 32;
        }
        break;
      case kTmaStore:
        if (st == 0) {
          bulk_wait_read_1();
          bulk_store(dst + off, side + slot * 16384, 16384);
          bytes += 16384;
        }
        break;
      case kEpilogue:  // fill a strip, fence, barrier, one thread stores it; the strip is rewritten 2 rounds later
        if (st == 0) {
          bulk_wait_read_1();
          *stop = *done;
        }
        side_barrier();
        if (*stop) goto out;
        for (int i = st; i < 1024; i += 96)
          asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(smem_addr(side + slot * 16384) + 16u * i),
                       "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                       : "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        side_barrier();
        if (st == 0) {
          bulk_store(dst + off, side + slot * 16384, 16384);
          bytes += 16384;
        }
        break;
      case kStGlobal:  // 96 x 16 B per instruction round, 16 KB per pass
        for (int i = st; i < 1024; i += 96) {
          asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(dst + off + 16u * i), "r"(v.x), "r"(v.y),
                       "r"(v.z), "r"(v.w)
                       : "memory");
          bytes += 16;
        }
        break;
      case kLdGlobal:
        for (int i = st; i < 1024; i += 96) {
          int4 r;
          asm volatile("ld.global.v4.b32 {%0, %1, %2, %3}, [%4];"
                       : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                       : "l"(a.set + ((off + 16u * i) % kSetBytes))
                       : "memory");
          sink ^= r.x;
          bytes += 16;
        }
        break;
      default:
        return 0;
    }
    slot ^= 1;
    off = (off + 16384) % kStoreBytesPerCta;
  }
out:
  if (a.mode == kTmaStore || a.mode == kEpilogue) {
    if (st == 0) bulk_wait_all();
  }
  if (sink == 0x12345678u) a.stats[0] = sink;  // keeps the loads
  return bytes;
}

__global__ void __launch_bounds__(kThreads, 1) contention_kernel(Args a) {
  extern __shared__ uint8_t raw[];
  uint8_t* base = raw + ((1024 - (smem_addr(raw) & 1023)) & 1023);
  uint8_t* stages = base;
  uint8_t* side = base + kStages * kStageBytes;
  uint64_t* full = reinterpret_cast<uint64_t*>(side + kSideBytes);
  uint64_t* empty = full + kStages;
  volatile int* done = reinterpret_cast<volatile int*>(empty + kStages);
  __shared__ unsigned long long side_bytes;
  __shared__ int side_stop;
  const int tid = threadIdx.x;
  if (tid == 0) {
    const int reader_warps = a.mode == kSolo ? 4 : 8;  // the warps that read (and release) each stage
    const int releases = reader_warps * (a.multicast ? 2 : 1);  // multicast: both CTAs' warps release it
    for (int s = 0; s < kStages; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], releases);
    *done = 0;
    side_bytes = 0;
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  if (a.multicast)
    cluster_sync();  // the peer's barriers are initialised before its stages or barriers are written
  else
    __syncthreads();
  const unsigned long long ns0 = global_ns();
  const long long c0 = clock64();
  if (tid == 0) {  // producer: 48 KB per k-tile from the set (CTAs start at different offsets)
    size_t off = (static_cast<size_t>(blockIdx.x) * 7 * kStageBytes) % (kSetBytes - kStageBytes);
    // multicast: the pair's B from the same place (its first CTA's offset), each CTA's A from its own
    size_t b_off = (static_cast<size_t>(blockIdx.x & ~1) * 7 * kStageBytes) % (kSetBytes - kStageBytes);
    const uint32_t rank = a.multicast ? cluster_rank() : 0;
    for (int kt = 0; kt < kKtiles; ++kt) {
      const int s = kt % kStages;
      mbar_wait(&empty[s], ((kt / kStages) & 1) ^ 1);
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(&full[s])),
                   "r"(kStageBytes));
      uint8_t* st = stages + s * kStageBytes;
      for (int part = 0; part < 3; ++part) {  // 3 x 16 KB (A, then B's two halves)
        if (a.multicast && part > 0) {
          if (part != 1 + static_cast<int>(rank)) continue;  // the peer multicasts the other half
          asm volatile(
              "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1], %2, "
              "[%3], %4;" ::"r"(smem_addr(st + part * 16384)),
              "l"(a.set + b_off + part * 16384), "r"(16384), "r"(smem_addr(&full[s])), "h"(static_cast<uint16_t>(3))
              : "memory");
          continue;
        }
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                smem_addr(st + part * 16384)),
            "l"(a.set + off + part * 16384), "r"(16384), "r"(smem_addr(&full[s]))
            : "memory");
      }
      off = (off + kStageBytes) % (kSetBytes - kStageBytes);
      b_off = (b_off + kStageBytes) % (kSetBytes - kStageBytes);
    }
  } else if (tid >= 32 && tid < 128) {
    const long long s0 = clock64();
    const unsigned long long b = side_traffic(a, side, done, &side_stop, tid - 32);
    const long long s1 = clock64();
    atomicAdd(&side_bytes, b);
    if (tid == 32) a.stats[blockIdx.x * kStatWords + 2] = static_cast<unsigned long long>(s1 - s0);  // thread 32 works in every mode
  } else if (tid >= 128 && (a.mode != kSolo || tid < 256)) {  // consumers: warpgroup w reads A rows [64 w, +64), all of B
    const int w = (tid - 128) / 128;
    auto release = [&](int stage) {  // multicast: the stage in both CTAs (the peer's producer writes both)
      mbar_arrive(&empty[stage]);
      if (a.multicast) mbar_arrive_in(&empty[stage], cluster_rank() ^ 1u);
    };
    float acc[128];
    clear_acc(acc);
    int previous = -1;
    const long long m0 = clock64();
    for (int kt = 0; kt < kKtiles; ++kt) {
      const int s = kt % kStages;
      mbar_wait(&full[s], (kt / kStages) & 1);
      const uint8_t* st = stages + s * kStageBytes;
      mma_k_tile(acc, st + w * 8192, st + kABytes);
      if (previous >= 0 && (tid % 32) == 0) release(previous);
      previous = s;
    }
    calico::gpu::ptx::wgmma_wait_group<0>();
    if ((tid % 32) == 0) release(previous);
    const long long m1 = clock64();
    if (a.mode == kSolo)
      asm volatile("bar.sync 2, 128;" ::: "memory");
    else
      asm volatile("bar.sync 2, 256;" ::: "memory");
    if (tid == 128) {
      *done = 1;
      a.stats[blockIdx.x * kStatWords + 0] = static_cast<unsigned long long>(m1 - m0);
    }
    keep_acc(acc, a.stats);
  }
  __syncthreads();
  if (a.multicast) cluster_sync();  // no CTA leaves while its peer may still write its stages or barriers
  if (tid == 0) {
    a.stats[blockIdx.x * kStatWords + 1] = side_bytes;
    a.stats[blockIdx.x * kStatWords + 3] = global_ns() - ns0;
    a.stats[blockIdx.x * kStatWords + 4] = static_cast<unsigned long long>(clock64() - c0);
  }
}

// The tile-shape rows: kWGs consumer warpgroups (64 rows each) and no producer warpgroup; thread 0 also issues
// every stage's loads: the first kStagesT before the loop, then k-tile kt - 1 + kStagesT into the stage of k-tile
// kt - 1 once every warp released it.
template <int kWGs>
struct TileShape {
  static constexpr int kThreadsT = 128 * kWGs, kStagesT = kWGs == 2 ? 4 : 3;
  static constexpr int kABytesT = 64 * kWGs * 64 * 2, kStageBytesT = kABytesT + kBBytes;
  static constexpr int kSmemBytesT = 1024 + kStagesT * kStageBytesT + 256;
};
template <int kWGs>
__global__ void __launch_bounds__(TileShape<kWGs>::kThreadsT, 1) tile_kernel(Args a) {
  using S = TileShape<kWGs>;
  extern __shared__ uint8_t raw[];
  uint8_t* stages = raw + ((1024 - (smem_addr(raw) & 1023)) & 1023);
  uint64_t* full = reinterpret_cast<uint64_t*>(stages + S::kStagesT * S::kStageBytesT);
  uint64_t* empty = full + S::kStagesT;
  const int tid = threadIdx.x, w = tid / 128;
  if (tid == 0) {
    for (int s = 0; s < S::kStagesT; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], 4 * kWGs);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  size_t off = (static_cast<size_t>(blockIdx.x) * 7 * S::kStageBytesT) % (kSetBytes - S::kStageBytesT);
  auto load = [&](int kt) {  // thread 0: k-tile kt into its stage, once that stage is free
    const int s = kt % S::kStagesT;
    mbar_wait(&empty[s], ((kt / S::kStagesT) & 1) ^ 1);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(&full[s])),
                 "r"(S::kStageBytesT));
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     smem_addr(stages + s * S::kStageBytesT)),
                 "l"(a.set + off), "r"(S::kStageBytesT), "r"(smem_addr(&full[s]))
                 : "memory");
    off = (off + S::kStageBytesT) % (kSetBytes - S::kStageBytesT);
  };
  if (tid == 0)
    for (int kt = 0; kt < S::kStagesT; ++kt) load(kt);
  float acc[128];
  clear_acc(acc);
  int previous = -1;
  const long long m0 = clock64();
  for (int kt = 0; kt < kKtiles; ++kt) {
    const int s = kt % S::kStagesT;
    mbar_wait(&full[s], (kt / S::kStagesT) & 1);
    const uint8_t* st = stages + s * S::kStageBytesT;
    mma_k_tile(acc, st + w * 8192, st + S::kABytesT);
    if (previous >= 0 && (tid % 32) == 0) mbar_arrive(&empty[previous]);
    previous = s;
    // the stage k-tile kt - 1 used takes k-tile kt - 1 + kStagesT (a uniform branch per warp)
    if (tid == 0 && kt >= 1 && kt - 1 + S::kStagesT < kKtiles) load(kt - 1 + S::kStagesT);
  }
  calico::gpu::ptx::wgmma_wait_group<0>();
  const long long m1 = clock64();
  if (tid == 0) a.stats[blockIdx.x * kStatWords + 0] = static_cast<unsigned long long>(m1 - m0);
  keep_acc(acc, a.stats);
}

// Operands like the kernel's (nonzero bf16 in [-1, 1)), in case the tensor cores' power, and so the clock,
// depends on the values.
__global__ void fill_bf16(uint16_t* p, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += gridDim.x * static_cast<size_t>(blockDim.x)) {
    uint32_t x = static_cast<uint32_t>(i) * 2654435761u;
    x ^= x >> 15;
    p[i] = static_cast<uint16_t>(0x3C00u + (x & 0x7Fu) + ((x >> 7) & 1u) * 0x8000u);  // +-[2^-7, 2^-6): sums stay small
  }
}

}  // namespace

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);  // lines reach a pipe as they are printed (a timeout keeps them)
  int dev = 0, sms = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, dev));
  if (prop.major != 9) {
    printf("needs an sm_90 device (found sm_%d%d)\n", prop.major, prop.minor);
    return 1;
  }
  printf("device %d %s SMs=%d; %d k-tiles of 128x256x64 per CTA, 4 stages of 48 KB\n", dev, prop.name, sms, kKtiles);
  uint8_t *set = nullptr, *dst = nullptr;
  CK(cudaMalloc(&set, kSetBytes));
  fill_bf16<<<264, 256>>>(reinterpret_cast<uint16_t*>(set), kSetBytes / 2);
  CK(cudaGetLastError());
  CK(cudaMalloc(&dst, kStoreBytesPerCta * sms));
  unsigned long long* stats = nullptr;
  CK(cudaMalloc(&stats, sizeof(unsigned long long) * kStatWords * sms));
  CK(cudaFuncSetAttribute(contention_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  printf("%-12s %5s %12s %12s %6s\n", "mode", "CTAs", "cyc/k-tile", "side B/clk", "GHz");
  std::vector<unsigned long long> h(kStatWords * sms);
  {  // how many 2-CTA clusters of this kernel fit at once (a persistent grid of pairs must not exceed it)
    cudaLaunchAttribute cluster{};
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = 2;
    cluster.val.clusterDim.y = cluster.val.clusterDim.z = 1;
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(sms & ~1);
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = kSmemBytes;
    cfg.attrs = &cluster;
    cfg.numAttrs = 1;
    int clusters = 0;
    CK(cudaOccupancyMaxActiveClusters(&clusters, contention_kernel, &cfg));
    printf("2-CTA clusters resident at once: %d (%d CTAs)\n", clusters, 2 * clusters);
  }
  // (mode, multicast): every mode unicast, then none / tma-store / epilogue with B multicast in CTA pairs
  std::vector<std::pair<int, int>> runs;
  for (int mode = 0; mode < kModes; ++mode) runs.push_back({mode, 0});
  for (int mode : {kNone, kTmaStore, kEpilogue}) runs.push_back({mode, 1});
  for (const auto& [mode, multicast] : runs) {
    for (int ctas : {multicast ? 2 : 1, 66, sms & ~1}) {
      Args a{set, dst, mode, multicast, stats};
      cudaLaunchAttribute cluster{};
      cluster.id = cudaLaunchAttributeClusterDimension;
      cluster.val.clusterDim.x = multicast ? 2 : 1;
      cluster.val.clusterDim.y = cluster.val.clusterDim.z = 1;
      cudaLaunchConfig_t cfg{};
      cfg.gridDim = dim3(ctas);
      cfg.blockDim = dim3(kThreads);
      cfg.dynamicSmemBytes = kSmemBytes;
      cfg.attrs = &cluster;
      cfg.numAttrs = 1;
      CK(cudaLaunchKernelEx(&cfg, contention_kernel, a));  // warm-up
      CK(cudaGetLastError());
      CK(cudaMemset(stats, 0, sizeof(unsigned long long) * kStatWords * sms));
      CK(cudaLaunchKernelEx(&cfg, contention_kernel, a));
      CK(cudaGetLastError());
      CK(cudaDeviceSynchronize());
      CK(cudaMemcpy(h.data(), stats, sizeof(unsigned long long) * kStatWords * ctas, cudaMemcpyDeviceToHost));
      double main_cycles = 0, side_bpc = 0, ghz = 0;
      for (int c = 0; c < ctas; ++c) {
        const unsigned long long* r = &h[c * kStatWords];
        main_cycles += static_cast<double>(r[0]) / kKtiles;
        side_bpc += r[2] ? static_cast<double>(r[1]) / static_cast<double>(r[2]) : 0.0;
        ghz += r[3] ? static_cast<double>(r[4]) / static_cast<double>(r[3]) : 0.0;
      }
      char name[32];
      snprintf(name, sizeof(name), "%s%s", kModeNames[mode], multicast ? "+mc" : "");
      printf("%-12s %5d %12.0f %12.2f %6.2f\n", name, ctas, main_cycles / ctas, side_bpc / ctas, ghz / ctas);
    }
  }
  // the tile-shape rows (main-loop cycles per k-tile of the tile's own rows; tensor-bound: 512 per 64 rows)
  auto run_tile = [&](auto kernel, int wgs, int threads, int smem) {
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    for (int ctas : {1, 66, sms}) {
      Args a{set, dst, kNone, 0, stats};
      kernel<<<ctas, threads, smem>>>(a);  // warm-up
      CK(cudaGetLastError());
      CK(cudaMemset(stats, 0, sizeof(unsigned long long) * kStatWords * sms));
      kernel<<<ctas, threads, smem>>>(a);
      CK(cudaGetLastError());
      CK(cudaDeviceSynchronize());
      CK(cudaMemcpy(h.data(), stats, sizeof(unsigned long long) * kStatWords * ctas, cudaMemcpyDeviceToHost));
      double cycles = 0;
      for (int c = 0; c < ctas; ++c) cycles += static_cast<double>(h[c * kStatWords]) / kKtiles;
      cycles /= ctas;
      printf("tile%-8d %5d %12.0f  (%.0f per 128 rows; %.1f B/clk of operands per SM)\n", 64 * wgs, ctas, cycles,
             cycles * 128.0 / (64.0 * wgs), (64.0 * wgs * 128 + 256 * 128) / cycles);
    }
  };
  run_tile(tile_kernel<2>, 2, TileShape<2>::kThreadsT, TileShape<2>::kSmemBytesT);
  run_tile(tile_kernel<3>, 3, TileShape<3>::kThreadsT, TileShape<3>::kSmemBytesT);
  CK(cudaFree(set));
  CK(cudaFree(dst));
  CK(cudaFree(stats));
  return 0;
}
