#!/usr/bin/env bash
# device call 2 (eighteenth pass): scripts/racecheck_wide.sh on main (first run: default build vs the
# CALICO_MK_EMPTY_PER_THREAD build, tiny T=8192) beside the builds of two variants, base (main) and padsel (main
# with padding rows looking up 1.0's entry by a select), then padsel's digests and both variants' qwen3 cycles.
set -uo pipefail
source scripts/device_env.sh
R=$OUT/r; mkdir -p $R
pack() { tar czf $OUT/results.tgz -C $OUT r; }
(timeout 420 bash scripts/racecheck_wide.sh $R/race > $R/racecheck.txt 2>&1; echo "racecheck_wide exit $?" >> $R/racecheck.txt) & rc=$!
bash scripts/variants.sh build $R/v > $R/build.txt 2>&1; tail -2 $R/build.txt; date
digests() { grep -E '^(out|d_x|d_router_weights|d_w_gate|d_w_up|d_w_down|d_ws_gate|d_ws_up|d_ws_down) ' | awk '{print $1, $4}'; }
for spec in "qwen3-30b-a3b 2048 zipf:1.2 --clamp 1.0" "tiny 2048 adversarial"; do
  set -- $spec; args=(--preset $1 --tokens $2 --routing $3 --seed 5 "${@:4}")
  .variants/base/build-gpu/cli/calico run "${args[@]}" --threads 16 | digests > $R/ref.txt
  for cfg in "push 16 0" "pull 16 64"; do read -r d c m <<< "$cfg"
    .variants/padsel/build-gpu/cli/calico run "${args[@]}" --backend megakernel --dispatch $d --comm-sms $c --minibatch $m \
      --weight-grads overwrite 2>&1 | digests > $R/mk.txt
    if [ -s $R/ref.txt ] && cmp -s $R/ref.txt $R/mk.txt; then r=IDENTICAL; else r=DIFFERENT; fi
    echo "padsel ${args[*]} | $cfg: $r ($(wc -l < $R/mk.txt) tensors)" | tee -a $R/check.txt
  done
done
wait $rc; cat $R/racecheck.txt; date; pack
PUSH=(--dispatch push --dispatch-backward push --comm-sms 16 --comm-sms-backward 16)
Q=(--preset qwen3-30b-a3b --tokens 16384)
B() { local n=$1 tag=$2; shift 2
  .variants/$n/build-gpu/cli/calico bench "$@" --weight-grads overwrite --json $R/bench-$tag.json > $R/bench-$tag.txt 2>&1
  echo "== $tag $(grep -E 'T=|MHz' $R/bench-$tag.txt | tr -s ' ' | tr '\n' ' ')"; }
for i in 1 2 3; do for n in base padsel; do B $n q-$n-$i "${Q[@]}" "${PUSH[@]}" --iters 30; done; done
for n in base padsel; do
  .variants/$n/build-gpu/cli/calico bench "${Q[@]}" "${PUSH[@]}" --iters 3 --warmup 1 --weight-grads overwrite --profile > $R/profile-q-$n.txt 2>&1
done
grep -H -E "epilogues by GEMM|tasks " $R/profile-*.txt
python3 scripts/bench_cycles.py $R/bench-*.json 2>&1 | tail -8
pack; date
