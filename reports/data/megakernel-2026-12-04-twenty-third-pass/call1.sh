#!/usr/bin/env bash
# device call 1 (twenty-third pass): the per-task timeline. Builds main (base) and the timeline branch (tl),
# runs the timeline's GPU test and the bit-for-bit tests of tl, cycles of both with the timeline off (the
# instrumentation must cost nothing), then qwen3 and deepseek-v3-routed with --timeline.
set -uo pipefail
source scripts/device_env.sh
R=$OUT/r; mkdir -p $R
pack() { tar czf $OUT/results.tgz -C $OUT r; }
bash scripts/variants.sh build $R/v > $R/build.txt 2>&1; tail -3 $R/build.txt; date
(cd .variants/tl && cmake --build build-gpu -j 16 --target test_megakernel_gpu > $R/build-tests.log 2>&1) &
ROUNDS=2 ITERS=20 bash scripts/variants.sh cycles $R/cyc > $R/cycles.txt 2>&1; tail -4 $R/cycles.txt; pack
wait
(timeout 240 $(find .variants/tl/build-gpu -name test_megakernel_gpu -type f -executable | head -1) > $R/tests.txt 2>&1); tail -8 $R/tests.txt; date; pack
C=.variants/tl/build-gpu/cli/calico
$C bench --preset qwen3-30b-a3b --tokens 16384 --weight-grads overwrite --iters 5 --timeline $R/timeline-qwen3.json \
  --timeline-records $R/timeline-records-qwen3.json > $R/bench-timeline-qwen3.txt 2>&1; cat $R/bench-timeline-qwen3.txt | head -60
$C bench --preset deepseek-v3-routed --tokens 8192 --weight-grads overwrite --iters 3 --timeline $R/timeline-dsv3.json \
  > $R/bench-timeline-dsv3.txt 2>&1; grep -A30 "launch:" $R/bench-timeline-dsv3.txt | head -45
gzip -f $R/timeline-*.json; pack; date
