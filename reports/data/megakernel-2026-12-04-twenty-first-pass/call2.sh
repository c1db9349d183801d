#!/usr/bin/env bash
# device call 2 (twenty-first pass): the hand-off (epi6: producer warps 1-3 run the push forward's epilogues in
# 80 KB of strips beside six K = 32 stages) against main (base) and eight K = 32 stages (k32x8): digests, the
# megakernel GPU tests of epi6, cycles, profiles, epi6 with its knob at consumers, deepseek-v3-routed.
set -uo pipefail
T0=$(date +%s)
source scripts/device_env.sh
R=$OUT/r; mkdir -p $R
pack() { tar czf $OUT/results.tgz -C $OUT r; }
bash scripts/variants.sh build $R/v > $R/build.txt 2>&1; tail -3 $R/build.txt; grep -l C751 $R/v/build-*.log; date
(cd .variants/epi6 && cmake --build build-gpu -j 16 --target test_megakernel_gpu > $R/build-tests.log 2>&1) &
CHECK_SPECS="qwen3-30b-a3b 2048 zipf:1.2 1.0;tiny 2048 adversarial 0;tiny 4096 uniform 1.0" \
CHECK_CONFIGS="push 16 0 ow;push 8 64 ow;pull 16 64 ow;push 16 0" bash scripts/variants.sh check $R > $R/check.log 2>&1
grep -c IDENTICAL $R/check.txt; grep -v IDENTICAL $R/check.txt; date; pack
wait
(timeout 200 $(find .variants/epi6/build-gpu -name test_megakernel_gpu -type f -executable | head -1) > $R/tests.txt 2>&1); tail -6 $R/tests.txt; date; pack
ROUNDS=2 ITERS=20 PROFILE=1 bash scripts/variants.sh cycles $R/cyc > $R/cycles.txt 2>&1
CALICO_MK_FWD_EPILOGUE=consumers .variants/epi6/build-gpu/cli/calico bench --preset qwen3-30b-a3b --tokens 16384 \
  --dispatch push --dispatch-backward push --comm-sms 16 --comm-sms-backward 16 --weight-grads overwrite --iters 20 \
  --json $R/bench-epi6-consumers.json > $R/bench-epi6-consumers.txt 2>&1
python3 scripts/bench_cycles.py $R/cyc/bench-*.json $R/bench-epi6-consumers.json 2>&1 | tail -8
for f in $R/cyc/profile-*.txt; do echo "$f: $(grep -E 'compute CTAs: tasks|per k-tile|gate/up epilogues' $f | head -3 | tr -s ' ' | tr '\n' ' ')"; done
pack; date
if [ $(( $(date +%s) - T0 )) -lt 430 ]; then
  CYCLES_ARGS="--preset deepseek-v3-routed --tokens 8192 --dispatch push --dispatch-backward push --comm-sms 16 --comm-sms-backward 16 --weight-grads overwrite" \
  ROUNDS=1 ITERS=8 bash scripts/variants.sh cycles $R/cycd > $R/cycles-d.txt 2>&1; tail -4 $R/cycles-d.txt
fi
pack; date
