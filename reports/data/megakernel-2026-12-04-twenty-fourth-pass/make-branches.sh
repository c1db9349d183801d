#!/usr/bin/env bash
# Recreates the twenty-fourth pass's candidate branches from patches/ (a checkout keeps main only): each
# try/NAME is its parent plus patches/NAME/*.patch (git am), the parents as below. BASE: the commit main's
# branches start from (default: the one the patches were made on, e8c6f1a; a later main works as long as the
# patched files did not change). Run from the repository root on a clean tree:
#   bash reports/data/megakernel-2026-12-04-twenty-fourth-pass/make-branches.sh [BASE]
set -euo pipefail
# (the patches are copied out first: checking out an older base removes them from the working tree)
here="$(mktemp -d)"
trap 'rm -rf "$here"' EXIT
cp -r "$(cd "$(dirname "$0")" && pwd)/patches" "$here/"
base="${1:-e8c6f1a}"
git rev-parse --verify --quiet "$base^{commit}" > /dev/null || { echo "'$base' is not a commit" >&2; exit 2; }
[ -z "$(git status --porcelain --untracked-files=no)" ] || { echo "the tree has uncommitted changes" >&2; exit 2; }
start="$(git rev-parse --abbrev-ref HEAD)"
make() {  # NAME PARENT
  git checkout -q -B "try/$1" "$2"
  git am -q "$here/patches/$1"/*.patch || { git am --abort; echo "patches/$1 do not apply on $2" >&2; exit 1; }
  echo "try/$1 = $(git log -1 --format='%h %s' | cut -c1-90)"
}
make warp-epilogue "$base"
make warp-epilogue-stsm try/warp-epilogue
make warp-epilogue-bwd try/warp-epilogue
make warp-epilogue-wgrad try/warp-epilogue-bwd
make fast-schedule "$base"
make interleave-dw-down "$base"
git checkout -q "$start"
