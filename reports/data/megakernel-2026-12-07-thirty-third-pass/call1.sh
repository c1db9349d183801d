#!/usr/bin/env bash
# Device call 1 of the thirty-third pass: where the d_h epilogue's ~30 us per tile goes, and one candidate.
# base: main with the d_h epilogue's new profile slots (saved g/u waits, d_g rounds, d_u rounds).
# cmp (try/dh-cmp, the candidate): an out-of-window gate input's (silu, grad) computed in place by numerics.h's
#   functions instead of read from the global table (an L2 round trip the batch then waits for).
# win, nolook (try/dh-win, try/dh-nolook): DIAGNOSTICS with wrong values, never merged: every lookup from the
#   shared window (prices the global lookups), no lookup at all (prices the lookups). Their digests must
#   differ (the check's negative control); base and cmp must be IDENTICAL.
# Then qwen3 f+b cycles, 3 interleaved rounds with a profile of each variant, cmp's test_megakernel_gpu, and
# deepseek-v3-routed base / cmp if time is left.
# Prepare here:
#   rm -rf .variants; bash scripts/variants.sh prepare base=main cmp=try/dh-cmp win=try/dh-win nolook=try/dh-nolook
#   (carry [".whl", ".variants"])
source scripts/device_call.sh  # T0, R, pack, build_variants
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt 2>&1; cat $R/gpu.txt
build_variants
(cd .variants/cmp && cmake --build build-gpu -j 8 --target test_megakernel_gpu > $R/build-tests-cmp.log 2>&1) &
TP=$!
CHECK_SPECS="qwen3-30b-a3b 2048 zipf:1.2 1.0;tiny 2048 adversarial 0" CHECK_CONFIGS="push 16 0;pull 16 64 ow" \
  bash scripts/variants.sh check $R > $R/check.log 2>&1
cat $R/check.txt | cut -c1-160; date; pack
PROFILE=1 ROUNDS=3 ITERS=20 bash scripts/variants.sh cycles $R/cyc > $R/cycles.txt 2>&1; tail -14 $R/cycles.txt
grep -H "d_h epilogues\|epilogues by GEMM\|main loops by GEMM" $R/cyc/profile-*.txt; pack; date
wait $TP
b=$(find .variants/cmp/build-gpu -name test_megakernel_gpu -type f -executable | head -1)
if [ -n "$b" ] && [ $(( $(date +%s) - T0 )) -lt 420 ]; then
  (OMP_NUM_THREADS=16 timeout 70 $b > $R/test_megakernel_gpu-cmp.txt 2>&1); echo "cmp: $(tail -1 $R/test_megakernel_gpu-cmp.txt)"
  grep -E "FAILED|Failure" $R/test_megakernel_gpu-cmp.txt | head -4
else echo "cmp: test_megakernel_gpu not built or no time"; fi
date; pack
DS="--preset deepseek-v3-routed --tokens 8192 --dispatch push --dispatch-backward push --comm-sms 16 --comm-sms-backward 16 --weight-grads overwrite"
if [ $(( $(date +%s) - T0 )) -lt 470 ]; then
  mkdir -p .variants-off; mv .variants/win .variants/nolook .variants-off/
  CYCLES_ARGS="$DS" ROUNDS=1 ITERS=6 bash scripts/variants.sh cycles $R/cycd > $R/cycles-d.txt 2>&1
  tail -6 $R/cycles-d.txt
fi
date; pack
