#!/usr/bin/env bash
# Golden digests of the CPU reference: a change detector for the numerical contract (DESIGN.md: "change it
# only on purpose, with the reference, the kernel and the golden files changed together").
# data/golden/reference-digests.txt holds, for each "## calico run ARGS" header, the digest table that
# `calico run ARGS` prints. scripts/gpu.sh checks the same file on the GPU machine's CPU (another vendor,
# compiler and thread count): reports/cross-machine-2026-11-30.md.
# Usage: scripts/golden.sh CALICO [--update]     (exit 1 and a diff when any digest changed)
set -euo pipefail
calico="$1"; mode="${2:-check}"
golden="$(dirname "$0")/../data/golden/reference-digests.txt"
actual="$(mktemp)"; trap 'rm -f "$actual"' EXIT
grep '^## calico run ' "$golden" | while read -r _ _ _ args; do
  echo "## calico run $args"
  # shellcheck disable=SC2086
  "$calico" run $args | sed -n '/^output/,$p'
done > "$actual"
if [ "$mode" = "--update" ]; then cp "$actual" "$golden"; echo "updated $golden"; exit 0; fi
if diff -u "$golden" "$actual"; then
  echo "golden digests: $(grep -c '^## ' "$golden") configs identical"
else
  echo "golden digests CHANGED: if the contract changed on purpose, run scripts/golden.sh CALICO --update" >&2
  exit 1
fi
