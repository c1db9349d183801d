// 16-byte vectors of bf16 for the combine (the push dispatch moves rows with bulk copies:
// dispatch/bulk_rows.cuh; the router gradient reads them from stages: dispatch/router_stages.cuh). H % 8 == 0
// (checked on the host).
#pragma once

#include <cstdint>

#include "calico/numerics.h"

namespace calico::gpu::mk {

struct alignas(16) Vec8 {
  uint16_t v[8];
};

}  // namespace calico::gpu::mk
