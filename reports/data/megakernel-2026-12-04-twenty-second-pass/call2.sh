#!/usr/bin/env bash
# device call 2 (twenty-second pass): the two weight-gradient modes' backward kernels in translation units of
# their own (split; the d_h epilogue forced inline in the accumulate one only) against main's both-forced
# (base): digests in both modes, the split's megakernel GPU tests, qwen3 cycles in both modes.
set -uo pipefail
source scripts/device_env.sh
R=$OUT/r; mkdir -p $R
pack() { tar czf $OUT/results.tgz -C $OUT r; }
bash scripts/variants.sh build $R/v > $R/build.txt 2>&1; tail -2 $R/build.txt; grep -c "instructions are serialized" $R/v/build-*.log; date
(cd .variants/split && cmake --build build-gpu -j 16 --target test_megakernel_gpu > $R/build-tests.log 2>&1) &
CHECK_SPECS="qwen3-30b-a3b 2048 zipf:1.2 1.0;tiny 2048 adversarial 0" \
CHECK_CONFIGS="push 16 0;pull 16 64;push 16 0 ow;push 8 64 ow" bash scripts/variants.sh check $R > $R/check.log 2>&1
grep -c IDENTICAL $R/check.txt; grep -v IDENTICAL $R/check.txt; date; pack
wait
(timeout 200 $(find .variants/split/build-gpu -name test_megakernel_gpu -type f -executable | head -1) > $R/tests.txt 2>&1); tail -3 $R/tests.txt; date; pack
Q="--preset qwen3-30b-a3b --tokens 16384 --dispatch push --dispatch-backward push --comm-sms 16 --comm-sms-backward 16"
CYCLES_ARGS="$Q --weight-grads overwrite" ROUNDS=3 ITERS=20 bash scripts/variants.sh cycles $R/cyc-ow > $R/cycles-ow.txt 2>&1; tail -7 $R/cycles-ow.txt
CYCLES_ARGS="$Q --weight-grads accumulate" ROUNDS=2 ITERS=20 bash scripts/variants.sh cycles $R/cyc-acc > $R/cycles-acc.txt 2>&1; tail -5 $R/cycles-acc.txt
pack; date
