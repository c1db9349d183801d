#!/usr/bin/env bash
# Device call 2 of the thirty-first pass. Call 1: the SwiGLU tasks made the d_h tiles' epilogue 6.48 -> 0.37 Mcycles
# per CTA, but the d_h producers' waits for the d_y dispatch grew 31.8 -> 420 and the d_x_k producers waited for
# the SwiGLU tasks (1,233 with 16 ahead, 205 with 64). So: more tasks ahead (64, 256, all of them first: ablk) and
# more backward data-movement CTAs (48, 64) or the pull backward, against main under the same settings.
# Prepare here:
#   rm -rf .variants; bash scripts/variants.sh prepare base=main a64=try/swiglu-side-a64 a256=try/swiglu-side-a256 \
#     ablk=try/swiglu-side-ablk   (carry [".whl", ".variants"])
source scripts/device_call.sh  # T0, R, pack, build_variants
build_variants
CHECK_SPECS="qwen3-30b-a3b 2048 zipf:1.2 1.0" CHECK_CONFIGS="push 64 0 ow;pull 16 64" \
  bash scripts/variants.sh check $R > $R/check.log 2>&1
grep -c IDENTICAL $R/check.txt; grep -v IDENTICAL $R/check.txt | head; date; pack
Q="--preset qwen3-30b-a3b --tokens 16384 --comm-sms 16 --weight-grads overwrite --dispatch push"
for cfg in "b64:--dispatch-backward push --comm-sms-backward 64" "b48:--dispatch-backward push --comm-sms-backward 48" \
           "pull:--dispatch-backward pull --comm-sms-backward 16"; do
  [ $(( $(date +%s) - T0 )) -lt 400 ] || break
  CYCLES_ARGS="$Q ${cfg#*:}" ROUNDS=1 ITERS=15 bash scripts/variants.sh cycles $R/cyc-${cfg%%:*} > $R/cycles-${cfg%%:*}.txt 2>&1
  echo "== ${cfg%%:*}"; tail -4 $R/cycles-${cfg%%:*}.txt; pack; date
done
DS="--preset deepseek-v3-routed --tokens 8192 --dispatch push --dispatch-backward push --comm-sms 16 --comm-sms-backward 64 --weight-grads overwrite"
if [ $(( $(date +%s) - T0 )) -lt 440 ]; then
  CYCLES_ARGS="$DS" ROUNDS=1 ITERS=6 bash scripts/variants.sh cycles $R/cycd > $R/cycles-d.txt 2>&1
  echo "== dsv3 b64"; tail -4 $R/cycles-d.txt
fi
date; pack
