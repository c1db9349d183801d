#!/usr/bin/env bash
# device call 4 (nineteenth pass): the register split of the warp-specialised CTA (setmaxnreg: producer 56 /
# consumers 224 on main) as reg232 (40 / 232) and reg240 (24 / 240), a16 (main with the d_h lookups in one batch
# of 16 pairs per block, all issued a round early) and r232a16 (both). Digests, qwen3 cycles, profiles, deepseek-v3.
set -uo pipefail
T0=$(date +%s)
source scripts/device_env.sh
R=$OUT/r; mkdir -p $R
pack() { tar czf $OUT/results.tgz -C $OUT r; }
V="reg232 reg240 a16 r232a16"; VX="$V"
bash scripts/variants.sh build $R/v > $R/build.txt 2>&1; tail -3 $R/build.txt; grep -l C751 $R/v/build-*.log; date
digests() { grep -E '^(out|d_x|d_router_weights|d_w_gate|d_w_up|d_w_down|d_ws_gate|d_ws_up|d_ws_down) ' | awk '{print $1, $4}'; }
for spec in "qwen3-30b-a3b 2048 zipf:1.2 --clamp 1.0" "tiny 2048 adversarial"; do
  set -- $spec; args=(--preset $1 --tokens $2 --routing $3 --seed 5 "${@:4}")
  .variants/base/build-gpu/cli/calico run "${args[@]}" --threads 16 | digests > $R/ref.txt
  for n in $VX; do for cfg in "push 16 0" "pull 16 64"; do read -r d c m <<< "$cfg"
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
python3 scripts/bench_cycles.py $R/bench-*.json 2>&1 | tail -20
pack; date
for n in base $V; do
  if [ $(( $(date +%s) - T0 )) -lt 500 ]; then B $n d-$n-1 "${D[@]}" "${PUSH[@]}" --iters 10; fi
done
python3 scripts/bench_cycles.py $R/bench-*.json 2>&1 | tail -20
pack; date
