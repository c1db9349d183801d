#!/usr/bin/env bash
# device call 1 (fifteenth pass): build 3 variants, bit checks, benches side by side
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/cutlass-site .whl/nvidia_cutlass-*.whl >/dev/null 2>&1
export CALICO_CUTLASS_INCLUDE=/tmp/cutlass-site/cutlass_library/source/include
date; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv
bash scripts/variants.sh build $OUT/v || exit 1
date
CHECK_SPECS='qwen3-30b-a3b 2048 zipf:1.2 1.0;tiny 2048 adversarial 0' CHECK_CONFIGS='push 16 0;pull 16 64;push 16 0 ow' \
  bash scripts/variants.sh check $OUT/c128; cp $OUT/c128/check.txt $OUT/check128.txt
date
# the tile192 forward of `ahead` (env on); base/idle ignore the variable
CALICO_MK_TILE192=1 CHECK_SPECS='qwen3-30b-a3b 2048 zipf:1.2 1.0;qwen3-30b-a3b 3000 uniform 0;qwen3-30b-a3b 2048 adversarial 1.0' CHECK_CONFIGS='push 16 0;push 16 0 ow' \
  bash scripts/variants.sh check $OUT/c192; cp $OUT/c192/check.txt $OUT/check192.txt
date
B() { local n=$1 e=$2 tag=$3; shift 3
  CALICO_MK_TILE192=$e .variants/$n/build-gpu/cli/calico bench "$@" --iters 10 --dispatch push --dispatch-backward push \
    --comm-sms 16 --comm-sms-backward 16 --weight-grads overwrite --json $OUT/bench-$tag.json > $OUT/bench-$tag.txt 2>&1
  echo "== $tag"; grep -iE "forward|ms" $OUT/bench-$tag.txt | head -6; }
Q=(--preset qwen3-30b-a3b --tokens 16384); D=(--preset deepseek-v3-routed --tokens 8192)
B base 0 q-base-1 "${Q[@]}"; B idle 0 q-idle-1 "${Q[@]}"; B ahead 1 q-ahead-1 "${Q[@]}"; B skip192 1 q-skip192-1 "${Q[@]}"
B base 0 q-base-2 "${Q[@]}"; B idle 0 q-idle-2 "${Q[@]}"; B ahead 1 q-ahead-2 "${Q[@]}"; B skip192 1 q-skip192-2 "${Q[@]}"
date
date
CALICO_MK_TILE192=1 .variants/ahead/build-gpu/cli/calico bench "${Q[@]}" --iters 2 --warmup 1 --weight-grads overwrite --profile > $OUT/profile-ahead.txt 2>&1
CALICO_MK_TILE192=1 .variants/skip192/build-gpu/cli/calico bench "${Q[@]}" --iters 2 --warmup 1 --weight-grads overwrite --profile > $OUT/profile-skip192.txt 2>&1
.variants/idle/build-gpu/cli/calico bench "${Q[@]}" --iters 2 --warmup 1 --weight-grads overwrite --profile > $OUT/profile-idle.txt 2>&1
date
