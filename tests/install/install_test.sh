#!/usr/bin/env bash
# Packaging test (issue 9): `cmake --install` into a fresh prefix, then build the ten-line consumer with
# find_package(calico) against that prefix, run it from PREFIX/bin, and check that the installed calico
# binary finds its data under PREFIX/share/calico/data.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR WORK_DIR
set -euo pipefail
BUILD="$1"; SRC="$2"; W="$3"
rm -rf "$W"; mkdir -p "$W"
unset CALICO_DATA_DIR
cmake --install "$BUILD" --prefix "$W/prefix" >"$W/install.log"
for f in bin/calico include/calico/core.h include/calico/harness.h include/calico/reference.h \
         include/calico/simulator.h include/calico/megakernel.h lib/cmake/calico/calicoConfig.cmake \
         share/calico/data/presets/tiny.json share/calico/scripts/plot_report.py; do
  [ -e "$W/prefix/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
"$W/prefix/bin/calico" info | grep -qF "data: $W/prefix/share/calico/data" || {
  echo "FAIL: the installed calico does not use its installed data"; "$W/prefix/bin/calico" info; exit 1; }
cmake -S "$SRC/tests/install/consumer" -B "$W/consumer" -DCMAKE_PREFIX_PATH="$W/prefix" \
      -DCMAKE_BUILD_TYPE=Release >"$W/configure.log" || { cat "$W/configure.log"; exit 1; }
cmake --build "$W/consumer" -j 2 >"$W/build.log" || { cat "$W/build.log"; exit 1; }
# Run from PREFIX/bin, like an installed program, so that it too finds the installed data.
cp "$W/consumer/consumer" "$W/prefix/bin/consumer"
out=$("$W/prefix/bin/consumer")
echo "$out"
grep -qF "data $W/prefix/share/calico/data" <<<"$out" || { echo "FAIL: consumer did not find installed data"; exit 1; }
grep -q "out digest [0-9a-f]\{16\}" <<<"$out" || { echo "FAIL: no digest"; exit 1; }
rm -rf "$W"
echo "install + find_package(calico) consumer: ok"
