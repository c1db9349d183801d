#!/usr/bin/env bash
# Device call 2 of the thirty-third pass: does main's new d_h epilogue profile (three clock pairs per round,
# taken in every launch) cost time? main (slots) beside f3c1604 (before them), qwen3 f+b, 4 interleaved rounds,
# then deepseek-v3-routed one round each if time is left. The slots stay only if they cost nothing measurable.
# Prepare here:
#   rm -rf .variants; bash scripts/variants.sh prepare base=f3c1604 slots=main   (carry [".whl", ".variants"])
source scripts/device_call.sh  # T0, R, pack, build_variants
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt 2>&1; cat $R/gpu.txt
build_variants
ROUNDS=4 ITERS=20 bash scripts/variants.sh cycles $R/cyc > $R/cycles.txt 2>&1; tail -10 $R/cycles.txt; pack; date
DS="--preset deepseek-v3-routed --tokens 8192 --dispatch push --dispatch-backward push --comm-sms 16 --comm-sms-backward 16 --weight-grads overwrite"
if [ $(( $(date +%s) - T0 )) -lt 420 ]; then
  CYCLES_ARGS="$DS" ROUNDS=1 ITERS=6 bash scripts/variants.sh cycles $R/cycd > $R/cycles-d.txt 2>&1
  tail -4 $R/cycles-d.txt
fi
date; pack
