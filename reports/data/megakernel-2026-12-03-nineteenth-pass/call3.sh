#!/usr/bin/env bash
# device call 3 (nineteenth pass): scripts/gpu.sh on main with the merged d_h epilogue (gpu tests,
# test_megakernel_gpu, compute-sanitizer) beside the builds of three forward variants: the gate/up epilogue's
# first kAhead pairs' SiLU lookups issued early, at the start of round 3b + kAheadRound: fa8r1 (8 pairs, the
# u round), fa8r0 (8, the g round), fa16r1 (16, the u round). Digests, then cycles.
set -uo pipefail
T0=$(date +%s)
source scripts/device_env.sh
R=$OUT/r; mkdir -p $R
pack() { tar czf $OUT/results.tgz -C $OUT r; }
V="fa8r1 fa8r0 fa16r1"
(bash scripts/variants.sh build $R/v > $R/build.txt 2>&1) & vb=$!
OUT=$R/gpu BENCH=0 GOLDEN=0 PROBES=0 SANITIZE_PROBES=0 bash scripts/gpu.sh > $R/gpu.txt 2>&1; echo "gpu.sh exit $?" >> $R/gpu.txt
tail -25 $R/gpu.txt; wait $vb; tail -2 $R/build.txt; grep -l C751 $R/v/build-*.log; date; pack
digests() { grep -E '^(out|d_x|d_router_weights|d_w_gate|d_w_up|d_w_down|d_ws_gate|d_ws_up|d_ws_down) ' | awk '{print $1, $4}'; }
for spec in "qwen3-30b-a3b 2048 zipf:1.2 --clamp 1.0" "tiny 2048 adversarial"; do
  set -- $spec; args=(--preset $1 --tokens $2 --routing $3 --seed 5 "${@:4}")
  .variants/base/build-gpu/cli/calico run "${args[@]}" --threads 16 | digests > $R/ref.txt
  for n in $V; do for cfg in "push 16 0" "pull 16 64"; do read -r d c m <<< "$cfg"
    .variants/$n/build-gpu/cli/calico run "${args[@]}" --backend megakernel --dispatch $d --comm-sms $c --minibatch $m \
      --weight-grads overwrite 2>&1 | digests > $R/mk.txt
    if [ -s $R/ref.txt ] && cmp -s $R/ref.txt $R/mk.txt; then r=IDENTICAL; else r=DIFFERENT; fi
    echo "$n ${args[*]} | $cfg: $r ($(wc -l < $R/mk.txt) tensors)" | tee -a $R/check.txt
  done; done
done
date; pack
PUSH=(--dispatch push --dispatch-backward push --comm-sms 16 --comm-sms-backward 16)
Q=(--preset qwen3-30b-a3b --tokens 16384); D=(--preset deepseek-v3-routed --tokens 8192)
B() { local n=$1 tag=$2; shift 2
  .variants/$n/build-gpu/cli/calico bench "$@" --weight-grads overwrite --json $R/bench-$tag.json > $R/bench-$tag.txt 2>&1
  echo "== $tag $(grep -E 'T=|MHz' $R/bench-$tag.txt | tr -s ' ' | tr '\n' ' ')"; }
for i in 1 2 3; do for n in base $V; do B $n q-$n-$i "${Q[@]}" "${PUSH[@]}" --iters 30; done; done
pack; date
for n in base $V; do
  .variants/$n/build-gpu/cli/calico bench "${Q[@]}" "${PUSH[@]}" --iters 3 --warmup 1 --weight-grads overwrite --profile > $R/profile-q-$n.txt 2>&1
done
grep -H -E "epilogues by GEMM|gate/up epilogues|tasks " $R/profile-*.txt
pack; date
for n in base $V; do
  if [ $(( $(date +%s) - T0 )) -lt 520 ]; then B $n d-$n-1 "${D[@]}" "${PUSH[@]}" --iters 10; fi
done
python3 scripts/bench_cycles.py $R/bench-*.json 2>&1 | tail -20
pack; date
