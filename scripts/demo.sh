#!/usr/bin/env bash
# Command (1) of the README: install what is missing, build `calico`, and run the main job on the embedded
# default: the bit-exact reference on the `tiny` preset with default (uniform) routing over emulated EP
# sizes R = 1, 2, 4, BF16 and MXFP8, two runs each, all demanded bitwise identical. Prints the gate's
# determinism summary and where the traces and the report went (out/demo/).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
export PATH="/usr/local/cuda/bin:$PATH"
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target calico
mkdir -p out/demo
status=0
./build/cli/calico gate --preset tiny --tokens 256 --ranks 1,2,4 --dtype bf16,mxfp8 --runs 2 \
  --report-dir out/demo --trace-dir out/demo/traces --keep-traces --name demo "$@" || status=$?
echo
sed -n '/^## Comparisons/,/^## Plots/p' out/demo/gate-demo.md | grep '^|'  # the determinism summary
echo
echo "traces: $PWD/out/demo/traces   report: $PWD/out/demo/gate-demo.{md,html,json}"
exit $status
