#!/usr/bin/env bash
# device call 2 of the twenty-fifth pass (the twenty-fourth pass's call2.sh, its candidates rebased on main 72988a0,
# which has the fast schedule merged): the backward's candidates against main (base):
#   bwd     the forward's and the backward's d_h / d_x_k epilogues per warp (try/warp-epilogue-bwd)
#   wgrad   bwd + the weight-gradient epilogues per warp (try/warp-epilogue-wgrad: every epilogue per warp)
#   ileave  the backward walk with the dW_down tiles spread over the d_x_k tiles (try/interleave-dw-down):
#           aimed at deepseek-v3's weight-gradient phases (23 of 35 ms, their fp32 stores with every SM storing)
# Digests (both weight-gradient modes), the GPU tests of wgrad and ileave, cycles of deepseek-v3-routed (one
# round) and qwen3 (two, if time is left), a timeline summary of deepseek-v3-routed for each (if time is left).
# Prepare here (a new checkout has main only):
#   bash reports/data/megakernel-2026-12-04-twenty-fourth-pass/make-branches.sh, then rebase each try/ branch --onto main e8c6f1a
#   bash scripts/variants.sh prepare base=main bwd=try/warp-epilogue-bwd wgrad=try/warp-epilogue-wgrad \
#                  ileave=try/interleave-dw-down
#                (carry [".whl", ".variants"]); add call 1's winner as a fourth variant if there is one.
source scripts/device_call.sh  # T0, R, pack, build_variants
build_variants
(for v in wgrad ileave; do
   (cd .variants/$v && cmake --build build-gpu -j 8 --target test_megakernel_gpu > $R/build-tests-$v.log 2>&1) &
 done; wait) &
TP=$!
CHECK_SPECS="qwen3-30b-a3b 2048 zipf:1.2 1.0;tiny 2048 adversarial 0;tiny 4096 uniform 1.0" \
CHECK_CONFIGS="push 16 0;pull 16 64;push 16 0 ow;push 8 64 ow" bash scripts/variants.sh check $R > $R/check.log 2>&1
grep -c IDENTICAL $R/check.txt; grep -v IDENTICAL $R/check.txt; date; pack
wait $TP
for v in wgrad ileave; do
  (timeout 80 $(find .variants/$v/build-gpu -name test_megakernel_gpu -type f -executable | head -1) > $R/tests-$v.txt 2>&1)
  echo "$v: $(tail -1 $R/tests-$v.txt)"; grep -E "FAILED|Failure" $R/tests-$v.txt | head -4
done; pack
DS="--preset deepseek-v3-routed --tokens 8192 --dispatch push --dispatch-backward push --comm-sms 16 --comm-sms-backward 16 --weight-grads overwrite"
CYCLES_ARGS="$DS" ROUNDS=1 ITERS=8 bash scripts/variants.sh cycles $R/cycd > $R/cycles-d.txt 2>&1; tail -6 $R/cycles-d.txt; pack; date
if [ $(( $(date +%s) - T0 )) -lt 450 ]; then
  ROUNDS=2 ITERS=20 bash scripts/variants.sh cycles $R/cyc > $R/cycles.txt 2>&1; tail -10 $R/cycles.txt; pack; date
fi
for v in base bwd wgrad ileave; do
  [ $(( $(date +%s) - T0 )) -lt 520 ] || break
  .variants/$v/build-gpu/cli/calico bench $DS --iters 2 --timeline $R/tl-$v.json > $R/timeline-$v.txt 2>&1 || echo "$v: timeline run failed"
  python3 scripts/timeline_gaps.py $R/tl-$v.json --top 6 > $R/timeline-gaps-$v.txt 2>&1; rm -f $R/tl-$v.json
  echo "== $v"; grep -E "T=" $R/timeline-$v.txt; grep -E "^(forward|backward):|d_x_k |dw_" $R/timeline-gaps-$v.txt
done; pack; date
