# Sourced by the scripts that build on the GPU machine (gpu.sh, variants.sh, racecheck_wide.sh, device-call
# scripts): nvcc on PATH, NVLink multicast off, and the CUTLASS/CuTe headers from the nvidia-cutlass wheel
# carried in .whl/ (the GPU machine reaches no registry; scripts/install-deps.sh fetches the wheel here).
# Run from the repository root.
export PATH="/usr/local/cuda/bin:$PATH"
export NCCL_NVLS_ENABLE=0
if [ -z "${CALICO_CUTLASS_INCLUDE:-}" ] && ls .whl/nvidia_cutlass-*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/cutlass-site .whl/nvidia_cutlass-*.whl \
    > /dev/null 2>&1 && export CALICO_CUTLASS_INCLUDE=/tmp/cutlass-site/cutlass_library/source/include
fi
