#!/usr/bin/env bash
# A/B benchmarks of several commits in ONE device call (device time is the scarce resource).
#   Here (the developer machine):  bash scripts/variants.sh prepare NAME=REF [NAME=REF ...]
#     writes each commit's tree to .variants/NAME (ignored by git through .git/info/exclude); the device
#     call then carries ".variants" (and ".whl" for the CUTLASS headers).
#   On the GPU machine:            bash scripts/variants.sh [build|bench] [OUT]
#     (build: only the builds, e.g. in the background while scripts/gpu.sh runs; bench builds what is not built)
#     builds `calico` of every .variants/NAME (its own build-gpu), then runs scripts/bench_megakernel.sh of the
#     CURRENT tree with each variant's binary, one variant after the other in the same call, and writes
#     OUT/variants.jsonl (each row tagged with its variant) and a table on stdout. The bench settings
#     (MODES, ITERS, TORCH, BENCH_ARGS) are the bench script's environment; TORCH defaults to 0 here, and
#     BENCH_ARGS must be flags every variant's `calico bench` knows. Returned files: variants.jsonl plus
#     OUT/variant-logs.tgz (NAME/bench.jsonl and NAME/bench.txt of every variant: the device returns only a
#     few files, so any number of variants comes back as two).
# NOTE: the variants share one GPU and one call, so their rows are comparable; rows of different calls are
# not (the deepseek-v3 forward alone varied by 15% between calls on 2026-12-01).
set -uo pipefail
cd "$(dirname "$0")/.."
usage() { echo "usage: $0 prepare NAME=REF [NAME=REF ...] | build [OUT] | bench [OUT]" >&2; exit 2; }
[ $# -ge 1 ] || usage
case "$1" in
  prepare)
    shift
    [ $# -ge 1 ] || usage
    grep -qx '/.variants/' .git/info/exclude 2>/dev/null || echo '/.variants/' >> .git/info/exclude
    mkdir -p .variants
    for pair in "$@"; do
      name="${pair%%=*}"; ref="${pair#*=}"
      [[ "$name" =~ ^[A-Za-z0-9._-]+$ ]] || { echo "variant name '$name': letters, digits, . _ - only" >&2; exit 2; }
      [ "$name" != "$pair" ] || { echo "'$pair': expected NAME=REF" >&2; exit 2; }
      git rev-parse --verify --quiet "$ref^{commit}" > /dev/null || { echo "'$ref' is not a commit" >&2; exit 2; }
      rm -rf ".variants/$name"
      mkdir -p ".variants/$name"
      git archive "$ref" | tar -x -C ".variants/$name"
      echo "$name = $(git log -1 --format='%h %s' "$ref" | cut -c1-100)" | tee ".variants/$name/VARIANT"
    done
    echo "carry: [\".whl\", \".variants\"] ($(du -sh .variants | cut -f1))"
    ;;
  build|bench)
    OUT="$(mkdir -p "${2:-variants-out}" && realpath "${2:-variants-out}")"
    export PATH="/usr/local/cuda/bin:$PATH"
    if [ -z "${CALICO_CUTLASS_INCLUDE:-}" ] && ls .whl/nvidia_cutlass-*.whl > /dev/null 2>&1; then
      python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/cutlass-site .whl/nvidia_cutlass-*.whl \
        > /dev/null 2>&1 && export CALICO_CUTLASS_INCLUDE=/tmp/cutlass-site/cutlass_library/source/include
    fi
    ls -d .variants/*/ > /dev/null 2>&1 || { echo "no .variants/*: run '$0 prepare' here first and carry .variants" >&2; exit 2; }
    status=0
    : > "$OUT/variants.jsonl"
    # Build them all first, side by side (each build's wall time is its longest CUDA file, ~1.5 min; one
    # after the other, four variants took ~6 min of device time): the benchmarks then run back to back.
    pids=()
    for dir in .variants/*/; do
      name="$(basename "$dir")"
      [ -x "$dir/build-gpu/cli/calico" ] && [ -f "$dir/build-gpu/BUILT" ] && continue  # built by an earlier `build`
      echo "[$(date +%T)] build $name: $(cat "$dir/VARIANT" 2>/dev/null)"
      (cd "$dir" && cmake --preset gpu -DCALICO_BENCHMARKS=OFF -DCALICO_H5DUMP=/bin/false > "$OUT/build-$name.log" 2>&1 \
        && cmake --build build-gpu -j "$(nproc)" --target calico >> "$OUT/build-$name.log" 2>&1 && touch build-gpu/BUILT) &
      pids+=("$!")
    done
    for pid in "${pids[@]}"; do wait "$pid"; done
    for dir in .variants/*/; do
      name="$(basename "$dir")"
      [ -f "$dir/build-gpu/BUILT" ] && continue
      echo "build of $name failed:"; grep -E "error" "$OUT/build-$name.log" | head -10; status=1
    done
    echo "[$(date +%T)] builds done"
    [ "$1" = build ] && exit $status
    for dir in .variants/*/; do
      name="$(basename "$dir")"
      [ -x "$dir/build-gpu/cli/calico" ] || continue
      mkdir -p "$OUT/$name"
      TORCH="${TORCH:-0}" bash scripts/bench_megakernel.sh "$dir/build-gpu/cli/calico" "$OUT/$name" > "$OUT/$name/bench.txt" 2>&1 \
        || status=1
      python3 - "$name" "$OUT/$name/bench.jsonl" >> "$OUT/variants.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[2]):
    if line.strip():
        row = json.loads(line); row["variant"] = sys.argv[1]; print(json.dumps(row))
PY
      rm -rf "$OUT/$name"/bench-row.json
    done
    python3 - "$OUT/variants.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(f"{'variant':16} {'backend':28} {'preset':20} {'fwd ms':>8} {'fwd+bwd ms':>11}")
for r in rows:
    name = r['backend'] + (f" {r['dispatch']}" if 'dispatch' in r else "") + (f" {r['task_walk']}" if 'task_walk' in r else "")
    print(f"{r['variant']:16} {name:28} {r['preset']:20} {r['forward_ms']:8.3f} {r['forward_backward_ms']:11.3f}")
PY
    [ $status = 0 ] && rm -f "$OUT"/build-*.log  # kept when something failed
    names=(); for dir in .variants/*/; do [ -d "$OUT/$(basename "$dir")" ] && names+=("$(basename "$dir")"); done
    [ ${#names[@]} -gt 0 ] && tar czf "$OUT/variant-logs.tgz" -C "$OUT" "${names[@]}" && (cd "$OUT" && rm -rf "${names[@]}")
    exit $status
    ;;
  *) usage ;;
esac
