#!/usr/bin/env bash
# Static audit of the megakernel's SASS, on a machine without a GPU: compiles moe/forward.cu and
# moe/backward.cu (and moe/backward_accumulate.cu) of one or more source trees for sm_90a (the flags of the build and of the `sass` tests)
# and prints, per kernel, what a device profile later explains as time: registers and spills, the wgmma
# stream (HGMMA count, batches waited to zero), branches, constant-bank reloads, table lookups and cp.async
# gathers. Found with it (2026-12-01): the d_h epilogue's SiLU lookups issued one pair at a time between
# shared-memory stores, and ~500 branches from the clamp tests in one epilogue.
#   Usage: scripts/sass_audit.sh [TREE ...]     (default: this tree; e.g. .variants/* of scripts/variants.sh)
#   Environment: CALICO_CUTLASS_INCLUDE (else found through python3's cutlass_library), CUOBJDUMP (else
#   cuobjdump on PATH or in the CUDA toolkit, else fetched once with pip into ~/.cache/calico-cuobjdump).
# Rows of different trees are comparable: same compiler, same flags. Counts, not timings.
set -euo pipefail
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
trees=()
for t in "$@"; do trees+=("$(realpath "$t")"); done  # before the cd: paths are the caller's
cd "$(dirname "$0")/.."
[ ${#trees[@]} -gt 0 ] || trees=("$PWD")
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
[ -x "$NVCC" ] || { echo "sass_audit: nvcc not found (set NVCC)" >&2; exit 2; }
CUTLASS="${CALICO_CUTLASS_INCLUDE:-$(python3 -c 'import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), "source", "include"))' 2>/dev/null || true)}"
[ -d "$CUTLASS/cute" ] || { echo "sass_audit: CUTLASS headers not found (scripts/install-deps.sh, or set CALICO_CUTLASS_INCLUDE)" >&2; exit 2; }

find_cuobjdump() {
  if [ -n "${CUOBJDUMP:-}" ]; then echo "$CUOBJDUMP"; return; fi
  for c in "$(command -v cuobjdump || true)" "$(dirname "$NVCC")/cuobjdump"; do
    [ -n "$c" ] && [ -x "$c" ] && { echo "$c"; return; }
  done
  local cache="$HOME/.cache/calico-cuobjdump"
  if [ ! -x "$cache/nvidia/cu13/bin/cuobjdump" ]; then
    echo "sass_audit: fetching cuobjdump (pip: nvidia-cuda-cuobjdump) into $cache" >&2
    mkdir -p "$cache/wheel"
    python3 -m pip download -q --no-deps "nvidia-cuda-cuobjdump>=13,<14" -d "$cache/wheel" >&2
    python3 -m zipfile -e "$cache"/wheel/*.whl "$cache" >&2
    chmod +x "$cache"/nvidia/cu13/bin/* 2>/dev/null || true
  fi
  echo "$cache/nvidia/cu13/bin/cuobjdump"
}
CUOBJDUMP="$(find_cuobjdump)"
[ -x "$CUOBJDUMP" ] || { echo "sass_audit: no cuobjdump at '$CUOBJDUMP' (set CUOBJDUMP)" >&2; exit 2; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

printf '%-28s %-12s %-7s %5s %6s %6s %5s %5s %5s %5s %6s %6s\n' tree kernel inst regs spillB hgmma dep0 bra ldc lds64 ldg64c ldgsts
for tree in "${trees[@]}"; do
  [ -f "$tree/megakernel/src/moe/forward.cu" ] || { echo "sass_audit: $tree has no megakernel/src/moe/forward.cu" >&2; exit 2; }
  for kernel in forward backward backward_accumulate; do
    [ -f "$tree/megakernel/src/moe/$kernel.cu" ] || continue  # (trees before 2026-12-04 build both modes in backward.cu)
    obj="$work/$kernel.o"
    log="$work/$kernel.log"
    if ! "$NVCC" -DCALICO_HAVE_CUDA=1 -I"$tree/megakernel/include" -I"$tree/megakernel/src" -I"$tree/core/include" \
        -isystem "$CUTLASS" -O3 -DNDEBUG --generate-code=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr \
        --fmad=false -Xptxas=-v -std=c++17 -x cu -c "$tree/megakernel/src/moe/$kernel.cu" -o "$obj" > "$log" 2>&1; then
      echo "sass_audit: $tree $kernel.cu does not compile:" >&2; grep -m5 error "$log" >&2; exit 1
    fi
    "$CUOBJDUMP" -sass "$obj" > "$work/$kernel.sass"
    # One row per kernel instance (backward: one per weight-gradient mode).
    python3 - "$tree" "$kernel" "$work/$kernel.sass" "$log" <<'PY'
import os, re, sys
tree, kernel, sass_path, log_path = sys.argv[1:]
log = open(log_path).read()
props = {}  # kernel name -> (registers, spill-store bytes), from ptxas -v
for m in re.finditer(r"Function properties for (\S+)\n\s+\d+ bytes stack frame, (\d+) bytes spill stores.*\n.*Used (\d+) registers", log):
    props[m.group(1)] = (m.group(3), m.group(2))
for body in re.split(r"\n\s*Function : ", open(sass_path).read())[1:]:
    name = body.split("\n", 1)[0].strip()
    if not re.search(r"(forward|backward)_kernel", name):
        continue  # the small table-building kernels
    inst = re.findall(r"/\*[0-9a-f]{4,}\*/\s+([^;]+);", body)
    ops = [re.sub(r"^@!?U?P[T0-9]+\s+", "", s).split()[0] for s in inst]
    count = lambda pred: sum(1 for o in ops if pred(o))
    depbar0 = sum(1 for s in inst if "WARPGROUP.DEPBAR.LE gsb0, 0x0" in s)
    # template flags: backward <carry-in, timeline>, forward <timeline> (trees before the timeline's
    # instantiations: backward <carry-in> only, forward none); "+tl": the recording instantiation
    m = re.search(r"(forward|backward)_kernelI((?:Lb[01]E)+)E", name)
    flags = re.findall(r"Lb([01])E", m.group(2)) if m else []
    label = kernel.split("_")[0]
    if label == "backward" and flags:
        label += {"0": "/ow", "1": "/acc"}[flags.pop(0)]
    if flags and flags[0] == "1":
        label += "+tl"
    regs, spill = props.get(name, ("?", "?"))
    print(f"{os.path.basename(tree)[-28:]:28} {label:12} {len(inst):7} {regs:>5} {spill:>6} {count(lambda o: o.startswith('HGMMA')):6} "
          f"{depbar0:5} {count(lambda o: o == 'BRA'):5} {count(lambda o: o.startswith('LDC')):5} "
          f"{count(lambda o: o == 'LDS.64'):5} {count(lambda o: o == 'LDG.E.64.CONSTANT'):6} "
          f"{count(lambda o: o.startswith('LDGSTS')):6}")
PY
  done
done
cat <<'EOF'
columns: kernel = pass (/ow, /acc: the weight-gradient mode; +tl: the timeline's recording instantiation);
inst = SASS instructions; spillB = spill-store bytes; hgmma = HGMMA instructions; dep0 = waits for
zero wgmma in flight (compare with the base: a serialised stream has one after every HGMMA); bra = branches;
ldc = constant-bank loads; lds64 / ldg64c = 8-byte shared / read-only global loads (the d_h table lookups);
ldgsts = cp.async gathers.
EOF
