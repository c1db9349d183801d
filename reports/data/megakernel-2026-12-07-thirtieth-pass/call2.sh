#!/usr/bin/env bash
# Device call 2 of the thirtieth pass: the SwiGLU backward probe again with 1, 2 and 4 steps' loads in flight
# per thread and its values checked against the host (simulator/probes/swiglu_backward_rate.cu), then main's
# benchmark beside the PyTorch baseline and the dense ceiling on this call's GPU (scripts/bench_megakernel.sh,
# push 16/16, overwrite, ITERS 20).
# Prepare here: rm -rf .variants; bash scripts/variants.sh prepare base=main   (carry [".whl", ".variants"])
source scripts/device_call.sh  # T0, R, pack, build_variants
nvcc -O3 -std=c++17 -fmad=false -gencode=arch=compute_90a,code=sm_90a -Icore/include -Imegakernel/src -o /tmp/sbr \
  simulator/probes/swiglu_backward_rate.cu && timeout 90 /tmp/sbr | tee $R/swiglu-probe.txt; echo "probe rc=$?"; pack
build_variants
MODES=push:push WEIGHT_GRADS=overwrite ITERS=20 TORCH=1 timeout 420 bash scripts/bench_megakernel.sh \
  .variants/base/build-gpu/cli/calico $R > $R/bench.txt 2>&1; echo "bench rc=$?"; tail -30 $R/bench.txt; pack; date
