#!/usr/bin/env bash
# Fuzzes the HDF5 trace reader with libFuzzer (+ ASan/UBSan): builds fuzz_trace_reader with clang in
# build-fuzz/, writes a seed corpus of small valid traces (a 'micro' preset in a temporary data folder) and
# runs RUNS executions (default 100000). Exit status is libFuzzer's: non-zero on any crash.
# Usage: bash scripts/fuzz_trace.sh [RUNS] [extra libFuzzer flags]
#   CALICO_FUZZ_RESEAL=1 bash scripts/fuzz_trace.sh ...  rewrites each input's checksummed header so the
#   mutations reach libhdf5's parsers: on Debian 12 (HDF5 1.10.8) this finds crashes inside libhdf5 within a
#   few thousand executions (see harness/TRACE_FORMAT.md); the default mode is what `calico diff` runs.
# Needs clang, libclang-rt and libomp (Debian: clang, libclang-rt-14-dev, libomp-14-dev); installs them when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-100000}"; shift || true
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
for p in clang libclang-rt-14-dev libomp-14-dev; do
  dpkg -s "$p" >/dev/null 2>&1 || { $SUDO apt-get update -qq; DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$p"; }
done
B=build-fuzz
# Libraries get coverage instrumentation (fuzzer-no-link); the fuzz target links libFuzzer's main.
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCALICO_CUDA=OFF -DCALICO_BENCHMARKS=OFF -DCALICO_NATIVE=OFF -DCALICO_FUZZ=ON \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer" >/dev/null
cmake --build "$B" -j "${JOBS:-2}" --target fuzz_trace_reader calico
work="$B/fuzz-work"; rm -rf "$work"; mkdir -p "$work/data/presets" "$work/corpus" "$work/artifacts"
cp data/presets/*.json "$work/data/presets/"
echo '{"name": "micro", "hidden": 8, "intermediate": 8, "experts": 4, "top_k": 2, "shared_intermediate": 8}' \
  > "$work/data/presets/micro.json"
export CALICO_DATA_DIR="$work/data" ASAN_OPTIONS=detect_leaks=0
# Seeds: toy traces at R = 1 and 2 (one and two runs), plus one reference trace.
"$B/cli/calico" gate --backend toy --baseline toy --preset micro --tokens 2 --ranks 1,2 --dtype bf16 --runs 2 \
  --trace-dir "$work/corpus" --keep-traces --no-plots --report-dir "$work" -q >/dev/null
"$B/cli/calico" gate --preset micro --tokens 2 --ranks 1 --dtype bf16 --runs 1 --trace-dir "$work/corpus" \
  --keep-traces --no-plots --report-dir "$work" --name ref -q >/dev/null
ls -la "$work/corpus"
max_len=$(stat -c %s "$work"/corpus/* | sort -n | tail -1)
"$B/fuzz/fuzz_trace_reader" -runs="$RUNS" -max_len="$max_len" -timeout=20 -rss_limit_mb=4096 \
  -artifact_prefix="$work/artifacts/" -print_final_stats=1 "$@" "$work/corpus" 2>&1 | tee "$work/fuzz.log" | \
  grep -v "^#[0-9]*.*\(NEW\|REDUCE\|pulse\)" || true
status=${PIPESTATUS[0]}
grep -E "^stat::number_of_executed_units|^Done|ERROR|crash-" "$work/fuzz.log" || true
exit "$status"
