#!/usr/bin/env bash
# Device call 3 of the twenty-sixth pass: try/warp-forward (call 2's `warp`, per-warp epilogues in the forward,
# with the backward's code restored to main's: Plan::kReleasesByWarp, the forward true, the backward false)
# against main, bit for bit and by cycles, qwen3 and deepseek-v3-routed.
# Prepare here:
#   rm -rf .variants; bash scripts/variants.sh prepare base=main warpf=try/warp-forward
#   (carry [".whl", ".variants"])
source scripts/device_call.sh  # T0, R, pack, build_variants
build_variants
(cd .variants/warpf && cmake --build build-gpu -j 8 --target test_megakernel_gpu > $R/build-tests-warpf.log 2>&1) &
TP=$!
CHECK_SPECS="qwen3-30b-a3b 2048 zipf:1.2 1.0;tiny 2048 adversarial 0;tiny 4096 uniform 1.0" \
CHECK_CONFIGS="push 16 0;pull 16 64;push 16 0 ow" bash scripts/variants.sh check $R > $R/check.log 2>&1
grep -c IDENTICAL $R/check.txt; grep -v IDENTICAL $R/check.txt; date; pack
wait $TP
b=$(find .variants/warpf/build-gpu -name test_megakernel_gpu -type f -executable | head -1)
if [ -n "$b" ]; then
  (OMP_NUM_THREADS=16 timeout 100 $b > $R/test_megakernel_gpu-warpf.txt 2>&1); echo "warpf: $(tail -1 $R/test_megakernel_gpu-warpf.txt)"
  grep -E "FAILED|Failure" $R/test_megakernel_gpu-warpf.txt | head -4
else echo "warpf: test_megakernel_gpu not built"; fi
date; pack
ROUNDS=3 ITERS=20 bash scripts/variants.sh cycles $R/cyc > $R/cycles.txt 2>&1; tail -8 $R/cycles.txt; pack; date
DS="--preset deepseek-v3-routed --tokens 8192 --dispatch push --dispatch-backward push --comm-sms 16 --comm-sms-backward 16 --weight-grads overwrite"
for round in 1 2 3 4; do
  [ $(( $(date +%s) - T0 )) -lt 500 ] || break
  CYCLES_ARGS="$DS" ROUNDS=1 ITERS=8 bash scripts/variants.sh cycles $R/cycd$round > $R/cycles-d$round.txt 2>&1
  tail -3 $R/cycles-d$round.txt; pack; date
done
