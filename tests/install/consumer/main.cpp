// Runs one tiny MoE layer through the installed libraries and prints the digest of `out`.
#include <cstdio>

#include "calico/core.h"
#include "calico/reference.h"

int main() {
  calico::RunRequest q;
  q.spec = calico::load_preset("tiny");  // from PREFIX/share/calico/data when run from PREFIX/bin
  q.config.tokens_per_rank = 16;
  q.routing = calico::make_routing(q.spec, 16, calico::RoutingSource::parse("uniform"), 1);
  const calico::RunResult r = calico::ref::run_reference(q, calico::ref::ReferenceMode::contract, nullptr);
  std::printf("data %s\nout digest %016llx\n", calico::data_dir().c_str(),
              static_cast<unsigned long long>(calico::digest(*r.ranks[0].find("out"))));
  return 0;
}
