#!/usr/bin/env bash
# Device call 4 of the twenty-fifth pass: the schedule's place_kernel with its routing loads batched and the
# padding memsets folded (batch = try/schedule-batch) against main (base). The measure is the forward's time
# outside the persistent kernel's records (the timeline's "outside them" line: the schedule kernels, memsets,
# the launch), which the in-kernel cycles do not see. Prepare here:
#   bash scripts/variants.sh prepare base=main batch=try/schedule-batch      (carry [".whl", ".variants"])
source scripts/device_call.sh  # T0, R, pack, build_variants
build_variants
(cd .variants/batch && cmake --build build-gpu -j 12 --target test_schedule_gpu test_megakernel_gpu > $R/build-tests-batch.log 2>&1) &
TP=$!
CHECK_SPECS="qwen3-30b-a3b 2048 zipf:1.2 1.0;tiny 2048 adversarial 0" CHECK_CONFIGS="push 16 0;pull 16 64" \
  bash scripts/variants.sh check $R > $R/check.log 2>&1
grep -c IDENTICAL $R/check.txt; grep -v IDENTICAL $R/check.txt; date; pack
wait $TP
for t in test_schedule_gpu test_megakernel_gpu; do
  b=$(find .variants/batch/build-gpu -name $t -type f -executable | head -1)
  [ -n "$b" ] || { echo "batch: $t not built"; continue; }
  (timeout 90 $b > $R/$t-batch.txt 2>&1); echo "batch $t: $(tail -1 $R/$t-batch.txt)"; grep -E "FAILED|Failure" $R/$t-batch.txt | head -4
done; date; pack
QW="--preset qwen3-30b-a3b --tokens 16384 --weight-grads overwrite"
DS="--preset deepseek-v3-routed --tokens 8192 --weight-grads overwrite"
for round in 1 2; do
  for v in base batch; do
    for shape in qw ds; do
      [ $(( $(date +%s) - T0 )) -lt 420 ] || break 3
      args=$QW; [ $shape = ds ] && args=$DS
      .variants/$v/build-gpu/cli/calico bench $args --iters 3 --timeline $R/tl.json > $R/timeline-$shape-$v-$round.txt 2>&1 \
        || echo "$v $shape: timeline run failed"
      rm -f $R/tl.json
      echo "== $v $shape $round: $(grep -E 'T=' $R/timeline-$shape-$v-$round.txt | cut -c1-110)"
      grep -E "outside" $R/timeline-$shape-$v-$round.txt
    done
  done
done; pack; date
