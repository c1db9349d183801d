#!/usr/bin/env bash
# device call 4 (seventeenth pass): whose are call 3's two racecheck reports (bulk_load, bulk_combine.cuh)?
# racecheck on `calico run` tiny T=8192 (enough tokens per warp that the forward tail's slots are reused too,
# which the sanitized tests' shapes never did), with CALICO_MK_COMBINE = bulk | registers-backward |
# registers (the same binary: which combine's bulk copies draw the reports).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R
date; bash scripts/variants.sh build $R/v > $R/build.txt 2>&1 || { cat $R/build.txt; exit 1; }
date
CAL=.variants/new/build-gpu/cli/calico
for c in bulk registers-backward registers; do
  CALICO_MK_COMBINE=$c compute-sanitizer --tool racecheck $CAL run --preset tiny --tokens 8192 --routing uniform --seed 5 \
    --backend megakernel > $R/racecheck-$c.txt 2>&1
  echo "== $c: exit $? $(grep -c 'Race reported' $R/racecheck-$c.txt) reports; $(grep 'RACECHECK SUMMARY' $R/racecheck-$c.txt)"
  grep -A1 "Race reported" $R/racecheck-$c.txt | head -8
done
date
