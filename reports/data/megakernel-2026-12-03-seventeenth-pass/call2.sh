#!/usr/bin/env bash
# device call 2 (seventeenth pass): the router gradient with two copy paths (CALICO_MK_ROUTER_BULK_ROWS of
# each task's pairs by bulk copies, the rest by cp.async) swept in one binary, the backward's bulk combine
# (CALICO_MK_COMBINE=registers-backward: off) and its task size (--combine-tokens), the strip ring on top.
# Variants: base (main a2f4e08), new (try/bulk-router), ring (new + the fourteenth pass's strip-ring patch).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R
pack() { tar czf $OUT/results.tgz -C $OUT r; }
date; bash scripts/variants.sh build $R/v > $R/build.txt 2>&1 || { cat $R/build.txt; pack; exit 1; }
date
digests() { grep -E '^(out|d_x|d_router_weights|d_w_gate|d_w_up|d_w_down|d_ws_gate|d_ws_up|d_ws_down) ' | awk '{print $1, $4}'; }
for spec in "qwen3-30b-a3b 2048 zipf:1.2 --clamp 1.0" "tiny 2048 adversarial"; do
  set -- $spec; args=(--preset $1 --tokens $2 --routing $3 --seed 5 "${@:4}")
  .variants/base/build-gpu/cli/calico run "${args[@]}" --threads 16 | digests > $R/ref.txt
  for v in "new 0" "new 224" "new 64" "ring 64"; do set -- $v
    for cfg in "push 16 0" "pull 16 64" "push 1 7"; do read -r d c m <<< "$cfg"
      CALICO_MK_ROUTER_BULK_ROWS=$2 .variants/$1/build-gpu/cli/calico run "${args[@]}" --backend megakernel --dispatch $d \
        --comm-sms $c --minibatch $m --weight-grads overwrite 2>&1 | digests > $R/mk.txt
      if [ -s $R/ref.txt ] && cmp -s $R/ref.txt $R/mk.txt; then r=IDENTICAL; else r=DIFFERENT; fi
      echo "$1 bulk_rows $2 ${args[*]} | $cfg ow: $r ($(wc -l < $R/mk.txt) tensors)" | tee -a $R/check.txt
    done
  done
done
date; pack
PUSH=(--dispatch push --dispatch-backward push --comm-sms 16 --comm-sms-backward 16)
Q=(--preset qwen3-30b-a3b --tokens 16384); D=(--preset deepseek-v3-routed --tokens 8192)
B() { local n=$1 rows=$2 c=$3 tag=$4; shift 4
  CALICO_MK_ROUTER_BULK_ROWS=$rows CALICO_MK_COMBINE=$c .variants/$n/build-gpu/cli/calico bench "$@" --weight-grads overwrite \
    --json $R/bench-$tag.json > $R/bench-$tag.txt 2>&1
  echo "== $tag $(grep -E 'T=|MHz' $R/bench-$tag.txt | tr -s ' ' | tr '\n' ' ')"; }
for i in 1 2 3; do
  B base 0 bulk q-base-$i "${Q[@]}" "${PUSH[@]}" --iters 30
  for rows in 0 32 64 96 224; do B new $rows bulk q-new$rows-$i "${Q[@]}" "${PUSH[@]}" --iters 30; done
  B new 64 registers-backward q-new64regs-$i "${Q[@]}" "${PUSH[@]}" --iters 30
  B new 64 bulk q-new64ct64-$i "${Q[@]}" "${PUSH[@]}" --iters 30 --combine-tokens 64
  B ring 64 bulk q-ring64-$i "${Q[@]}" "${PUSH[@]}" --iters 30
done
pack; date
for i in 1 2; do
  B base 0 bulk d-base-$i "${D[@]}" "${PUSH[@]}" --iters 10
  for rows in 0 64 96; do B new $rows bulk d-new$rows-$i "${D[@]}" "${PUSH[@]}" --iters 10; done
  B new 64 bulk d-new64ct64-$i "${D[@]}" "${PUSH[@]}" --iters 10 --combine-tokens 64
  B ring 64 bulk d-ring64-$i "${D[@]}" "${PUSH[@]}" --iters 10
done
pack; date
for rows in 0 64 96; do
  CALICO_MK_ROUTER_BULK_ROWS=$rows .variants/new/build-gpu/cli/calico bench "${Q[@]}" "${PUSH[@]}" --iters 3 --warmup 1 \
    --weight-grads overwrite --profile > $R/profile-q-new$rows.txt 2>&1
done
grep -E "side tasks|T=" $R/profile-*.txt
python3 scripts/bench_cycles.py $R/bench-*.json 2>&1 | tail -60
pack; date
