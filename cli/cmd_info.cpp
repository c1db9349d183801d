// `calico info`: what this build is, where its data lives, which presets and GPUs it sees.
#include <cstdio>

#include "calico/core.h"
#include "calico/megakernel.h"
#include "command.h"

namespace {
calico::cli::Registrar info("info", "Show the build, data directory, presets and GPUs", [](CLI::App&) {
  return [] {
    std::printf("calico 0.1.0\ndata: %s\npresets:", calico::data_dir().c_str());
    for (const auto& n : calico::preset_names()) std::printf(" %s", n.c_str());
    std::printf("\ngpu: %s\n", calico::gpu::device_description().c_str());
    return 0;
  };
});
}  // namespace
