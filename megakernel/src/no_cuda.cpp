// Built without nvcc: no device is usable, and every device entry point says so. The probe's host side
// (probe_host.cpp, probe_model.cpp) still builds, so `calico probe-mma --help` and its CPU tests work.
#include "calico/error.h"
#include "calico/megakernel.h"
#include "probe/probe_kernels.h"

namespace calico::gpu {
namespace {
[[noreturn]] void no_cuda(const char* what) { throw Error(fmt::format("{}: this build has no CUDA (nvcc was not found)", what)); }
}  // namespace

int device_count() { return 0; }
std::string device_description() { return "built without CUDA"; }
std::string driver_description() { return "built without CUDA"; }
const char* numerics_op_name(NumericsOp) { return "unavailable"; }
std::vector<uint32_t> numerics_on_device(NumericsOp, const std::vector<uint32_t>&) { no_cuda("numerics_on_device"); }
std::vector<uint8_t> mx_quantize_on_device(const std::vector<float>&, int, Fp8Kind, MxScaleRule) {
  no_cuda("mx_quantize_on_device");
}
std::vector<float> mma_step_bf16_on_device(const std::vector<uint16_t>&, const std::vector<uint16_t>&,
                                           const std::vector<float>&, MmaModel) {
  no_cuda("mma_step_bf16_on_device");
}
std::vector<float> mma_step_fp8_on_device(const std::vector<uint8_t>&, Fp8Kind, const std::vector<uint8_t>&,
                                          const std::vector<uint8_t>&, Fp8Kind, const std::vector<uint8_t>&,
                                          const std::vector<float>&, MmaModel) {
  no_cuda("mma_step_fp8_on_device");
}

ConversionCheck check_bf16x2_conversion(bool) { no_cuda("check_bf16x2_conversion"); }
RoutingSchedule schedule_on_device(const std::vector<int>&, const std::vector<float>&, int, int, int) {
  no_cuda("schedule_on_device");
}

void MoeOptions::validate() const {}
void validate_megakernel_layer(const LayerSpec&, int64_t) { no_cuda("the megakernel"); }
void silu_tables_for_test(float, std::vector<float>&, std::vector<float>&, std::vector<float>&) {
  no_cuda("the megakernel's SiLU tables");
}
struct MoeLayer::Impl {};
MoeLayer::MoeLayer(const LayerSpec&, int64_t, const MoeOptions&) { no_cuda("the megakernel"); }
MoeLayer::~MoeLayer() = default;
void MoeLayer::set_inputs(const MoeInputs&) { no_cuda("the megakernel"); }
void MoeLayer::zero_weight_grads() { no_cuda("the megakernel"); }
void MoeLayer::set_random_inputs(const int32_t*, const float*, uint64_t) { no_cuda("the megakernel"); }
void MoeLayer::forward() { no_cuda("the megakernel"); }
void MoeLayer::backward() { no_cuda("the megakernel"); }
void MoeLayer::synchronize() { no_cuda("the megakernel"); }
void MoeLayer::get_outputs(const MoeOutputs&) { no_cuda("the megakernel"); }
float MoeLayer::forward_ms(int) { no_cuda("the megakernel"); }
float MoeLayer::forward_backward_ms(int) { no_cuda("the megakernel"); }
void MoeLayer::record_timeline(bool) { no_cuda("the megakernel"); }
std::vector<TimelineEvent> MoeLayer::timeline() { no_cuda("the megakernel"); }
size_t MoeLayer::device_bytes() const { return 0; }
std::vector<float> MoeLayer::last_times_ms() const { return {}; }
std::vector<float> MoeLayer::last_clocks_mhz() const { return {}; }
std::string MoeLayer::profile_report() { no_cuda("the megakernel"); }
std::string MoeLayer::describe() const { return "built without CUDA"; }

namespace probe {
void require_device_for(ProbeKernel) { no_cuda("probe"); }
std::vector<uint32_t> launch_mma_sync_bf16_tiles(const std::vector<uint8_t>&, const std::vector<uint8_t>&,
                                                 const std::vector<uint32_t>&, int64_t) {
  no_cuda("probe");
}
std::vector<uint32_t> launch_wgmma_tiles(ProbeKernel, const std::vector<uint8_t>&, const std::vector<uint8_t>&,
                                         const std::vector<uint32_t>&, int64_t) {
  no_cuda("probe");
}
std::vector<uint32_t> launch_wgmma_chain(ProbeKernel, const std::vector<uint8_t>&, const std::vector<uint8_t>&, int,
                                         int, bool) {
  no_cuda("probe");
}
std::vector<uint32_t> launch_tcgen05_tiles(ProbeKernel, const std::vector<uint8_t>&, const std::vector<uint8_t>&,
                                           const std::vector<uint32_t>&, const std::vector<uint8_t>&,
                                           const std::vector<uint8_t>&, int64_t) {
  no_cuda("probe");
}
}  // namespace probe
}  // namespace calico::gpu
