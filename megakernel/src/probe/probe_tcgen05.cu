// Blackwell slot of the tensor-core probe: tcgen05.mma kind::f16 (BF16) and kind::mxf8f6f4.block_scale (MXFP8).
//
// Status: the host side (instruction table, inputs with per-row/column E8M0 scales, the model comparison,
// the reports) is complete and shared with the Hopper instructions; the device kernels are not written yet.
// They go here, guarded by CALICO_TCGEN05_AVAILABLE so the sm_90a build still compiles, and must fill d with
// D = A B + C (f32 bits) for each case exactly like launch_wgmma_tiles does. PROBE.md lists what the kernel
// needs (TMEM allocation, instruction descriptor, tcgen05.mma + commit to an mbarrier, tcgen05.ld).
#include <cuda_runtime.h>

#include "../cuda_check.cuh"
#include "probe_kernels.h"

#if defined(__CUDA_ARCH__) && (defined(__CUDA_ARCH_FEAT_SM100_ALL) || defined(__CUDA_ARCH_FEAT_SM103_ALL))
#define CALICO_TCGEN05_AVAILABLE 1
#else
#define CALICO_TCGEN05_AVAILABLE 0
#endif

namespace calico::gpu::probe {

std::vector<uint32_t> launch_tcgen05_tiles(ProbeKernel kernel, const std::vector<uint8_t>& a,
                                           const std::vector<uint8_t>& b, const std::vector<uint32_t>& c,
                                           const std::vector<uint8_t>& scale_a, const std::vector<uint8_t>& scale_b,
                                           int64_t cases) {
  require(kernel == ProbeKernel::tcgen05_f16 || kernel == ProbeKernel::tcgen05_mxf8_e4m3,
          "launch_tcgen05_tiles: kernel {} is not a tcgen05 kernel", static_cast<int>(kernel));
  require(cases >= 0 && !a.empty() == (cases > 0) && !b.empty() == (cases > 0) && !c.empty() == (cases > 0) &&
              scale_a.size() <= a.size() && scale_b.size() <= b.size(),
          "launch_tcgen05_tiles: inputs do not fit {} cases", cases);
  require_device_for(kernel);
  throw Error(
      "probe: the tcgen05 kernels (kind::f16, kind::mxf8f6f4.block_scale) are not implemented yet; the "
      "host side is ready (megakernel/PROBE.md, 'Blackwell')");
}

}  // namespace calico::gpu::probe
