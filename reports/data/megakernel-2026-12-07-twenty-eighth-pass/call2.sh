#!/usr/bin/env bash
# Device call 2 of the twenty-eighth pass: the backward dispatch's per-piece work cut (try/dispatch-scale: the
# d_y weight loaded before the copy's wait, a 4 KB piece scaled with its chunks loaded together) and the same
# with each slot reloaded at the top of the next item (try/dispatch-early) against main: digests, one qwen3
# timeline per variant (dispatch durations), qwen3 cycles, deepseek-v3 rounds, and main's deepseek-v3
# data-movement CTA counts (16/16, 32/16, 16/32).
# Prepare here:
#   rm -rf .variants; bash scripts/variants.sh prepare base=main scale=try/dispatch-scale early=try/dispatch-early
#   (carry [".whl", ".variants"])
source scripts/device_call.sh  # T0, R, pack, build_variants
build_variants
CHECK_SPECS="qwen3-30b-a3b 2048 zipf:1.2 1.0;tiny 2048 adversarial 0;tiny 4096 uniform 1.0" \
CHECK_CONFIGS="push 16 0;pull 16 64;push 16 0 ow" bash scripts/variants.sh check $R > $R/check.log 2>&1
grep -c IDENTICAL $R/check.txt; grep -v IDENTICAL $R/check.txt; date; pack
for v in base scale early; do
  .variants/$v/build-gpu/cli/calico bench --preset qwen3-30b-a3b --tokens 16384 --weight-grads overwrite --iters 3 \
    --timeline $R/timeline-qwen3-$v.json > $R/bench-timeline-qwen3-$v.txt 2>&1 || echo "$v: timeline run failed"
  python3 scripts/timeline_gaps.py $R/timeline-qwen3-$v.json --top 2 > $R/gaps-qwen3-$v.txt 2>&1
  echo "== $v"; grep -E "span|dispatch|d_h " $R/gaps-qwen3-$v.txt
  gzip -f $R/timeline-qwen3-$v.json
done; date; pack
ROUNDS=3 ITERS=20 bash scripts/variants.sh cycles $R/cyc > $R/cycles.txt 2>&1; tail -10 $R/cycles.txt; pack; date
DS="--preset deepseek-v3-routed --tokens 8192 --dispatch push --dispatch-backward push --weight-grads overwrite"
for round in 1 2; do
  CYCLES_ARGS="$DS --comm-sms 16 --comm-sms-backward 16" ROUNDS=1 ITERS=8 bash scripts/variants.sh cycles $R/cycd$round > $R/cycles-d$round.txt 2>&1
  tail -3 $R/cycles-d$round.txt; pack; date
done
mkdir -p $R/sweep
for fb in 16/16 32/16 16/32 32/32; do
  [ $(( $(date +%s) - T0 )) -lt 480 ] || break
  f=${fb%/*}; b=${fb#*/}
  .variants/base/build-gpu/cli/calico bench $DS --iters 8 --comm-sms $f --comm-sms-backward $b \
    --json $R/sweep/bench-dsv3-c$f-$b.json > $R/sweep/bench-dsv3-c$f-$b.txt 2>&1
done
python3 scripts/bench_cycles.py $R/sweep/bench-*.json > $R/sweep.txt 2>&1; cat $R/sweep.txt; pack; date
