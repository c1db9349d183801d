#!/usr/bin/env bash
# device call 3 (twentieth pass): no wgmma batch in flight in the forward (each stage released at once),
# with main's epilogues (base0) and with the epilogue warps (epi0, from epi8), against base and epi8.
# The same steps as call 2 (it ran as a copy of call2.sh); only the prepared .variants differed:
#   bash scripts/variants.sh prepare base=main epi8=fwd-epi-b8 epi0=fwd-epi-w0 base0=fwd-base-w0
exec bash "$(dirname "$0")/call2.sh"
