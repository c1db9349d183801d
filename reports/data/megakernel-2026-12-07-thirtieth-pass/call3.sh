#!/usr/bin/env bash
# Device call 3 of the thirtieth pass: the SwiGLU backward probe with the grid that has the megakernel's shared
# memory taken (`smem` rows: ~28 KB of L1 left, as a side task inside the kernel would have).
source scripts/device_call.sh  # T0, R, pack
nvcc -O3 -std=c++17 -fmad=false -gencode=arch=compute_90a,code=sm_90a -Icore/include -Imegakernel/src -o /tmp/sbr \
  simulator/probes/swiglu_backward_rate.cu && timeout 120 /tmp/sbr | tee $R/swiglu-probe.txt; echo "probe rc=$?"; pack
