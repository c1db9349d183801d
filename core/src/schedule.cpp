// PLACEHOLDER until the reference work lands (issue 2): build_schedule.
#include "calico/schedule.h"
#include "calico/error.h"
namespace calico {
Schedule build_schedule(const LayerSpec&, const RunConfig&, const Routing&, int) { throw Error("build_schedule: not implemented yet"); }
}
