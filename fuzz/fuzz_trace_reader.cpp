// libFuzzer target for the trace reader: any byte string must give a Trace or a calico::Error, never a
// crash, a hang, a sanitizer report or another exception. Built with -DCALICO_FUZZ=ON and clang;
// run by scripts/fuzz_trace.sh.
//
// CALICO_FUZZ_RESEAL=1 rewrites the input's checksummed header before reading, so that mutations get past
// our checksum and reach HDF5's own parsers: that mode fuzzes libhdf5 (1.10.8 on Debian 12 crashes there;
// see scripts/fuzz_trace.sh), the default mode fuzzes what a user of `calico diff` runs.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "calico/harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool reseal = std::getenv("CALICO_FUZZ_RESEAL") != nullptr;
  try {
    if (reseal && size >= calico::harness::kTraceHeaderBytes) {
      std::vector<uint8_t> image(data, data + size);
      calico::harness::seal_trace_image(image);
      calico::harness::read_trace_image(image.data(), image.size(), "fuzz-input");
    } else {
      calico::harness::read_trace_image(data, size, "fuzz-input");
    }
  } catch (const calico::Error&) {
    // the expected outcome for a bad file
  }
  return 0;
}
