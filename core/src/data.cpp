// PLACEHOLDER until the reference work lands (issue 2): routing generators and deterministic data.
#include "calico/data.h"
