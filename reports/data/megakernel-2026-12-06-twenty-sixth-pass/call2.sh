#!/usr/bin/env bash
# Device call 2 of the twenty-sixth pass: the per-warp forward epilogues of the twenty-fourth pass
# (patches/warp-epilogue and warp-epilogue-stsm of reports/data/megakernel-2026-12-04-twenty-fourth-pass,
# applied with `git am -3` on main 423f25f) against main, with more rounds than the twenty-fifth pass's call 1
# gave them (there: qwen3 forward -2.8% / -1.9% cycles, deepseek-v3-routed forward +1.5% / -0.3% in ONE round).
# Prepare here:
#   bash scripts/variants.sh prepare base=main warp=try/warp-epilogue stsm=try/warp-epilogue-stsm
#   (carry [".whl", ".variants"])
source scripts/device_call.sh  # T0, R, pack, build_variants
build_variants
(for v in warp stsm; do
   (cd .variants/$v && cmake --build build-gpu -j 6 --target test_megakernel_gpu > $R/build-tests-$v.log 2>&1) &
 done; wait) &
TP=$!
CHECK_SPECS="qwen3-30b-a3b 2048 zipf:1.2 1.0;tiny 2048 adversarial 0;tiny 4096 uniform 1.0" \
CHECK_CONFIGS="push 16 0;pull 16 64;push 16 0 ow" bash scripts/variants.sh check $R > $R/check.log 2>&1
grep -c IDENTICAL $R/check.txt; grep -v IDENTICAL $R/check.txt; date; pack
wait $TP
for v in warp stsm; do
  b=$(find .variants/$v/build-gpu -name test_megakernel_gpu -type f -executable | head -1)
  [ -n "$b" ] || { echo "$v: test_megakernel_gpu not built"; continue; }
  (timeout 100 $b > $R/test_megakernel_gpu-$v.txt 2>&1); echo "$v: $(tail -1 $R/test_megakernel_gpu-$v.txt)"
  grep -E "FAILED|Failure" $R/test_megakernel_gpu-$v.txt | head -4
done; date; pack
ROUNDS=3 ITERS=20 bash scripts/variants.sh cycles $R/cyc > $R/cycles.txt 2>&1; tail -12 $R/cycles.txt; pack; date
DS="--preset deepseek-v3-routed --tokens 8192 --dispatch push --dispatch-backward push --comm-sms 16 --comm-sms-backward 16 --weight-grads overwrite"
for round in 1 2 3; do
  [ $(( $(date +%s) - T0 )) -lt 480 ] || break
  CYCLES_ARGS="$DS" ROUNDS=1 ITERS=8 bash scripts/variants.sh cycles $R/cycd$round > $R/cycles-d$round.txt 2>&1
  tail -5 $R/cycles-d$round.txt; pack; date
done
