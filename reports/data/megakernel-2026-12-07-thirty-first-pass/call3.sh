#!/usr/bin/env bash
# Device call 3 of the thirty-first pass: main's backward data-movement CTA count on an H200 (the open question of
# the twenty-eighth and thirtieth passes; the H100 rounds found 48-64 ~2% fewer cycles and level in time). qwen3 f+b
# with 16 / 64 backward data-movement CTAs, 2 interleaved rounds; deepseek-v3-routed with 16 / 64, 1 round, if time is left.
# Prepare here:
#   rm -rf .variants; bash scripts/variants.sh prepare base=main   (carry [".whl", ".variants"])
source scripts/device_call.sh  # T0, R, pack, build_variants
build_variants
C=.variants/base/build-gpu/cli/calico
Q="--preset qwen3-30b-a3b --tokens 16384 --dispatch push --dispatch-backward push --weight-grads overwrite --comm-sms 16"
mkdir -p $R/sweep
for round in 1 2; do
  for b in 16 64; do
    [ $(( $(date +%s) - T0 )) -lt 240 ] || break 2
    $C bench $Q --iters 20 --comm-sms-backward $b --json $R/sweep/bench-qwen3-b$b-$round.json > $R/sweep/bench-qwen3-b$b-$round.txt 2>&1
    echo "== qwen3 bwd comm $b round $round: $(grep -E 'T=' $R/sweep/bench-qwen3-b$b-$round.txt | tr -s ' ' | tr '\n' ' ')"
  done
done; pack
DS="--preset deepseek-v3-routed --tokens 8192 --dispatch push --dispatch-backward push --weight-grads overwrite --comm-sms 16"
for b in 16 64; do
  [ $(( $(date +%s) - T0 )) -lt 260 ] || break
  $C bench $DS --iters 6 --comm-sms-backward $b --json $R/sweep/bench-dsv3-b$b-1.json > $R/sweep/bench-dsv3-b$b-1.txt 2>&1
  echo "== dsv3 bwd comm $b: $(grep -E 'T=' $R/sweep/bench-dsv3-b$b-1.txt | tr -s ' ' | tr '\n' ' ')"
done
python3 scripts/bench_cycles.py $R/sweep/bench-*.json > $R/sweep.txt 2>&1; cat $R/sweep.txt; date; pack
