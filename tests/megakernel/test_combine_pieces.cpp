// The bulk combine's layout and chain (combine/combine_pieces.h), run on the host: the pieces of a row
// cover every byte once in 16-byte aligned pieces, a warp's slots fit its share of the tail's shared memory,
// and combine_chunk over slots filled the way bulk_combine_warp fills them gives the bits of combine_tokens
// (the register combine, itself checked against the contract in test_combine_tokens), for the forward's
// weighted chain (the tail: stages and strips, 8 or 12 warps) and the backward's sum (the combine side tasks:
// the stages, 8 warps). Negative controls: a
// layout that drops the last piece leaves bytes uncovered; a slot filled with the rows in another order of
// k gives other bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "calico/numerics.h"
#include "combine/combine.cuh"
#include "combine/combine_pieces.h"

namespace calico::gpu::mk {
namespace {

constexpr uint32_t kRegion = 229376;      // GemmSmem's stages and strips (4 x 48 KB + 32 KB): the forward tail
constexpr uint32_t kStagesRegion = 196608;  // its stages alone (4 x 48 KB): the backward's combine tasks

std::string layout_problem(int H, int K, bool shared, int nwarps, int drop_pieces = 0, uint32_t region = kRegion) {
  const uint32_t warp_bytes = combine_warp_bytes(region, nwarps);
  if (warp_bytes % 128 != 0) return "warp share not 128-byte aligned";
  if (warp_bytes * static_cast<uint32_t>(nwarps) + static_cast<uint32_t>(nwarps) * kCombineMaxSlots * 16u > region)
    return "shares and barriers past the region";
  const CombineLayout L = combine_layout(H, K, shared, warp_bytes);
  if (L.slots < 2) return "fewer than two slots";
  if (static_cast<uint32_t>(L.slots) * L.slot_bytes > warp_bytes) return "slots past the warp's share";
  if (L.piece_bytes % 16 != 0 || L.piece_bytes == 0) return "piece not a multiple of 16 bytes";
  std::vector<int> covered(2 * static_cast<size_t>(H), 0);
  for (int j = 0; j < L.pieces_per_row - drop_pieces; ++j) {
    const uint32_t b = combine_piece_bytes(L, H, j), off = static_cast<uint32_t>(j) * L.piece_bytes;
    if (b == 0 || b % 16 != 0 || b > L.piece_bytes) return "piece " + std::to_string(j) + " of bad size";
    for (uint32_t i = off; i < off + b; ++i) ++covered[i];
  }
  for (size_t i = 0; i < covered.size(); ++i)
    if (covered[i] != 1) return "byte " + std::to_string(i) + " covered " + std::to_string(covered[i]) + " times";
  return "";
}

TEST(CombinePieces, LayoutCoversRowsAndFits) {
  // qwen3 (H 2048, K 8), deepseek-v3 (7168, 8, shared), kimi-like K, tiny rows, a row shorter than a piece,
  // a row that is not a whole number of pieces; 8 warps (compute CTAs' consumers) and 12 (data-movement CTAs).
  for (int H : {2048, 7168, 64, 8, 1000, 4104})
    for (int K : {1, 2, 8, 16, 64})
      for (bool shared : {false, true})
        for (int nwarps : {8, 12}) {
          SCOPED_TRACE("H " + std::to_string(H) + " K " + std::to_string(K) + " shared " + std::to_string(shared) +
                       " warps " + std::to_string(nwarps));
          EXPECT_EQ(layout_problem(H, K, shared, nwarps), "");
          if (nwarps == 8) {
            EXPECT_EQ(layout_problem(H, K, shared, nwarps, 0, kStagesRegion), "") << "stages only";
          }
        }
  // What the benchmark shapes get: 1 KB pieces, 3 slots per consumer warp, 2 per data-movement warp.
  const CombineLayout q = combine_layout(2048, 8, false, combine_warp_bytes(kRegion, 8));
  EXPECT_EQ(q.piece_bytes, 1024u);
  EXPECT_EQ(q.pieces_per_row, 4);
  EXPECT_EQ(q.slots, 3);
  const CombineLayout d = combine_layout(7168, 8, true, combine_warp_bytes(kRegion, 12));
  EXPECT_EQ(d.piece_bytes, 1024u);
  EXPECT_EQ(d.pieces_per_row, 14);
  EXPECT_EQ(d.slots, 2);
  EXPECT_EQ(combine_layout(8, 8, false, combine_warp_bytes(kRegion, 8)).piece_bytes, 16u);  // one 16-byte row
  // The backward's combine tasks: 1 KB pieces, 2 slots for deepseek-v3's 9 rows, 2 for qwen3's 8.
  const CombineLayout b = combine_layout(7168, 8, true, combine_warp_bytes(kStagesRegion, 8));
  EXPECT_EQ(b.piece_bytes, 1024u);
  EXPECT_EQ(b.slots, 2);
}

TEST(CombinePieces, CheckCatchesAMissingPieceAndTooManyRows) {
  EXPECT_NE(layout_problem(7168, 8, true, 8, 1).find("covered 0 times"), std::string::npos);
  // 2000 rows of 16 bytes do not fit two slots of a 12-warp share: the host refuses such a K.
  EXPECT_EQ(combine_layout(2048, 2000, false, combine_warp_bytes(kRegion, 12)).slots, 0);
}

// Fills a slot as bulk_combine_warp does (row k's piece at k * piece_bytes, the shared row after them) and
// runs every lane's chunks; `swap_ends` puts rows 0 and K - 1 in each other's place (the negative control;
// with K >= 3 it changes the order of both chains, the sum's included).
template <bool kWeighted = true>
std::vector<uint16_t> bulk_combine_host(const std::vector<uint16_t>& rows, const std::vector<int>& token_row,
                                        const std::vector<float>& w, const std::vector<uint16_t>* shared, int T, int K,
                                        int H, int nwarps, bool swap_ends = false, uint32_t region = kRegion) {
  const CombineLayout L = combine_layout(H, K, shared != nullptr, combine_warp_bytes(region, nwarps));
  std::vector<uint16_t> out(static_cast<size_t>(T) * H, 0x7FC1);
  std::vector<uint8_t> slot(L.slot_bytes);
  for (int t = 0; t < T; ++t)
    for (int j = 0; j < L.pieces_per_row; ++j) {
      const uint32_t bytes = combine_piece_bytes(L, H, j), off = static_cast<uint32_t>(j) * L.piece_bytes;
      for (int r = 0; r < L.rows_per_slot; ++r) {
        const int rr = !swap_ends ? r : r == 0 ? K - 1 : r == K - 1 ? 0 : r;
        const uint16_t* src = rr < K ? rows.data() + static_cast<size_t>(token_row[t * K + rr]) * H
                                     : shared->data() + static_cast<size_t>(t) * H;
        std::memcpy(slot.data() + static_cast<size_t>(r) * L.piece_bytes, reinterpret_cast<const uint8_t*>(src) + off,
                    bytes);
      }
      for (int lane = 0; lane < 32; ++lane)
        for (uint32_t at = 16u * lane; at < bytes; at += 16u * 32u) {
          const Vec8 o = combine_chunk<kWeighted>(slot.data(), L, K, shared != nullptr, w.data() + t * K, at);
          std::memcpy(reinterpret_cast<uint8_t*>(out.data() + static_cast<size_t>(t) * H) + off + at, &o, 16);
        }
    }
  return out;
}

TEST(CombinePieces, ChunksEqualTheRegisterCombine) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  struct Shape { int T, K, H; bool shared; };
  for (const Shape s : {Shape{5, 8, 2048, false}, Shape{3, 8, 1000, true}, Shape{4, 3, 8, true}, Shape{2, 16, 4104, false}}) {
    SCOPED_TRACE("T " + std::to_string(s.T) + " K " + std::to_string(s.K) + " H " + std::to_string(s.H));
    const int R = s.T * s.K + 3;
    std::vector<uint16_t> rows(static_cast<size_t>(R) * s.H), shared(static_cast<size_t>(s.T) * s.H);
    for (auto& v : rows) v = f32_to_bf16(normal(rng));
    for (auto& v : shared) v = f32_to_bf16(normal(rng));
    std::vector<int> token_row(static_cast<size_t>(R));  // distinct rows, in a shuffled order
    std::iota(token_row.begin(), token_row.end(), 0);
    std::shuffle(token_row.begin(), token_row.end(), rng);
    token_row.resize(static_cast<size_t>(s.T) * s.K);
    // Each token's rows k = 0 and 1 cancel (+-2^20 scale): in the contract's order the sum keeps the small
    // rows' bits, in another order they are rounded away at 2^20, so the order shows in the bf16 results
    // (with rows of one scale, fp32 sums of a few bf16 are nearly always exact in any order).
    if (s.K >= 2)
      for (int t = 0; t < s.T; ++t)
        for (int c = 0; c < s.H; ++c) {
          const uint16_t big = f32_to_bf16(std::ldexp(normal(rng), 20));
          rows[static_cast<size_t>(token_row[t * s.K]) * s.H + c] = big;
          rows[static_cast<size_t>(token_row[t * s.K + 1]) * s.H + c] = static_cast<uint16_t>(big ^ 0x8000u);
        }
    std::vector<float> w(token_row.size());
    for (auto& v : w) v = normal(rng);
    const std::vector<uint16_t>* sh = s.shared ? &shared : nullptr;
    std::vector<uint16_t> expect(static_cast<size_t>(s.T) * s.H);
    combine_tokens<true>(rows.data(), token_row.data(), w.data(), s.shared ? shared.data() : nullptr, expect.data(), 0,
                         s.T, s.K, s.H, 0, 1);
    for (int nwarps : {8, 12}) EXPECT_EQ(bulk_combine_host(rows, token_row, w, sh, s.T, s.K, s.H, nwarps), expect);
    if (s.K >= 3) {
      EXPECT_NE(bulk_combine_host(rows, token_row, w, sh, s.T, s.K, s.H, 8, /*swap_ends=*/true), expect);
    }
    // The backward's chain (an fp32 sum, no weights) in the stages region.
    std::vector<uint16_t> expect_sum(static_cast<size_t>(s.T) * s.H);
    combine_tokens<false>(rows.data(), token_row.data(), nullptr, s.shared ? shared.data() : nullptr,
                          expect_sum.data(), 0, s.T, s.K, s.H, 0, 1);
    EXPECT_NE(expect_sum, expect);  // the two chains differ on these inputs: the check below can tell them apart
    EXPECT_EQ(bulk_combine_host<false>(rows, token_row, w, sh, s.T, s.K, s.H, 8, false, kStagesRegion), expect_sum);
    if (s.K >= 3) {
      EXPECT_NE(bulk_combine_host<false>(rows, token_row, w, sh, s.T, s.K, s.H, 8, true, kStagesRegion), expect_sum);
    }
  }
}

}  // namespace
}  // namespace calico::gpu::mk
