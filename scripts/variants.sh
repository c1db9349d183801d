#!/usr/bin/env bash
# A/B benchmarks of several commits in ONE device call (device time is the scarce resource).
#   Here (the developer machine):  bash scripts/variants.sh prepare NAME=REF [NAME=REF ...]
#     writes each commit's tree to .variants/NAME (ignored by git through .git/info/exclude); the device
#     call then carries ".variants" (and ".whl" for the CUTLASS headers).
#   On the GPU machine:            bash scripts/variants.sh [build|bench] [OUT]
#     (build: only the builds, e.g. in the background while scripts/gpu.sh runs; bench builds what is not built)
#     builds `calico` of every .variants/NAME (its own build-gpu), then runs scripts/bench_megakernel.sh of the
#     CURRENT tree with each variant's binary, one variant after the other in the same call, and writes
#     OUT/variants.jsonl (each row tagged with its variant) and a table on stdout. The bench settings
#     (MODES, ITERS, TORCH, BENCH_ARGS) are the bench script's environment; TORCH defaults to 0 here, and
#     BENCH_ARGS must be flags every variant's `calico bench` knows. Returned files: variants.jsonl plus
#     OUT/variant-logs.tgz (NAME/bench.jsonl and NAME/bench.txt of every variant: the device returns only a
#     few files, so any number of variants comes back as two).
#   cycles (after build): ROUNDS rounds of `calico bench` over every variant, interleaved, and their cycles per
#     iteration (the A/B measure under the H200's power cap; see the subcommand).
#   check (after build): digests of every variant's megakernel against the reference (the `base` variant's, or
#     the first's, `calico run --backend reference`) on CHECK_SPECS ("PRESET T ROUTING CLAMP;...", default
#     qwen3-30b-a3b 2048 zipf:1.2 1.0) and CHECK_CONFIGS ("DISPATCH COMM_SMS MINIBATCH [ow];...", ow: --weight-grads overwrite; default push 16 0;
#     pull 16 64): OUT/check.txt, one line per variant and spec, exit 1 on any difference. A quick screen
#     before the benchmark, not the gate (scripts/gpu.sh runs that on the chosen commit). Each megakernel run
#     at qwen3 T=2048 takes a few seconds; at deepseek-v3's full size (256 experts) about a minute (its
#     weights are built on the host): 4 variants x 3 configs of it did not fit a 10-minute call.
# NOTE: every device call must carry .variants again (the device keeps no ignored files of the tree between
# calls, builds included).
# NOTE: the variants share one GPU and one call, so their rows are comparable; rows of different calls are
# not (the deepseek-v3 forward alone varied by 15% between calls on 2026-12-01).
set -uo pipefail
cd "$(dirname "$0")/.."
usage() { echo "usage: $0 prepare NAME=REF [NAME=REF ...] | build [OUT] | check [OUT] | cycles [OUT] | bench [OUT]" >&2; exit 2; }
[ $# -ge 1 ] || usage
case "$1" in
  prepare)
    shift
    [ $# -ge 1 ] || usage
    grep -qx '/.variants/' .git/info/exclude 2>/dev/null || echo '/.variants/' >> .git/info/exclude
    mkdir -p .variants
    for pair in "$@"; do
      name="${pair%%=*}"; ref="${pair#*=}"
      [[ "$name" =~ ^[A-Za-z0-9._-]+$ ]] || { echo "variant name '$name': letters, digits, . _ - only" >&2; exit 2; }
      [ "$name" != "$pair" ] || { echo "'$pair': expected NAME=REF" >&2; exit 2; }
      git rev-parse --verify --quiet "$ref^{commit}" > /dev/null || { echo "'$ref' is not a commit" >&2; exit 2; }
      rm -rf ".variants/$name"
      mkdir -p ".variants/$name"
      # (without reports/: a build needs none of it, and the device carries at most 64 MiB)
      git archive "$ref" | tar -x -C ".variants/$name" --anchored --exclude=reports
      echo "$name = $(git log -1 --format='%h %s' "$ref" | cut -c1-100)" | tee ".variants/$name/VARIANT"
    done
    echo "carry: [\".whl\", \".variants\"] ($(du -sh .variants | cut -f1))"
    ;;
  check)
    OUT="$(mkdir -p "${2:-variants-out}" && realpath "${2:-variants-out}")"
    digests() { grep -E '^(out|d_x|d_router_weights|d_w_gate|d_w_up|d_w_down|d_ws_gate|d_ws_up|d_ws_down) ' | awk '{print $1, $4}'; }
    ref_bin=".variants/base/build-gpu/cli/calico"
    [ -x "$ref_bin" ] || ref_bin="$(ls .variants/*/build-gpu/cli/calico | head -1)"
    [ -x "$ref_bin" ] || { echo "no built variant: run '$0 build' first" >&2; exit 2; }
    status=0; tmp="$(mktemp -d)"; : > "$OUT/check.txt"
    IFS=';' read -r -a specs <<< "${CHECK_SPECS:-qwen3-30b-a3b 2048 zipf:1.2 1.0}"
    IFS=';' read -r -a configs <<< "${CHECK_CONFIGS:-push 16 0;pull 16 64}"
    for spec in "${specs[@]}"; do
      read -r preset tokens routing clamp <<< "$spec"
      args=(--preset "$preset" --tokens "$tokens" --routing "$routing" --seed 5)
      [ "$clamp" != 0 ] && args+=(--clamp "$clamp")
      "$ref_bin" run "${args[@]}" --threads "$(nproc)" | digests > "$tmp/ref.txt"
      # an empty digest list would make every variant "identical"
      [ -s "$tmp/ref.txt" ] || { echo "$spec: the reference run gave no digests" | tee -a "$OUT/check.txt"; status=1; continue; }
      for dir in .variants/*/; do
        name="$(basename "$dir")"; [ -x "$dir/build-gpu/cli/calico" ] || continue
        for cfg in "${configs[@]}"; do
          read -r dispatch comm minibatch wg <<< "$cfg"
          wgrad=(); [ "${wg:-}" = ow ] && wgrad=(--weight-grads overwrite)  # (variants older than the option fail)
          "$dir/build-gpu/cli/calico" run "${args[@]}" --backend megakernel --dispatch "$dispatch" --comm-sms "$comm" \
            --minibatch "$minibatch" "${wgrad[@]}" 2> "$tmp/err.txt" | digests > "$tmp/mk.txt"
          same=$(comm -12 <(sort "$tmp/ref.txt") <(sort "$tmp/mk.txt") | wc -l)
          if cmp -s "$tmp/ref.txt" "$tmp/mk.txt"; then r=IDENTICAL; else r="DIFFERENT ($(head -c 300 "$tmp/err.txt"))"; status=1; fi
          echo "$name $spec | $cfg: $r, $same of $(wc -l < "$tmp/ref.txt") tensors" | tee -a "$OUT/check.txt"
        done
      done
    done
    rm -rf "$tmp"; exit $status
    ;;
  cycles)
    # The A/B measure of the recent passes in one subcommand: ROUNDS (default 3) rounds of `calico bench` with
    # every built variant in turn (interleaved, so a drift of the power-capped clock touches them all alike),
    # CYCLES_ARGS (default: qwen3-30b-a3b T=16384, push 16/16, overwrite; no --iters: ITERS, default 30)
    # -> OUT/bench-NAME-I.json and .txt; PROFILE=1 adds one `--profile` run per variant (OUT/profile-NAME.txt); then the cycles per
    # iteration of every row (scripts/bench_cycles.py). Build first (`build`).
    OUT="$(mkdir -p "${2:-variants-out}" && realpath "${2:-variants-out}")"
    source scripts/device_env.sh
    read -r -a cyc_args <<< "${CYCLES_ARGS:---preset qwen3-30b-a3b --tokens 16384 --dispatch push --dispatch-backward push --comm-sms 16 --comm-sms-backward 16 --weight-grads overwrite}"
    rounds="${ROUNDS:-3}"
    [[ "$rounds" =~ ^[1-9][0-9]?$ ]] || { echo "ROUNDS='$rounds': a count from 1 to 99" >&2; exit 2; }
    names=(); for dir in .variants/*/; do [ -x "$dir/build-gpu/cli/calico" ] && names+=("$(basename "$dir")"); done
    [ ${#names[@]} -gt 0 ] || { echo "no built variant: run '$0 build' first" >&2; exit 2; }
    status=0
    for ((i = 1; i <= rounds; ++i)); do
      for name in "${names[@]}"; do
        ".variants/$name/build-gpu/cli/calico" bench "${cyc_args[@]}" --iters "${ITERS:-30}" --json "$OUT/bench-$name-$i.json" \
          > "$OUT/bench-$name-$i.txt" 2>&1 || status=1
        echo "== $name $i: $(grep -E 'T=|MHz' "$OUT/bench-$name-$i.txt" | tr -s ' ' | tr '\n' ' ')"
      done
    done
    if [ "${PROFILE:-0}" = 1 ]; then
      for name in "${names[@]}"; do
        ".variants/$name/build-gpu/cli/calico" bench "${cyc_args[@]}" --iters 3 --warmup 1 --profile \
          > "$OUT/profile-$name.txt" 2>&1 || status=1
      done
      grep -H -E "epilogues by GEMM|gate/up epilogues|tasks " "$OUT"/profile-*.txt
    fi
    python3 scripts/bench_cycles.py "$OUT"/bench-*.json || status=1
    exit $status
    ;;
  build|bench)
    OUT="$(mkdir -p "${2:-variants-out}" && realpath "${2:-variants-out}")"
    source scripts/device_env.sh
    ls -d .variants/*/ > /dev/null 2>&1 || { echo "no .variants/*: run '$0 prepare' here first and carry .variants" >&2; exit 2; }
    status=0
    : > "$OUT/variants.jsonl"
    # Build them all first, side by side (each build's wall time is its longest CUDA file, ~1.5 min; one
    # after the other, four variants took ~6 min of device time): the benchmarks then run back to back.
    pids=()
    for dir in .variants/*/; do
      name="$(basename "$dir")"
      [ -x "$dir/build-gpu/cli/calico" ] && [ -f "$dir/build-gpu/BUILT" ] && continue  # built by an earlier `build`
      echo "[$(date +%T)] build $name: $(cat "$dir/VARIANT" 2>/dev/null)"
      (cd "$dir" && cmake --preset gpu -DCALICO_BENCHMARKS=OFF -DCALICO_H5DUMP=/bin/false > "$OUT/build-$name.log" 2>&1 \
        && cmake --build build-gpu -j "$(nproc)" --target calico >> "$OUT/build-$name.log" 2>&1 && touch build-gpu/BUILT) &
      pids+=("$!")
    done
    for pid in "${pids[@]}"; do wait "$pid"; done
    for dir in .variants/*/; do
      name="$(basename "$dir")"
      [ -f "$dir/build-gpu/BUILT" ] && continue
      echo "build of $name failed:"; grep -E "error" "$OUT/build-$name.log" | head -10; status=1
    done
    echo "[$(date +%T)] builds done"
    [ "$1" = build ] && exit $status
    for dir in .variants/*/; do
      name="$(basename "$dir")"
      [ -x "$dir/build-gpu/cli/calico" ] || continue
      mkdir -p "$OUT/$name"
      TORCH="${TORCH:-0}" bash scripts/bench_megakernel.sh "$dir/build-gpu/cli/calico" "$OUT/$name" > "$OUT/$name/bench.txt" 2>&1 \
        || status=1
      python3 - "$name" "$OUT/$name/bench.jsonl" >> "$OUT/variants.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[2]):
    if line.strip():
        row = json.loads(line); row["variant"] = sys.argv[1]; print(json.dumps(row))
PY
      rm -rf "$OUT/$name"/bench-row.json
    done
    python3 - "$OUT/variants.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(f"{'variant':16} {'backend':28} {'preset':20} {'fwd ms':>8} {'fwd+bwd ms':>11}")
for r in rows:
    name = r['backend'] + (f" {r['dispatch']}" if 'dispatch' in r else "") + (f" {r['task_walk']}" if 'task_walk' in r else "")
    print(f"{r['variant']:16} {name:28} {r['preset']:20} {r['forward_ms']:8.3f} {r['forward_backward_ms']:11.3f}")
PY
    python3 scripts/bench_cycles.py "$OUT/variants.jsonl" || status=1  # cycles: the A/B measure under the power cap
    [ $status = 0 ] && rm -f "$OUT"/build-*.log  # kept when something failed
    names=(); for dir in .variants/*/; do [ -d "$OUT/$(basename "$dir")" ] && names+=("$(basename "$dir")"); done
    [ ${#names[@]} -gt 0 ] && tar czf "$OUT/variant-logs.tgz" -C "$OUT" "${names[@]}" && (cd "$OUT" && rm -rf "${names[@]}")
    exit $status
    ;;
  *) usage ;;
esac
