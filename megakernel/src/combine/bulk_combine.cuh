// The forward's combine tail by bulk copies (the layout and the chain: combine/combine_pieces.h).
//
// Why: the register-load combine (combine_tokens) keeps what fits the ~28 KB of L1 that 226 KB of shared
// memory leaves in flight per SM, ~9 B/clk per SM (qwen3 profile: the tail is ~10% of the forward). Here
// each warp streams its items through kCombineMaxSlots slots of its share of the (then idle) pipeline
// stages and strips, ~24 KB per warp in flight, and takes tokens from the tail's ticket counter one at a
// time, the ticket two tokens ahead and the next token's rows one token ahead (no round trip on the path).
//
// NOTE (bits): every output chunk is combine_chunk's chain, the one combine_tokens runs; who computes a
// token changes nothing.
#pragma once

#include "combine/combine_pieces.h"
#include "dispatch/bulk_rows.cuh"
#include "sync/bounded_wait.cuh"

namespace calico::gpu::mk {

// A warp's share of the combine's shared memory: its slots, then one barrier and one item (token, piece) per
// slot. own_bars: the barriers are in the region too, set up here and invalidated at the end (the forward
// tail); else they are the caller's, set up once, their phases carried from one call to the next in `phases`
// (the backward's combine tasks: GemmSmem::combine_bar).
struct CombineWarp {
  uint8_t* slots;
  uint64_t* bar;
  int2* item;
  bool own_bars;
};

// The region [base, base + bytes) split among nwarps warps (bytes: the stages and strips, idle in the tail).
__device__ __forceinline__ CombineWarp combine_warp(uint8_t* base, uint32_t bytes, int nwarps, int warp,
                                                    uint64_t* bars = nullptr) {
  const uint32_t share = combine_warp_bytes(bytes, nwarps);
  uint8_t* m = base + share * static_cast<uint32_t>(nwarps);
  uint64_t* own = reinterpret_cast<uint64_t*>(m) + warp * kCombineMaxSlots;
  return {base + share * static_cast<uint32_t>(warp), bars != nullptr ? bars : own,
          reinterpret_cast<int2*>(m + static_cast<uint32_t>(nwarps) * kCombineMaxSlots * 8u) + warp * kCombineMaxSlots,
          bars == nullptr};
}

// Every lane of a warp; returns false if a wait failed. kWeighted: the forward's chain (weights [T, K]), else
// the backward's (weights unused). rows: y or d_x_k [rows, H]; token_row [T, K]; shared: y_s or d_x_s [T, H]
// or null. take(): the warp's next token (every lane, the same value), `end` or more once there is none.
// phases: the parity of each slot barrier's next phase (bit k; 0 for barriers just set up), updated.
// stage: the pass's stage for a timed-out wait (kStageCombine, kStageCombineBwd). The
// caller has ordered the rows' writes (acquire + fence.proxy.async) before this warp's bulk loads and left
// the region idle.
template <bool kWeighted, class Take>
__device__ __forceinline__ bool bulk_combine_warp(const SyncContext& sc, const CombineWarp& cw, const CombineLayout& L,
                                                  const uint16_t* rows, const int* __restrict__ token_row,
                                                  const float* __restrict__ weights, const uint16_t* shared,
                                                  uint16_t* __restrict__ out, int end, int K, int H, Take&& take,
                                                  int stage, uint32_t& phases) {
  const int lane = threadIdx.x % 32;
  const bool with_shared = shared != nullptr;
  if (cw.own_bars) {
    if (lane < L.slots) mbar_init(&cw.bar[lane], 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncwarp();
  // The issue side's cursor: token `cur` (piece `piece` next), and the next token with its row of this lane's k.
  int next = take();
  int next_row = next < end && lane < K ? __ldg(token_row + static_cast<int64_t>(next) * K + lane) : 0;
  int cur = -1, cur_row = 0, piece = L.pieces_per_row;
  auto issue = [&](int i) {  // every lane: item i into slot i % slots (token -1: no more items)
    const int k = i % L.slots;
    if (piece == L.pieces_per_row && cur < end) {  // the next token
      cur = next, cur_row = next_row, piece = 0;
      if (cur < end) {
        next = take();
        next_row = next < end && lane < K ? __ldg(token_row + static_cast<int64_t>(next) * K + lane) : 0;
      }
    }
    if (cur >= end) {
      if (lane == 0) cw.item[k] = make_int2(-1, 0);
      return;
    }
    const uint32_t bytes = combine_piece_bytes(L, H, piece), offset = static_cast<uint32_t>(piece) * L.piece_bytes;
    if (lane == 0) {
      cw.item[k] = make_int2(cur, piece);
      mbar_arrive_expect_tx(&cw.bar[k], bytes * static_cast<uint32_t>(L.rows_per_slot));
    }
    __syncwarp();
    for (int r = lane; r < L.rows_per_slot; r += 32) {  // lane r: row r (the shared row after the K routed ones)
      // (this lane's k is r on the first pass; K > 32 loads the rest)
      const int row = r == lane ? cur_row : (r < K ? __ldg(token_row + static_cast<int64_t>(cur) * K + r) : 0);
      const uint16_t* src = r < K ? rows + static_cast<int64_t>(row) * H : shared + static_cast<int64_t>(cur) * H;
      bulk_load(cw.slots + static_cast<uint32_t>(k) * L.slot_bytes + static_cast<uint32_t>(r) * L.piece_bytes,
                reinterpret_cast<const uint8_t*>(src) + offset, bytes, &cw.bar[k]);
    }
    ++piece;
  };
  for (int i = 0; i < L.slots; ++i) issue(i);
  __syncwarp();
  for (int i = 0;; ++i) {
    const int k = i % L.slots;
    const int2 item = cw.item[k];
    if (item.x < 0) break;
    if (!mbar_wait(sc, &cw.bar[k], (phases >> k) & 1u, stage, item.x, kCounterBulkLoad, item.y)) return false;
    phases ^= 1u << k;
    const uint8_t* slot = cw.slots + static_cast<uint32_t>(k) * L.slot_bytes;
    const uint32_t bytes = combine_piece_bytes(L, H, item.y);
    uint16_t* dst = out + static_cast<int64_t>(item.x) * H + static_cast<int64_t>(item.y) * (L.piece_bytes / 2);
    for (uint32_t at = 16u * lane; at < bytes; at += 16u * 32u)
      *reinterpret_cast<Vec8*>(reinterpret_cast<uint8_t*>(dst) + at) =
          combine_chunk<kWeighted>(slot, L, K, with_shared, kWeighted ? weights + static_cast<int64_t>(item.x) * K : nullptr, at);
    __syncwarp();  // every lane's reads of the slot are done (their values are in the stores above)
    issue(i + L.slots);
    __syncwarp();
  }
  // No load is in flight now (the end marker follows every issued item).
  if (cw.own_bars && lane < L.slots)
    asm volatile("mbarrier.inval.shared::cta.b64 [%0];\n" ::"r"(smem_addr(&cw.bar[lane])) : "memory");
  __syncwarp();
  return true;
}

// The forward tail's token source: tokens from the ticket counter, each warp's next one taken a token ahead
// (lane 0's atomic in flight while the warp combines), so no round trip is on the path.
struct TicketTokens {
  int* ticket;
  int end;
  int pending;
  __device__ explicit TicketTokens(int* t, int T) : ticket(t), end(T), pending(threadIdx.x % 32 == 0 ? atomicAdd(t, 1) : 0) {}
  __device__ int operator()() {
    const int t = __shfl_sync(0xffffffffu, pending, 0);
    if (threadIdx.x % 32 == 0 && t < end) pending = atomicAdd(ticket, 1);
    return t;
  }
};

// A side task's token source: tokens [t0, end) dealt round the nwarps warps (warp w: t0 + w, + nwarps, ...).
struct StridedTokens {
  int next, step;
  __device__ int operator()() {
    const int t = next;
    next += step;
    return t;
  }
};

}  // namespace calico::gpu::mk
