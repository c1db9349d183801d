#!/usr/bin/env bash
# Issue 12 measurements of the CPU reference on a many-core host (the GPU machine's 16-core host), in one call:
#  1. deepseek-v3, 2048 tokens, R=1, forward + backward at THREADS (default nproc): stage times, the per-GEMM
#     breakdown (CALICO_REFERENCE_PROFILE=1, stderr), wall time and peak RSS. Needs ~70 GB of RAM.
#  2. qwen3-30b-a3b, 2048 tokens, forward + backward at THREADS (the same breakdown).
#  3. A thread-scaling table (1 2 4 8 16 threads, capped at nproc) on "dsv3-e64", a deepseek-v3 variant with
#     64 experts at 512 tokens: the production per-expert shape (T*K/E = 64 rows, H=7168, I=2048, I_s=2048)
#     small enough for one thread (~14 GB RSS). Digests must be identical at every thread count (checked).
#  4. bench_model_gemm (model GEMM vs Eigen float, side by side), when BENCH_BIN points at the binary.
# Everything goes to OUTDIR: one log per run and scaling.md (the table).
# Usage: scripts/reference_scaling.sh CALICO OUTDIR          e.g. build/cli/calico ./scaling-out
#   [THREADS=16] [SCALING_EXPERTS=64] [SCALING_TOKENS=512] [SKIP_FULL=1] [BENCH_BIN=build/bench/bench_model_gemm]
set -uo pipefail
calico="$(realpath "$1")"; out="$2"
mkdir -p "$out"
repo="$(cd "$(dirname "$0")/.." && pwd)"
threads="${THREADS:-$(nproc)}"
tokens="${SCALING_TOKENS:-512}"; experts="${SCALING_EXPERTS:-64}"
data="$(mktemp -d)"; trap 'rm -rf "$data"' EXIT
cp -r "$repo/data/." "$data/"
cat > "$data/presets/dsv3-e64.json" <<'EOF'
{
  "name": "dsv3-e64",
  "hidden": 7168,
  "intermediate": 2048,
  "experts": EXPERTS,
  "top_k": 8,
  "shared_intermediate": 2048,
  "source": "deepseek-v3 (H, I, K, I_s) with 64 experts: at 512 tokens the production 64 rows per expert"
}
EOF
sed -i "s/EXPERTS/$experts/" "$data/presets/dsv3-e64.json"
export CALICO_DATA_DIR="$data" CALICO_REFERENCE_PROFILE=1
{ lscpu | grep -E "Model name|^CPU\(s\)|Thread|Flags" | cut -c1-200; free -g; } > "$out/host.txt" 2>&1

# run NAME ARGS...: calico run ARGS with the profile and /usr/bin/time, log in OUTDIR/NAME.log
run() {
  local name="$1"; shift
  echo "[$(date +%T)] $name: calico run $*"
  if [ -x /usr/bin/time ]; then /usr/bin/time -v "$calico" run "$@" > "$out/$name.log" 2>&1
  else "$calico" run "$@" > "$out/$name.log" 2>&1; fi
  echo "  rc=$? $(grep -E '^total' "$out/$name.log") wall $(grep 'Elapsed (wall' "$out/$name.log" | awk '{print $NF}')" \
       "rss_kb $(grep 'Maximum resident' "$out/$name.log" | awk '{print $NF}')"
}
stage() { grep -E "^$2 " "$out/$1.log" | awk '{print $NF}'; }

bash "$repo/scripts/golden.sh" "$calico" > "$out/golden.log" 2>&1 && echo "golden: $(tail -1 "$out/golden.log")" \
  || echo "golden digests CHANGED: see $out/golden.log"

if [ "${SKIP_FULL:-0}" != 1 ]; then
  run deepseek-v3-2048 --preset deepseek-v3 --tokens 2048 --ranks 1 --threads "$threads"
  run qwen3-30b-a3b-2048 --preset qwen3-30b-a3b --tokens 2048 --ranks 1 --threads "$threads"
fi

{
  echo "# Reference thread scaling: dsv3-e64 (H=7168 I=2048 E=$experts K=8 I_s=2048), $tokens tokens, R=1, fwd+bwd"
  echo
  echo "| threads | total s | forward experts s | backward experts s | shared fwd+bwd s | speedup vs 1 |"
  echo "|---:|---:|---:|---:|---:|---:|"
} > "$out/scaling.md"
base=""
for t in 1 2 4 8 16; do
  [ "$t" -gt "$(nproc)" ] && break
  name="scaling-t$t"
  run "$name" --preset dsv3-e64 --tokens "$tokens" --ranks 1 --threads "$t"
  total="$(stage "$name" total)"; [ -z "$base" ] && base="$total"
  shared="$(awk '/^forward shared expert|^backward shared expert/ {s += $NF} END {print s}' "$out/$name.log")"
  speedup="$(awk -v a="$base" -v b="$total" 'BEGIN {if (b > 0) printf "%.2f", a / b}')"
  echo "| $t | $total | $(stage "$name" "forward experts") | $(stage "$name" "backward experts") | $shared | $speedup |" >> "$out/scaling.md"
  sed -n '/^output/,$p' "$out/$name.log" | grep -v -E '^(wall|\s)' | grep -E '^[a-z_]+ +(bf16|f32)' > "$out/$name.digests"
  if [ "$t" != 1 ] && ! diff -q "$out/scaling-t1.digests" "$out/$name.digests" > /dev/null; then
    echo "DIGESTS DIFFER between 1 and $t threads" | tee -a "$out/scaling.md"
  fi
done
echo >> "$out/scaling.md"
echo "Digests identical at every thread count unless a DIGESTS DIFFER line says otherwise." >> "$out/scaling.md"
cat "$out/scaling.md"

if [ -n "${BENCH_BIN:-}" ] && [ -x "$BENCH_BIN" ]; then
  echo "[$(date +%T)] bench_model_gemm"
  "$BENCH_BIN" --benchmark_counters_tabular=true > "$out/bench_model_gemm.txt" 2>&1
  tail -20 "$out/bench_model_gemm.txt"
fi
