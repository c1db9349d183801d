#!/usr/bin/env bash
# device call 1 (twenty-second pass): the backward's d_h epilogue always inlined (fix: ptxas had outlined it in
# the accumulate-mode kernel and serialised its every wgmma, C7520) against main (base): digests in both
# weight-gradient modes, the fix's megakernel GPU tests, cycles in accumulate and overwrite mode, qwen3 and
# deepseek-v3-routed.
set -uo pipefail
T0=$(date +%s)
source scripts/device_env.sh
R=$OUT/r; mkdir -p $R
pack() { tar czf $OUT/results.tgz -C $OUT r; }
bash scripts/variants.sh build $R/v > $R/build.txt 2>&1; tail -2 $R/build.txt; grep -c "instructions are serialized" $R/v/build-*.log; date
(cd .variants/fix && cmake --build build-gpu -j 16 --target test_megakernel_gpu > $R/build-tests.log 2>&1) &
CHECK_SPECS="qwen3-30b-a3b 2048 zipf:1.2 1.0;tiny 2048 adversarial 0;tiny 4096 uniform 1.0" \
CHECK_CONFIGS="push 16 0;push 8 64;pull 16 64;push 16 0 ow" bash scripts/variants.sh check $R > $R/check.log 2>&1
grep -c IDENTICAL $R/check.txt; grep -v IDENTICAL $R/check.txt; date; pack
wait
(timeout 200 $(find .variants/fix/build-gpu -name test_megakernel_gpu -type f -executable | head -1) > $R/tests.txt 2>&1); tail -4 $R/tests.txt; date; pack
Q="--preset qwen3-30b-a3b --tokens 16384 --dispatch push --dispatch-backward push --comm-sms 16 --comm-sms-backward 16"
CYCLES_ARGS="$Q --weight-grads accumulate" ROUNDS=2 ITERS=20 PROFILE=1 bash scripts/variants.sh cycles $R/cyc-acc > $R/cycles-acc.txt 2>&1; tail -6 $R/cycles-acc.txt
CYCLES_ARGS="$Q --weight-grads overwrite" ROUNDS=2 ITERS=20 bash scripts/variants.sh cycles $R/cyc-ow > $R/cycles-ow.txt 2>&1; tail -6 $R/cycles-ow.txt
pack; date
DS="--preset deepseek-v3-routed --tokens 8192 --dispatch push --dispatch-backward push --comm-sms 16 --comm-sms-backward 16"
if [ $(( $(date +%s) - T0 )) -lt 400 ]; then
  CYCLES_ARGS="$DS --weight-grads accumulate" ROUNDS=1 ITERS=8 bash scripts/variants.sh cycles $R/cycd-acc > $R/cycles-d-acc.txt 2>&1; tail -4 $R/cycles-d-acc.txt
fi
pack; date
if [ $(( $(date +%s) - T0 )) -lt 470 ]; then
  CYCLES_ARGS="$DS --weight-grads overwrite" ROUNDS=1 ITERS=8 bash scripts/variants.sh cycles $R/cycd-ow > $R/cycles-d-ow.txt 2>&1; tail -4 $R/cycles-d-ow.txt
fi
pack; date
