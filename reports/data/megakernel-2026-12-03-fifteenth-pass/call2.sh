#!/usr/bin/env bash
# device call 2 (fifteenth pass): profiles of main and the skipping 192-row forward; main vs idle A/B
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/cutlass-site .whl/nvidia_cutlass-*.whl >/dev/null 2>&1
export CALICO_CUTLASS_INCLUDE=/tmp/cutlass-site/cutlass_library/source/include
R=$OUT/r; mkdir -p $R
pack() { tar czf $OUT/results.tgz -C $OUT r; }
date; bash scripts/variants.sh build $R/v > $R/build.txt 2>&1 || { cat $R/build.txt; pack; exit 1; }
date
COMMON=(--dispatch push --dispatch-backward push --comm-sms 16 --comm-sms-backward 16 --weight-grads overwrite)
Q=(--preset qwen3-30b-a3b --tokens 16384); D=(--preset deepseek-v3-routed --tokens 8192)
CALICO_MK_TILE192=0 .variants/base/build-gpu/cli/calico bench "${Q[@]}" --iters 3 --warmup 1 "${COMMON[@]}" --profile > $R/profile-base.txt 2>&1
CALICO_MK_TILE192=1 .variants/skip192/build-gpu/cli/calico bench "${Q[@]}" --iters 3 --warmup 1 "${COMMON[@]}" --profile > $R/profile-skip192.txt 2>&1
.variants/idle/build-gpu/cli/calico bench "${Q[@]}" --iters 3 --warmup 1 "${COMMON[@]}" --profile > $R/profile-idle.txt 2>&1
tail -3 $R/profile-base.txt; pack; date
B() { local n=$1 tag=$2; shift 2
  CALICO_MK_TILE192=0 .variants/$n/build-gpu/cli/calico bench "$@" "${COMMON[@]}" --json $R/bench-$tag.json > $R/bench-$tag.txt 2>&1
  echo "== $tag $(grep -E 'T=' $R/bench-$tag.txt)"; pack; }
for i in 1 2 3; do B base q-base-$i "${Q[@]}" --iters 20; B idle q-idle-$i "${Q[@]}" --iters 20; done
date
for i in 1 2; do B base d-base-$i "${D[@]}" --iters 10; B idle d-idle-$i "${D[@]}" --iters 10; done
date
