#!/usr/bin/env bash
# The megakernel against the reference on the GPU machine (issue 8's matrix, sized to the device time):
#  1. `calico gate` on tiny, T = 2048, 20 runs per config: reference R=1 vs the megakernel over SM splits
#     and minibatch (combine granularity), routing uniform / zipf:1.2 / adversarial, and with the clamp.
#  2. digest comparisons (no traces: full-size tensors are GBs) of the reference and the megakernel at several
#     SM splits: qwen3-30b-a3b T = 2048 (uniform, zipf:1.2, adversarial, clamp) and deepseek-v3's shape
#     (H, I, K, I_s) with 32 experts, T = 512 (the CPU reference runs ~20 GFLOP/s there: issue 12).
#     DIGEST_ONLY="PRESET T ROUTING CLAMP;..." replaces that list (e.g. "deepseek-v3 2048 uniform 0"), and
#     MK_CONFIGS="DISPATCH COMM_SMS MINIBATCH [ow];..." the megakernel configs compared (full size: fewer, for
#     time); a fourth word `ow` runs the megakernel with --weight-grads overwrite (same bits, the other path).
# Megakernel configs: pull dispatch (compute CTAs gather rows) and push (data-movement CTAs) at SM splits.
# Writes $OUT/gate/ (the gate reports) and $OUT/gate-megakernel.md; exit 1 on any difference.
# Usage: [GATE_TINY=0] bash scripts/gate_megakernel.sh [CALICO] [OUT]
set -uo pipefail
cd "$(dirname "$0")/.."
CALICO="$(realpath "${1:-build-gpu/cli/calico}")"
OUT="$(realpath "${2:-gate-out}")"
mkdir -p "$OUT/gate"
DATA="$(mktemp -d)"
trap 'rm -rf "$DATA"' EXIT
cp -r data/. "$DATA/"
python3 - "$DATA/presets" <<'PY'
import json, sys, os
d = sys.argv[1]
t = json.load(open(os.path.join(d, "tiny.json"))); t.update(name="tiny-clamp", swiglu_limit=0.5)
json.dump(t, open(os.path.join(d, "tiny-clamp.json"), "w"))
s = json.load(open(os.path.join(d, "deepseek-v3.json"))); s.update(name="deepseek-v3-32e", experts=32)
json.dump(s, open(os.path.join(d, "deepseek-v3-32e.json"), "w"))
PY
export CALICO_DATA_DIR="$DATA"
status=0
md="$OUT/gate-megakernel.md"
{
  echo "# Megakernel vs reference on $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1), $(date -u +%F)"
  echo
  echo "## 1. calico gate: tiny, 2048 tokens, 20 runs per config"
  echo
  echo "| preset | routing | result |"
  echo "|---|---|---|"
} > "$md"
TINY_SPECS=("tiny uniform" "tiny zipf:1.2" "tiny adversarial" "tiny-clamp zipf:1.2")
[ "${GATE_TINY:-1}" = 1 ] || TINY_SPECS=()
for spec in "${TINY_SPECS[@]}"; do
  set -- $spec
  name="megakernel-$1-${2/:/}"
  cat > "$DATA/matrix.json" <<JSON
{"preset": "$1", "tokens": 2048, "runs": 20, "routing": "$2", "seed": 3, "baseline": "reference",
 "configs": [{"backend": "reference", "ranks": 1, "dtype": "bf16"},
             {"backend": "megakernel", "ranks": 1, "dtype": "bf16", "dispatch": "pull", "minibatch": 0},
             {"backend": "megakernel", "ranks": 1, "dtype": "bf16", "dispatch": "pull", "minibatch": 7},
             {"backend": "megakernel", "ranks": 1, "dtype": "bf16", "comm_sms": 16, "minibatch": 0},
             {"backend": "megakernel", "ranks": 1, "dtype": "bf16", "comm_sms": 1, "minibatch": 7},
             {"backend": "megakernel", "ranks": 1, "dtype": "bf16", "comm_sms": 40, "minibatch": 512}]}
JSON
  if "$CALICO" gate --matrix "$DATA/matrix.json" --report-dir "$OUT/gate" --name "$name" -q > "$OUT/gate/$name.log" 2>&1; then
    r="PASSED"
  else
    r="FAILED"; status=1
  fi
  echo "gate $1 $2: $r ($(tail -2 "$OUT/gate/$name.log" | head -1))"
  echo "| $1 | $2 | $r: $(grep -E '^gate ' "$OUT/gate/$name.log" | head -1) |" >> "$md"
done

digests() {  # calico run output -> "name digest" lines
  grep -E '^(out|d_x|d_router_weights|d_w_gate|d_w_up|d_w_down|d_ws_gate|d_ws_up|d_ws_down) ' | awk '{print $1, $4}'
}
{
  echo
  echo "## 2. Digests (FNV-1a of every output tensor): reference vs megakernel"
  echo
  echo "| preset | T | routing | clamp | megakernel configs | identical tensors | result |"
  echo "|---|---|---|---|---|---|---|"
} >> "$md"
DIGEST_SPECS=("qwen3-30b-a3b 2048 uniform 0" "qwen3-30b-a3b 2048 zipf:1.2 0" "qwen3-30b-a3b 2048 adversarial 0"
              "qwen3-30b-a3b 2048 uniform 1.0" "deepseek-v3-32e 512 zipf:1.2 1.0")
[ -n "${DIGEST_ONLY:-}" ] && IFS=';' read -r -a DIGEST_SPECS <<< "$DIGEST_ONLY"  # e.g. "deepseek-v3 2048 uniform 0"
for spec in "${DIGEST_SPECS[@]}"; do
  set -- $spec
  clamp="$4"
  args=(--preset "$1" --tokens "$2" --routing "$3" --seed 5)
  [ "$clamp" != 0 ] && args+=(--clamp "$clamp")
  t0=$(date +%s)
  "$CALICO" run "${args[@]}" --threads "$(nproc)" | digests > "$DATA/ref.txt"
  t1=$(date +%s)
  ok=1; configs=""; n=$(wc -l < "$DATA/ref.txt"); same=$n; failed_runs=""
  IFS=';' read -r -a mk_configs <<< "${MK_CONFIGS:-pull 16 0;pull 16 64;push 16 0;push 4 2048;pull 16 0}"
  for cfg in "${mk_configs[@]}"; do  # dispatch, comm SMs, minibatch[, ow]; the default list's last repeats its first
    set -- $cfg
    wg=accumulate; [ "${4:-}" = ow ] && wg=overwrite  # ow: the megakernel's overwrite-mode weight gradients
    name="$1$([ "$1" = push ] && echo "/comm$2")/mb$3$([ $wg = overwrite ] && echo /ow)"
    configs="$configs $name"
    "$CALICO" run "${args[@]}" --backend megakernel --dispatch "$1" --comm-sms "$2" --minibatch "$3" \
      --weight-grads "$wg" | digests > "$DATA/mk.txt"
    [ "${PIPESTATUS[0]}" = 0 ] || { ok=0; failed_runs="$failed_runs $name"; }  # an error, not a difference
    if ! cmp -s "$DATA/ref.txt" "$DATA/mk.txt"; then ok=0; diff "$DATA/ref.txt" "$DATA/mk.txt" | head -20; fi
    k=$(comm -12 <(sort "$DATA/ref.txt") <(sort "$DATA/mk.txt") | wc -l); [ "$k" -lt "$same" ] && same=$k
  done
  r=$([ $ok = 1 ] && echo PASSED || echo FAILED); [ $ok = 1 ] || status=1
  [ -n "$failed_runs" ] && r="$r (megakernel run failed:$failed_runs)"
  echo "digests ${args[*]}: $r ($n tensors; reference $((t1 - t0)) s)"
  echo "| ${args[1]} | ${args[3]} | ${args[5]} | $clamp |$configs | $same of $n (fewest of any config) | $r |" >> "$md"
done
echo >> "$md"
echo "Overall: $([ $status = 0 ] && echo PASSED || echo FAILED)" >> "$md"
cat "$md"
exit $status
