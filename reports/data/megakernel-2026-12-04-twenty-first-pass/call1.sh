#!/usr/bin/env bash
# device call 1 (twenty-first pass): the forward's ring as eight (k32x8) or six (k32x6) stages of K = 32 in
# 64-byte swizzle against main's four of K = 64 (base): digests, cycles, profiles, deepseek-v3-routed.
set -uo pipefail
T0=$(date +%s)
source scripts/device_env.sh
R=$OUT/r; mkdir -p $R
pack() { tar czf $OUT/results.tgz -C $OUT r; }
bash scripts/variants.sh build $R/v > $R/build.txt 2>&1; tail -2 $R/build.txt; date
CHECK_SPECS="qwen3-30b-a3b 2048 zipf:1.2 1.0;tiny 2048 adversarial 0" CHECK_CONFIGS="push 16 0 ow;push 8 64;pull 16 64" \
  bash scripts/variants.sh check $R > $R/check.log 2>&1
grep -c IDENTICAL $R/check.txt; grep -v IDENTICAL $R/check.txt; date; pack
ROUNDS=2 ITERS=20 PROFILE=1 bash scripts/variants.sh cycles $R/cyc > $R/cycles.txt 2>&1; tail -12 $R/cycles.txt
for f in $R/cyc/profile-*.txt; do echo "$f: $(grep -E 'main loops, waiting|per k-tile' $f | head -2 | tr -s ' ' | tr '\n' ' ')"; done
pack; date
if [ $(( $(date +%s) - T0 )) -lt 420 ]; then
  CYCLES_ARGS="--preset deepseek-v3-routed --tokens 8192 --dispatch push --dispatch-backward push --comm-sms 16 --comm-sms-backward 16 --weight-grads overwrite" \
  ROUNDS=1 ITERS=8 bash scripts/variants.sh cycles $R/cycd > $R/cycles-d.txt 2>&1; tail -6 $R/cycles-d.txt
fi
pack; date
