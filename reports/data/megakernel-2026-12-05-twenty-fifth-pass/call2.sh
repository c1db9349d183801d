#!/usr/bin/env bash
# Device call 2 of the twenty-fifth pass: the twenty-fourth pass's call2.sh (the backward's candidates bwd, wgrad
# and ileave against main), with the candidates rebased on main 72988a0, which has the fast schedule merged, so
# base and the candidates differ only by their own change. Prepare here:
#   bash reports/data/megakernel-2026-12-04-twenty-fourth-pass/make-branches.sh
#   for b in warp-epilogue-bwd warp-epilogue-wgrad interleave-dw-down; do
#     git branch -f r/$b try/$b && git rebase --onto main e8c6f1a r/$b; done
#   bash scripts/variants.sh prepare base=main bwd=r/warp-epilogue-bwd wgrad=r/warp-epilogue-wgrad \
#        ileave=r/interleave-dw-down                                     (carry [".whl", ".variants"])
exec bash reports/data/megakernel-2026-12-04-twenty-fourth-pass/call2.sh
