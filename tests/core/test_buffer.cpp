// calico/buffer.h: the storage of Tensor::bytes (no zero-fill on resize, 2 MiB-aligned large blocks).
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>

#include "calico/buffer.h"
#include "calico/tensor.h"

namespace calico {

TEST(Buffer, ValuesAreConstructedWhereGivenAndLargeBlocksAreAligned) {
  UninitVector<uint32_t> v(10, 7u);  // explicit value: constructed
  for (uint32_t x : v) EXPECT_EQ(x, 7u);
  v.assign(3, 0u);
  EXPECT_EQ(v, (UninitVector<uint32_t>{0, 0, 0}));
  UninitVector<uint8_t> big((kHugeBlock * 3) / 2);  // above the huge-block threshold
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.data()) % kHugeBlock, 0u);
  std::iota(big.begin(), big.end(), uint8_t{0});
  const UninitVector<uint8_t> copy = big;  // copies carry the values
  EXPECT_EQ(copy, big);
  big.resize(big.size() + 5);  // growth keeps the old values
  EXPECT_EQ(big[kHugeBlock + 3], static_cast<uint8_t>(kHugeBlock + 3));
}

TEST(Buffer, TensorBytesBehaveAsBefore) {
  Tensor t = Tensor::from("x", ElemType::f32, {2}, std::vector<float>{1.5f, -2.0f});
  EXPECT_EQ(t.bytes.size(), 8u);
  EXPECT_EQ(t.data<float>()[1], -2.0f);
  Tensor z{"z", ElemType::u8, {4}, Tensor::Bytes(4, 0)};
  EXPECT_EQ(digest(z), digest(Tensor::from("z", ElemType::u8, {4}, std::vector<uint8_t>(4, 0))));
}

}  // namespace calico
