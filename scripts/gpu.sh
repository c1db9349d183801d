#!/usr/bin/env bash
# On the GPU machine (H200), in one call: configure + build for sm_90a (only `calico` and the GPU test
# binaries), the gpu-labelled tests, the megakernel against the reference bit for bit (test_megakernel_gpu,
# 16 threads for the reference), compute-sanitizer over the megakernel and probe tests, the megakernel
# benchmark beside the PyTorch baseline and the dense ceiling (scripts/bench_megakernel.sh), the golden digests
# and the tensor-core probe for every Hopper instruction. Logs and JSON go to $OUT (default ./gpu-out).
# CUTLASS/CuTe headers: the device reaches no registry, so the nvidia-cutlass wheel travels in .whl/ (see
# scripts/install-deps.sh) and is unpacked here.
# Usage: [MK_TESTS=0] [MK_TIMEOUT=400] [L2PROBE=1] [CONTENTION=1] [BENCH=0] [PROFILE=1] [PROBES=0] [SANITIZE=0] [GOLDEN=0] [GATE=0] [REF_SCALING=1]
#        bash scripts/gpu.sh [CASES]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu-out}"
CASES="${1:-1048576}"
mkdir -p "$OUT"
source scripts/device_env.sh
JOBS="$(nproc)"
log() { echo "[$(date +%T)] $*" | tee -a "$OUT/gpu.log"; }
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  nvcc --version | tail -1
  lscpu | grep -E "Model name|^CPU\(s\)|Flags" | cut -c1-200
} > "$OUT/device.txt" 2>&1
log "configure"
# CALICO_H5DUMP: the harness tests want h5dump, absent on the device image; nothing built here uses it.
cmake --preset gpu -DCALICO_BENCHMARKS=$([ "${REF_SCALING:-0}" = 1 ] && echo ON || echo OFF) -DCALICO_H5DUMP="$(command -v h5dump || echo /bin/false)" > "$OUT/build.log" 2>&1 || { log "configure failed"; tail -30 "$OUT/build.log"; exit 1; }
log "build"
cmake --build build-gpu -j "$JOBS" --target calico test_numerics_gpu test_probe_model test_probe_tcgen05 test_megakernel_gpu \
  $([ "${REF_SCALING:-0}" = 1 ] && echo bench_model_gemm) >> "$OUT/build.log" 2>&1 \
  || { log "build failed"; grep -E "error" "$OUT/build.log" | head -30; exit 1; }
if command -v cuobjdump >/dev/null; then  # which tensor-core SASS the probe kernels really use
  cuobjdump --dump-sass build-gpu/megakernel/libcalico_megakernel.a 2>/dev/null | grep -oE "(HGMMA|QGMMA|HMMA)\.[A-Za-z0-9.]*" | sort | uniq -c >> "$OUT/device.txt"
  # The megakernel's SASS: HGMMA present, and no FFMA (contraction guard: --fmad=false) in its kernels.
  for k in forward backward; do
    cuobjdump --dump-sass build-gpu/megakernel/CMakeFiles/calico_megakernel.dir/src/moe/$k.cu.o 2>/dev/null \
      | grep -oE "\b(HGMMA|FFMA|FMUL|FADD|UTMALDG)\b" | sort | uniq -c | sed "s/^/$k kernel SASS: /" >> "$OUT/device.txt"
  done
fi
status=0
log "gpu tests"
(cd build-gpu && ctest -L gpu -E Megakernel --output-on-failure) > "$OUT/tests.log" 2>&1 || status=1
tail -5 "$OUT/tests.log" | tee -a "$OUT/gpu.log"
./build-gpu/tests/megakernel/test_probe_model >> "$OUT/tests.log" 2>&1 || status=1
./build-gpu/tests/megakernel/test_probe_tcgen05 >> "$OUT/tests.log" 2>&1 || status=1  # on Hopper: clear refusal
if [ "${MK_TESTS:-1}" = 1 ]; then  # the reference on 16 threads: the full-size comparisons take seconds, not minutes
  log "megakernel vs reference"
  OMP_NUM_THREADS="$JOBS" timeout "${MK_TIMEOUT:-400}" ./build-gpu/tests/megakernel/test_megakernel_gpu ${MK_FILTER:+--gtest_filter=$MK_FILTER} \
    >> "$OUT/tests.log" 2>&1 || status=1
  grep -E "^\[  (PASSED|FAILED) |OK \]|FAILED \]" "$OUT/tests.log" | tail -12 | tee -a "$OUT/gpu.log"
fi
if [ "${BENCH:-1}" = 1 ]; then
  log "benchmark"
  bash scripts/bench_megakernel.sh ./build-gpu/cli/calico "$OUT" 2>&1 | tee -a "$OUT/gpu.log" || status=1
fi
if [ "${PROFILE:-0}" = 1 ]; then  # where the SM cycles go (calico bench --profile), both dispatch paths
  log "profile"
  for row in "qwen3-30b-a3b 16384" "deepseek-v3-routed 8192"; do
    set -- $row
    IFS=';' read -r -a profile_modes <<< "${PROFILE_MODES:-push push;pull pull}"
    for modes in "${profile_modes[@]}"; do  # forward / backward dispatch
      set -- $row $modes
      ./build-gpu/cli/calico bench --preset "$1" --tokens "$2" --iters 3 --warmup 1 --dispatch "$3" --dispatch-backward "$4" \
        $([ "$3" = push ] && echo "--comm-sms 16") $([ "$4" = push ] && echo "--comm-sms-backward 16") --profile \
        >> "$OUT/profile.txt" 2>&1 || status=1
    done
  done
  grep -E "forward  |TFLOP" "$OUT/profile.txt" | tee -a "$OUT/gpu.log"
fi
if [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then  # fixed seeds, small cases
  log "compute-sanitizer"
  for tool in $([ "${SANITIZE_PROBES:-1}" = 1 ] && echo memcheck racecheck synccheck); do  # the probe kernels
    timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 ./build-gpu/cli/calico probe-mma \
      --instr wgmma.bf16 --cases 256 --no-targeted --chain-tiles 1 --chain-k 256 > "$OUT/sanitizer-$tool.txt" 2>&1
    rc=$?; [ $rc -eq 0 ] || status=1
    log "sanitizer $tool (wgmma.bf16 probe): exit $rc, $(grep -cE '^========= (Invalid|Race|Barrier)' "$OUT/sanitizer-$tool.txt") reports"
  done
  if [ "${SANITIZE_PROBES:-1}" = 1 ]; then
    timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 ./build-gpu/tests/megakernel/test_numerics_gpu \
      --gtest_filter='*Mma*' > "$OUT/sanitizer-numerics.txt" 2>&1 || status=1
    log "sanitizer memcheck (numerics gpu test, MMA steps): $(tail -1 "$OUT/sanitizer-numerics.txt")"
  fi
  for tool in memcheck racecheck synccheck; do  # the megakernel on the small shapes
    timeout 300 compute-sanitizer --tool $tool --error-exitcode 9 ./build-gpu/tests/megakernel/test_megakernel_gpu \
      --gtest_filter='*Tiny*:*Ragged*' > "$OUT/sanitizer-mk-$tool.txt" 2>&1
    rc=$?; [ $rc -eq 0 ] || status=1
    log "sanitizer $tool (megakernel tiny + ragged): exit $rc, $(grep -cE '^========= (Invalid|Race|Barrier|Error)' "$OUT/sanitizer-mk-$tool.txt") reports"
  done
  cat "$OUT"/sanitizer-*.txt > "$OUT/sanitizer.txt"; rm -f "$OUT"/sanitizer-*.txt
fi
# Cross-machine determinism: the CPU reference on this machine's CPU (another vendor, 16 threads) must print
# the golden digests that developer machines and CI print (data/golden/reference-digests.txt).
if [ "${GOLDEN:-1}" = 1 ]; then
  log "golden reference digests"
  OMP_NUM_THREADS="$JOBS" bash scripts/golden.sh ./build-gpu/cli/calico > "$OUT/golden.txt" 2>&1 || status=1
  tail -1 "$OUT/golden.txt" | tee -a "$OUT/gpu.log"
fi
if [ "${REF_SCALING:-0}" = 1 ]; then  # issue 12 on this host + the full-size deepseek-v3 megakernel comparison
  log "reference scaling"
  MEGAKERNEL=1 BENCH_BIN=build-gpu/bench/bench_model_gemm bash scripts/reference_scaling.sh ./build-gpu/cli/calico \
    "$OUT/scaling" 2>&1 | tail -25 | tee -a "$OUT/gpu.log" || status=1
  tar czf "$OUT/scaling.tgz" -C "$OUT" scaling && rm -rf "$OUT/scaling"
fi
if [ "${GATE:-0}" = 1 ]; then  # the megakernel gate matrix (scripts/gate_megakernel.sh)
  log "megakernel gate"
  OMP_NUM_THREADS="$JOBS" bash scripts/gate_megakernel.sh ./build-gpu/cli/calico "$OUT" 2>&1 | tail -40 | tee -a "$OUT/gpu.log" || status=1
fi
if [ "${L2PROBE:-0}" = 1 ]; then  # TMA loads from L2 / HBM on all SMs (simulator/probes/README.md)
  log "L2 TMA read probe"
  nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/l2_tma_read simulator/probes/l2_tma_read.cu \
    > "$OUT/l2-probe.txt" 2>&1 && timeout 120 /tmp/l2_tma_read >> "$OUT/l2-probe.txt" 2>&1 || status=1
  tail -3 "$OUT/l2-probe.txt" | tee -a "$OUT/gpu.log"
fi
if [ "${CONTENTION:-0}" = 1 ]; then  # a main loop beside one kind of side traffic (simulator/probes/README.md)
  log "main-loop contention probe"
  nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/mainloop_contention \
    simulator/probes/mainloop_contention.cu > "$OUT/contention-probe.txt" 2>&1 &&
    timeout 120 /tmp/mainloop_contention >> "$OUT/contention-probe.txt" 2>&1 || status=1
  tail -20 "$OUT/contention-probe.txt" | tee -a "$OUT/gpu.log"
fi
probe() {  # name, extra args
  local name="$1"; shift
  log "probe $name"
  timeout 240 ./build-gpu/cli/calico probe-mma --instr "$name" --cases "$CASES" --json "$OUT/probe-$name.json" "$@" \
    > "$OUT/probe-$name.txt" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || status=1
  # TOTAL carries both columns: mismatches vs the model (must be 0) and vs --compare-model old-zero-rule (the
  # negative control of issue 10: nonzero, in zero_rows and the targeted:edge_* rows shown here).
  grep -E "TOTAL|time:|error| zero_rows |edge_h200_issue10|edge_zero_row_c_s" "$OUT/probe-$name.txt" | tee -a "$OUT/gpu.log"
  log "probe $name exit $rc"
}
if [ "${PROBES:-1}" = 1 ]; then  # PROBES=0 skips the probe (about 3 minutes)
  probe mma.sync.bf16
  probe wgmma.bf16 --chain-tiles 4
  probe wgmma.e4m3 --chain-tiles 4
  probe wgmma.e5m2 --chain-tiles 4
fi
# Keep at most 8 files: device.txt gpu.log build.log tests.log and the four probe JSON/summary pairs merged.
for n in mma.sync.bf16 wgmma.bf16 wgmma.e4m3 wgmma.e5m2; do
  [ -f "$OUT/probe-$n.txt" ] && cat "$OUT/probe-$n.txt" >> "$OUT/probes.txt" && rm -f "$OUT/probe-$n.txt"
done
mkdir -p "$OUT/json" && mv "$OUT"/probe-*.json "$OUT/json/" 2>/dev/null
tar czf "$OUT/probe-json.tgz" -C "$OUT" json 2>/dev/null && rm -rf "$OUT/json"
log "done, status $status"
exit $status
