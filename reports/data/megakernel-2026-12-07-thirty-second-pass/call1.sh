#!/usr/bin/env bash
# Device call 1 of the thirty-second pass: main's backward data-movement CTA count, 16 beside 32 and 64, in one
# call (the thirty-first pass's call 3, not run there, with one more setting and round). qwen3 f+b, 3 interleaved
# rounds; deepseek-v3-routed 16 / 64, 2 rounds, as time allows. The default changes only if one count wins in
# cycles and time on both shapes.
# Prepare here:
#   rm -rf .variants; bash scripts/variants.sh prepare base=main   (carry [".whl", ".variants"])
source scripts/device_call.sh  # T0, R, pack, build_variants
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/gpu.txt 2>&1; cat $R/gpu.txt
build_variants
C=.variants/base/build-gpu/cli/calico
Q="--preset qwen3-30b-a3b --tokens 16384 --dispatch push --dispatch-backward push --weight-grads overwrite --comm-sms 16"
mkdir -p $R/sweep
for round in 1 2 3; do
  for b in 16 32 64; do
    [ $(( $(date +%s) - T0 )) -lt 330 ] || break 2
    $C bench $Q --iters 20 --comm-sms-backward $b --json $R/sweep/bench-qwen3-b$b-$round.json > $R/sweep/bench-qwen3-b$b-$round.txt 2>&1
    echo "== $(( $(date +%s) - T0 )) s qwen3 bwd comm $b round $round: $(grep -E 'T=' $R/sweep/bench-qwen3-b$b-$round.txt | tr -s ' ' | tr '\n' ' ')"
  done
done; pack
DS="--preset deepseek-v3-routed --tokens 8192 --dispatch push --dispatch-backward push --weight-grads overwrite --comm-sms 16"
for round in 1 2; do
  for b in 16 64; do
    [ $(( $(date +%s) - T0 )) -lt 420 ] || break 2
    $C bench $DS --iters 6 --comm-sms-backward $b --json $R/sweep/bench-dsv3-b$b-$round.json > $R/sweep/bench-dsv3-b$b-$round.txt 2>&1
    echo "== $(( $(date +%s) - T0 )) s dsv3 bwd comm $b round $round: $(grep -E 'T=' $R/sweep/bench-dsv3-b$b-$round.txt | tr -s ' ' | tr '\n' ' ')"
  done
done
python3 scripts/bench_cycles.py $R/sweep/bench-*.json > $R/sweep.txt 2>&1; cat $R/sweep.txt; date; pack
