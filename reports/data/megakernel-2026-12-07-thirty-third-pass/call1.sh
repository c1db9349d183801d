#!/usr/bin/env bash
# Device call 1 of the thirty-third pass: where the d_h epilogue's ~30 us per tile goes.
# base: main with the d_h epilogue's new profile slots (saved g/u waits, d_g rounds, d_u rounds).
# (The candidate try/dh-cmp, out-of-window entries computed in place, is not in this call: its division's slow
# path made ptxas serialise the wgmma (C7520); it waits for this call's answer.)
# win, nolook (try/dh-win, try/dh-nolook): DIAGNOSTICS with wrong values, never merged: every lookup from the
#   shared window (prices the global lookups), no lookup at all (prices the lookups). Their digests must
#   differ (the check's negative control).
# Then qwen3 f+b cycles, 3 interleaved rounds with a profile of each variant.
# Prepare here:
#   rm -rf .variants; bash scripts/variants.sh prepare base=main win=try/dh-win nolook=try/dh-nolook
#   (carry [".whl", ".variants"])
source scripts/device_call.sh  # T0, R, pack, build_variants
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt 2>&1; cat $R/gpu.txt
build_variants
CHECK_SPECS="qwen3-30b-a3b 2048 zipf:1.2 1.0;tiny 2048 adversarial 0" CHECK_CONFIGS="push 16 0;pull 16 64 ow" \
  bash scripts/variants.sh check $R > $R/check.log 2>&1
cat $R/check.txt | cut -c1-160; date; pack
PROFILE=1 ROUNDS=3 ITERS=20 bash scripts/variants.sh cycles $R/cyc > $R/cycles.txt 2>&1; tail -14 $R/cycles.txt
grep -H "d_h epilogues\|epilogues by GEMM\|main loops by GEMM" $R/cyc/profile-*.txt; pack; date
date; pack
