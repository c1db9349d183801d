#!/usr/bin/env bash
# device call 1 (sixteenth pass): build 4 variants; bit checks of the bulk combine; qwen3 A/B (same-binary
# bulk vs register combine, and base / idle / idle+bulk); a profile; per-iteration times with SM clocks sampled.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/cutlass-site .whl/nvidia_cutlass-*.whl >/dev/null 2>&1
export CALICO_CUTLASS_INCLUDE=/tmp/cutlass-site/cutlass_library/source/include
R=$OUT/r; mkdir -p $R
pack() { tar czf $OUT/results.tgz -C $OUT r; }
q='clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active'
nvidia-smi --query-gpu=timestamp,$q --format=csv > /dev/null 2>&1 || q='clocks.sm,clocks.mem,power.draw,temperature.gpu'
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $R/device.txt 2>&1
nvidia-smi --query-gpu=timestamp,$q --format=csv,noheader -lms 100 > $R/smi.csv 2>&1 &
SMI=$!
date; bash scripts/variants.sh build $R/v > $R/build.txt 2>&1 || { cat $R/build.txt; pack; kill $SMI; exit 1; }
date
digests() { grep -E '^(out|d_x|d_router_weights|d_w_gate|d_w_up|d_w_down|d_ws_gate|d_ws_up|d_ws_down) ' | awk '{print $1, $4}'; }
ref=.variants/base/build-gpu/cli/calico
for spec in "qwen3-30b-a3b 2048 zipf:1.2 1.0" "tiny 2048 adversarial 0" "qwen3-30b-a3b 3000 uniform 0"; do
  read -r preset tokens routing clamp <<< "$spec"
  args=(--preset $preset --tokens $tokens --routing $routing --seed 5); [ "$clamp" != 0 ] && args+=(--clamp $clamp)
  $ref run "${args[@]}" --threads 16 | digests > $R/ref.txt
  for n in bulk idlebulk; do
    for cfg in "push 16 0" "pull 16 64" "push 16 0 ow" "push 1 7"; do
      read -r dispatch comm mb wg <<< "$cfg"; w=(); [ "${wg:-}" = ow ] && w=(--weight-grads overwrite)
      .variants/$n/build-gpu/cli/calico run "${args[@]}" --backend megakernel --dispatch $dispatch --comm-sms $comm --minibatch $mb "${w[@]}" 2>&1 | digests > $R/mk.txt
      if [ -s $R/ref.txt ] && cmp -s $R/ref.txt $R/mk.txt; then r=IDENTICAL; else r=DIFFERENT; fi
      echo "$n $spec | $cfg: $r ($(wc -l < $R/mk.txt) tensors)" | tee -a $R/check.txt
    done
  done
done
pack; date
COMMON=(--dispatch push --dispatch-backward push --comm-sms 16 --comm-sms-backward 16 --weight-grads overwrite)
Q=(--preset qwen3-30b-a3b --tokens 16384)
B() { local n=$1 c=$2 tag=$3; shift 3
  echo "$(date +%T.%N) start $tag" >> $R/marks.txt
  CALICO_MK_COMBINE=$c .variants/$n/build-gpu/cli/calico bench "$@" "${COMMON[@]}" --json $R/bench-$tag.json > $R/bench-$tag.txt 2>&1
  echo "$(date +%T.%N) end $tag" >> $R/marks.txt
  echo "== $tag $(grep -E 'T=' $R/bench-$tag.txt)"; }
for i in 1 2; do
  B bulk bulk q-bulk-$i "${Q[@]}" --iters 20; B bulk registers q-bulkregs-$i "${Q[@]}" --iters 20
  B base bulk q-base-$i "${Q[@]}" --iters 20; B idle bulk q-idle-$i "${Q[@]}" --iters 20; B idlebulk bulk q-idlebulk-$i "${Q[@]}" --iters 20
done
pack; date
# the short-run question: iters 3 after warmup 1, then iters 50, same binary, clocks sampled throughout
B base bulk q-base-short "${Q[@]}" --iters 3 --warmup 1; B base bulk q-base-long "${Q[@]}" --iters 50
B bulk bulk q-bulk-short "${Q[@]}" --iters 3 --warmup 1
pack; date
.variants/bulk/build-gpu/cli/calico bench "${Q[@]}" --iters 3 --warmup 1 "${COMMON[@]}" --profile > $R/profile-bulk.txt 2>&1
CALICO_MK_COMBINE=registers .variants/bulk/build-gpu/cli/calico bench "${Q[@]}" --iters 3 --warmup 1 "${COMMON[@]}" --profile > $R/profile-bulkregs.txt 2>&1
grep -E "tail|T=" $R/profile-bulk*.txt
kill $SMI; pack; date
