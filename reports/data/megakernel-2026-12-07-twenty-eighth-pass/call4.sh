#!/usr/bin/env bash
# Device call 4 of the twenty-eighth pass: call 3's best backward data-movement CTA count confirmed. qwen3
# T=16384, 4 interleaved rounds of main at backward comm 16 / 48 / 64 / 80 (forward 16), ITERS 20.
# Prepare here: rm -rf .variants; bash scripts/variants.sh prepare base=main   (carry [".whl", ".variants"])
source scripts/device_call.sh  # T0, R, pack, build_variants
build_variants
C=.variants/base/build-gpu/cli/calico
Q="--preset qwen3-30b-a3b --tokens 16384 --dispatch push --dispatch-backward push --weight-grads overwrite --comm-sms 16"
mkdir -p $R/sweep
for round in 1 2 3 4; do
  for b in 16 48 64 80; do
    $C bench $Q --iters 20 --comm-sms-backward $b --json $R/sweep/bench-qwen3-b$b-$round.json > $R/sweep/bench-qwen3-b$b-$round.txt 2>&1
    echo "== qwen3 bwd comm $b round $round: $(grep -E 'T=' $R/sweep/bench-qwen3-b$b-$round.txt | tr -s ' ')"
  done
done
python3 scripts/bench_cycles.py $R/sweep/bench-*.json > $R/sweep.txt 2>&1; cat $R/sweep.txt; pack; date
