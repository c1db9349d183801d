# Sourced by the device-call scripts (reports/data/*/callN.sh, run on the GPU machine from the repository
# root): strict mode, the device environment, T0 (the call's start, for the scripts' time guards), the
# results folder R=$OUT/r, `pack` (R as $OUT/results.tgz: the device returns few files) and `build_variants`
# (scripts/variants.sh build of every .variants/NAME; build.txt, and the count of serialised-wgmma warnings
# per variant, which must be 0).
set -uo pipefail
T0=$(date +%s)
source scripts/device_env.sh
R=$OUT/r
mkdir -p "$R"
pack() { tar czf "$OUT/results.tgz" -C "$OUT" r; }
build_variants() {
  bash scripts/variants.sh build "$R/v" > "$R/build.txt" 2>&1
  tail -2 "$R/build.txt"
  grep -c "instructions are serialized" "$R"/v/build-*.log
  date
}
