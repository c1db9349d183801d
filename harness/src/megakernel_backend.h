// The megakernel backend for the harness (megakernel_backend.cpp).
#pragma once

#include <memory>

#include "calico/backend.h"
#include "calico/megakernel.h"

namespace calico::harness {

std::unique_ptr<Backend> make_megakernel_backend();
gpu::MoeOptions megakernel_options(const RunConfig& config);  // RunConfig's comm SMs and minibatch

}  // namespace calico::harness
