// Probe (issue 8): what limits the megakernel's weight-gradient epilogue, an SM writing a 128 x 256 fp32 tile
// (128 KB) through shared memory and TMA tensor stores. The tenth pass's profile (reports/megakernel-2026-12-01.md)
// put a store round (each of 256 threads writes 16 fp32 into a 64 x 32 fp32 strip in the 128-byte swizzle,
// proxy fence, barrier, thread 0 issues both warpgroups' boxes) at ~940 cycles per 16 KB, ~17 B/clk per SM,
// and spreading the epilogues among other tiles did not move it. This probe runs the same rounds alone, so
// the per-SM rate can be told from the HBM's, and then adds the kernel's other traffic one piece at a time.
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/esr simulator/probes/epilogue_store_rate.cu
//   /tmp/esr            # one H200, ~25 s (or /tmp/esr MODE ...: those modes only)
//
// Each line: mode, CTAs, the tiles' store rate (GB/s, and B per clock per SM at the measured clock), and the
// round's cycles as seen by each warpgroup's thread 0 (mean over its rounds): strip wait + first barrier,
// the st.shared (issue), the proxy fence, the second barrier, thread 0's TMA issue.
// Modes (every mode stores the same bytes to the same [M, N] fp32 matrix, tiles 128 x 256 as the kernel):
//   tma        the kernel's rounds, nothing else on the SM
//   tma+l2     + a producer warp loading 192 KB per tile (4 stages of 48 KB, as the next tile's prefetch) by
//                bulk copies from an 8 MB set (L2 hits), issued when the tile's epilogue starts
//   tma+hbm    the same from a 1 GiB set (HBM)
//   tma+main   + 4400 cycles of spinning between tiles (the main loop's time: stores drain meanwhile)
//   tma+all    tma+l2 and tma+main together (the kernel's wgrad tile, its wgmma aside)
//   nofill     the rounds without the st.shared (the boxes store stale strips): the TMA alone
//   nofence    the rounds without the proxy fence (wrong in a kernel; the fence's share)
//   lsu        no shared memory: st.global.v2.f32 of the accumulator fragment, as in the register epilogue
//   1wg-2/1wg-4  warpgroup 0 alone stores its 64 rows per tile through 2 or 4 strips (see kModeNames)
#include <cuda.h>
#include <cudaTypedefs.h>

#include <cstring>
#include <vector>

#include "probe_common.cuh"

namespace {

constexpr int kConsumers = 256, kThreads = kConsumers + 32;  // two consumer warpgroups + one producer warp
constexpr int kStrip = 64 * 128;                             // one box: 64 rows x 32 fp32
constexpr int kSlots = 2;                                    // strips per warpgroup (gemm/sm90_tile.cuh kOutSlots)
constexpr int kStageBytes = 48 * 1024, kStages = 4, kLoadChunk = 16 * 1024;
constexpr int kSmemBytes = 1024 + 2 * kSlots * kStrip + kStages * kStageBytes;
constexpr int kTilesPerCta = 48;  // 6 MB per CTA, so one CTA's run stays short

enum Mode { kTma, kTmaL2, kTmaHbm, kTmaMain, kTmaAll, kNoFill, kNoFence, kLsu, kOneWg2, kOneWg4, kWarp16, kWarp16Main, kModes };
const char* kModeNames[kModes] = {"tma",     "tma+l2",  "tma+hbm", "tma+main", "tma+all",
                                  "nofill",  "nofence", "lsu",     "1wg-2",    "1wg-4", "warp16", "warp16+main"};
// warp16 / warp16+main (2026-12-04, twenty-fourth pass, not yet run): each of the 8 consumer warps stores its
// own 16 rows per round through its own 2 strips of 16 rows (2 KB, 16-row boxes), its lane 0 waiting and
// issuing, no barrier among warps: the per-warp epilogues of branch try/warp-epilogue (gemm/tma_store.cuh,
// store_rounds_per_warp). The question: do 2 KB boxes keep the TMA store rate of 8 KB ones, and do the warps'
// rounds overlap as the joint rounds' barriers did not.
// 1wg-2 / 1wg-4 (run 2026-12-02, twelfth pass: ~18.9 B/clk per SM with 2 strips and with 4): warpgroup 0 alone stores its 64 rows of each
// tile (64 KB) through 2 or 4 strips (16 or 32 KB in flight), as a staggered weight-gradient epilogue does
// with its own strips or with the pooled ones (branch try/wgrad-strip-pool); warpgroup 1 idles.

constexpr int kWarpStrip = 16 * 128;  // warp16: one warp's strip, 16 rows x 32 fp32

struct Args {
  CUtensorMap map;    // the output [M, N] fp32, box 32 x 64, 128-byte swizzle
  CUtensorMap map16;  // the same, box 32 x 16 (warp16)
  float* out;
  const char* src;  // the producer's loads
  size_t src_bytes;
  int M, N, mode, main_cycles;
  unsigned long long* stats;  // per CTA: 2 leaders x 5 phases of cycles, then rounds, then the CTA's cycles
};
constexpr int kStatWords = 2 * 5 + 2;

__device__ __forceinline__ void bar_consumers() { asm volatile("bar.sync 1, %0;" ::"n"(kConsumers) : "memory"); }
__device__ __forceinline__ void bar_wg0() { asm volatile("bar.sync 2, 128;" ::: "memory"); }
__device__ __forceinline__ uint32_t strip_offset(int r, int c) {  // as gemm/tma_store.cuh strip_offset<float>
  const uint32_t byte = static_cast<uint32_t>(c) * 4u;
  return static_cast<uint32_t>(r) * 128u + ((((byte >> 4) ^ static_cast<uint32_t>(r)) & 7u) << 4) + (byte & 15u);
}

// Round r's 16 fp32 of this thread's fragment (warp w of its warpgroup, lane) into a strip, as the kernel's fill.
__device__ __forceinline__ void fill_strip(uint8_t* strip, const float (&acc)[128], int r, int w, int lane) {
#pragma unroll
  for (int i = 16 * r; i < 16 * r + 16; i += 2) {
    const int m = 16 * w + lane / 4 + 8 * ((i / 2) % 2), c = 8 * (i / 4) + 2 * (lane % 4) - 32 * r;
    asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(smem_addr(strip) + strip_offset(m, c)), "f"(acc[i]),
                 "f"(acc[i + 1])
                 : "memory");
  }
}

// A tile's 8 rounds with each step timed into t (strip wait + barrier, st.shared, fence, barrier, issue; then
// the round count): `leader` waits for its oldest strip (kInFlight boxes may stay in flight) and issues the
// round's box, `sync()` is the barrier of the threads that share the strips, strip_of(r) the round's strip.
template <int kInFlight, class Sync, class StripOf, class Fill, class Issue>
__device__ __forceinline__ void timed_rounds(unsigned long long (&t)[6], bool leader, Sync&& sync, StripOf&& strip_of,
                                             Fill&& fill, Issue&& issue) {
#pragma unroll
  for (int r = 0; r < 8; ++r) {
    const long long c0 = clock64();
    if (leader) asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kInFlight) : "memory");
    sync();
    const long long c1 = clock64();
    uint8_t* strip = strip_of(r);
    fill(r, strip);
    const long long c2 = clock64();
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    const long long c3 = clock64();
    sync();
    const long long c4 = clock64();
    if (leader) {
      issue(r, strip);
      asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    }
    const long long c5 = clock64();
    t[0] += c1 - c0, t[1] += c2 - c1, t[2] += c3 - c2, t[3] += c4 - c3, t[4] += c5 - c4, ++t[5];
  }
}
__device__ __forceinline__ void tma_store_box(const CUtensorMap* map, int x, int y, const uint8_t* strip) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];" ::"l"(map), "r"(x), "r"(y),
               "r"(smem_addr(strip))
               : "memory");
}

// Warpgroup 0's rounds alone, kStrips strips in flight (modes 1wg-2, 1wg-4).
template <int kStrips>
__device__ __forceinline__ void one_warpgroup_rounds(const Args& a, uint8_t* strips, const float (&acc)[128], int tm,
                                                     int tn, unsigned long long (&t)[6]) {
  const int tid = threadIdx.x, w = tid / 32, lane = tid % 32;
  timed_rounds<kStrips - 1>(
      t, tid == 0, [] { bar_wg0(); }, [&](int r) { return strips + (r % kStrips) * kStrip; },
      [&](int r, uint8_t* strip) { fill_strip(strip, acc, r, w % 4, lane); },
      [&](int r, const uint8_t* strip) { tma_store_box(&a.map, tn * 256 + 32 * r, tm * 128, strip); });
}

// Every consumer warp's rounds on its own (modes warp16, warp16+main): 2 strips of 16 rows per warp.
__device__ __forceinline__ void warp_rounds(const Args& a, uint8_t* strips, const float (&acc)[128], int tm, int tn,
                                            unsigned long long (&t)[6]) {
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  uint8_t* mine = strips + warp * (2 * kWarpStrip);
  timed_rounds<1>(
      t, lane == 0, [] { __syncwarp(); }, [&](int r) { return mine + (r % 2) * kWarpStrip; },
      [&](int r, uint8_t* strip) { fill_strip(strip, acc, r, 0, lane); },  // rows lane / 4 + {0, 8}: the warp's 16
      [&](int r, const uint8_t* strip) { tma_store_box(&a.map16, tn * 256 + 32 * r, tm * 128 + 16 * warp, strip); });
}

__global__ void __launch_bounds__(kThreads, 1) epilogue_store(const __grid_constant__ Args a) {
  extern __shared__ uint8_t raw[];
  uint8_t* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
  uint8_t* strips = base;                        // [2 warpgroups][kSlots] strips
  uint8_t* stages = base + 2 * kSlots * kStrip;  // the producer's stages
  __shared__ __align__(8) uint64_t full;
  __shared__ volatile int epilogues_started;
  const int tid = threadIdx.x;
  if (tid == 0) {
    mbar_init_one(&full);
    epilogues_started = 0;
    asm volatile("fence.mbarrier_init.release.cluster;");
  }
  __syncthreads();
  const int tiles_n = a.N / 256, tiles = (a.M / 128) * tiles_n;
  const bool loads = a.mode == kTmaL2 || a.mode == kTmaHbm || a.mode == kTmaAll;
  const int my_tiles = min(kTilesPerCta, (tiles - static_cast<int>(blockIdx.x) + static_cast<int>(gridDim.x) - 1) /
                                             static_cast<int>(gridDim.x));
  if (tid >= kConsumers) {  // producer warp: lane 0 loads one tile's stages per epilogue started
    if (!loads || tid != kConsumers) return;
    uint32_t phase = 0;
    size_t off = static_cast<size_t>(blockIdx.x) * kStages * kStageBytes;
    for (int t = 0; t < my_tiles; ++t) {
      while (epilogues_started <= t) {
      }
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(&full)),
                   "r"(kStages * kStageBytes));
      for (int c = 0; c < kStages * kStageBytes / kLoadChunk; ++c) {
        if (off + kLoadChunk > a.src_bytes) off = 0;
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                smem_addr(stages + c * kLoadChunk)),
            "l"(a.src + off), "r"(kLoadChunk), "r"(smem_addr(&full))
            : "memory");
        off += kLoadChunk;
      }
      mbar_wait_flip(&full, phase);
    }
    return;
  }
  // Consumers: thread (warp w, lane l) holds the m64n256 fragment's rows 16 (w % 4) + l / 4 + {0, 8} of its
  // warpgroup and columns 8 j + 2 (l % 4) + {0, 1}: 128 fp32, as the kernel's accumulator.
  const int wg = tid / 128, w = (tid % 128) / 32, lane = tid % 32;
  const bool leader = tid % 128 == 0;
  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = static_cast<float>(tid * 128 + i);
  unsigned long long t_in = 0, t_st = 0, t_fence = 0, t_out = 0, t_issue = 0, rounds = 0;
  const bool one_wg = a.mode == kOneWg2 || a.mode == kOneWg4;
  const bool per_warp = a.mode == kWarp16 || a.mode == kWarp16Main;
  if (one_wg && wg == 1) return;  // (warpgroup 1 takes no part: the rounds use named barrier 2 of 128)
  unsigned long long t1[6] = {};
  const long long start = clock64();
  for (int j = 0; j < my_tiles; ++j) {
    const int t = blockIdx.x + j * gridDim.x;
    const int tm = t / tiles_n, tn = t % tiles_n;
    if (a.mode == kTmaMain || a.mode == kTmaAll || a.mode == kWarp16Main) {
      const long long s0 = clock64();
      while (clock64() - s0 < a.main_cycles) {
      }
    }
    if (tid == 0) epilogues_started = epilogues_started + 1;
    if (one_wg) {
      if (a.mode == kOneWg2) one_warpgroup_rounds<2>(a, strips, acc, tm, tn, t1);
      else one_warpgroup_rounds<4>(a, strips, acc, tm, tn, t1);
      continue;
    }
    if (per_warp) {
      warp_rounds(a, strips, acc, tm, tn, t1);
      continue;
    }
    if (a.mode == kLsu) {
#pragma unroll
      for (int i = 0; i < 128; i += 2) {
        const int row = tm * 128 + 64 * wg + 16 * w + lane / 4 + 8 * ((i / 2) % 2);
        const int col = tn * 256 + 8 * (i / 4) + 2 * (lane % 4);
        *reinterpret_cast<float2*>(a.out + static_cast<size_t>(row) * a.N + col) = make_float2(acc[i], acc[i + 1]);
      }
      continue;
    }
#pragma unroll
    for (int r = 0; r < 8; ++r) {
      const long long c0 = clock64();
      if (tid == 0) asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kSlots - 1) : "memory");
      bar_consumers();
      const long long c1 = clock64();
      uint8_t* strip = strips + (wg * kSlots + r % kSlots) * kStrip;
      if (a.mode != kNoFill) {
        fill_strip(strip, acc, r, w, lane);
      }
      const long long c2 = clock64();
      if (a.mode != kNoFence) asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      const long long c3 = clock64();
      bar_consumers();
      const long long c4 = clock64();
      if (tid == 0) {
        for (int g = 0; g < 2; ++g) {
          const int x = tn * 256 + 32 * r, y = tm * 128 + 64 * g;
          asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];" ::"l"(&a.map),
                       "r"(x), "r"(y), "r"(smem_addr(strips + (g * kSlots + r % kSlots) * kStrip))
                       : "memory");
        }
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
      }
      const long long c5 = clock64();
      t_in += c1 - c0, t_st += c2 - c1, t_fence += c3 - c2, t_out += c4 - c3, t_issue += c5 - c4;
      ++rounds;
    }
  }
  if (one_wg || per_warp) t_in = t1[0], t_st = t1[1], t_fence = t1[2], t_out = t1[3], t_issue = t1[4], rounds = t1[5];
  if (tid % 32 == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");  // (per_warp: every warp's lane 0)
  const long long end = clock64();
  if (leader) {
    unsigned long long* s = a.stats + blockIdx.x * kStatWords + wg * 5;
    s[0] = t_in, s[1] = t_st, s[2] = t_fence, s[3] = t_out, s[4] = t_issue;
    if (wg == 0) a.stats[blockIdx.x * kStatWords + 10] = rounds, a.stats[blockIdx.x * kStatWords + 11] = end - start;
  }
}

PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q;
  CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
  if (q != cudaDriverEntryPointSuccess || fn == nullptr) {
    printf("ERR cuTensorMapEncodeTiled not found\n");
    exit(1);
  }
  return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
}

}  // namespace

int main(int argc, char** argv) {  // argv: the modes to run (names as kModeNames), all when none given
  const ModeArgs modes{argc, argv, kModeNames, kModes};
  if (!modes.valid()) return 2;
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, 0));
  printf("device 0 %s SMs=%d\n", p.name, p.multiProcessorCount);
  Args a{};
  a.M = 32768, a.N = 7168;  // 896 MiB of fp32, 7168 tiles; N as deepseek-v3's H (a row stride of 28 KB)
  const size_t out_bytes = static_cast<size_t>(a.M) * a.N * 4;
  CK(cudaMalloc(&a.out, out_bytes));
  char* src;
  const size_t src_bytes = 1ull << 30;
  CK(cudaMalloc(&src, src_bytes));
  CK(cudaMemset(src, 1, src_bytes));
  a.src = src;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(a.N), static_cast<cuuint64_t>(a.M)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(a.N) * 4};
  const cuuint32_t box[2] = {32, 64}, elem[2] = {1, 1};
  CUresult r = encode_tiled()(&a.map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, a.out, dims, strides, box, elem,
                              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  const cuuint32_t box16[2] = {32, 16};
  const CUresult r16 = encode_tiled()(&a.map16, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, a.out, dims, strides, box16, elem,
                                      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS || r16 != CUDA_SUCCESS) {
    printf("ERR cuTensorMapEncodeTiled %d / %d\n", static_cast<int>(r), static_cast<int>(r16));
    return 1;
  }
  const int max_blocks = p.multiProcessorCount;
  CK(cudaMalloc(&a.stats, sizeof(unsigned long long) * kStatWords * max_blocks));
  CK(cudaFuncSetAttribute(epilogue_store, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  cudaEvent_t e1, e2;
  CK(cudaEventCreate(&e1));
  CK(cudaEventCreate(&e2));
  printf("mode       CTAs   GB/s  B/clk/SM  GHz | round cycles per leader (wg0 / wg1): in, st.shared, fence, barrier, issue\n");
  for (int mode = 0; mode < kModes; ++mode)
    for (int blocks : {1, 8, 33, 66, 116, 132}) {
      if (!modes.wanted(mode)) break;
      a.mode = mode;
      a.main_cycles = 4400;
      a.src_bytes = mode == kTmaHbm ? src_bytes : (8u << 20);
      // every CTA stores kTilesPerCta tiles (the matrix has enough for 132 CTAs), so the rate counts those bytes
      epilogue_store<<<blocks, kThreads, kSmemBytes>>>(a);  // warm-up
      CK(cudaGetLastError());
      CK(cudaEventRecord(e1));
      epilogue_store<<<blocks, kThreads, kSmemBytes>>>(a);
      CK(cudaEventRecord(e2));
      const float ms = time_ms(e1, e2);
      std::vector<unsigned long long> st(kStatWords * blocks);
      CK(cudaMemcpy(st.data(), a.stats, st.size() * 8, cudaMemcpyDeviceToHost));
      const int tile_bytes = (mode == kOneWg2 || mode == kOneWg4) ? 64 * 256 * 4 : 128 * 256 * 4;
      const double gbps = static_cast<double>(blocks) * kTilesPerCta * tile_bytes / (ms / 1e3) / 1e9;
      const double ghz = st[11] / (ms * 1e6);  // CTA 0's cycles over the launch's time
      double phase[2][5] = {};
      const double rounds = static_cast<double>(st[10]);
      for (int g = 0; g < 2; ++g)
        for (int k = 0; k < 5; ++k) phase[g][k] = rounds > 0 ? st[g * 5 + k] / rounds : 0.0;
      printf("%-9s %4d %7.1f %8.2f %5.2f | %5.0f %5.0f %5.0f %5.0f %5.0f / %5.0f %5.0f %5.0f %5.0f %5.0f\n",
             kModeNames[mode], blocks, gbps, gbps / blocks / ghz, ghz, phase[0][0], phase[0][1], phase[0][2],
             phase[0][3], phase[0][4], phase[1][0], phase[1][1], phase[1][2], phase[1][3], phase[1][4]);
      fflush(stdout);
    }
  return 0;
}
