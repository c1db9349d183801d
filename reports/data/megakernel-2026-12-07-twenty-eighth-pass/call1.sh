#!/usr/bin/env bash
# Device call 1 of the twenty-eighth pass: the push dispatch with one 16 KB slot per warp (branch
# try/dispatch-slot16: a 14 KB deepseek-v3 row in one bulk copy each way instead of four; four 4 KB qwen3 rows
# per slot, one bulk store for the four) and the same generic code at main's 4 KB x 4 layout (gen4k, the
# control) against main: digests, qwen3 cycles, one timeline per variant (dispatch durations), deepseek-v3
# rounds, and main's data-movement CTA counts swept (forward / backward: 16/16, 16/24, 16/32, 24/24).
# Prepare here:
#   rm -rf .variants; bash scripts/variants.sh prepare base=main slot16=try/dispatch-slot16 \
#     gen4k=try/dispatch-gen4k     (carry [".whl", ".variants"])
source scripts/device_call.sh  # T0, R, pack, build_variants
(cd .variants/slot16 && cmake --build build-gpu -j 8 --target test_megakernel_gpu > $R/build-tests-slot16.log 2>&1) &
TP=$!
build_variants
CHECK_SPECS="qwen3-30b-a3b 2048 zipf:1.2 1.0;tiny 2048 adversarial 0;tiny 4096 uniform 1.0" \
CHECK_CONFIGS="push 16 0;pull 16 64;push 16 0 ow" bash scripts/variants.sh check $R > $R/check.log 2>&1
grep -c IDENTICAL $R/check.txt; grep -v IDENTICAL $R/check.txt; date; pack
for v in base slot16; do
  .variants/$v/build-gpu/cli/calico bench --preset qwen3-30b-a3b --tokens 16384 --weight-grads overwrite --iters 3 \
    --timeline $R/timeline-qwen3-$v.json > $R/bench-timeline-qwen3-$v.txt 2>&1 || echo "$v: timeline run failed"
  python3 scripts/timeline_gaps.py $R/timeline-qwen3-$v.json --top 2 > $R/gaps-qwen3-$v.txt 2>&1
  echo "== $v"; grep -E "span|dispatch|d_h |gate_up " $R/gaps-qwen3-$v.txt
  gzip -f $R/timeline-qwen3-$v.json
done; date; pack
wait $TP
b=$(find .variants/slot16/build-gpu -name test_megakernel_gpu -type f -executable | head -1)
if [ -n "$b" ]; then
  (OMP_NUM_THREADS=16 timeout 100 $b > $R/test_megakernel_gpu-slot16.txt 2>&1); echo "slot16: $(tail -1 $R/test_megakernel_gpu-slot16.txt)"
  grep -E "FAILED|Failure" $R/test_megakernel_gpu-slot16.txt | head -4
else echo "slot16: test_megakernel_gpu not built"; fi
date; pack
ROUNDS=3 ITERS=20 bash scripts/variants.sh cycles $R/cyc > $R/cycles.txt 2>&1; tail -5 $R/cycles.txt; pack; date
DS="--preset deepseek-v3-routed --tokens 8192 --dispatch push --dispatch-backward push --comm-sms 16 --comm-sms-backward 16 --weight-grads overwrite"
CYCLES_ARGS="$DS" ROUNDS=1 ITERS=8 bash scripts/variants.sh cycles $R/cycd1 > $R/cycles-d1.txt 2>&1
tail -4 $R/cycles-d1.txt; pack; date
# main's data-movement CTA counts (forward / backward), qwen3 T=16384, two rounds interleaved
Q="--preset qwen3-30b-a3b --tokens 16384 --dispatch push --dispatch-backward push --weight-grads overwrite --iters 20"
mkdir -p $R/sweep
for round in 1 2; do
  for fb in 16/16 16/24 16/32 24/24; do
    [ $(( $(date +%s) - T0 )) -lt 470 ] || break 2
    f=${fb%/*}; b=${fb#*/}
    .variants/base/build-gpu/cli/calico bench $Q --comm-sms $f --comm-sms-backward $b \
      --json $R/sweep/bench-c$f-$b-$round.json > $R/sweep/bench-c$f-$b-$round.txt 2>&1
    echo "== comm $fb round $round: $(grep -E 'T=|MHz' $R/sweep/bench-c$f-$b-$round.txt | tr -s ' ' | tr '\n' ' ')"
  done
done
python3 scripts/bench_cycles.py $R/sweep/bench-*.json > $R/sweep.txt 2>&1; tail -10 $R/sweep.txt; pack; date
for round in 2 3; do
  [ $(( $(date +%s) - T0 )) -lt 500 ] || break
  CYCLES_ARGS="$DS" ROUNDS=1 ITERS=8 bash scripts/variants.sh cycles $R/cycd$round > $R/cycles-d$round.txt 2>&1
  tail -4 $R/cycles-d$round.txt; pack; date
done
