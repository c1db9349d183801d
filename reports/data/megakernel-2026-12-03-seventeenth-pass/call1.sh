#!/usr/bin/env bash
# device call 1 (seventeenth pass): the router gradient and the backward's d_x combine by bulk copies.
# Variants: base (main a2f4e08), new (the branch). Bits: digests against the reference (qwen3 zipf + clamp,
# tiny adversarial with the shared expert; push, pull mb 64, push ow, push 1 CTA mb 7). Cycles: same-binary
# A/B of the backward combine (CALICO_MK_COMBINE=bulk | registers-backward) beside base; profiles.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R
pack() { tar czf $OUT/results.tgz -C $OUT r; }
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader -lms 200 > $R/smi.csv 2>&1 &
SMI=$!
date; bash scripts/variants.sh build $R/v > $R/build.txt 2>&1 || { cat $R/build.txt; pack; kill $SMI; exit 1; }
date
CHECK_SPECS="qwen3-30b-a3b 2048 zipf:1.2 1.0;tiny 2048 adversarial 0" \
CHECK_CONFIGS="push 16 0;pull 16 64;push 16 0 ow;push 1 7" bash scripts/variants.sh check $R/c > $R/check-log.txt 2>&1
cat $R/c/check.txt; date; pack
PUSH=(--dispatch push --dispatch-backward push --comm-sms 16 --comm-sms-backward 16)
Q=(--preset qwen3-30b-a3b --tokens 16384); D=(--preset deepseek-v3-routed --tokens 8192)
B() { local n=$1 c=$2 tag=$3; shift 3
  CALICO_MK_COMBINE=$c .variants/$n/build-gpu/cli/calico bench "$@" --weight-grads overwrite --json $R/bench-$tag.json > $R/bench-$tag.txt 2>&1
  echo "== $tag $(grep -E 'T=|MHz' $R/bench-$tag.txt | tr -s ' ' | tr '\n' ' ')"; }
for i in 1 2 3; do
  B base bulk q-base-$i "${Q[@]}" "${PUSH[@]}" --iters 30; B new bulk q-new-$i "${Q[@]}" "${PUSH[@]}" --iters 30
  B new registers-backward q-router-$i "${Q[@]}" "${PUSH[@]}" --iters 30
done
pack; date
for i in 1 2; do
  B base bulk d-base-$i "${D[@]}" "${PUSH[@]}" --iters 10; B new bulk d-new-$i "${D[@]}" "${PUSH[@]}" --iters 10
  B new registers-backward d-router-$i "${D[@]}" "${PUSH[@]}" --iters 10
done
pack; date
.variants/new/build-gpu/cli/calico bench "${Q[@]}" "${PUSH[@]}" --iters 3 --warmup 1 --weight-grads overwrite --profile > $R/profile-q-new.txt 2>&1
.variants/base/build-gpu/cli/calico bench "${Q[@]}" "${PUSH[@]}" --iters 3 --warmup 1 --weight-grads overwrite --profile > $R/profile-q-base.txt 2>&1
.variants/new/build-gpu/cli/calico bench "${D[@]}" "${PUSH[@]}" --iters 2 --warmup 1 --weight-grads overwrite --profile > $R/profile-d-new.txt 2>&1
grep -E "side tasks|T=" $R/profile-*.txt
python3 scripts/bench_cycles.py $R/bench-*.json 2>&1 | tail -30
kill $SMI; pack; date
