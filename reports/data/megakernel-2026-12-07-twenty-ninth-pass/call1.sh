#!/usr/bin/env bash
# Device call 1 of the twenty-ninth pass: the L2 evict-first policy on the streaming TMA stores
# (CALICO_MK_L2_EVICT_FIRST, gemm/tma_store.cuh) against main. Variants: base (main), l2none (the branch's code,
# no hint: the cost of the runtime choice), l2w (the fp32 weight gradients evict-first), l2s (also the saved g/u,
# y, d_x_k). Digests (accumulate and overwrite), deepseek-v3-routed cycles (the target: its weight-gradient
# phases are write-bound), qwen3 cycles, then one deepseek-v3 timeline each of base and l2s.
# Prepare here:
#   rm -rf .variants; bash scripts/variants.sh prepare base=main l2none=try/l2-evict-first l2w=try/l2-wgrad \
#     l2s=try/l2-streams      (carry [".whl", ".variants"])
source scripts/device_call.sh  # T0, R, pack, build_variants
build_variants
for v in base l2none; do  # the TMA store instructions of each kernel (the hinted ones carry a cache policy)
  for f in forward backward; do
    o=$(find .variants/$v/build-gpu -name "$f.cu.o" | head -1)
    echo "== $v $f: $(cuobjdump -sass $o | grep -oE 'UTMASTG[.A-Z0-9_]*' | sort | uniq -c | tr -s ' ' | tr '\n' ' ')"
  done
done | tee $R/utmastg.txt
CHECK_SPECS="qwen3-30b-a3b 2048 zipf:1.2 1.0;tiny 2048 adversarial 0" \
CHECK_CONFIGS="push 16 0;push 16 0 ow" bash scripts/variants.sh check $R > $R/check.log 2>&1
grep -c IDENTICAL $R/check.txt; grep -v IDENTICAL $R/check.txt; date; pack
DS="--preset deepseek-v3-routed --tokens 8192 --dispatch push --dispatch-backward push --comm-sms 16 --comm-sms-backward 16 --weight-grads overwrite"
for round in 1 2; do
  [ $(( $(date +%s) - T0 )) -lt 300 ] || break
  CYCLES_ARGS="$DS" ROUNDS=1 ITERS=8 bash scripts/variants.sh cycles $R/cycd$round > $R/cycles-d$round.txt 2>&1
  tail -5 $R/cycles-d$round.txt; pack; date
done
[ $(( $(date +%s) - T0 )) -lt 330 ] && { ROUNDS=1 ITERS=20 bash scripts/variants.sh cycles $R/cyc > $R/cycles.txt 2>&1; tail -5 $R/cycles.txt; pack; date; }
for v in base l2s; do
  [ $(( $(date +%s) - T0 )) -lt 400 ] || break
  .variants/$v/build-gpu/cli/calico bench $DS --iters 2 --timeline $R/timeline-dsv3-$v.json > $R/bench-timeline-dsv3-$v.txt 2>&1 || echo "$v: timeline run failed"
  python3 scripts/timeline_gaps.py $R/timeline-dsv3-$v.json --top 2 > $R/gaps-dsv3-$v.txt 2>&1
  echo "== $v"; grep -E "span|dw_|d_x_k |d_h " $R/gaps-dsv3-$v.txt
  rm -f $R/timeline-dsv3-$v.json
done; date; pack
