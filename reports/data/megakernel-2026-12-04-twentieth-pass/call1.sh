#!/usr/bin/env bash
# device call 1 (twentieth pass): the push forward's epilogues by producer warps 1-3 (epi) against main
# (base): digests (push: epi path; pull: the consumers' path), the megakernel GPU tests of epi, cycles, profiles.
set -uo pipefail
source scripts/device_env.sh
R=$OUT/r; mkdir -p $R
pack() { tar czf $OUT/results.tgz -C $OUT r; }
bash scripts/variants.sh build $R/v > $R/build.txt 2>&1; tail -3 $R/build.txt; grep -l C751 $R/v/build-*.log; date
(cd .variants/epi && cmake --build build-gpu -j 16 --target test_megakernel_gpu > $R/build-tests.log 2>&1) &
CHECK_SPECS="qwen3-30b-a3b 2048 zipf:1.2 1.0;tiny 2048 adversarial 0;tiny 4096 uniform 1.0" \
CHECK_CONFIGS="push 16 0 ow;push 8 64 ow;pull 16 64 ow;push 16 0" bash scripts/variants.sh check $R > $R/check.log 2>&1
tail -30 $R/check.txt; date; pack
wait
(timeout 200 $(find .variants/epi/build-gpu -name test_megakernel_gpu -type f -executable | head -1) > $R/tests.txt 2>&1); tail -15 $R/tests.txt; date; pack
ROUNDS=2 ITERS=20 PROFILE=1 bash scripts/variants.sh cycles $R/cyc > $R/cycles.txt 2>&1; tail -25 $R/cycles.txt
CALICO_MK_FWD_EPILOGUE=consumers .variants/epi/build-gpu/cli/calico bench --preset qwen3-30b-a3b --tokens 16384 \
  --dispatch push --dispatch-backward push --comm-sms 16 --comm-sms-backward 16 --weight-grads overwrite --iters 20 \
  --json $R/bench-epi-consumers.json > $R/bench-epi-consumers.txt 2>&1
python3 scripts/bench_cycles.py $R/cyc/bench-*.json $R/bench-epi-consumers.json 2>&1 | tail -12
pack; date
