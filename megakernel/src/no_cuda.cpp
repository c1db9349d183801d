// Built without nvcc: the GPU API reports that no device is usable.
#include "calico/megakernel.h"

namespace calico::gpu {
int device_count() { return 0; }
std::string device_description() { return "built without CUDA"; }
}  // namespace calico::gpu
