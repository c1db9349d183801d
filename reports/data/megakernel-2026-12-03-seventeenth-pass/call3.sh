#!/usr/bin/env bash
# device call 3 (seventeenth pass): scripts/gpu.sh on the branch's tree (b248937: bulk combine tasks, router with
# 96 bulk pairs and cached row indices; test_megakernel_gpu, sanitizers), the variants built in the background,
# then digests and cycles: base (main), new96 (7c29ebd with CALICO_MK_ROUTER_BULK_ROWS=96), cached (b248937).
set -uo pipefail
T0=$(date +%s)
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/cutlass-site .whl/nvidia_cutlass-*.whl >/dev/null 2>&1
export CALICO_CUTLASS_INCLUDE=/tmp/cutlass-site/cutlass_library/source/include
mkdir -p $OUT/g $OUT/r
(sleep 120; nice bash scripts/variants.sh build $OUT/r/v > $OUT/r/build.txt 2>&1) &
OUT=$OUT/g MK_TIMEOUT=300 BENCH=0 GOLDEN=0 SANITIZE_PROBES=0 PROBES=0 bash scripts/gpu.sh; echo "gpu.sh exit $?" | tee $OUT/g/exit.txt
tar czf $OUT/gpu.tgz -C $OUT g && cp $OUT/g/gpu.log $OUT/gpu.log; rm -rf $OUT/g
wait; date
R=$OUT/r
pack() { tar czf $OUT/results.tgz -C $OUT r; }
digests() { grep -E '^(out|d_x|d_router_weights|d_w_gate|d_w_up|d_w_down|d_ws_gate|d_ws_up|d_ws_down) ' | awk '{print $1, $4}'; }
for spec in "qwen3-30b-a3b 2048 zipf:1.2 --clamp 1.0" "tiny 2048 adversarial"; do
  set -- $spec; args=(--preset $1 --tokens $2 --routing $3 --seed 5 "${@:4}")
  .variants/base/build-gpu/cli/calico run "${args[@]}" --threads 16 | digests > $R/ref.txt
  for cfg in "push 16 0" "pull 16 64" "push 1 7"; do read -r d c m <<< "$cfg"
    for w in accumulate overwrite; do
      .variants/cached/build-gpu/cli/calico run "${args[@]}" --backend megakernel --dispatch $d --comm-sms $c --minibatch $m \
        --weight-grads $w 2>&1 | digests > $R/mk.txt
      if [ -s $R/ref.txt ] && cmp -s $R/ref.txt $R/mk.txt; then r=IDENTICAL; else r=DIFFERENT; fi
      echo "cached ${args[*]} | $cfg $w: $r ($(wc -l < $R/mk.txt) tensors)" | tee -a $R/check.txt
    done
  done
done
date; pack
PUSH=(--dispatch push --dispatch-backward push --comm-sms 16 --comm-sms-backward 16)
Q=(--preset qwen3-30b-a3b --tokens 16384); D=(--preset deepseek-v3-routed --tokens 8192)
B() { local n=$1 tag=$2; shift 2
  CALICO_MK_ROUTER_BULK_ROWS=96 .variants/$n/build-gpu/cli/calico bench "$@" --weight-grads overwrite --json $R/bench-$tag.json > $R/bench-$tag.txt 2>&1
  echo "== $tag $(grep -E 'T=|MHz' $R/bench-$tag.txt | tr -s ' ' | tr '\n' ' ')"; }
for i in 1 2 3; do for n in base new96 cached; do B $n q-$n-$i "${Q[@]}" "${PUSH[@]}" --iters 30; done; done
pack; date
if [ $(( $(date +%s) - T0 )) -lt 480 ]; then
  for i in 1 2; do for n in base new96 cached; do B $n d-$n-$i "${D[@]}" "${PUSH[@]}" --iters 10; done; done
  .variants/cached/build-gpu/cli/calico bench "${Q[@]}" "${PUSH[@]}" --iters 3 --warmup 1 --weight-grads overwrite --profile > $R/profile-q-cached.txt 2>&1
  grep -E "side tasks|T=" $R/profile-*.txt
fi
python3 scripts/bench_cycles.py $R/bench-*.json 2>&1 | tail -40
pack; date
