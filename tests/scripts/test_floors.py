#!/usr/bin/env python3
"""scripts/floors.py against facts derived without its byte table: the FLOPs are the issue's count
(6 T K H I forward plus the shared expert, twice that backward); the bytes are affine in T with the weights
(and the fp32 weight gradients) as the constant term; accumulating adds exactly one read of dW; push adds
exactly one read of the expert-major x copy. Each property check also runs on a deliberately broken table
(the negative control: the check must fail there). Plus the CLI's bad-input errors. Exit 1 on any failure."""
import json
import os
import subprocess
import sys
import tempfile

from script_checks import ROOT, check, failures, load_script, script_path

SCRIPT = script_path("floors.py")
floors = load_script("floors.py")


def totals(phases_fn, p, T, **kw):
    rows = phases_fn(p, T, **kw)
    f = {s: sum(r[2] for r in rows if r[0] == s) for s in ("forward", "backward")}
    b = {s: sum(r[3] for r in rows if r[0] == s) for s in ("forward", "backward")}
    return f, b


def flops_problem(phases_fn, p, T):
    H, I, K, Is = p["hidden"], p["intermediate"], p["top_k"], p.get("shared_intermediate", 0)
    f, _ = totals(phases_fn, p, T)
    want = 6 * T * K * H * I + 6 * T * H * Is
    if f["forward"] != want:
        return f"forward FLOPs {f['forward']} != {want}"
    if f["backward"] != 2 * want:
        return f"backward FLOPs {f['backward']} != {2 * want}"
    return ""


def weight_bytes(p):
    H, I, E, Is = p["hidden"], p["intermediate"], p["experts"], p.get("shared_intermediate", 0)
    return 3 * (E * I * H + Is * H)  # elements of W_gate, W_up, W_down (routed + shared)


def affine_problem(phases_fn, p, weight_grads):
    """bytes(T) = weights + T * c: the constant term is the weights read (bf16) once per pass, plus the fp32
    weight gradients written (and read when accumulated) in the backward."""
    _, b1 = totals(phases_fn, p, 1, weight_grads=weight_grads)
    _, b2 = totals(phases_fn, p, 2, weight_grads=weight_grads)
    _, b5 = totals(phases_fn, p, 5, weight_grads=weight_grads)
    w = weight_bytes(p)
    dw = w * 4 * (2 if weight_grads == "accumulate" else 1)
    for s, const in (("forward", w * 2), ("backward", w * 2 + dw)):
        slope = b2[s] - b1[s]
        if b5[s] - b1[s] != 4 * slope:
            return f"{s}: bytes not affine in T"
        if b1[s] - slope != const:
            return f"{s}: constant term {b1[s] - slope} != {const} (weights and weight gradients)"
    return ""


def mode_problem(phases_fn, p, T):
    H, K = p["hidden"], p["top_k"]
    _, acc = totals(phases_fn, p, T, weight_grads="accumulate")
    _, ow = totals(phases_fn, p, T, weight_grads="overwrite")
    if acc["backward"] - ow["backward"] != weight_bytes(p) * 4 or acc["forward"] != ow["forward"]:
        return "accumulate - overwrite is not one read of dW"
    _, push = totals(phases_fn, p, T, dispatch="push")
    _, pull = totals(phases_fn, p, T, dispatch="pull")
    if push["forward"] - pull["forward"] != T * K * H * 2 or push["backward"] != pull["backward"]:
        return "push - pull is not one read of the expert-major x copy"
    return ""


def broken_flops(p, T, **kw):  # the down GEMM counted once instead of twice (a 2 N I H row as N I H)
    return [r if r[1] != "down" else (r[0], r[1], r[2] // 2, r[3]) for r in floors.phases(p, T, **kw)]


def broken_weights(p, T, **kw):  # W_down not read by the d_h GEMM
    H, I, E, Is = p["hidden"], p["intermediate"], p["experts"], p.get("shared_intermediate", 0)
    return [r if r[1] != "d_h + SwiGLU backward" else (r[0], r[1], r[2], r[3] - (E + 0) * H * I * 2 - Is * H * 2)
            for r in floors.phases(p, T, **kw)]


def broken_modes(p, T, **kw):  # accumulate forgets the read of dW
    kw = dict(kw)
    kw["weight_grads"] = "overwrite"
    return floors.phases(p, T, **kw)


presets = {n: json.load(open(os.path.join(ROOT, "data", "presets", n + ".json")))
           for n in ("tiny", "qwen3-30b-a3b", "deepseek-v3", "deepseek-v3-routed")}
for name, p in presets.items():
    for T in (1, 7, 2048):
        check(f"{name} T={T}: FLOPs are the issue's count", flops_problem(floors.phases, p, T) == "")
    for wg in ("accumulate", "overwrite"):
        check(f"{name} dW {wg}: bytes affine in T, weights the constant", affine_problem(floors.phases, p, wg) == "")
    check(f"{name}: accumulate and push add exactly their reads", mode_problem(floors.phases, p, 33) == "")
    # Negative controls: each check sees its broken table.
    check(f"{name}: the FLOPs check sees a halved down GEMM", flops_problem(broken_flops, p, 7) != "")
    check(f"{name}: the affine check sees W_down missing", affine_problem(broken_weights, p, "overwrite") != "")
    check(f"{name}: the mode check sees a forgotten dW read", mode_problem(broken_modes, p, 33) != "")

# The numbers the report quotes: deepseek-v3's fp32 weight gradients are 45.1 GB; the compute floors at 800
# TFLOP/s are 6 T K H I / rate.
s = floors.summarize(floors.phases(presets["deepseek-v3-routed"], 8192, "overwrite"), 800.0, 4.0)
wg_row = [r for r in s["phases"] if r["phase"] == "weight gradients"][0]
dw = weight_bytes(presets["deepseek-v3-routed"]) * 4
check("deepseek-v3 dW is 45.1 GB", round(dw / 1e9, 1) == 45.1)
check("the weight-gradient phase writes dW at least", wg_row["bytes"] > dw)
qs = floors.summarize(floors.phases(presets["qwen3-30b-a3b"], 16384), 800.0, 4.0)
want_ms = 6 * 16384 * 8 * 2048 * 768 / 800e12 * 1e3
check("qwen3 forward compute floor is 6 T K H I at 800 TFLOP/s",
      abs(qs["passes"]["forward"]["compute_ms"] - want_ms) < 1e-9)
check("a pass's floor is max(compute, HBM) and never above the no-overlap sum",
      all(r["floor_ms"] == max(r["compute_ms"], r["hbm_ms"]) <= r["no_overlap_ms"]
          for k, r in qs["passes"].items() if k != "forward+backward"))


# The L2 path: a GEMM's operand bytes, counted tile by tile (M, N, K multiples of the tile), are
# operand_bytes(2 M N K); the negative control counts the A strips only.
def tile_count(M, N, K, bm, bn):
    return sum(2 * K * (bm + bn) for _ in range(M // bm) for _ in range(N // bn))


for bm in (128, 192):
    M, N, K = 3 * 384, 4 * 256, 640
    check(f"L2 path: {bm} x 256 operand bytes are the tile-by-tile count",
          abs(floors.operand_bytes(2 * M * N * K, bm) - tile_count(M, N, K, bm, 256)) < 1e-9 * tile_count(M, N, K, bm, 256))
    check(f"L2 path: the count sees a formula without the B strips ({bm} rows)",
          2 * M * N * K / bm != tile_count(M, N, K, bm, 256))


# Going from 128- to 192-row tiles changes only the operand term, by the GEMM FLOPs (6 T K H I
# forward, twice that backward) times 1/128 - 1/192; at qwen3 T=16384 every GEMM phase's tile count exceeds
# its HBM bytes, so the difference is exact there. Negative control: an L2 count without the weight gradients.
def l2_diff(l2_fn, p, T):
    a = sum(r[2] for r in l2_fn(p, T, tile_rows=128))
    b = sum(r[2] for r in l2_fn(p, T, tile_rows=192))
    return a - b


def l2_without_wgrad(p, T, **kw):
    return [r for r in floors.l2_path(p, T, **kw) if r[1] != "weight gradients"]


q = presets["qwen3-30b-a3b"]
want = 18 * 16384 * q["top_k"] * q["hidden"] * q["intermediate"] * (1 / 128 - 1 / 192)
check("L2 path: 192-row tiles save the GEMM FLOPs x (1/128 - 1/192)", abs(l2_diff(floors.l2_path, q, 16384) - want) < 1e-3 * want)
check("L2 path: the saving check sees a count without the weight gradients",
      abs(l2_diff(l2_without_wgrad, q, 16384) - want) > 1e-3 * want)
check("L2 path: never below the HBM bytes of a phase (tiny, T=1: the weights dominate)",
      all(l2[2] >= hbm[3] for l2, hbm in zip(floors.l2_path(presets["tiny"], 1), floors.phases(presets["tiny"], 1))))


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


with tempfile.TemporaryDirectory() as d:
    out = os.path.join(d, "f.json")
    r = run("--preset", "tiny", "--tokens", "64", "--json", out)
    check("CLI: runs and writes JSON", r.returncode == 0 and json.load(open(out))["tokens"] == 64)
    check("CLI: the table names the phases", "weight gradients" in r.stdout and "floor" in r.stdout)
r = run("--preset", "no-such-model", "--tokens", "8")
check("CLI: an unknown preset is named with the known ones",
      r.returncode != 0 and "no-such-model" in r.stderr and "qwen3-30b-a3b" in r.stderr)
r = run("--preset", "tiny", "--tokens", "0")
check("CLI: --tokens 0 is refused with the allowed range", r.returncode == 2 and "--tokens must be >= 1" in r.stderr)
r = run("--preset", "tiny", "--tokens", "8", "--hbm-tbs", "0")
check("CLI: a zero bandwidth is refused", r.returncode == 2 and "must be > 0" in r.stderr)
r = run("--preset", "tiny", "--tokens", "8", "--l2-tbs", "0")
check("CLI: a zero L2 rate is refused", r.returncode == 2 and "--l2-tbs" in r.stderr and "must be > 0" in r.stderr)
r = run("--preset", "tiny", "--tokens", "8", "--tile-rows", "160")
check("CLI: --tile-rows 160 is refused with the choices", r.returncode == 2 and "192" in r.stderr)
with tempfile.TemporaryDirectory() as d:
    out = os.path.join(d, "f.json")
    r = run("--preset", "qwen3-30b-a3b", "--tokens", "16384", "--tile-rows", "192", "--json", out)
    j = json.load(open(out)) if r.returncode == 0 else {}
    check("CLI: the L2 path's time per pass in the JSON and the table",
          j.get("tile_rows") == 192 and "l2_ms" in j.get("passes", {}).get("forward", {}) and "L2 path" in r.stdout)
r = run("--preset", "tiny", "--tokens", "8", "--weight-grads", "sometimes")
check("CLI: a bad --weight-grads lists the choices", r.returncode == 2 and "accumulate" in r.stderr)

# --bench: a row measured exactly at its floors hides 100%, one at the no-overlap sum 0%; PyTorch rows are
# not ours (skipped); a file without megakernel rows and --bench with --preset are errors.
t = floors.summarize(floors.phases(presets["tiny"], 256, "overwrite", "pull"), 800.0, 4.0)["passes"]
with tempfile.TemporaryDirectory() as d:
    bench, out = os.path.join(d, "bench.jsonl"), os.path.join(d, "out.json")
    rows = [{"backend": "megakernel", "preset": "tiny", "tokens": 256, "weight_grads": "overwrite", "dispatch": "pull",
             "forward_ms": t["forward"]["floor_ms"], "forward_backward_ms": t["forward+backward"]["no_overlap_ms"]},
            {"backend": "pytorch-grouped-mm", "preset": "tiny", "tokens": 256, "forward_ms": 1.0, "forward_backward_ms": 2.0}]
    with open(bench, "w") as f:
        f.write("\n".join(json.dumps(r) for r in rows) + "\n")
    r = run("--bench", bench, "--json", out)
    got = json.load(open(out)) if r.returncode == 0 else []
    check("--bench: one megakernel row, two passes", len(got) == 2)
    check("--bench: measured at the floor hides 100%", len(got) == 2 and abs(got[0]["hidden"] - 1) < 1e-12)
    check("--bench: measured at the no-overlap sum hides 0%", len(got) == 2 and abs(got[1]["hidden"]) < 1e-12)
    with open(bench, "w") as f:
        f.write(json.dumps(rows[1]) + "\n")
    r = run("--bench", bench)
    check("--bench: no megakernel rows is an error", r.returncode != 0 and "no megakernel rows" in r.stderr)
    r = run("--bench", bench, "--preset", "tiny")
    check("--bench with --preset is refused", r.returncode == 2 and "no --preset" in r.stderr)
    r = run("--bench", os.path.join(d, "missing.jsonl"))
    check("--bench: a missing file is named", r.returncode == 2 and "missing.jsonl" in r.stderr)
r = run()
check("CLI: neither --preset nor --bench is refused", r.returncode == 2 and "--preset and --tokens are required" in r.stderr)

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
