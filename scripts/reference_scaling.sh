#!/usr/bin/env bash
# Issue 12 measurements of the CPU reference on a many-core host (the GPU machine's 16-core host), in one call:
#  1. deepseek-v3, 2048 tokens, R=1, forward + backward at THREADS (default nproc): stage times, the per-GEMM
#     breakdown (CALICO_REFERENCE_PROFILE=1, stderr), wall time and peak RSS. Needs ~70 GB of RAM.
#  2. qwen3-30b-a3b, 2048 tokens, forward + backward at THREADS (the same breakdown).
#  3. A thread-scaling table (1 2 4 8 16 threads, capped at nproc) on "dsv3-e32", a deepseek-v3 variant with
#     32 experts at 256 tokens: the production per-expert shape (T*K/E = 64 rows, H=7168, I=2048, I_s=2048)
#     small enough for one thread. Digests must be identical at every thread count (checked).
#     Time budget: on the 2-core development VM (Zen, AVX-512) one thread of dsv3-e16 at 128 tokens (the
#     same per-expert shape, half the work) takes ~10 s of stages and ~13 s of wall, so dsv3-e32 at 256
#     tokens is ~25-30 s at 1 thread there, well under the ~3 min allowed for the 1-thread run on the GPU
#     host; the whole table (1..16 threads) is ~1-1.5 min, ~9 GB RSS. (SCALING_EXPERTS=64
#     SCALING_TOKENS=512 doubles it.)
#  4. bench_model_gemm (model GEMM on the AVX-512 and AVX2 kernels vs Eigen float, AVX-512 and AVX2 builds,
#     side by side in one run), when BENCH_BIN points at the binary (~1 min).
# Everything goes to OUTDIR: one log per run, scaling.md (the table) and summary.txt (one line per part);
# the last line printed is a one-line summary.
# Device time: deepseek-v3 needs ~70 GB, its stages (goal) <= 60 s plus ~15-20 s of output digests; qwen3 is
# ~1/4 of it; everything together ~5-8 minutes on the 16-core host.
# Usage: scripts/reference_scaling.sh CALICO OUTDIR          e.g. build/cli/calico ./scaling-out
#   [THREADS=16] [SCALING_EXPERTS=32] [SCALING_TOKENS=256] [SKIP_FULL=1] [BENCH_BIN=build/bench/bench_model_gemm]
#   [BENCH_ARGS=--benchmark_filter=...] [CALICO_MODEL_GEMM_KERNEL=avx2]  (the reference on the AVX2 kernel)
#   [MEGAKERNEL=1]  (GPU machine: the megakernel on the full-size deepseek-v3 run, digests against the reference)
set -uo pipefail
calico="$(realpath "$1")"; out="$2"
mkdir -p "$out"
repo="$(cd "$(dirname "$0")/.." && pwd)"
threads="${THREADS:-$(nproc)}"
tokens="${SCALING_TOKENS:-256}"; experts="${SCALING_EXPERTS:-32}"
data="$(mktemp -d)"; trap 'rm -rf "$data"' EXIT
cp -r "$repo/data/." "$data/"
variant="dsv3-e$experts"
cat > "$data/presets/$variant.json" <<'EOF'
{
  "name": "VARIANT",
  "hidden": 7168,
  "intermediate": 2048,
  "experts": EXPERTS,
  "top_k": 8,
  "shared_intermediate": 2048,
  "source": "deepseek-v3 (H, I, K, I_s) with fewer experts: at 8 tokens per expert the production 64 rows per expert"
}
EOF
sed -i "s/EXPERTS/$experts/; s/VARIANT/$variant/" "$data/presets/$variant.json"
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

# MEGAKERNEL=1 (on the GPU machine): the megakernel on the same full-size deepseek-v3 run (shared expert,
# 2048 tokens, the same seed and routing), both dispatch directions, against the reference digests above.
digests() { grep -E '^(out|d_x|d_router_weights|d_w_gate|d_w_up|d_w_down|d_ws_gate|d_ws_up|d_ws_down) ' | awk '{print $1, $4}'; }
if [ "${MEGAKERNEL:-0}" = 1 ] && [ -f "$out/deepseek-v3-2048.log" ]; then
  digests < "$out/deepseek-v3-2048.log" > "$out/ref-deepseek-v3-2048.digests"
  mk_md="$out/megakernel-deepseek-v3-2048.md"
  echo "| dispatch | identical tensors of $(wc -l < "$out/ref-deepseek-v3-2048.digests") | result |" > "$mk_md"
  echo "|---|---|---|" >> "$mk_md"
  for dispatch in pull push; do
    echo "[$(date +%T)] megakernel deepseek-v3 2048, dispatch $dispatch"
    "$calico" run --backend megakernel --preset deepseek-v3 --tokens 2048 --ranks 1 --dispatch "$dispatch" \
      > "$out/megakernel-$dispatch.log" 2>&1
    digests < "$out/megakernel-$dispatch.log" > "$out/mk-$dispatch.digests"
    same="$(join <(sort "$out/ref-deepseek-v3-2048.digests") <(sort "$out/mk-$dispatch.digests") | awk '$2 == $3' | wc -l)"
    if cmp -s "$out/ref-deepseek-v3-2048.digests" "$out/mk-$dispatch.digests"; then r=PASSED; else r=FAILED; fi
    echo "| $dispatch | $same | $r |" >> "$mk_md"
  done
  cat "$mk_md"
fi

{
  echo "# Reference thread scaling: $variant (H=7168 I=2048 E=$experts K=8 I_s=2048), $tokens tokens, R=1, fwd+bwd"
  echo
  echo "| threads | total s | forward experts s | backward experts s | shared fwd+bwd s | speedup vs 1 |"
  echo "|---:|---:|---:|---:|---:|---:|"
} > "$out/scaling.md"
base=""
for t in 1 2 4 8 16; do
  [ "$t" -gt "$(nproc)" ] && break
  name="scaling-t$t"
  run "$name" --preset "$variant" --tokens "$tokens" --ranks 1 --threads "$t"
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
  echo "[$(date +%T)] bench_model_gemm (OMP_NUM_THREADS=$threads)"
  # shellcheck disable=SC2086
  OMP_NUM_THREADS="$threads" "$BENCH_BIN" --benchmark_counters_tabular=true ${BENCH_ARGS:-} \
    > "$out/bench_model_gemm.txt" 2>&1
  sed -n '/^summary/,$p' "$out/bench_model_gemm.txt"
fi

# summary.txt: one line per part; then the one-line summary, printed last.
field() { grep -E "^$2 " "$out/$1.log" 2>/dev/null | awk '{print $NF}'; }
wall() { grep 'Elapsed (wall' "$out/$1.log" 2>/dev/null | awk '{print $NF}'; }
rss_gb() { grep 'Maximum resident' "$out/$1.log" 2>/dev/null | awk '{printf "%.1f", $NF / 1048576}'; }
t1="$(field scaling-t1 total)"; tn=""; tmax=1
for t in 1 2 4 8 16; do [ -f "$out/scaling-t$t.log" ] && tn="$(field "scaling-t$t" total)" && tmax="$t"; done
speedup="$(awk -v a="$t1" -v b="$tn" 'BEGIN {if (b > 0) printf "%.2f", a / b}')"
same="$(grep -q '^DIGESTS DIFFER' "$out/scaling.md" && echo 'DIGESTS DIFFER' || echo 'digests identical')"
{
  echo "golden: $(tail -1 "$out/golden.log")"
  for r in deepseek-v3-2048 qwen3-30b-a3b-2048; do
    [ -f "$out/$r.log" ] && echo "$r: total $(field "$r" total) s, wall $(wall "$r"), RSS $(rss_gb "$r") GB, $threads threads"
  done
  [ -f "$out/megakernel-deepseek-v3-2048.md" ] && \
    echo "megakernel vs reference, deepseek-v3 2048: $(grep -cE 'PASSED' "$out/megakernel-deepseek-v3-2048.md") of 2 dispatch configs bitwise identical"
  echo "scaling $variant $tokens tokens: 1 thread $t1 s, $tmax threads $tn s, speedup ${speedup}x, $same"
  [ -f "$out/bench_model_gemm.txt" ] && sed -n '/^summary/,$p' "$out/bench_model_gemm.txt" | sed 's/^/bench: /'
} > "$out/summary.txt"
cat "$out/summary.txt"
full="$(grep '^deepseek-v3-2048' "$out/summary.txt" | sed 's/^deepseek-v3-2048: //')"
ratio="$(grep -E '^bench: +64/2048/7168' "$out/summary.txt" | grep -oE '[0-9.]+x eigen(-avx2)?' | tr '\n' ' ')"
echo "SUMMARY: deepseek-v3 2048 tok: ${full:-skipped} | scaling 1->$tmax threads: ${speedup}x ($same) |" \
     "model/Eigen 64x2048x7168 (avx512, avx2): ${ratio:-not run}| $(tail -1 "$out/golden.log")"
