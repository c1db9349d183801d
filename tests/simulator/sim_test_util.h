// Shared helpers of the simulator tests.
#pragma once

#include "calico/simulator.h"

namespace calico::sim {

// A RunConfig with the same direction and SM count for both passes.
inline RunConfig run(int ranks, int tokens, int minibatch, int sms, Direction d, Direction c) {
  RunConfig r;
  r.ranks = ranks;
  r.tokens_per_rank = tokens;
  r.minibatch = minibatch;
  r.comm_sms_forward = r.comm_sms_backward = sms;
  r.dispatch_forward = r.dispatch_backward = d;
  r.combine_forward = r.combine_backward = c;
  return r;
}

}  // namespace calico::sim
