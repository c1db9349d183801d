#!/usr/bin/env bash
# Device call 3 of the twenty-eighth pass: main's backward with many more data-movement CTAs. The dynamic walk
# lets them join the compute walk, so at 64-128 the d_y rows are dispatched by most of the GPU in a burst at the
# start of the backward (HBM-bound) instead of pacing the d_h tiles for ~1.3 ms. Forward stays at 16.
# qwen3 T=16384 (2 rounds, backward comm 16 / 32 / 64 / 96 / 128), deepseek-v3-routed T=8192 (2 rounds,
# 16 / 32 / 64 / 128), and one qwen3 timeline each at 16, 64 and 128.
# Prepare here: rm -rf .variants; bash scripts/variants.sh prepare base=main   (carry [".whl", ".variants"])
source scripts/device_call.sh  # T0, R, pack, build_variants
build_variants
C=.variants/base/build-gpu/cli/calico
Q="--preset qwen3-30b-a3b --tokens 16384 --dispatch push --dispatch-backward push --weight-grads overwrite --comm-sms 16"
DS="--preset deepseek-v3-routed --tokens 8192 --dispatch push --dispatch-backward push --weight-grads overwrite --comm-sms 16"
mkdir -p $R/sweep
for round in 1 2; do
  for b in 16 32 64 96 128; do
    $C bench $Q --iters 20 --comm-sms-backward $b --json $R/sweep/bench-qwen3-b$b-$round.json > $R/sweep/bench-qwen3-b$b-$round.txt 2>&1
    echo "== qwen3 bwd comm $b round $round: $(grep -E 'T=' $R/sweep/bench-qwen3-b$b-$round.txt | tr -s ' ')"
  done
  for b in 16 32 64 128; do
    $C bench $DS --iters 8 --comm-sms-backward $b --json $R/sweep/bench-dsv3-b$b-$round.json > $R/sweep/bench-dsv3-b$b-$round.txt 2>&1
    echo "== dsv3 bwd comm $b round $round: $(grep -E 'T=' $R/sweep/bench-dsv3-b$b-$round.txt | tr -s ' ')"
  done
done
python3 scripts/bench_cycles.py $R/sweep/bench-*.json > $R/sweep.txt 2>&1; cat $R/sweep.txt; pack; date
for b in 16 64 128; do
  $C bench $Q --iters 3 --comm-sms-backward $b --timeline $R/timeline-qwen3-b$b.json > $R/bench-timeline-qwen3-b$b.txt 2>&1
  python3 scripts/timeline_gaps.py $R/timeline-qwen3-b$b.json --top 2 > $R/gaps-qwen3-b$b.txt 2>&1
  echo "== b$b"; sed -n '/^backward/,$p' $R/gaps-qwen3-b$b.txt | grep -E "span|dispatch|d_h |d_h ->"
  gzip -f $R/timeline-qwen3-b$b.json
done; pack; date
