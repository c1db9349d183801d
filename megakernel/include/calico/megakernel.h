// Calico megakernel: the CUDA side. Host-callable API only; device code lives in megakernel/src.
#pragma once

#include <string>

namespace calico::gpu {

// Number of CUDA devices this process can use; 0 when built without CUDA or when no driver/GPU is present.
int device_count();
// "NVIDIA H200, sm_90, driver 13.0, 132 SMs" or why no device is usable.
std::string device_description();

}  // namespace calico::gpu
