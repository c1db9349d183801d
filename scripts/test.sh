#!/usr/bin/env bash
# Command (2) of the README: install what is missing, build (host code + CUDA for sm_90a/100a/103a when nvcc
# is present) and run the whole test suite. GPU tests skip on a machine without a GPU. Then the sanitizer
# job: the cpu-labelled tests again under ASan + UBSan (preset asan; CALICO_SKIP_ASAN=1 skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
export PATH="/usr/local/cuda/bin:$PATH"
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
ctest --preset release -j "$(nproc)" "$@"
if [ "${CALICO_SKIP_ASAN:-0}" != 1 ]; then
  cmake --preset asan >/dev/null
  cmake --build --preset asan -j "$(nproc)"
  ctest --preset asan -j "$(nproc)" "$@"
fi
