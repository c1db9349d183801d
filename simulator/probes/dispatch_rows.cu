// Probe (issue 8, twenty-eighth pass): how fast can one data-movement CTA gather token rows into an
// expert-major buffer with bulk copies, and what limits it? The twenty-seventh pass found the megakernel's
// push dispatch (dispatch/bulk_rows.cuh: 12 warps, one lane each driving a ring of 4 slots of 4 KB, one
// bulk load and one bulk store per piece) moving ~33 GB/s per CTA in the kernel, and ~50% slower with 2 KB
// pieces at the same bytes in flight: a cost per bulk copy, not per byte. This probe runs that loop alone on
// 16 and 32 CTAs over a routed row layout (experts' segments padded to 128-row tiles; padding rows are zeros)
// and varies what could cut the cost per copy:
//   slot bytes x slots per warp   4 KB x 4 (main), 8 KB x 2, 16 KB x 1; with 6 warps 16 KB x 2, 8 KB x 4,
//                                 32 KB x 1 (the same 192 KB of slots per CTA)
//   grouped stores                a row that fits a slot shares it with the next rows of the tile: one bulk
//                                 load per row, ONE bulk store of the group (the destination rows are
//                                 contiguous; dispatch/row_pieces.h group_item)
//   lanes per warp                1, 2 or 4 lanes each drive their own ring (their waits overlap)
// Rows of 4096 B (qwen3-30b-a3b, H = 2048: 131,072 rows) and 14,336 B (deepseek-v3, H = 7168: 65,536 rows).
// Every configuration's output is checked byte for byte against the source rows (after a poisoned fill that
// the check must flag: its negative control). Prints the median of 5 runs, GB/s copied in all and per CTA.
//
//   nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a -Icore/include -Imegakernel/src \
//        -o /tmp/dr simulator/probes/dispatch_rows.cu && /tmp/dr        # one H100/H200, ~10 s
#include <algorithm>
#include <random>
#include <vector>

#include "dispatch/row_pieces.h"
#include "probe_common.cuh"

using calico::gpu::mk::group_item;
using calico::gpu::mk::group_items;
using calico::gpu::mk::row_groups;
using calico::gpu::mk::RowGroupItem;
using calico::gpu::mk::RowGroups;
using calico::gpu::mk::warp_items;

constexpr int kTileRows = 128, kWarps = 12, kMaxSlots = 8;
constexpr long long kTimeoutCycles = 4'000'000'000LL;

__device__ __forceinline__ void store_bulk(void* gmem, const void* smem, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(gmem), "r"(smem_addr(smem)),
               "r"(bytes)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
__device__ __forceinline__ bool wait_parity(uint64_t* bar, uint32_t parity, unsigned long long* timeouts) {
  const long long c0 = clock64();
  for (;;) {
    uint32_t done;
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done)
                 : "r"(smem_addr(bar)), "r"(parity)
                 : "memory");
    if (done) return true;
    if (clock64() - c0 > kTimeoutCycles) {
      atomicAdd(timeouts, 1ull);
      return false;
    }
  }
}

// All threads: the barriers of every warp's slots, initialised and visible to the async proxy.
__device__ __forceinline__ void init_barriers(uint64_t* bars) {
  if (threadIdx.x < kWarps * kMaxSlots) mbar_init_one(bars + threadIdx.x);
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  __syncthreads();
}
// One thread: the bulk loads of an item's real rows into its slot, all completing on `bar` (nothing for an
// item of padding rows only). `tokens`: the tile's row tokens.
__device__ __forceinline__ void load_group(uint8_t* slot, uint64_t* bar, const RowGroupItem& it, const uint8_t* src,
                                           const int* tokens, uint32_t row_bytes) {
  uint32_t bytes = 0;
  for (int r = 0; r < it.rows; ++r) bytes += tokens[it.row + r] >= 0 ? it.bytes : 0u;
  if (bytes == 0) return;
  mbar_arrive_expect(bar, bytes);
  for (int r = 0; r < it.rows; ++r) {
    const int tok = tokens[it.row + r];
    if (tok >= 0) bulk_load_tx(slot + r * it.bytes, src + static_cast<size_t>(tok) * row_bytes + it.offset, it.bytes, bar);
  }
}

// One CTA per 128-row tile in turn (m = blockIdx.x, += gridDim.x), as the kernel's forward_comm; each of the
// first `warps` warps moves its items of the tile (round-robin, warp_items), lanes 0..kLanes-1 each a ring of
// kSlots / kLanes slots over every kLanes-th of them; the CTA meets a barrier after each tile (where the
// kernel releases the tile's counter).
template <int kSlotBytes, int kSlots, int kLanes>
__global__ void __launch_bounds__(384, 1) gather_rows(const uint8_t* src, const int* row_token, uint8_t* dst,
                                                      int tiles, uint32_t row_bytes, int warps,
                                                      unsigned long long* timeouts) {
  static_assert(kSlots % kLanes == 0 && kSlots <= kMaxSlots);
  constexpr int kLaneSlots = kSlots / kLanes;
  extern __shared__ __align__(1024) uint8_t slots[];
  __shared__ __align__(8) uint64_t bar[kWarps][kMaxSlots];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  init_barriers(&bar[0][0]);
  const RowGroups g = row_groups(row_bytes, kSlotBytes);
  uint32_t phases = 0;
  bool ok = true;
  for (int m = blockIdx.x; m < tiles && ok; m += gridDim.x) {
    if (warp < warps && lane < kLanes) {
      const int row0 = m * kTileRows;
      const int nq = warp_items(warp_items(group_items(kTileRows, g), warp, warps), lane, kLanes);
      auto item = [&](int q) { return group_item(warp + warps * (lane + kLanes * q), kTileRows, g, row_bytes, kSlotBytes); };
      auto slot_index = [&](int q) { return lane * kLaneSlots + q % kLaneSlots; };
      auto slot = [&](int k) { return slots + static_cast<size_t>(warp * kSlots + k) * kSlotBytes; };
      auto issue = [&](int q) {
        const int k = slot_index(q);
        load_group(slot(k), &bar[warp][k], item(q), src, row_token + row0, row_bytes);
      };
      for (int q = 0; q < min(nq, kLaneSlots); ++q) issue(q);
      for (int q = 0; q < nq && ok; ++q) {
        const RowGroupItem it = item(q);
        const int k = slot_index(q);
        bool any_real = false, any_pad = false;
        for (int r = 0; r < it.rows; ++r) (row_token[row0 + it.row + r] >= 0 ? any_real : any_pad) = true;
        if (any_real) {
          ok = wait_parity(&bar[warp][k], (phases >> k) & 1u, timeouts);
          phases ^= 1u << k;
        }
        if (any_pad) {  // zeros for the padding rows, then ordered before the bulk store's reads
          for (int r = 0; r < it.rows; ++r)
            if (row_token[row0 + it.row + r] < 0)
              for (uint32_t c = 0; c < it.bytes; c += 16)
                *reinterpret_cast<int4*>(slot(k) + r * it.bytes + c) = int4{0, 0, 0, 0};
          asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        }
        store_bulk(dst + static_cast<size_t>(row0 + it.row) * row_bytes + it.offset, slot(k), it.rows * it.bytes);
        if constexpr (kLaneSlots == 1) {  // the one slot is free once its store has read it
          asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
          if (q + 1 < nq) issue(q + 1);
        } else if (q >= 1 && q - 1 + kLaneSlots < nq) {  // the previous item's slot, once its store has read it
          asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
          issue(q - 1 + kLaneSlots);
        }
      }
      asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    }
    ok = __syncthreads_and(ok) != 0;
  }
}

// The same loads, but the warp stores the rows from shared memory by st.global.v4 (each lane 16-byte chunks):
// the TMA engine then only loads (the mainloop probe: ~44 B/clk of bulk loads per SM alone, ~29 B/clk of bulk
// stores), the LSU path stores, and the two run side by side. Items with (item % 4) < tma_share are stored by
// one bulk copy instead (a mix of both store paths). A slot stored by the lanes is free after __syncwarp; a
// slot stored by a bulk copy after its read (lane 0 waits for it before reloading that slot).
template <int kSlotBytes, int kSlots>
__global__ void __launch_bounds__(384, 1) gather_rows_lsu(const uint8_t* src, const int* row_token, uint8_t* dst,
                                                          int tiles, uint32_t row_bytes, int warps, int tma_share,
                                                          unsigned long long* timeouts) {
  static_assert(kSlots >= 2 && kSlots <= kMaxSlots);
  extern __shared__ __align__(1024) uint8_t slots[];
  __shared__ __align__(8) uint64_t bar[kWarps][kMaxSlots];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  init_barriers(&bar[0][0]);
  const RowGroups g = row_groups(row_bytes, kSlotBytes);
  uint32_t phases = 0;
  bool ok = true;
  for (int m = blockIdx.x; m < tiles && ok; m += gridDim.x) {
    if (warp < warps) {
      const int row0 = m * kTileRows;
      const int nq = warp_items(group_items(kTileRows, g), warp, warps);
      auto item = [&](int q) { return group_item(warp + warps * q, kTileRows, g, row_bytes, kSlotBytes); };
      auto by_tma = [&](int q) { return (warp + warps * q) % 4 < tma_share; };
      auto slot = [&](int k) { return slots + static_cast<size_t>(warp * kSlots + k) * kSlotBytes; };
      auto issue = [&](int q) {  // lane 0
        const int k = q % kSlots;
        load_group(slot(k), &bar[warp][k], item(q), src, row_token + row0, row_bytes);
      };
      if (lane == 0)
        for (int q = 0; q < min(nq, kSlots); ++q) issue(q);
      for (int q = 0; q < nq && ok; ++q) {
        const RowGroupItem it = item(q);
        const int k = q % kSlots;
        bool any_real = false;
        for (int r = 0; r < it.rows; ++r) any_real |= row_token[row0 + it.row + r] >= 0;
        if (any_real) {
          ok = wait_parity(&bar[warp][k], (phases >> k) & 1u, timeouts);
          phases ^= 1u << k;
        }
        uint8_t* out = dst + static_cast<size_t>(row0 + it.row) * row_bytes + it.offset;
        if (by_tma(q)) {
          for (int r = 0; r < it.rows; ++r)
            if (row_token[row0 + it.row + r] < 0)
              for (uint32_t c = 16u * lane; c < it.bytes; c += 16u * 32u)
                *reinterpret_cast<int4*>(slot(k) + r * it.bytes + c) = int4{0, 0, 0, 0};
          asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
          __syncwarp();
          if (lane == 0) store_bulk(out, slot(k), it.rows * it.bytes);
        } else {
          for (int r = 0; r < it.rows; ++r) {
            const bool real = row_token[row0 + it.row + r] >= 0;
            for (uint32_t c = 16u * lane; c < it.bytes; c += 16u * 32u) {
              const int4 v = real ? *reinterpret_cast<const int4*>(slot(k) + r * it.bytes + c) : int4{0, 0, 0, 0};
              *reinterpret_cast<int4*>(out + static_cast<size_t>(r) * row_bytes + c) = v;
            }
          }
        }
        __syncwarp();
        if (lane == 0 && q >= 1 && q - 1 + kSlots < nq) {  // the previous item's slot
          if (by_tma(q - 1)) {
            if (by_tma(q)) asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
            else asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
          }
          issue(q - 1 + kSlots);
        }
        __syncwarp();
      }
      if (lane == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
      asm volatile("fence.proxy.async.global;" ::: "memory");  // as the kernel's writers before a release
    }
    ok = __syncthreads_and(ok) != 0;
  }
}

// Counts 16-byte words of dst that differ from their source row (zeros for padding rows).
__global__ void count_wrong(const int4* src, const int* row_token, const int4* dst, size_t rows, uint32_t row_words,
                            unsigned long long* wrong) {
  int bad = 0;
  for (size_t w = blockIdx.x * (size_t)blockDim.x + threadIdx.x; w < rows * row_words; w += (size_t)gridDim.x * blockDim.x) {
    const size_t row = w / row_words, col = w % row_words;
    const int tok = row_token[row];
    const int4 want = tok >= 0 ? src[static_cast<size_t>(tok) * row_words + col] : int4{0, 0, 0, 0};
    const int4 got = dst[w];
    bad += want.x != got.x || want.y != got.y || want.z != got.z || want.w != got.w;
  }
  const int block_bad = __syncthreads_count(bad > 0);
  if (threadIdx.x == 0 && block_bad) atomicAdd(wrong, static_cast<unsigned long long>(block_bad));
}

// Rows of T tokens routed K times each to E experts (uniformly at random, distinct per token), expert
// segments padded to 128-row tiles, tokens ascending within a segment (as the kernel's schedule places them).
static std::vector<int> routed_rows(int T, int K, int E, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int>> per_expert(E);
  std::vector<int> experts(E);
  for (int e = 0; e < E; ++e) experts[e] = e;
  for (int t = 0; t < T; ++t) {
    for (int k = 0; k < K; ++k) std::swap(experts[k], experts[k + rng() % (E - k)]);
    for (int k = 0; k < K; ++k) per_expert[experts[k]].push_back(t);
  }
  std::vector<int> rows;
  for (auto& toks : per_expert) {
    rows.insert(rows.end(), toks.begin(), toks.end());
    while (rows.size() % kTileRows) rows.push_back(-1);
  }
  return rows;
}

struct Shape {
  const char* name;
  int T, K, E;
  uint32_t row_bytes;
};

template <int kSlotBytes, int kSlots, int kLanes, bool kLsu = false>
static void run_config(const Shape& sh, int warps, int ctas, int tma_share, const uint8_t* src, const int* row_token, uint8_t* dst,
                       size_t rows, unsigned long long* counters) {
  const int smem = 226 * 1024;  // ~the compute CTAs' dynamic shared memory: the L1 left is the kernel's
  if constexpr (kLsu)
    CK(cudaFuncSetAttribute(gather_rows_lsu<kSlotBytes, kSlots>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  else
    CK(cudaFuncSetAttribute(gather_rows<kSlotBytes, kSlots, kLanes>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const int tiles = static_cast<int>(rows / kTileRows);
  unsigned long long host[2];
  // The check's negative control: a poisoned destination must count wrong before the copy.
  CK(cudaMemset(dst, 0xAB, rows * sh.row_bytes));
  CK(cudaMemset(counters, 0, 2 * sizeof(unsigned long long)));
  count_wrong<<<528, 512>>>(reinterpret_cast<const int4*>(src), row_token, reinterpret_cast<const int4*>(dst), rows,
                            sh.row_bytes / 16, counters + 1);
  CK(cudaMemcpy(host, counters, sizeof host, cudaMemcpyDeviceToHost));
  const unsigned long long poisoned = host[1];
  std::vector<float> us;
  cudaEvent_t e1, e2;
  CK(cudaEventCreate(&e1));
  CK(cudaEventCreate(&e2));
  for (int rep = 0; rep < 6; ++rep) {
    CK(cudaEventRecord(e1));
    if constexpr (kLsu)
      gather_rows_lsu<kSlotBytes, kSlots><<<ctas, 384, smem>>>(src, row_token, dst, tiles, sh.row_bytes, warps,
                                                                tma_share, counters);
    else
      gather_rows<kSlotBytes, kSlots, kLanes><<<ctas, 384, smem>>>(src, row_token, dst, tiles, sh.row_bytes, warps,
                                                                   counters);
    CK(cudaEventRecord(e2));
    CK(cudaGetLastError());
    const float ms = time_ms(e1, e2);
    if (rep > 0) us.push_back(ms * 1e3f);
  }
  CK(cudaMemset(counters + 1, 0, sizeof(unsigned long long)));
  count_wrong<<<528, 512>>>(reinterpret_cast<const int4*>(src), row_token, reinterpret_cast<const int4*>(dst), rows,
                            sh.row_bytes / 16, counters + 1);
  CK(cudaMemcpy(host, counters, sizeof host, cudaMemcpyDeviceToHost));
  std::sort(us.begin(), us.end());
  const double med = us[us.size() / 2], bytes = static_cast<double>(rows) * sh.row_bytes;
  const RowGroups g = row_groups(sh.row_bytes, kSlotBytes);
  printf("%-8s %s ctas %2d warps %2d slot %5d x %d lanes %d rows/item %d pieces/row %d: %8.1f us  %7.1f GB/s  %5.1f per CTA"
         "  check %s (poisoned blocks flagged %llu)%s\n",
         sh.name, kLsu ? (tma_share == 0 ? "lsu-store " : tma_share == 1 ? "mix-1/4   " : tma_share == 2 ? "mix-2/4   " : "mix-3/4   ") : "bulk-store", ctas, warps, kSlotBytes, kSlots, kLanes, g.rows_per_item, g.pieces, med, bytes / med * 1e-3,
         bytes / med * 1e-3 / ctas, host[1] == 0 && poisoned > 0 ? "ok" : "FAILED", poisoned,
         host[0] ? "  TIMEOUTS" : "");
  CK(cudaEventDestroy(e1));
  CK(cudaEventDestroy(e2));
}

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("device %s SMs=%d\n", prop.name, prop.multiProcessorCount);
  const Shape shapes[] = {{"qwen3", 16384, 8, 128, 4096}, {"dsv3", 8192, 8, 256, 14336}};
  unsigned long long* counters;
  CK(cudaMalloc(&counters, 2 * sizeof(unsigned long long)));
  for (const Shape& sh : shapes) {
    const std::vector<int> rows = routed_rows(sh.T, sh.K, sh.E, 2026);
    size_t pad = 0;
    for (int t : rows) pad += t < 0;
    printf("%s: %zu rows of %u B (%zu padding), %.0f MB moved\n", sh.name, rows.size(), sh.row_bytes, pad,
           rows.size() * 1.0 * sh.row_bytes / 1e6);
    uint8_t *src, *dst;
    int* row_token;
    CK(cudaMalloc(&src, static_cast<size_t>(sh.T) * sh.row_bytes));
    CK(cudaMalloc(&dst, rows.size() * sh.row_bytes));
    CK(cudaMalloc(&row_token, rows.size() * sizeof(int)));
    CK(cudaMemcpy(row_token, rows.data(), rows.size() * sizeof(int), cudaMemcpyHostToDevice));
    std::vector<uint32_t> host_src(static_cast<size_t>(sh.T) * sh.row_bytes / 4);
    std::mt19937 rng(7);
    for (auto& v : host_src) v = rng();
    CK(cudaMemcpy(src, host_src.data(), host_src.size() * 4, cudaMemcpyHostToDevice));
    for (int ctas : {16, 32}) {
      run_config<4096, 4, 1>(sh, 12, ctas, 4, src, row_token, dst, rows.size(), counters);  // main
      run_config<4096, 4, 4>(sh, 12, ctas, 4, src, row_token, dst, rows.size(), counters);
      run_config<16384, 1, 1>(sh, 12, ctas, 4, src, row_token, dst, rows.size(), counters);
      run_config<8192, 2, 2>(sh, 12, ctas, 4, src, row_token, dst, rows.size(), counters);
      for (int share : {0, 1, 2}) {
        run_config<4096, 4, 1, true>(sh, 12, ctas, share, src, row_token, dst, rows.size(), counters);
        run_config<8192, 2, 1, true>(sh, 12, ctas, share, src, row_token, dst, rows.size(), counters);
      }
      run_config<4096, 2, 1, true>(sh, 12, ctas, 0, src, row_token, dst, rows.size(), counters);
      run_config<16384, 2, 1, true>(sh, 6, ctas, 0, src, row_token, dst, rows.size(), counters);
    }
    CK(cudaFree(src));
    CK(cudaFree(dst));
    CK(cudaFree(row_token));
  }
  printf("probe rc 0\n");
  return 0;
}
