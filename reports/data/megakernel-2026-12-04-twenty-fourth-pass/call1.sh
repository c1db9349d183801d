#!/usr/bin/env bash
# device call 1 (prepared in the twenty-fourth pass, not run: the device was withdrawn); the forward's
# candidates against main (base) (call2.sh: the backward's):
#   warp  the forward's epilogues per warp (each consumer warp stores its 16 rows through its own strips)
#   stsm  warp + the strips written by stmatrix.x4
#   sched the schedule kernels rewritten (one warp per chunk ranking by __match_any_sync; block scan)
# First the store-rate probe's per-warp modes (simulator/probes/epilogue_store_rate.cu warp16, warp16+main).
# Digests of all, the GPU tests of stsm and sched (with test_schedule_gpu, main's schedule in base's tree as
# well), cycles (qwen3 two rounds with profiles, deepseek-v3-routed one), then a timeline summary of each.
# Prepare here (a new checkout has main only):
#   bash reports/data/megakernel-2026-12-04-twenty-fourth-pass/make-branches.sh
#   bash scripts/variants.sh prepare base=main warp=try/warp-epilogue stsm=try/warp-epilogue-stsm \
#                  sched=try/fast-schedule     (carry [".whl", ".variants"])
source scripts/device_call.sh  # T0, R, pack, build_variants
(nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/esr simulator/probes/epilogue_store_rate.cu \
  > $R/esr-build.log 2>&1) &
build_variants
wait  # the probe's build
# the store-rate probe: 16-row per-warp boxes against the joint 64-row rounds (try/warp-epilogue's question)
timeout 60 /tmp/esr tma tma+main warp16 warp16+main > $R/epilogue-store-probe.txt 2>&1; cat $R/epilogue-store-probe.txt | head -30
(for v in base stsm sched; do
   (cd .variants/$v && cmake --build build-gpu -j 5 --target test_megakernel_gpu test_schedule_gpu > $R/build-tests-$v.log 2>&1) &
 done; wait) &
TP=$!
CHECK_SPECS="qwen3-30b-a3b 2048 zipf:1.2 1.0;tiny 2048 adversarial 0;tiny 4096 uniform 1.0" \
CHECK_CONFIGS="push 16 0;pull 16 64;push 16 0 ow" bash scripts/variants.sh check $R > $R/check.log 2>&1
grep -c IDENTICAL $R/check.txt; grep -v IDENTICAL $R/check.txt; date; pack
ROUNDS=2 ITERS=20 PROFILE=1 bash scripts/variants.sh cycles $R/cyc > $R/cycles.txt 2>&1; tail -12 $R/cycles.txt; pack
wait $TP
for v in base stsm sched; do
  for t in test_megakernel_gpu test_schedule_gpu; do
    [ $v = base ] && [ $t = test_megakernel_gpu ] && continue  # (main's ran in call 1 of this pass)
    b=$(find .variants/$v/build-gpu -name $t -type f -executable | head -1)
    [ -n "$b" ] || { echo "$v: $t not built"; continue; }
    (timeout 100 $b > $R/$t-$v.txt 2>&1); echo "$v $t: $(tail -1 $R/$t-$v.txt)"; grep -E "FAILED|Failure" $R/$t-$v.txt | head -4
  done
done; date; pack
DS="--preset deepseek-v3-routed --tokens 8192 --dispatch push --dispatch-backward push --comm-sms 16 --comm-sms-backward 16 --weight-grads overwrite"
if [ $(( $(date +%s) - T0 )) -lt 400 ]; then
  CYCLES_ARGS="$DS" ROUNDS=1 ITERS=8 bash scripts/variants.sh cycles $R/cycd > $R/cycles-d.txt 2>&1; tail -6 $R/cycles-d.txt
fi
pack; date
for v in base stsm sched; do
  [ $(( $(date +%s) - T0 )) -lt 540 ] || break
  .variants/$v/build-gpu/cli/calico bench --preset qwen3-30b-a3b --tokens 16384 --weight-grads overwrite --iters 5 \
    --timeline $R/tl-$v.json > $R/timeline-$v.txt 2>&1 || echo "$v: timeline run failed"
  python3 scripts/timeline_gaps.py $R/tl-$v.json --top 6 > $R/timeline-gaps-$v.txt 2>&1; rm -f $R/tl-$v.json
  echo "== $v"; grep -E "T=" $R/timeline-$v.txt; grep -E "^(forward|backward):|gate_up |  down |d_h |dw_down " $R/timeline-gaps-$v.txt
done; pack; date
