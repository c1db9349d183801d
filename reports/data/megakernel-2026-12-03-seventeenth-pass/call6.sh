#!/usr/bin/env bash
# device call 6 (seventeenth pass): call 5's racecheck of `calico run` tiny T=8192 (a shape no sanitizer run had
# used) reported 13 hazards on the branch, the same with the backward combine by registers: producer copies into
# a stage (the SiLU window's bulk load, cp.async gathers) against the d_h epilogue's reads of a saved g/u stage.
# The same run on main (a2f4e08): does main draw the same reports?
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R
date; bash scripts/variants.sh build $R/v > $R/build.txt 2>&1 || { cat $R/build.txt; exit 1; }
date
timeout 100 compute-sanitizer --tool racecheck .variants/base/build-gpu/cli/calico run --preset tiny --tokens 8192 \
  --routing uniform --seed 5 --backend megakernel > $R/racecheck-main.txt 2>&1
echo "== racecheck tiny T=8192 main: exit $? $(grep -c 'Race reported' $R/racecheck-main.txt) reports; $(grep 'RACECHECK SUMMARY' $R/racecheck-main.txt)"
grep -A1 "Race reported" $R/racecheck-main.txt | sed 's/calico::gpu::mk:://g' | cut -c1-160 | head -30
rm -rf $R/v; date
