// Calico core: the numerical contract, the problem description, the schedule and deterministic data.
#pragma once

#include "calico/backend.h"
#include "calico/data.h"
#include "calico/error.h"
#include "calico/numerics.h"
#include "calico/schedule.h"
#include "calico/spec.h"
#include "calico/tensor.h"
