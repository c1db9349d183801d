// The accumulate-mode backward kernel (MoeOptions::accumulate_weight_grads: the weight-gradient chains start
// from the carried-in fp32 accumulators): moe/backward.cu built in a translation unit of its own (why: the top
// of that file).
#define CALICO_MK_BWD_CARRY_IN 1
#include "moe/backward.cu"
