// The epilogues' way out: a tile's results go to global memory through shared memory and TMA stores, so the
// consumer warpgroups spend a few hundred cycles writing shared memory instead of tens of thousands issuing
// scattered 4- and 8-byte global stores (the profile's "stores issued"), and the write traffic drains while
// they run the next tile's main loop.
//
// Layout: a *strip* is 64 rows x 128 bytes (64 bf16 or 32 fp32 columns) in the 128-byte swizzle, one TMA box.
// Each consumer warpgroup (64 rows of the tile) owns kOutSlots strips of GemmSmem::out and writes its 64 rows
// one strip per *round*; consumer thread 0 issues both warpgroups' boxes of a round as one bulk group. A slot
// is rewritten kOutSlots rounds later, after `cp.async.bulk.wait_group.read` says its box has been read, so
// one round's box drains while the next round is written. Every tile stores an even number of rounds, so the
// slot of round r is r % kOutSlots in every tile and the wait carries over from one tile to the next.
//
// NOTE (bits): values are stored exactly as the register epilogues stored them (same conversions, same zero
// rows); TMA clips rows and columns past the tensor, which the register epilogues skipped.
#pragma once

#include <cute/atom/copy_traits_sm90_tma.hpp>

#include "gemm/epilogue.cuh"
#include "gemm/sm90_tile.cuh"

namespace calico::gpu::mk {

template <class T>
constexpr int kStripCols = 128 / static_cast<int>(sizeof(T));
// kRows: 64 (a warpgroup's strip) or 16 (a warp's: the forward's epilogues, store_rounds_per_warp).
template <class T, int kRows = 64>
using StripLayout = decltype(cute::tile_to_shape(cute::GMMA::Layout_K_SW128_Atom<T>{},
                                                 cute::Shape<cute::Int<kRows>, cute::Int<kStripCols<T>>>{}));
template <class T, int kRows = 64>
using StoreAtom = decltype(cute::make_tma_atom(
    cute::SM90_TMA_STORE{},
    cute::make_tensor(cute::make_gmem_ptr(static_cast<T*>(nullptr)), GmemShape{}, StrideKMajor{}),
    StripLayout<T, kRows>{}, cute::Shape<cute::Int<kRows>, cute::Int<kStripCols<T>>>{}));

// A row-major output [rows, cols] per l (l: the expert of a weight gradient, else 1), stored by strips of
// kBoxRows rows.
template <class T, int kBoxRows = 64>
struct StoreOperand {
  static constexpr int kRows = kBoxRows;
  StoreAtom<T, kBoxRows> atom;
  int rows = 0, cols = 0, l = 0;
};

using StoreBf16 = StoreOperand<bf16_t>;
using StoreF32 = StoreOperand<float>;
using StoreBf16Warp = StoreOperand<bf16_t, 16>;  // a consumer warp's 16 rows (the forward)

// Byte offset of column c (an even column: pairs never straddle a 16-byte chunk) of strip row r: the 128-byte
// swizzle XORs the 16-byte chunk index with r % 8 (CuTe's Layout_K_SW128_Atom, which the TMA atom was built
// from; the GPU tests compare every stored byte with the reference, so a disagreement cannot pass).
template <class T>
__device__ __forceinline__ uint32_t strip_offset(int r, int c) {
  const uint32_t byte = static_cast<uint32_t>(c) * sizeof(T);
  return static_cast<uint32_t>(r) * 128u + ((((byte >> 4) ^ static_cast<uint32_t>(r)) & 7u) << 4) + (byte & 15u);
}
__device__ __forceinline__ void st_shared_u32(uint8_t* strip, uint32_t off, uint32_t v) {
  asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(smem_addr(strip) + off), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t ld_shared_u32(const uint8_t* p) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(smem_addr(p)) : "memory");
  return v;
}
__device__ __forceinline__ void st_shared_f32x2(uint8_t* strip, uint32_t off, float a, float b) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(smem_addr(strip) + off), "f"(a), "f"(b) : "memory");
}

__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void bulk_wait_read() {  // the boxes of all but the newest N groups have been read
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
// Every box this thread issued is written (visible in global memory), then ordered before this thread's later
// generic-proxy accesses (the release of a counter that other CTAs acquire).
__device__ __forceinline__ void bulk_wait_all_written() {
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
  fence_proxy_async_global();
}

// TMA store of one strip: rows [R * row_box, +R), columns [kStripCols * strip, +kStripCols) of l (R: the
// operand's box rows, 64 or 16). Nothing is issued for a box wholly past the tensor (TMA clips the partial ones).
template <class T, int R>
__device__ __forceinline__ void tma_store_strip(const StoreOperand<T, R>& op, const uint8_t* smem, int row_box,
                                                int strip, int l) {
  using namespace cute;
  if (row_box * R >= op.rows || strip * kStripCols<T> >= op.cols) return;
  Tensor m = op.atom.get_tma_tensor(make_shape(op.rows, op.cols, op.l));
  Tensor g = local_tile(m, Shape<Int<R>, Int<kStripCols<T>>>{}, make_coord(row_box, strip, l));
  Tensor s = make_tensor(make_smem_ptr(reinterpret_cast<const T*>(smem)), StripLayout<T, R>{});
  auto [tg, ts] = tma_partition(op.atom, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(s), group_modes<0, 2>(g));
  copy(op.atom, ts, tg);
}

// A tile's counter releases, which must follow its stores' writes (other CTAs read the results by TMA), held
// by consumer thread 0 (the thread that issued the stores) until `flush()`: waiting for the writes right
// after issuing them stalled warpgroup 0 (its next wgmma need all four warps) for ~1.5k cycles per tile. The
// kernels flush (moe/persistent.cuh, consume_tile): once the next tile's k-tile kFlushKTile is issued (its
// wgmma run during the wait, and the writes are done by then), before the consumers wait for a task's
// first stage that is not there yet (its producer may be waiting on this very counter), before a side task's
// waits, and at the end of the walk. So no wait of this CTA's threads can depend on a release it holds.
struct DeferredRelease {
  int* counter[2] = {nullptr, nullptr};
  // Hold this tile's releases (one increment each; b may be null); the previous tile's are made first.
  __device__ __forceinline__ void defer(int* a, int* b = nullptr) {
    flush();
    counter[0] = a, counter[1] = b;
  }
  __device__ __forceinline__ bool pending() const { return counter[0] != nullptr; }
  // Every store this thread issued is written and ordered before the releases (bulk_wait_all_written).
  __device__ __forceinline__ void flush() {
    if (!pending()) return;
    bulk_wait_all_written();
    signal_add(counter[0], 1);
    if (counter[1] != nullptr) signal_add(counter[1], 1);
    counter[0] = counter[1] = nullptr;
  }
  // consume_tile's after_batch for consumer thread ctid of a tile of k_tiles k-tiles: flush after k-tile
  // kFlushKTile (or the tile's last). NOTE: measured on the H200 (2026-12-01, ninth pass): flushing after
  // k-tile 1 moved the wait into the main loop (the stores of a 128 x 256 gate/up tile, 96 KB, drain at
  // ~20 B/clk: ~5k cycles, while one k-tile's batch covers ~1k), which grew by as much as the release wait it
  // removed; a later k-tile finds the writes done.
  static constexpr int kFlushKTile = 5;
  // holder: this thread holds releases (consumer thread 0, or in the forward lane 0 of every consumer warp:
  // store_rounds_per_warp).
  __device__ __forceinline__ auto flush_after_batch(bool holder, int k_tiles) {
    return [this, holder, k_tiles](int kt) {
      if (holder && kt == (k_tiles - 1 < kFlushKTile ? k_tiles - 1 : kFlushKTile)) flush();
    };
  }
};

// One tile's rounds. fill(r, strip): this thread writes its values of round r into its warpgroup's strip
// (r is a compile-time index after unrolling: the accumulator fragment stays in registers). issue(r, wg,
// strip): consumer thread 0 stores warpgroup wg's strip of round r (tma_store_strip).
// kPerWarpgroup: each warpgroup runs its rounds on its own (its barrier; its thread 0, consumer thread 0 or
// 128, waits for its strips and issues its boxes), so one warpgroup's epilogue overlaps the other's main loop
// (the weight-gradient tiles). NOTE: a strip's box is waited for by the thread that issued it: warpgroup 1's
// strips, issued by thread 128 in a per-warpgroup epilogue, are waited for by it before the next joint one;
// those thread 0 issued in a joint one, before warpgroup 1 may start a per-warpgroup one (consume_wgrad).
template <int kRounds, bool kPerWarpgroup = false, class Fill, class Issue>
__device__ __forceinline__ void store_rounds(const SyncContext& sc, GemmSmem& s, int ctid, Fill&& fill,
                                             Issue&& issue) {
  static_assert(kRounds % kOutSlots == 0, "every tile ends on the same slot (see the header)");
  const int wg = ctid / 128;
  long long waited = 0;  // profile only
  if constexpr (kPerWarpgroup) {
    const bool leader = ctid % 128 == 0;
    CUTE_UNROLL
    for (int r = 0; r < kRounds; ++r) {
      if (leader) {
        const long long w0 = clock64();
        bulk_wait_read<kOutSlots - 1>();
        waited += clock64() - w0;
      }
      warpgroup_barrier(wg);
      uint8_t* strip = s.out[wg * kOutSlots + r % kOutSlots];
      fill(r, strip);
      fence_proxy_async_shared();
      warpgroup_barrier(wg);
      if (leader) {
        issue(r, wg, strip);
        bulk_commit();
      }
    }
    if (ctid == 0) profile_add(sc, kProfStoreWait, waited);
    return;
  }
  if (ctid == 128) bulk_wait_read<0>();  // warpgroup 1's own boxes (a per-warpgroup epilogue's) are read
  CUTE_UNROLL
  for (int r = 0; r < kRounds; ++r) {
    if (ctid == 0) {
      const long long w0 = clock64();
      bulk_wait_read<kOutSlots - 1>();  // this round's slots: read out kOutSlots rounds ago
      waited += clock64() - w0;
    }
    consumer_barrier();
    fill(r, s.out[wg * kOutSlots + r % kOutSlots]);
    fence_proxy_async_shared();  // generic writes -> the TMA engine's reads
    consumer_barrier();
    if (ctid == 0) {
      issue(r, 0, s.out[r % kOutSlots]);
      issue(r, 1, s.out[kOutSlots + r % kOutSlots]);
      bulk_commit();
    }
  }
  if (ctid == 0) profile_add(sc, kProfStoreWait, waited);
}

// The per-warp form of store_rounds (the forward's epilogues): each consumer warp stores its own 16 rows of a
// round from its own kWarpSlots strips of 16 rows x 128 bytes (2 KB; the warp's 4 KB of GemmSmem::out), its
// lane 0 waiting for its slots and issuing its boxes, so no warp waits for another: the 256-thread barriers of
// store_rounds (two per round) serialised every round's latency across all eight warps. A warp's results are
// written (and its counter releases made) by its own lane 0 (DeferredRelease, one per warp).
constexpr int kWarpSlots = 2;
constexpr int kWarpStripBytes = 16 * 128;
static_assert(kConsumerThreads / 32 * kWarpSlots * kWarpStripBytes <= sizeof(GemmSmem::out));
template <int kRounds, class Fill, class Issue>
__device__ __forceinline__ void store_rounds_per_warp(GemmSmem& s, int ctid, Fill&& fill, Issue&& issue) {
  static_assert(kRounds % kWarpSlots == 0, "every tile ends on the same slot (see the header)");
  const bool leader = ctid % 32 == 0;
  uint8_t* slots = &s.out[0][0] + (ctid / 32) * (kWarpSlots * kWarpStripBytes);
  CUTE_UNROLL
  for (int r = 0; r < kRounds; ++r) {
    uint8_t* strip = slots + (r % kWarpSlots) * kWarpStripBytes;
    if (leader) bulk_wait_read<kWarpSlots - 1>();  // this round's slot: read out kWarpSlots rounds ago
    __syncwarp();
    fill(r, strip);
    fence_proxy_async_shared();  // generic writes -> the TMA engine's reads
    __syncwarp();
    if (leader) {
      issue(r, strip);
      bulk_commit();
    }
  }
}

// store_tile_bf16 by warps (store_rounds_per_warp): this warp's 16 rows of the 128 x 256 tile, 64 columns per
// round, to 16-row boxes of `out`.
template <class Acc, class Coord>
__device__ __forceinline__ void store_tile_bf16_per_warp(GemmSmem& s, int ctid, Acc& acc, const Coord& coord,
                                                         const StoreBf16Warp& out, int m_tile, int n_tile) {
  using cute::get;
  store_rounds_per_warp<256 / 64>(
      s, ctid,
      [&](int r, uint8_t* strip) {
        CUTE_UNROLL
        for (int i = 32 * r; i < 32 * r + 32; i += 2) {
          const int m = get<0>(coord(i)), c = get<1>(coord(i)) - 64 * r;
          st_shared_u32(strip, strip_offset<bf16_t>(m % 16, c), bf16x2_from_f32(acc(i), acc(i + 1)));
        }
      },
      [&](int r, const uint8_t* strip) { tma_store_strip(out, strip, m_tile * 8 + ctid / 32, n_tile * (256 / 64) + r, 0); });
}

// A 128 x 256 fp32 accumulator tile (the m64n256 fragments of both consumer warpgroups) rounded to bf16 and
// stored to rows [128 m_tile, +128), columns [256 n_tile, +256) of `out`, 64 columns per round: the down
// tiles' y and the d_x_k tiles.
template <class Acc, class Coord>
__device__ __forceinline__ void store_tile_bf16(const SyncContext& sc, GemmSmem& s, int ctid, Acc& acc,
                                                const Coord& coord, const StoreBf16& out, int m_tile, int n_tile) {
  using cute::get;
  store_rounds<256 / 64>(
      sc, s, ctid,
      [&](int r, uint8_t* strip) {
        CUTE_UNROLL
        for (int i = 32 * r; i < 32 * r + 32; i += 2) {
          const int m = get<0>(coord(i)), c = get<1>(coord(i)) - 64 * r;
          st_shared_u32(strip, strip_offset<bf16_t>(m % 64, c), bf16x2_from_f32(acc(i), acc(i + 1)));
        }
      },
      [&](int r, int wg, const uint8_t* strip) { tma_store_strip(out, strip, m_tile * 2 + wg, n_tile * (256 / 64) + r, 0); });
}

}  // namespace calico::gpu::mk
