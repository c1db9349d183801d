// The megakernel's tile walk order (schedule/tile_order.h): every tile exactly once, and the tiles that share
// weight columns adjacent. No GPU needed: the walks decode with these same functions.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "schedule/tile_order.h"

namespace calico::gpu::mk {
namespace {

// Checks an order of the tiles [first, first + count) x [0, n_per_m) given position -> tile, and returns the
// first problem found ("" if none): a tile outside the grid or seen twice, or a column of a group whose
// tiles are not consecutive positions (the L2-sharing property), or a group's m-tile whose columns are more
// than `group` positions apart (its rows' reuse).
template <class Order>
std::string order_problem(Order&& order, int first, int count, int n_per_m, int group) {
  std::vector<int> position(static_cast<size_t>(count) * n_per_m, -1);
  for (int j = first * n_per_m; j < (first + count) * n_per_m; ++j) {
    const TileMN t = order(j);
    if (t.m < first || t.m >= first + count || t.n < 0 || t.n >= n_per_m)
      return "position " + std::to_string(j) + ": tile (" + std::to_string(t.m) + ", " + std::to_string(t.n) +
             ") outside the grid";
    int& at = position[static_cast<size_t>(t.m - first) * n_per_m + t.n];
    if (at >= 0) return "tile (" + std::to_string(t.m) + ", " + std::to_string(t.n) + ") twice";
    at = j;
  }
  for (int base = 0; base < count; base += group) {
    const int size = std::min(group, count - base);
    for (int n = 0; n < n_per_m; ++n)
      for (int i = 1; i < size; ++i) {
        const int a = position[static_cast<size_t>(base + i - 1) * n_per_m + n];
        const int b = position[static_cast<size_t>(base + i) * n_per_m + n];
        if (b != a + 1)
          return "column " + std::to_string(n) + ": m-tiles " + std::to_string(first + base + i - 1) + " and " +
                 std::to_string(first + base + i) + " at positions " + std::to_string(a) + ", " + std::to_string(b);
      }
    for (int i = 0; i < size; ++i)
      for (int n = 1; n < n_per_m; ++n) {
        const int a = position[static_cast<size_t>(base + i) * n_per_m + n - 1];
        const int b = position[static_cast<size_t>(base + i) * n_per_m + n];
        if (b - a != size)
          return "m-tile " + std::to_string(first + base + i) + ": columns " + std::to_string(n - 1) + ", " +
                 std::to_string(n) + " are " + std::to_string(b - a) + " apart";
      }
  }
  return "";
}

struct Grid {
  int first, count, n_per_m, group;
};
// The edges: one m-tile, one column, fewer m-tiles than a group, exactly a group, one more, several groups
// plus a remainder, a group of 1 (m-major), and a nonzero first m-tile.
const Grid kGrids[] = {{0, 1, 1, 8}, {0, 1, 6, 8}, {0, 5, 1, 8}, {0, 3, 16, 8}, {0, 8, 6, 8}, {0, 9, 6, 8},
                       {0, 27, 28, 8}, {7, 2, 16, 8}, {40, 100, 3, 8}, {3, 10, 4, 1}, {0, 64, 8, 16}};

TEST(TileOrder, GroupedTileCoversEveryTileOnceWithSharedColumnsAdjacent) {
  for (const Grid& g : kGrids) {
    SCOPED_TRACE("first " + std::to_string(g.first) + " count " + std::to_string(g.count) + " n_per_m " +
                 std::to_string(g.n_per_m) + " group " + std::to_string(g.group));
    EXPECT_EQ(order_problem([&](int j) { return grouped_tile(j, g.first, g.count, g.n_per_m, g.group); }, g.first,
                            g.count, g.n_per_m, g.group),
              "");
  }
}

TEST(TileOrder, NegativeControlsAreCaught) {
  // The m-major order (the walk before tile_order.h): every tile once, but a column's m-tiles n_per_m apart.
  auto m_major = [](int j) { return TileMN{j / 6, j % 6}; };
  EXPECT_NE(order_problem(m_major, 0, 9, 6, 8).find("column 0: m-tiles 0 and 1 at positions 0, 6"), std::string::npos);
  // Column-major over all m-tiles: columns of one m-tile count apart (the rows' reuse is lost).
  auto column_major = [](int j) { return TileMN{j % 20, j / 20}; };
  EXPECT_NE(order_problem(column_major, 0, 20, 3, 8).find("columns 0, 1 are 20 apart"), std::string::npos);
  // The last group taken as full (in_group = group): its m-tiles run past the grid.
  auto full_last_group = [](int j) {
    const int n_per_m = 6, group = 8, g = j / (group * n_per_m), r = j - g * group * n_per_m;
    return TileMN{g * group + r % group, r / group};
  };
  EXPECT_NE(order_problem(full_last_group, 0, 9, 6, 8).find("outside the grid"), std::string::npos);
  auto wraps = [](int j) { return TileMN{(j / 6) % 4, j % 6}; };
  EXPECT_NE(order_problem(wraps, 0, 5, 6, 8).find("tile (0, 0) twice"), std::string::npos);
}

TEST(TileOrder, RoutedWalkDecodesEveryExpertsBlockIncludingEmptyExperts) {
  // m-tiles per expert, with experts that have no rows (no block) at the start, middle and end.
  const std::vector<int> tiles_of = {0, 2, 1, 0, 0, 9, 17, 0, 8, 1, 0};
  std::vector<int> tile_first{0}, tile_expert;
  for (size_t e = 0; e < tiles_of.size(); ++e) {
    tile_first.push_back(tile_first.back() + tiles_of[e]);
    for (int i = 0; i < tiles_of[e]; ++i) tile_expert.push_back(static_cast<int>(e));
  }
  const int m_tiles = tile_first.back();
  for (int n_per_m : {1, 3, 16}) {
    SCOPED_TRACE("n_per_m " + std::to_string(n_per_m));
    std::vector<int> seen(static_cast<size_t>(m_tiles) * n_per_m, 0);
    for (int j = 0; j < m_tiles * n_per_m; ++j) {
      const TileMN t = routed_grouped_tile(j, n_per_m, tile_expert.data(), tile_first.data());
      ASSERT_TRUE(t.m >= 0 && t.m < m_tiles && t.n >= 0 && t.n < n_per_m) << j;
      ++seen[static_cast<size_t>(t.m) * n_per_m + t.n];
    }
    for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], 1) << "tile " << i;
    // Inside each expert the walk is the grouped order of its own m-tiles.
    for (size_t e = 0; e < tiles_of.size(); ++e) {
      if (tiles_of[e] == 0) continue;
      const int first = tile_first[e];
      EXPECT_EQ(order_problem([&](int j) { return routed_grouped_tile(j, n_per_m, tile_expert.data(), tile_first.data()); },
                              first, tiles_of[e], n_per_m, kGroupM),
                "")
          << "expert " << e;
    }
  }
}

// Checks a walk of main and side tasks: each index of each kind once and in order, no side task before
// `lead`, and side tasks at most ceil(span / n_side) positions apart. "" if none.
template <class Slot>
std::string walk_problem(Slot&& slot, int n_main, int n_side, int lead) {
  int next_main = 0, next_side = 0, last_side = lead - 1;
  const long long span = static_cast<long long>(n_main) + n_side - lead;
  const long long gap = n_side > 0 ? (span + n_side - 1) / n_side : 0;
  for (int i = 0; i < n_main + n_side; ++i) {
    const WalkSlot s = slot(i);
    if (s.side) {
      if (i < lead) return "side task at position " + std::to_string(i) + " before the lead";
      if (s.index != next_side) return "side task " + std::to_string(s.index) + " at position " + std::to_string(i);
      if (i - last_side > gap) return "side tasks " + std::to_string(i - last_side) + " apart";
      ++next_side, last_side = i;
    } else {
      if (s.index != next_main) return "main task " + std::to_string(s.index) + " at position " + std::to_string(i);
      ++next_main;
    }
  }
  if (next_main != n_main || next_side != n_side) return "missing tasks";
  return "";
}

TEST(TileOrder, SideTasksInterleaveEvenlyAfterTheLead) {
  // No side tasks; as many side as main tasks; lead = everything (side tasks last); the backward's sizes.
  const int cases[][3] = {{10, 0, 0}, {1, 1, 0},       {7, 7, 3},         {5, 20, 5},         {1000, 3, 0},
                          {64, 16, 64}, {11264, 512, 0}, {18432, 1024, 1056}, {344064, 256, 1056}};
  for (const auto& c : cases) {
    SCOPED_TRACE("main " + std::to_string(c[0]) + " side " + std::to_string(c[1]) + " lead " + std::to_string(c[2]));
    EXPECT_EQ(walk_problem([&](int i) { return interleaved_slot(i, c[0], c[1], c[2]); }, c[0], c[1], c[2]), "");
  }
}

TEST(TileOrder, WalkCheckCatchesBadInterleaves) {
  // All side tasks first: before the lead. All side tasks last with lead 0: too far apart.
  auto side_first = [](int i) { return i < 4 ? WalkSlot{true, i} : WalkSlot{false, i - 4}; };
  EXPECT_NE(walk_problem(side_first, 10, 4, 2).find("before the lead"), std::string::npos);
  auto side_last = [](int i) { return i >= 10 ? WalkSlot{true, i - 10} : WalkSlot{false, i}; };
  EXPECT_NE(walk_problem(side_last, 10, 4, 0).find("apart"), std::string::npos);
  // A side index repeated.
  auto repeated = [](int i) { return i % 2 ? WalkSlot{true, 0} : WalkSlot{false, i / 2}; };
  EXPECT_NE(walk_problem(repeated, 3, 3, 0).find("side task 0 at position 3"), std::string::npos);
}

}  // namespace
}  // namespace calico::gpu::mk
