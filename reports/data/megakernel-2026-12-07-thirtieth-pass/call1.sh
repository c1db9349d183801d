#!/usr/bin/env bash
# Device call 1 of the thirtieth pass: the producer's ticket taken one task ahead (branch try/ticket-ahead,
# moe/persistent.cuh: the atomic for task j + 1 issued when task j starts) against main. Digests, one qwen3
# timeline per variant (the gaps between tasks, forward and backward), qwen3 cycles (3 interleaved rounds),
# deepseek-v3-routed cycles (2 rounds), then main's backward data-movement CTA counts (16 / 48 / 64, qwen3) if
# time is left. `ta`'s gpu tests are built in the background and run at the end. First the SwiGLU backward
# probe (simulator/probes/swiglu_backward_rate.cu): the d_h epilogue's arithmetic as element-wise work alone.
# Prepare here:
#   rm -rf .variants; bash scripts/variants.sh prepare base=main ta=try/ticket-ahead   (carry [".whl", ".variants"])
source scripts/device_call.sh  # T0, R, pack, build_variants
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Icore/include -Imegakernel/src -o /tmp/sbr \
  simulator/probes/swiglu_backward_rate.cu && timeout 60 /tmp/sbr | tee $R/swiglu-probe.txt; pack
build_variants
(cd .variants/ta && cmake --build build-gpu -j 8 --target test_megakernel_gpu > $R/build-tests-ta.log 2>&1) &
TP=$!
CHECK_SPECS="qwen3-30b-a3b 2048 zipf:1.2 1.0;tiny 2048 adversarial 0" \
CHECK_CONFIGS="push 16 0;pull 16 64;push 16 0 ow" bash scripts/variants.sh check $R > $R/check.log 2>&1
grep -c IDENTICAL $R/check.txt; grep -v IDENTICAL $R/check.txt; date; pack
for v in base ta; do
  .variants/$v/build-gpu/cli/calico bench --preset qwen3-30b-a3b --tokens 16384 --weight-grads overwrite --iters 3 \
    --timeline $R/timeline-qwen3-$v.json > $R/bench-timeline-qwen3-$v.txt 2>&1 || echo "$v: timeline run failed"
  python3 scripts/timeline_gaps.py $R/timeline-qwen3-$v.json --top 6 > $R/gaps-qwen3-$v.txt 2>&1
  echo "== $v"; grep -E "span|-> " $R/gaps-qwen3-$v.txt | head -16
  gzip -f $R/timeline-qwen3-$v.json
done; date; pack
.variants/base/build-gpu/cli/calico bench --preset qwen3-30b-a3b --tokens 16384 --weight-grads overwrite --iters 3 \
  --warmup 1 --profile > $R/profile-qwen3-base.txt 2>&1; grep -iE "d_h|epilog" $R/profile-qwen3-base.txt | head -12; pack
ROUNDS=3 ITERS=20 bash scripts/variants.sh cycles $R/cyc > $R/cycles.txt 2>&1; tail -8 $R/cycles.txt; pack; date
DS="--preset deepseek-v3-routed --tokens 8192 --dispatch push --dispatch-backward push --comm-sms 16 --comm-sms-backward 16 --weight-grads overwrite"
for round in 1 2; do
  [ $(( $(date +%s) - T0 )) -lt 420 ] || break
  CYCLES_ARGS="$DS" ROUNDS=1 ITERS=8 bash scripts/variants.sh cycles $R/cycd$round > $R/cycles-d$round.txt 2>&1
  tail -3 $R/cycles-d$round.txt; pack; date
done
wait $TP
b=$(find .variants/ta/build-gpu -name test_megakernel_gpu -type f -executable | head -1)
if [ -n "$b" ] && [ $(( $(date +%s) - T0 )) -lt 500 ]; then
  (OMP_NUM_THREADS=16 timeout 60 $b > $R/test_megakernel_gpu-ta.txt 2>&1); echo "ta: $(tail -1 $R/test_megakernel_gpu-ta.txt)"
  grep -E "FAILED|Failure" $R/test_megakernel_gpu-ta.txt | head -4
else echo "ta: test_megakernel_gpu not built or no time"; fi
date; pack
C=.variants/base/build-gpu/cli/calico
Q="--preset qwen3-30b-a3b --tokens 16384 --dispatch push --dispatch-backward push --weight-grads overwrite --comm-sms 16"
mkdir -p $R/sweep
for round in 1 2; do
  for b in 16 48 64; do
    [ $(( $(date +%s) - T0 )) -lt 550 ] || break 2
    $C bench $Q --iters 20 --comm-sms-backward $b --json $R/sweep/bench-qwen3-b$b-$round.json > $R/sweep/bench-qwen3-b$b-$round.txt 2>&1
    echo "== qwen3 bwd comm $b round $round: $(grep -E 'T=' $R/sweep/bench-qwen3-b$b-$round.txt | tr -s ' ' | tr '\n' ' ')"
  done
done
python3 scripts/bench_cycles.py $R/sweep/bench-*.json > $R/sweep.txt 2>&1; cat $R/sweep.txt; pack; date
