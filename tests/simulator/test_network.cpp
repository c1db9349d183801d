// The fluid network on its own: max-min fair sharing, injection caps, reverse-direction overhead.
#include <gtest/gtest.h>

#include "network.h"

namespace calico::sim {
namespace {

std::vector<double> to(int gpus, int peer) {
  std::vector<double> w(gpus, 0.0);
  w[peer] = 1.0;
  return w;
}

TEST(Network, TwoFlowsIntoOnePortShareItEqually) {
  Network net(3, 1.0, 0.0);  // 1 byte/ps per direction
  const int a = net.add({0, false, 1e6, 10.0, to(3, 2)}, 0);
  const int b = net.add({1, false, 1e6, 10.0, to(3, 2)}, 0);
  net.next_completion();
  EXPECT_DOUBLE_EQ(net.rate(a), 0.5);
  EXPECT_DOUBLE_EQ(net.rate(b), 0.5);
}

TEST(Network, CappedFlowLeavesTheRestToOthers) {
  Network net(3, 1.0, 0.0);
  const int a = net.add({0, false, 1e6, 0.2, to(3, 2)}, 0);
  const int b = net.add({1, false, 1e6, 10.0, to(3, 2)}, 0);
  net.next_completion();
  EXPECT_DOUBLE_EQ(net.rate(a), 0.2);
  EXPECT_NEAR(net.rate(b), 0.8, 1e-12);
}

TEST(Network, FinishTimeIsBytesOverRateAndFreedCapacityIsReused) {
  Network net(3, 1.0, 0.0);
  net.add({0, false, 1000, 10.0, to(3, 2)}, 0);
  const int b = net.add({1, false, 3000, 10.0, to(3, 2)}, 0);
  EXPECT_EQ(net.next_completion(), 2000);  // 1000 B at 0.5 B/ps
  EXPECT_EQ(net.advance(2000).size(), 1u);
  EXPECT_EQ(net.next_completion(), 4000);  // the other 2000 B at the full 1 B/ps
  EXPECT_DOUBLE_EQ(net.rate(b), 1.0);
}

TEST(Network, OpposingPushesPayTheReverseOverhead) {
  Network net(2, 1.0, 0.25);
  const int a = net.add({0, false, 1e6, 10.0, to(2, 1)}, 0);
  const int b = net.add({1, false, 1e6, 10.0, to(2, 1 - 1)}, 0);
  net.next_completion();
  EXPECT_DOUBLE_EQ(net.rate(a), 1.0 / 1.25);  // each egress carries r + 0.25 r
  EXPECT_DOUBLE_EQ(net.rate(b), 1.0 / 1.25);
}

TEST(Network, PullLoadsThePeersEgress) {
  Network net(3, 1.0, 0.0);
  std::vector<double> w{0.0, 0.5, 0.5};
  const int a = net.add({0, true, 1e6, 10.0, w}, 0);    // GPU 0 pulls from 1 and 2
  const int b = net.add({1, false, 1e6, 10.0, to(3, 2)}, 0);  // GPU 1 also pushes to 2
  net.next_completion();
  // GPU 0 ingress bounds a at 1; GPU 1 egress carries 0.5 a + b <= 1; max-min: a = b = 2/3.
  EXPECT_NEAR(net.rate(a), 2.0 / 3, 1e-12);
  EXPECT_NEAR(net.rate(b), 2.0 / 3, 1e-12);
}

// Issue 9 (UBSan): a finish time beyond the int64 picosecond range saturates at kNever instead of
// overflowing (huge bytes over a tiny rate, late in a long simulation).
TEST(Network, FinishTimesSaturateInsteadOfOverflowing) {
  Network net(2, 1e-12, 0.0);
  net.add({0, false, 1e300, 1.0, to(2, 1)}, kNever / 2);
  EXPECT_EQ(net.next_completion(), kNever);
}

}  // namespace
}  // namespace calico::sim
