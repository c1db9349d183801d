#!/usr/bin/env bash
# Device call 1 of the twenty-seventh pass: the streaming push dispatch (patches/dispatch-stream.patch, branch
# try/dispatch-stream: loads kLoadsAhead = kSlotsPerWarp - 1 items ahead across tile ends) and two variants of
# it (ahead2: kLoadsAhead = kSlotsPerWarp - 2; 2k8: 2 KB pieces x 8 slots, 6 ahead) against main: digests,
# the stream's GPU tests, qwen3 cycles, one timeline per variant (dispatch and d_h durations), deepseek-v3 rounds.
# Prepare here:
#   rm -rf .variants; bash scripts/variants.sh prepare base=main stream=try/dispatch-stream \
#     ahead2=try/dispatch-ahead2 2k8=try/dispatch-2k8     (carry [".whl", ".variants"])
source scripts/device_call.sh  # T0, R, pack, build_variants
build_variants
(cd .variants/stream && cmake --build build-gpu -j 8 --target test_megakernel_gpu > $R/build-tests-stream.log 2>&1) &
TP=$!
CHECK_SPECS="qwen3-30b-a3b 2048 zipf:1.2 1.0;tiny 2048 adversarial 0;tiny 4096 uniform 1.0" \
CHECK_CONFIGS="push 16 0;pull 16 64;push 16 0 ow" bash scripts/variants.sh check $R > $R/check.log 2>&1
grep -c IDENTICAL $R/check.txt; grep -v IDENTICAL $R/check.txt; date; pack
for v in base stream ahead2 2k8; do
  .variants/$v/build-gpu/cli/calico bench --preset qwen3-30b-a3b --tokens 16384 --weight-grads overwrite --iters 3 \
    --timeline $R/timeline-qwen3-$v.json > $R/bench-timeline-qwen3-$v.txt 2>&1 || echo "$v: timeline run failed"
  python3 scripts/timeline_gaps.py $R/timeline-qwen3-$v.json --top 2 > $R/gaps-qwen3-$v.txt 2>&1
  echo "== $v"; grep -E "span|dispatch|d_h |gate_up " $R/gaps-qwen3-$v.txt
  gzip -f $R/timeline-qwen3-$v.json
done; date; pack
wait $TP
b=$(find .variants/stream/build-gpu -name test_megakernel_gpu -type f -executable | head -1)
if [ -n "$b" ]; then
  (OMP_NUM_THREADS=16 timeout 100 $b > $R/test_megakernel_gpu-stream.txt 2>&1); echo "stream: $(tail -1 $R/test_megakernel_gpu-stream.txt)"
  grep -E "FAILED|Failure" $R/test_megakernel_gpu-stream.txt | head -4
else echo "stream: test_megakernel_gpu not built"; fi
date; pack
ROUNDS=3 ITERS=20 bash scripts/variants.sh cycles $R/cyc > $R/cycles.txt 2>&1; tail -6 $R/cycles.txt; pack; date
DS="--preset deepseek-v3-routed --tokens 8192 --dispatch push --dispatch-backward push --comm-sms 16 --comm-sms-backward 16 --weight-grads overwrite"
for round in 1 2 3; do
  [ $(( $(date +%s) - T0 )) -lt 500 ] || break
  CYCLES_ARGS="$DS" ROUNDS=1 ITERS=8 bash scripts/variants.sh cycles $R/cycd$round > $R/cycles-d$round.txt 2>&1
  tail -5 $R/cycles-d$round.txt; pack; date
done
