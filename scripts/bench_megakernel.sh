#!/usr/bin/env bash
# The megakernel benchmark beside its baselines, in one script on one GPU: `calico bench` (forward, forward +
# backward; CUDA events, L2 flushed, medians after warm-up) and bench/torch_moe_baseline.py (PyTorch
# permute + torch._grouped_mm + SwiGLU + index_add, and a dense bf16 GEMM as the ceiling) on the same shapes:
# qwen3-30b-a3b T=16384 and deepseek-v3 routed experts T=8192 (ANCHORS.md). One JSON line per row in
# $OUT/bench.jsonl, a table on stdout (scripts/bench_table.py: ratios to the dense ceiling, PyTorch, anchors;
# scripts/floors.py: against the compute and HBM floors).
# WEIGHT_GRADS: the --weight-grads of each row (accumulate: the contract's d_W += ...; overwrite: d_W = ...,
# like-for-like with kernels that return fresh gradients).
# Usage: [MODES='push:push pull:pull'] [WEIGHT_GRADS='accumulate overwrite'] [TORCH=0] [ITERS=20]
#        [BENCH_ARGS='--task-walk static'] bash scripts/bench_megakernel.sh [CALICO] [OUT]
set -uo pipefail
cd "$(dirname "$0")/.."
CALICO="${1:-build-gpu/cli/calico}"
OUT="${2:-.}"
ITERS="${ITERS:-20}"
status=0
: > "$OUT/bench.jsonl"
for row in "qwen3-30b-a3b 16384" "deepseek-v3-routed 8192"; do
  set -- $row
  for mode in ${MODES:-push:push pull:pull}; do  # forward:backward dispatch
    for wgrad in ${WEIGHT_GRADS:-accumulate}; do
      fwd="${mode%:*}"; bwd="${mode#*:}"
      "$CALICO" bench --preset "$1" --tokens "$2" --iters "$ITERS" --dispatch "$fwd" --dispatch-backward "$bwd" \
        $([ "$fwd" = push ] && echo "--comm-sms ${COMM_FWD:-16}") $([ "$bwd" = push ] && echo "--comm-sms-backward ${COMM_BWD:-16}") \
        $([ "$wgrad" != accumulate ] && echo "--weight-grads $wgrad") ${BENCH_ARGS:-} --json "$OUT/bench-row.json" || status=1
      [ -f "$OUT/bench-row.json" ] && cat "$OUT/bench-row.json" >> "$OUT/bench.jsonl"
    done
  done
  if [ "${TORCH:-1}" = 1 ]; then
    python3 bench/torch_moe_baseline.py --preset "$1" --tokens "$2" --iters "$ITERS" --json "$OUT/bench-row.json" || status=1
    [ -f "$OUT/bench-row.json" ] && cat "$OUT/bench-row.json" >> "$OUT/bench.jsonl"
  fi
  rm -f "$OUT/bench-row.json"
done
python3 scripts/bench_table.py "$OUT/bench.jsonl" || status=1
python3 scripts/floors.py --bench "$OUT/bench.jsonl" || status=1  # measured against the compute and HBM floors
exit $status
