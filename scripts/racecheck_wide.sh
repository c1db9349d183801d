#!/usr/bin/env bash
# compute-sanitizer racecheck of the megakernel on a shape wider than the tests' (tiny T=8192: every ring of
# stages and combine slots is reused many times), in the normal build and in the racecheck build
# (CALICO_MK_EMPTY_PER_THREAD=ON: every consumer thread releases the stages it read, an order the tool
# follows). On the GPU machine (carry .whl: scripts/device_env.sh). Writes OUT/racecheck-{default,per-thread}.txt
# and prints each run's count of reports; exits 1 if the racecheck build draws any.
# Usage: bash scripts/racecheck_wide.sh [OUT]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="$(mkdir -p "${1:-racecheck-out}" && realpath "${1:-racecheck-out}")"
source scripts/device_env.sh
build() {  # build dir, extra cmake arguments
  local dir=$1; shift
  cmake --preset gpu -B "$dir" -DCALICO_BENCHMARKS=OFF -DCALICO_H5DUMP=/bin/false "$@" > "$OUT/build-$(basename "$dir").log" 2>&1 \
    && cmake --build "$dir" -j "$(nproc)" --target calico >> "$OUT/build-$(basename "$dir").log" 2>&1
}
build build-gpu & b1=$!
build build-race -DCALICO_MK_EMPTY_PER_THREAD=ON & b2=$!
wait $b1 || { echo "build-gpu failed: $OUT/build-build-gpu.log"; exit 2; }
wait $b2 || { echo "build-race failed: $OUT/build-build-race.log"; exit 2; }
status=0
for cfg in "default build-gpu" "per-thread build-race"; do
  set -- $cfg
  compute-sanitizer --tool racecheck "$2/cli/calico" run --preset tiny --tokens 8192 --routing uniform --seed 5 \
    --backend megakernel > "$OUT/racecheck-$1.txt" 2>&1
  n=$(grep -c "Race reported" "$OUT/racecheck-$1.txt")
  echo "$1: $n reports ($(grep 'RACECHECK SUMMARY' "$OUT/racecheck-$1.txt" | sed 's/=* *//'))"
  [ "$1" = per-thread ] && [ "$n" != 0 ] && status=1
done
exit $status
