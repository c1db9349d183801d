#!/usr/bin/env bash
# Device call 1 of the thirty-first pass: the SwiGLU side tasks (branch try/swiglu-side: the d_h tiles store d_h as
# bf16 in the d_g buffer, a SwiGLU task per m-tile computes d_g, d_u ahead of its d_x_k tiles) against main, with
# 4 steps of loads in flight (sw4) and 64 tasks ahead (a64). First the thirtieth pass's call 3, not run then: the
# SwiGLU probe with the kernel's shared memory taken, and its negative control. Then digests, sw's
# test_megakernel_gpu, qwen3 cycles (2 rounds, with a profile of each), deepseek-v3-routed cycles if time is left.
# Prepare here:
#   rm -rf .variants; bash scripts/variants.sh prepare base=main sw=try/swiglu-side sw4=try/swiglu-side4 \
#     a64=try/swiglu-side-a64   (carry [".whl", ".variants"])
source scripts/device_call.sh  # T0, R, pack, build_variants
nvcc -O3 -std=c++17 -fmad=false -gencode=arch=compute_90a,code=sm_90a -Icore/include -Imegakernel/src -o /tmp/sbr \
  simulator/probes/swiglu_backward_rate.cu && timeout 90 /tmp/sbr | tee $R/swiglu-probe.txt; pack
build_variants
(cd .variants/sw && cmake --build build-gpu -j 8 --target test_megakernel_gpu > $R/build-tests-sw.log 2>&1) &
TP=$!
CHECK_SPECS="qwen3-30b-a3b 2048 zipf:1.2 1.0;tiny 2048 adversarial 0;tiny 1000 uniform 0.5" \
CHECK_CONFIGS="push 16 0;pull 16 64;push 16 0 ow" bash scripts/variants.sh check $R > $R/check.log 2>&1
grep -c IDENTICAL $R/check.txt; grep -v IDENTICAL $R/check.txt | head; date; pack
PROFILE=1 ROUNDS=2 ITERS=20 bash scripts/variants.sh cycles $R/cyc > $R/cycles.txt 2>&1; tail -12 $R/cycles.txt; pack; date
wait $TP
b=$(find .variants/sw/build-gpu -name test_megakernel_gpu -type f -executable | head -1)
if [ -n "$b" ] && [ $(( $(date +%s) - T0 )) -lt 450 ]; then
  (OMP_NUM_THREADS=16 timeout 70 $b > $R/test_megakernel_gpu-sw.txt 2>&1); echo "sw: $(tail -1 $R/test_megakernel_gpu-sw.txt)"
  grep -E "FAILED|Failure" $R/test_megakernel_gpu-sw.txt | head -4
else echo "sw: test_megakernel_gpu not built or no time"; fi
date; pack
DS="--preset deepseek-v3-routed --tokens 8192 --dispatch push --dispatch-backward push --comm-sms 16 --comm-sms-backward 16 --weight-grads overwrite"
if [ $(( $(date +%s) - T0 )) -lt 480 ]; then
  CYCLES_ARGS="$DS" ROUNDS=1 ITERS=6 bash scripts/variants.sh cycles $R/cycd > $R/cycles-d.txt 2>&1
  tail -6 $R/cycles-d.txt
fi
date; pack
