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

}  // namespace calico::gpu::mk
