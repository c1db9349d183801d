// Tensor helpers: element-type names and the FNV-1a digest used by traces and reports.
#include "calico/tensor.h"

namespace calico {

const char* to_string(ElemType t) {
  switch (t) {
    case ElemType::bf16: return "bf16";
    case ElemType::f32: return "f32";
    case ElemType::f64: return "f64";
    case ElemType::i32: return "i32";
    case ElemType::u8: return "u8";
  }
  return "?";
}

uint64_t digest(const Tensor& t) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint8_t b : t.bytes) {
    h ^= b;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace calico
