#!/usr/bin/env bash
# CLI checks of the harness: `calico run --out`, `calico diff` exit codes and messages (equal, different,
# within tolerance, truncated and corrupt files), and `calico gate` on the reference (passes) and with a
# seeded one-bit flip (fails, naming run, rank, tensor, token and column; plots and HTML written).
# Usage: cli_test.sh CALICO WORKDIR
set -uo pipefail
CALICO="$1"; W="$2"
rm -rf "$W"; mkdir -p "$W"
fails=0
check() {  # check WANT_EXIT NAME PATTERN -- command...
  local want="$1" name="$2" pattern="$3"; shift 4
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" -ne "$want" ]; then echo "FAIL $name: exit $rc, want $want"; echo "$out" | tail -20; fails=$((fails+1)); return; fi
  if [ -n "$pattern" ] && ! grep -q -- "$pattern" <<<"$out"; then
    echo "FAIL $name: output lacks '$pattern'"; echo "$out" | tail -20; fails=$((fails+1)); return
  fi
  echo "ok   $name"
}
# Same global batch of 16 tokens at R=1 and R=2.
check 0 run-r1 "trace:" -- "$CALICO" run --tokens 16 --ranks 1 --runs 2 --out "$W/r1.h5"
check 0 run-r2 "trace:" -- "$CALICO" run --tokens 8 --ranks 2 --runs 1 --out "$W/r2.h5"
check 0 diff-runs "EQUAL" -- "$CALICO" diff "$W/r1.h5"
check 0 diff-r1-r2 "EQUAL" -- "$CALICO" diff "$W/r1.h5" "$W/r2.h5"
# The Blackwell MXFP8 path: same global batch at R=1 and R=2, the trace records mma = blackwell-mxfp8.
check 0 run-bw-r1 "trace:" -- "$CALICO" run --tokens 16 --ranks 1 --dtype mxfp8 --mma blackwell-mxfp8 --out "$W/bw1.h5"
check 0 run-bw-r2 "trace:" -- "$CALICO" run --tokens 8 --ranks 2 --dtype mxfp8 --mma blackwell-mxfp8 --out "$W/bw2.h5"
check 0 diff-bw-r1-r2 "EQUAL" -- "$CALICO" diff "$W/bw1.h5" "$W/bw2.h5"
if command -v h5dump >/dev/null; then
  check 0 trace-mma-attr "blackwell-mxfp8" -- h5dump -a /spec/mma "$W/bw1.h5"
fi
check 2 run-bw-needs-mxfp8 "or blackwell-mxfp8 with --dtype mxfp8" -- "$CALICO" run --tokens 8 --mma blackwell-mxfp8
check 2 diff-bad-tolerance "calico: error: --tolerance" -- "$CALICO" diff "$W/r1.h5" --tolerance ulp:x
head -c 3000 "$W/r1.h5" > "$W/cut.h5"
check 2 diff-truncated "calico: error: trace" -- "$CALICO" diff "$W/cut.h5"
echo "not hdf5" > "$W/text.h5"
check 2 diff-not-hdf5 "not an HDF5 file" -- "$CALICO" diff "$W/text.h5"
# A trace whose run 1 has one flipped bit in out (global token 13 = rank 1, token 5 at R=2; column 3).
check 1 gate-bitflip "run 1, rank 1, token 5, column 3" -- "$CALICO" gate \
  --backend "faulty-bitflip:inner=reference:token=13:column=3" --preset tiny --tokens 16 --ranks 1,2 --dtype bf16 \
  --runs 2 --report-dir "$W/reports" --trace-dir "$W/traces" --name flip
for f in flip.json flip.md flip.html flip-summary.png flip-ulp-0.png flip-where-0.png; do
  [ -s "$W/reports/gate-$f" ] && echo "ok   report gate-$f" || { echo "FAIL report gate-$f missing"; fails=$((fails+1)); }
done
grep -q "data:image/png;base64" "$W/reports/gate-flip.html" && echo "ok   html has inline plots" || \
  { echo "FAIL html has no plots"; fails=$((fails+1)); }
t=$(ls "$W"/traces/faulty-bitflip*R_2*.h5 | head -1)
check 1 diff-flipped-runs "first mismatch: run 1, rank 1, token 5, column 3" -- "$CALICO" diff "$t"
check 0 diff-flipped-tolerance "WITHIN TOLERANCE" -- "$CALICO" diff "$t" --tolerance ulp:1
check 1 gate-order "d_w_down" -- "$CALICO" gate --backend faulty-order --baseline toy --preset tiny --tokens 16 \
  --ranks 1,2 --dtype bf16 --runs 1 --report-dir "$W/reports" --trace-dir "$W/traces-order" --name order --no-plots
check 0 gate-reference "gate PASSED" -- "$CALICO" gate --preset tiny --tokens 16 --ranks 1,2,4 --dtype bf16,mxfp8 \
  --runs 2 --report-dir "$W/reports" --name ref --no-plots
check 2 gate-bad-backend "calico: error: --backend" -- "$CALICO" gate --backend nope --report-dir "$W/reports"
echo "$fails failure(s)"
exit $(( fails > 0 ))
