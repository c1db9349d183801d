#!/usr/bin/env bash
# device call 5 (seventeenth pass): call 3 found 2 racecheck reports, both at the backward combine tasks' bulk
# loads (bulk_combine.cuh, the UBLKCP at backward_kernel<true>+0x32c10), which re-initialised their slot
# barriers in the held stages for every task. Here they are GemmSmem::combine_bar, set up once with the
# pipeline's, their phases carried across tasks. scripts/gpu.sh on this tree (tests, sanitizers), racecheck
# of `calico run` tiny T=8192 (slots reused within tasks and the forward tail), then the same binary's
# cycles with the combine tasks by bulk copies or by registers (CALICO_MK_COMBINE=registers-backward).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/cutlass-site .whl/nvidia_cutlass-*.whl >/dev/null 2>&1
export CALICO_CUTLASS_INCLUDE=/tmp/cutlass-site/cutlass_library/source/include
mkdir -p $OUT/g $OUT/r
OUT=$OUT/g MK_TIMEOUT=300 BENCH=0 GOLDEN=0 SANITIZE_PROBES=0 PROBES=0 bash scripts/gpu.sh; echo "gpu.sh exit $?" | tee $OUT/g/exit.txt
tar czf $OUT/gpu.tgz -C $OUT g && cp $OUT/g/gpu.log $OUT/gpu.log && cp $OUT/g/sanitizer.txt $OUT/sanitizer.txt; rm -rf $OUT/g
R=$OUT/r; CAL=build-gpu/cli/calico
pack() { tar czf $OUT/results.tgz -C $OUT r; }
for c in bulk registers-backward; do
  CALICO_MK_COMBINE=$c timeout 120 compute-sanitizer --tool racecheck $CAL run --preset tiny --tokens 8192 --routing uniform \
    --seed 5 --backend megakernel > $R/racecheck-$c.txt 2>&1
  echo "== racecheck tiny T=8192 $c: exit $? $(grep -c 'Race reported' $R/racecheck-$c.txt) reports; $(grep 'RACECHECK SUMMARY' $R/racecheck-$c.txt)"
  grep -A1 "Race reported" $R/racecheck-$c.txt | head -6
done
pack; date
PUSH=(--dispatch push --dispatch-backward push --comm-sms 16 --comm-sms-backward 16)
Q=(--preset qwen3-30b-a3b --tokens 16384); D=(--preset deepseek-v3-routed --tokens 8192)
B() { local c=$1 tag=$2; shift 2
  CALICO_MK_COMBINE=$c $CAL bench "$@" --weight-grads overwrite --json $R/bench-$tag.json > $R/bench-$tag.txt 2>&1
  echo "== $tag $(grep -E 'T=|MHz' $R/bench-$tag.txt | tr -s ' ' | tr '\n' ' ')"; }
for i in 1 2 3; do B bulk q-bulk-$i "${Q[@]}" "${PUSH[@]}" --iters 30; B registers-backward q-regs-$i "${Q[@]}" "${PUSH[@]}" --iters 30; done
for i in 1 2; do B bulk d-bulk-$i "${D[@]}" "${PUSH[@]}" --iters 10; B registers-backward d-regs-$i "${D[@]}" "${PUSH[@]}" --iters 10; done
python3 scripts/bench_cycles.py $R/bench-*.json 2>&1 | tail -12
pack; date
