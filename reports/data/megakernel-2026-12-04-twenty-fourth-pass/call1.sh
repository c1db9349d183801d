#!/usr/bin/env bash
# device call 1 (twenty-fourth pass): the forward's epilogues per warp (warp: each consumer warp stores its 16
# rows through its own strips, no 256-thread barriers; stsm: the same with stmatrix.x4) against main (base):
# digests, the GPU tests of both, cycles (qwen3 two rounds, deepseek-v3-routed one), a timeline summary each.
set -uo pipefail
T0=$(date +%s)
source scripts/device_env.sh
R=$OUT/r; mkdir -p $R
pack() { tar czf $OUT/results.tgz -C $OUT r; }
bash scripts/variants.sh build $R/v > $R/build.txt 2>&1; tail -2 $R/build.txt; grep -c "instructions are serialized" $R/v/build-*.log; date
(for v in warp stsm; do (cd .variants/$v && cmake --build build-gpu -j 8 --target test_megakernel_gpu > $R/build-tests-$v.log 2>&1) & done; wait) &
TP=$!
CHECK_SPECS="qwen3-30b-a3b 2048 zipf:1.2 1.0;tiny 2048 adversarial 0;tiny 4096 uniform 1.0" \
CHECK_CONFIGS="push 16 0;push 8 64;pull 16 64" bash scripts/variants.sh check $R > $R/check.log 2>&1
grep -c IDENTICAL $R/check.txt; grep -v IDENTICAL $R/check.txt; date; pack
ROUNDS=2 ITERS=20 PROFILE=1 bash scripts/variants.sh cycles $R/cyc > $R/cycles.txt 2>&1; tail -8 $R/cycles.txt; pack
wait $TP
for v in warp stsm; do
  (timeout 120 $(find .variants/$v/build-gpu -name test_megakernel_gpu -type f -executable | head -1) > $R/tests-$v.txt 2>&1); echo "$v: $(tail -1 $R/tests-$v.txt)"; grep -E "FAILED|Failure" $R/tests-$v.txt | head -5
done; date; pack
for v in base warp stsm; do
  .variants/$v/build-gpu/cli/calico bench --preset qwen3-30b-a3b --tokens 16384 --weight-grads overwrite --iters 5 \
    --timeline $R/tl-$v.json > $R/timeline-$v.txt 2>&1 || echo "$v: timeline run failed"
  echo "== $v"; grep -A5 "forward launch" $R/timeline-$v.txt | head -6; rm -f $R/tl-$v.json
done; pack
DS="--preset deepseek-v3-routed --tokens 8192 --dispatch push --dispatch-backward push --comm-sms 16 --comm-sms-backward 16 --weight-grads overwrite"
if [ $(( $(date +%s) - T0 )) -lt 420 ]; then
  CYCLES_ARGS="$DS" ROUNDS=1 ITERS=8 bash scripts/variants.sh cycles $R/cycd > $R/cycles-d.txt 2>&1; tail -4 $R/cycles-d.txt
fi
pack; date
