// How a data-movement CTA's warps split the rows they move (dispatch/bulk_rows.cuh): each row of row_bytes
// is cut into pieces of at most piece_bytes, item j is piece j % pieces of row j / pieces, and warp w takes
// items w, w + warps, w + 2 warps, ... Host and device (tests/megakernel/test_row_pieces.cpp checks that
// every byte of every row is moved once, in 16-byte aligned pieces: cp.async.bulk's rule).
#pragma once

#include <cstdint>

#include "calico/numerics.h"  // CALICO_HD

namespace calico::gpu::mk {

struct RowPiece {
  int row = 0;               // row index among the rows being moved
  uint32_t offset = 0, bytes = 0;  // byte range of the row
};

CALICO_HD int pieces_per_row(uint32_t row_bytes, uint32_t piece_bytes) {
  return static_cast<int>((row_bytes + piece_bytes - 1) / piece_bytes);
}
// Items of warp `warp` among `items` dealt round-robin over `warps`.
CALICO_HD int warp_items(int items, int warp, int warps) {
  return items > warp ? (items - warp + warps - 1) / warps : 0;
}
// The i-th item of warp `warp`.
CALICO_HD RowPiece row_piece(int warp, int i, int warps, int pieces, uint32_t row_bytes, uint32_t piece_bytes) {
  const int j = warp + warps * i;
  const uint32_t offset = static_cast<uint32_t>(j % pieces) * piece_bytes;
  const uint32_t left = row_bytes - offset;
  return {j / pieces, offset, left < piece_bytes ? left : piece_bytes};
}

// Grouped items (a slot of slot_bytes): when a row fits in a slot, an item is up to rows_per_item consecutive
// whole rows, loaded one bulk copy per row and stored by ONE bulk copy (their destination rows are
// contiguous); otherwise an item is one piece of a row, as row_piece. Used by simulator/probes/dispatch_rows.cu
// (and tested here); the kernel keeps row_piece: with one 16 KB slot per warp the grouped dispatch was +31%
// alone on 14 KB rows but slower inside the megakernel (reports/data/megakernel-2026-12-07-twenty-eighth-pass).
struct RowGroups {
  int rows_per_item = 1, pieces = 1;  // one of them is 1
};
CALICO_HD RowGroups row_groups(uint32_t row_bytes, uint32_t slot_bytes) {
  if (row_bytes <= slot_bytes) return {static_cast<int>(slot_bytes / row_bytes), 1};
  return {1, pieces_per_row(row_bytes, slot_bytes)};
}
CALICO_HD int group_items(int nrows, RowGroups g) {
  return g.pieces > 1 ? nrows * g.pieces : (nrows + g.rows_per_item - 1) / g.rows_per_item;
}
struct RowGroupItem {
  int row = 0, rows = 1;           // rows [row, row + rows) among the rows being moved
  uint32_t offset = 0, bytes = 0;  // the byte range of each of them (offset 0 and the whole row when rows > 1)
};
// Item j (0 <= j < group_items) of nrows rows.
CALICO_HD RowGroupItem group_item(int j, int nrows, RowGroups g, uint32_t row_bytes, uint32_t slot_bytes) {
  if (g.pieces > 1) {
    const uint32_t offset = static_cast<uint32_t>(j % g.pieces) * slot_bytes, left = row_bytes - offset;
    return {j / g.pieces, 1, offset, left < slot_bytes ? left : slot_bytes};
  }
  const int row = j * g.rows_per_item, rest = nrows - row;
  return {row, rest < g.rows_per_item ? rest : g.rows_per_item, 0, row_bytes};
}

}  // namespace calico::gpu::mk
