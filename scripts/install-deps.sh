#!/usr/bin/env bash
# Installs what Calico needs on a fresh Debian 12 machine (root or sudo). Safe to run again.
set -euo pipefail
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
pkgs=(build-essential cmake g++ libeigen3-dev libhdf5-dev hdf5-tools libgtest-dev libgmock-dev libbenchmark-dev
      libcli11-dev nlohmann-json3-dev libfmt-dev libopenmpi-dev openmpi-bin python3-matplotlib python3-h5py
      python3-numpy)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# CUTLASS/CuTe 4.2 C++ headers for the megakernel (header-only; the wheel carries them under
# cutlass_library/source/include; CMake finds them through python3). The GPU machine reaches no registry:
# scripts/gpu.sh installs the wheel from .whl/ there (put it there with `pip download nvidia-cutlass==4.2.0.0
# --no-deps -d .whl`).
if ! python3 -c "import cutlass_library" >/dev/null 2>&1; then
  echo "installing: nvidia-cutlass==4.2.0.0 (pip)"
  # (a Debian system python refuses plain pip installs: PEP 668)
  python3 -m pip install -q --no-deps nvidia-cutlass==4.2.0.0 ||
    python3 -m pip install -q --no-deps --break-system-packages nvidia-cutlass==4.2.0.0
fi
