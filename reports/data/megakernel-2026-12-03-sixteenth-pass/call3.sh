#!/usr/bin/env bash
# device call 3 (sixteenth pass): scripts/gpu.sh on main (the full test_megakernel_gpu, sanitizers), the
# variants (two old patches on main) built in the background, then measured in cycles if time is left.
set -uo pipefail
T0=$(date +%s)
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/cutlass-site .whl/nvidia_cutlass-*.whl >/dev/null 2>&1
export CALICO_CUTLASS_INCLUDE=/tmp/cutlass-site/cutlass_library/source/include
mkdir -p $OUT/g $OUT/v
(sleep 150; nice bash scripts/variants.sh build $OUT/v/b > $OUT/v/build.txt 2>&1) &
OUT=$OUT/g MK_TIMEOUT=300 BENCH=0 GOLDEN=0 SANITIZE_PROBES=0 PROBES=0 bash scripts/gpu.sh; echo "gpu.sh exit $?" | tee $OUT/g/exit.txt
tar czf $OUT/gpu.tgz -C $OUT g && cp $OUT/g/gpu.log $OUT/gpu.log; rm -rf $OUT/g
wait
if [ $(( $(date +%s) - T0 )) -lt 450 ]; then
  for i in 1 2; do MODES=push:push WEIGHT_GRADS=overwrite TORCH=0 ITERS=20 bash scripts/variants.sh bench $OUT/v/r$i > $OUT/v/bench-$i.txt 2>&1; tail -12 $OUT/v/bench-$i.txt; done
fi
tar czf $OUT/variants.tgz -C $OUT v && rm -rf $OUT/v
