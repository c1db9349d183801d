#!/usr/bin/env bash
# device call 1 (eighteenth pass): where the d_h epilogue's cycles go. Variants (scripts/variants.sh):
# base (main), pad (no lookups for padding rows; producer L1 prefetch of out-of-window entries, A/B by
# CALICO_MK_SILU_PREFETCH), wide (the 64 KB window over the four stages), and two timing-only bounds with
# wrong bits: allwin (every lookup from the window), nolookup (no table loads). Digests of pad and wide
# against the reference, then qwen3 forward + backward cycles and profiles.
set -uo pipefail
T0=$(date +%s)
source scripts/device_env.sh
R=$OUT/r; mkdir -p $R
pack() { tar czf $OUT/results.tgz -C $OUT r; }
bash scripts/variants.sh build $R/v > $R/build.txt 2>&1; tail -3 $R/build.txt; grep -l C751 $R/v/build-*.log; date
digests() { grep -E '^(out|d_x|d_router_weights|d_w_gate|d_w_up|d_w_down|d_ws_gate|d_ws_up|d_ws_down) ' | awk '{print $1, $4}'; }
for spec in "qwen3-30b-a3b 2048 zipf:1.2 --clamp 1.0" "tiny 2048 adversarial"; do
  set -- $spec; args=(--preset $1 --tokens $2 --routing $3 --seed 5 "${@:4}")
  .variants/base/build-gpu/cli/calico run "${args[@]}" --threads 16 | digests > $R/ref.txt
  for n in pad wide; do for cfg in "push 16 0" "pull 16 64"; do read -r d c m <<< "$cfg"
    .variants/$n/build-gpu/cli/calico run "${args[@]}" --backend megakernel --dispatch $d --comm-sms $c --minibatch $m \
      --weight-grads overwrite 2>&1 | digests > $R/mk.txt
    if [ -s $R/ref.txt ] && cmp -s $R/ref.txt $R/mk.txt; then r=IDENTICAL; else r=DIFFERENT; fi
    echo "$n ${args[*]} | $cfg: $r ($(wc -l < $R/mk.txt) tensors)" | tee -a $R/check.txt
  done; done
done
date; pack
PUSH=(--dispatch push --dispatch-backward push --comm-sms 16 --comm-sms-backward 16)
Q=(--preset qwen3-30b-a3b --tokens 16384); D=(--preset deepseek-v3-routed --tokens 8192)
B() { local n=$1 pf=$2 tag=$3; shift 3
  CALICO_MK_SILU_PREFETCH=$pf .variants/$n/build-gpu/cli/calico bench "$@" --weight-grads overwrite --json $R/bench-$tag.json > $R/bench-$tag.txt 2>&1
  echo "== $tag $(grep -E 'T=|MHz' $R/bench-$tag.txt | tr -s ' ' | tr '\n' ' ')"; }
for i in 1 2; do
  B base 1 q-base-$i "${Q[@]}" "${PUSH[@]}" --iters 30; B pad 0 q-pad-$i "${Q[@]}" "${PUSH[@]}" --iters 30
  B pad 1 q-padpf-$i "${Q[@]}" "${PUSH[@]}" --iters 30; B wide 0 q-wide-$i "${Q[@]}" "${PUSH[@]}" --iters 30
  B allwin 0 q-allwin-$i "${Q[@]}" "${PUSH[@]}" --iters 30; B nolookup 0 q-nolookup-$i "${Q[@]}" "${PUSH[@]}" --iters 30
done
pack; date
for n in pad wide allwin nolookup; do
  CALICO_MK_SILU_PREFETCH=0 .variants/$n/build-gpu/cli/calico bench "${Q[@]}" "${PUSH[@]}" --iters 3 --warmup 1 --weight-grads overwrite --profile > $R/profile-q-$n.txt 2>&1
done
grep -H -E "epilogues by GEMM|tasks " $R/profile-*.txt
pack; date
if [ $(( $(date +%s) - T0 )) -lt 470 ]; then
  for n in base wide; do B $n 0 d-$n-1 "${D[@]}" "${PUSH[@]}" --iters 10; done
fi
python3 scripts/bench_cycles.py $R/bench-*.json 2>&1 | tail -20
pack; date
