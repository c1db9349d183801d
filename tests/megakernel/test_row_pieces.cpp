// The push dispatch's split of rows into bulk-copy pieces (dispatch/row_pieces.h): every byte of every row
// moved exactly once, in pieces of at most the piece size whose offsets and sizes keep cp.async.bulk's
// 16-byte alignment, the warps' items disjoint. No GPU needed: bulk_rows.cuh computes its items with these.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dispatch/row_pieces.h"

namespace calico::gpu::mk {
namespace {

// "" or the first byte of the rows (row_bytes each) that `moved` counts other than once.
std::string unevenly_moved(const std::vector<int>& moved, uint32_t row_bytes) {
  for (size_t k = 0; k < moved.size(); ++k)
    if (moved[k] != 1)
      return "row " + std::to_string(k / row_bytes) + " byte " + std::to_string(k % row_bytes) + " moved " +
             std::to_string(moved[k]) + " times";
  return "";
}

// "" or the first problem: a byte moved twice or never, a piece past its row, too big or misaligned.
// `dropped`: items left out of warp 0's share (the negative control).
std::string coverage_problem(int nrows, uint32_t row_bytes, uint32_t piece_bytes, int warps, int dropped = 0) {
  std::vector<int> moved(static_cast<size_t>(nrows) * row_bytes, 0);
  const int pieces = pieces_per_row(row_bytes, piece_bytes);
  for (int w = 0; w < warps; ++w)
    for (int i = 0; i < warp_items(nrows * pieces, w, warps) - (w == 0 ? dropped : 0); ++i) {
      const RowPiece p = row_piece(w, i, warps, pieces, row_bytes, piece_bytes);
      if (p.row < 0 || p.row >= nrows || p.offset + p.bytes > row_bytes || p.bytes == 0 || p.bytes > piece_bytes)
        return "warp " + std::to_string(w) + " item " + std::to_string(i) + ": piece outside its row";
      if (p.offset % 16 != 0 || p.bytes % 16 != 0) return "piece not 16-byte aligned";
      for (uint32_t b = p.offset; b < p.offset + p.bytes; ++b) ++moved[static_cast<size_t>(p.row) * row_bytes + b];
    }
  return unevenly_moved(moved, row_bytes);
}

TEST(RowPieces, EveryByteOnceInAlignedPieces) {
  // H = 2048 (one piece per row), 7168 (3.5 pieces), 8 (a 16-byte row), a row of exactly two pieces; 128
  // rows as in an m-tile, fewer rows than warps, one warp.
  const uint32_t row_bytes[] = {4096, 14336, 16, 8192, 2 * 7000};
  for (uint32_t rb : row_bytes)
    for (int nrows : {128, 5, 1})
      for (int warps : {12, 1}) {
        SCOPED_TRACE("row bytes " + std::to_string(rb) + ", rows " + std::to_string(nrows) + ", warps " +
                     std::to_string(warps));
        EXPECT_EQ(coverage_problem(nrows, rb, 4096, warps), "");
      }
}

TEST(RowPieces, CheckCatchesAMissingItemAndMisalignedPieces) {
  // Negative controls: warp 0 one item short leaves its last piece unmoved; a piece size that is not a
  // multiple of 16 breaks cp.async.bulk's alignment.
  EXPECT_NE(coverage_problem(128, 14336, 4096, 12, 1).find("moved 0 times"), std::string::npos);
  EXPECT_NE(coverage_problem(128, 14336, 4104, 12).find("not 16-byte aligned"), std::string::npos);
  // The deal: 128 rows x 4 pieces over 12 warps, 43 items for the first 8 warps and 42 for the rest.
  const int pieces = pieces_per_row(14336, 4096);
  EXPECT_EQ(pieces, 4);
  EXPECT_EQ(warp_items(128 * pieces, 0, 12), 43);
  EXPECT_EQ(warp_items(128 * pieces, 11, 12), 42);
  EXPECT_EQ(warp_items(3, 5, 12), 0);  // a warp past the items gets none
}

// The grouped items (group_item): "" or the first problem, as coverage_problem, and also a group that is not
// whole contiguous rows or does not fit its slot (its one bulk store would write the wrong bytes).
std::string group_problem(int nrows, uint32_t row_bytes, uint32_t slot_bytes, int warps, int dropped = 0) {
  std::vector<int> moved(static_cast<size_t>(nrows) * row_bytes, 0);
  const RowGroups g = row_groups(row_bytes, slot_bytes);
  for (int w = 0; w < warps; ++w)
    for (int i = 0; i < warp_items(group_items(nrows, g), w, warps) - (w == 0 ? dropped : 0); ++i) {
      const RowGroupItem it = group_item(w + warps * i, nrows, g, row_bytes, slot_bytes);
      const std::string at = "warp " + std::to_string(w) + " item " + std::to_string(i) + ": ";
      if (it.row < 0 || it.rows < 1 || it.row + it.rows > nrows || it.offset + it.bytes > row_bytes || it.bytes == 0)
        return at + "outside the rows";
      if (static_cast<uint64_t>(it.rows) * it.bytes > slot_bytes) return at + "larger than its slot";
      if (it.rows > 1 && (it.offset != 0 || it.bytes != row_bytes)) return at + "a group of partial rows";
      if (it.offset % 16 != 0 || it.bytes % 16 != 0) return at + "not 16-byte aligned";
      for (int r = it.row; r < it.row + it.rows; ++r)
        for (uint32_t b = it.offset; b < it.offset + it.bytes; ++b) ++moved[static_cast<size_t>(r) * row_bytes + b];
    }
  return unevenly_moved(moved, row_bytes);
}

TEST(RowGroups, EveryByteOnceInWholeRowGroupsOrPieces) {
  // Slots of 16 KB (1 per warp), 8 KB and 4 KB; rows of H = 2048 (4 rows per 16 KB slot), 7168 (one piece of
  // 14 KB; two pieces of 8 + 6 KB; four of 4 KB), 8 (a 16-byte row: 128 rows in one item), 16 KB exactly,
  // and a row just over a slot.
  const uint32_t row_bytes[] = {4096, 14336, 16, 16384, 16400, 2 * 7000};
  for (uint32_t slot : {16384u, 8192u, 4096u})
    for (uint32_t rb : row_bytes)
      for (int nrows : {128, 5, 1})
        for (int warps : {12, 1}) {
          SCOPED_TRACE("slot " + std::to_string(slot) + ", row bytes " + std::to_string(rb) + ", rows " +
                       std::to_string(nrows) + ", warps " + std::to_string(warps));
          EXPECT_EQ(group_problem(nrows, rb, slot, warps), "");
        }
}

TEST(RowGroups, MatchesRowPiecesWhenARowFillsItsSlotAndCatchesMistakes) {
  // 4 KB rows in 4 KB slots and 14 KB rows in 4 KB slots: the same items as row_piece (main's dispatch).
  for (uint32_t rb : {4096u, 14336u}) {
    const RowGroups g = row_groups(rb, 4096);
    const int pieces = pieces_per_row(rb, 4096);
    ASSERT_EQ(group_items(128, g), 128 * pieces);
    for (int w = 0; w < 12; ++w)
      for (int i = 0; i < warp_items(128 * pieces, w, 12); ++i) {
        const RowPiece p = row_piece(w, i, 12, pieces, rb, 4096);
        const RowGroupItem it = group_item(w + 12 * i, 128, g, rb, 4096);
        EXPECT_EQ(it.row, p.row);
        EXPECT_EQ(it.rows, 1);
        EXPECT_EQ(it.offset, p.offset);
        EXPECT_EQ(it.bytes, p.bytes);
      }
  }
  // 4 rows of 4 KB per 16 KB slot: 32 items for 128 rows, the last of 5 rows has 1 row.
  EXPECT_EQ(group_items(128, row_groups(4096, 16384)), 32);
  EXPECT_EQ(group_item(1, 5, row_groups(4096, 16384), 4096, 16384).rows, 1);
  // Negative controls: one item left out; a slot that is not a multiple of 16 bytes.
  EXPECT_NE(group_problem(128, 4096, 16384, 12, 1).find("moved 0 times"), std::string::npos);
  EXPECT_NE(group_problem(128, 14336, 8200, 12).find("not 16-byte aligned"), std::string::npos);
}

}  // namespace
}  // namespace calico::gpu::mk
