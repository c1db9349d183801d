// Large host buffers without a serial zero-fill: the storage of Tensor::bytes and of the reference's big
// intermediates. At production shapes (deepseek-v3: 22 GB of weights, 45 GB of fp32 weight gradients) a
// std::vector's value-initialisation is one thread touching every page first (kernel zeroing included)
// before any parallel code runs; here the parallel producer touches the pages first.
#pragma once

#include <cstddef>
#include <new>
#include <utility>
#include <vector>

namespace calico {

// Raw storage for DefaultInitAllocator: blocks of at least kHugeBlock bytes are kHugeBlock-aligned and, with
// CALICO_HUGEPAGES=1 in the environment, advised for transparent huge pages (MADV_HUGEPAGE, Linux; a hint,
// no effect on contents).
constexpr size_t kHugeBlock = size_t{2} << 20;
void* allocate_buffer(size_t bytes);
void free_buffer(void* p, size_t bytes) noexcept;

// An allocator whose value-less construct() default-initialises: vector::resize(n) and vector(n) leave
// trivial elements uninitialised (the caller writes every one of them), while resize(n, v), assign(n, v) and
// copies construct values as usual.
template <typename T>
struct DefaultInitAllocator {
  using value_type = T;
  DefaultInitAllocator() noexcept = default;
  template <typename U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}
  T* allocate(size_t n) {
    if (n > static_cast<size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(allocate_buffer(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) noexcept { free_buffer(p, n * sizeof(T)); }
  template <typename U>
  void construct(U* p) noexcept(noexcept(::new (static_cast<void*>(p)) U)) {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <typename U>
  bool operator==(const DefaultInitAllocator<U>&) const noexcept { return true; }
};

// A vector whose resize() does not zero: write every element before reading it.
template <typename T>
using UninitVector = std::vector<T, DefaultInitAllocator<T>>;

}  // namespace calico
