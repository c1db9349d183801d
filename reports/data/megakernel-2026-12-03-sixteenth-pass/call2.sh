#!/usr/bin/env bash
# device call 2 (sixteenth pass): the SM clock of every iteration beside its time. Same-binary A/B of the
# combine (CALICO_MK_COMBINE=bulk|registers; registers = main's tail) on the bulk and idle+bulk builds,
# qwen3 and deepseek-v3-routed, push and (qwen3) pull; smi sampled.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/cutlass-site .whl/nvidia_cutlass-*.whl >/dev/null 2>&1
export CALICO_CUTLASS_INCLUDE=/tmp/cutlass-site/cutlass_library/source/include
R=$OUT/r; mkdir -p $R
pack() { tar czf $OUT/results.tgz -C $OUT r; }
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader -lms 100 > $R/smi.csv 2>&1 &
SMI=$!
date; bash scripts/variants.sh build $R/v > $R/build.txt 2>&1 || { cat $R/build.txt; pack; kill $SMI; exit 1; }
date
digests() { grep -E '^(out|d_x|d_router_weights|d_w_gate|d_w_up|d_w_down|d_ws_gate|d_ws_up|d_ws_down) ' | awk '{print $1, $4}'; }
args=(--preset qwen3-30b-a3b --tokens 2048 --routing zipf:1.2 --seed 5 --clamp 1.0)
.variants/bulk/build-gpu/cli/calico run "${args[@]}" --threads 16 | digests > $R/ref.txt
for n in bulk idlebulk; do for w in accumulate overwrite; do
  .variants/$n/build-gpu/cli/calico run "${args[@]}" --backend megakernel --weight-grads $w 2>&1 | digests > $R/mk.txt
  if [ -s $R/ref.txt ] && cmp -s $R/ref.txt $R/mk.txt; then r=IDENTICAL; else r=DIFFERENT; fi
  echo "$n qwen3 2048 zipf:1.2 clamp 1.0 push $w: $r ($(wc -l < $R/mk.txt) tensors)" | tee -a $R/check.txt
done; done
date
PUSH=(--dispatch push --dispatch-backward push --comm-sms 16 --comm-sms-backward 16)
PULL=(--dispatch pull --dispatch-backward pull)
Q=(--preset qwen3-30b-a3b --tokens 16384); D=(--preset deepseek-v3-routed --tokens 8192)
B() { local n=$1 c=$2 tag=$3; shift 3
  echo "$(date +%T.%N) start $tag" >> $R/marks.txt
  CALICO_MK_COMBINE=$c .variants/$n/build-gpu/cli/calico bench "$@" --weight-grads overwrite --json $R/bench-$tag.json > $R/bench-$tag.txt 2>&1
  echo "$(date +%T.%N) end $tag" >> $R/marks.txt
  echo "== $tag $(grep -E 'T=|MHz' $R/bench-$tag.txt | tr -s ' ' | tr '\n' ' ')"; }
for i in 1 2 3; do
  B bulk bulk q-bulk-$i "${Q[@]}" "${PUSH[@]}" --iters 30; B bulk registers q-regs-$i "${Q[@]}" "${PUSH[@]}" --iters 30
  B idlebulk bulk q-idlebulk-$i "${Q[@]}" "${PUSH[@]}" --iters 30; B idlebulk registers q-idleregs-$i "${Q[@]}" "${PUSH[@]}" --iters 30
done
pack; date
for i in 1 2; do B bulk bulk q-pull-bulk-$i "${Q[@]}" "${PULL[@]}" --iters 30; B bulk registers q-pull-regs-$i "${Q[@]}" "${PULL[@]}" --iters 30; done
pack; date
for i in 1 2; do
  B bulk bulk d-bulk-$i "${D[@]}" "${PUSH[@]}" --iters 10; B bulk registers d-regs-$i "${D[@]}" "${PUSH[@]}" --iters 10
  B idlebulk bulk d-idlebulk-$i "${D[@]}" "${PUSH[@]}" --iters 10
done
pack; date
.variants/idlebulk/build-gpu/cli/calico bench "${Q[@]}" "${PUSH[@]}" --iters 3 --warmup 1 --weight-grads overwrite --profile > $R/profile-q-idlebulk.txt 2>&1
.variants/bulk/build-gpu/cli/calico bench "${D[@]}" "${PUSH[@]}" --iters 2 --warmup 1 --weight-grads overwrite --profile > $R/profile-d-bulk.txt 2>&1
CALICO_MK_COMBINE=registers .variants/bulk/build-gpu/cli/calico bench "${D[@]}" "${PUSH[@]}" --iters 2 --warmup 1 --weight-grads overwrite --profile > $R/profile-d-regs.txt 2>&1
grep -E "tail|T=" $R/profile-*.txt
kill $SMI; pack; date
