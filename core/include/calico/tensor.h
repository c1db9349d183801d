// A named, typed, shaped tensor as raw little-endian bytes: the unit that backends produce, traces store and
// the diff compares. bf16 tensors hold uint16 bit patterns; nothing here does arithmetic.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "calico/buffer.h"

namespace calico {

enum class ElemType : uint8_t { bf16, f32, f64, i32, u8 };

inline int elem_size(ElemType t) {
  switch (t) {
    case ElemType::bf16: return 2;
    case ElemType::f32: return 4;
    case ElemType::f64: return 8;
    case ElemType::i32: return 4;
    case ElemType::u8: return 1;
  }
  return 1;
}

const char* to_string(ElemType t);

struct Tensor {
  std::string name;            // e.g. "out", "d_x", "d_w_gate"
  ElemType type = ElemType::f32;
  std::vector<int64_t> shape;  // row-major
  // Storage without a zero-fill on resize (calico/buffer.h): a producer writes every byte; assign(n, 0)
  // zeroes. Large tensors are 2 MiB aligned (huge pages on request).
  using Bytes = UninitVector<uint8_t>;
  Bytes bytes;

  int64_t numel() const {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
  template <typename T>
  static Tensor from(std::string name, ElemType type, std::vector<int64_t> shape, const std::vector<T>& values) {
    Tensor t{std::move(name), type, std::move(shape), {}};
    t.bytes.resize(values.size() * sizeof(T));
    if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
    return t;
  }
  template <typename T>
  const T* data() const { return reinterpret_cast<const T*>(bytes.data()); }
};

// An ordered set of tensors (outputs of one run on one rank, or of the whole layer).
struct TensorSet {
  std::vector<Tensor> tensors;
  const Tensor* find(const std::string& name) const {
    for (const auto& t : tensors)
      if (t.name == name) return &t;
    return nullptr;
  }
  void add(Tensor t) { tensors.push_back(std::move(t)); }
};

// FNV-1a 64 over the bytes: the per-tensor digest of traces and reports.
uint64_t digest(const Tensor& t);

}  // namespace calico
