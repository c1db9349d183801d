#!/usr/bin/env python3
"""Lower bounds on the megakernel's time for a preset: the tensor-core floor (FLOPs at a dense rate) and the
HBM floor (the bytes its data flow must move, each tensor crossing HBM once, at a bandwidth), per GEMM phase
and per pass. No GPU needed.

Why: a pass can be no faster than max(compute, HBM) with perfect overlap and no faster than their sum
without any; where a measured time sits between the two says how much of the traffic hides behind the
tensor cores (reports/megakernel-2026-12-01.md, "Floors").

The data flow is the megakernel's (megakernel/MEGAKERNEL.md): N = T * K routed rows (padding to 128-row
tiles not counted: a floor), bf16 activations and weights, fp32 weight gradients.
  forward : x -> xp (expert-major copy, written in both dispatch modes: the backward reads it; push also reads
            it back for the gate/up GEMM, pull gathers from x) -> g, u, h (saved for the backward) -> y -> out
  backward: d_out -> d_y (expert-major, scaled) -> d_h GEMM + SwiGLU backward (reads saved g, u; writes
            d_g, d_u) -> d_x_k -> d_x; router gradient <d_out, y_k>; dW_down = d_y^T h, dW_gate/up = d_g/u^T xp
            (fp32 written; read as well when accumulated).
A third count, the L2 path (l2_path): the bytes that cross the SMs' path to L2, where every GEMM tile reads
its operands' K strips again (a weight tile once per m-tile, an activation tile once per column tile), at
the aggregate rate all SMs get (~10 TB/s on the H200, ~43 B/clk per SM: simulator/probes/README.md). The
128 x 256 tile's operands alone ask about as much time of it as the tensor cores need; a 192-row tile asks
22% less (--tile-rows 192; the contention probe's tile192 rows).
Usage: scripts/floors.py --preset qwen3-30b-a3b --tokens 16384 [--weight-grads overwrite] [--dispatch pull]
       [--tflops 800] [--hbm-tbs 4.0] [--l2-tbs 10] [--tile-rows 128|192] [--json FILE]
       scripts/floors.py --bench bench.jsonl [--tflops 800] [--hbm-tbs 4.0]
         (every megakernel row of a scripts/bench_megakernel.sh file against its floors: measured, the floor
         with perfect overlap, the sum with none, and the share of the smaller floor the kernel hid)
"""
import argparse
import json
import os
import sys

BF16, F32 = 2, 4


def load_preset(name, data_dir):
    path = os.path.join(data_dir, "presets", name + ".json")
    if not os.path.isfile(path):
        known = sorted(f[:-5] for f in os.listdir(os.path.join(data_dir, "presets")) if f.endswith(".json"))
        raise SystemExit(f"floors.py: error: unknown preset '{name}' (no file {path}); known presets: {', '.join(known)}")
    return json.load(open(path))


def phases(p, T, weight_grads="accumulate", dispatch="push"):
    """[(pass, phase, flops, bytes)] of one layer: the shared expert's work folded into the same phases."""
    H, I, E, K, Is = p["hidden"], p["intermediate"], p["experts"], p["top_k"], p.get("shared_intermediate", 0)
    N = T * K
    acc = weight_grads == "accumulate"
    rows = [
        # forward
        ("forward", "dispatch", 0,
         T * H * BF16 + N * H * BF16),                                    # x read, xp written
        ("forward", "gate/up + SwiGLU", 4 * N * H * I + 4 * T * H * Is,
         (N * H * BF16 if dispatch == "push" else 0)                      # xp read (pull: gathered from x, in L2)
         + 2 * E * I * H * BF16 + 2 * Is * H * BF16                       # W_gate, W_up
         + 3 * N * I * BF16 + 3 * T * Is * BF16),                         # g, u, h written
        ("forward", "down", 2 * N * I * H + 2 * T * Is * H,
         N * I * BF16 + T * Is * BF16 + E * H * I * BF16 + Is * H * BF16  # h, W_down read
         + N * H * BF16 + (T * H * BF16 if Is else 0)),                   # y (and y_s) written
        ("forward", "combine", 0,
         N * H * BF16 + (T * H * BF16 if Is else 0) + T * H * BF16 + T * K * F32),  # y read, out written
        # backward
        ("backward", "d_y dispatch + router gradient", 0,  # the router dot products: not tensor-core work
         T * H * BF16 + N * H * BF16 + N * H * BF16 + T * K * F32),       # d_out read, d_y written, y read
        ("backward", "d_h + SwiGLU backward", 2 * N * H * I + 2 * T * H * Is,
         N * H * BF16 + (T * H * BF16 if Is else 0) + E * H * I * BF16 + Is * H * BF16  # d_y, W_down
         + 2 * N * I * BF16 + 2 * T * Is * BF16                           # saved g, u read
         + 2 * N * I * BF16 + 2 * T * Is * BF16),                         # d_g, d_u written
        ("backward", "d_x_k", 4 * N * I * H + 4 * T * Is * H,
         2 * N * I * BF16 + 2 * T * Is * BF16 + 2 * E * I * H * BF16 + 2 * Is * H * BF16  # d_g, d_u, W_gate/up
         + N * H * BF16 + (T * H * BF16 if Is else 0)),                   # d_x_k (and d_x_s) written
        ("backward", "d_x combine", 0,
         N * H * BF16 + (T * H * BF16 if Is else 0) + T * H * BF16),
        ("backward", "weight gradients", 6 * N * I * H + 6 * T * Is * H,
         N * H * BF16 + N * I * BF16                                      # d_y, h (dW_down)
         + 2 * N * I * BF16 + N * H * BF16                                # d_g, d_u, xp (dW_gate, dW_up)
         + (T * H * BF16 + 3 * T * Is * BF16 if Is else 0)
         + (2 if acc else 1) * 3 * (E * I * H + Is * H) * F32),           # dW written (and read)
    ]
    return rows


def operand_bytes(flops, tile_rows, tile_cols=256):
    """bf16 operand bytes a GEMM of `flops` reads in tiles of tile_rows x tile_cols: a tile reads 2 K
    (BM + BN) bytes for 2 BM BN K FLOPs (tiles past an edge not counted: a floor)."""
    return flops * (1 / tile_rows + 1 / tile_cols)


# Per GEMM phase, what its tiles' epilogues move besides the operands: (written, other reads) in elements
# and their sizes, from the same data flow as phases().
def _epilogue_bytes(p, T, weight_grads):
    H, I, E, K, Is = p["hidden"], p["intermediate"], p["experts"], p["top_k"], p.get("shared_intermediate", 0)
    N = T * K
    dw = 3 * (E * I * H + Is * H) * F32
    return {
        "gate/up + SwiGLU": 3 * (N * I + T * Is) * BF16,                      # g, u, h written
        "down": (N * H + (T * H if Is else 0)) * BF16,                        # y (and y_s) written
        # saved g, u read; d_g, d_u written; the (silu, grad) table window, 16 KB per 64 columns of 128 rows
        "d_h + SwiGLU backward": 2 * (N * I + T * Is) * BF16 * 2 + (N * I + T * Is) * 2,
        "d_x_k": (N * H + (T * H if Is else 0)) * BF16,                       # d_x_k (and d_x_s) written
        "weight gradients": dw * (2 if weight_grads == "accumulate" else 1),  # dW written (and read)
    }


def l2_path(p, T, weight_grads="accumulate", dispatch="push", tile_rows=128):
    """[(pass, phase, bytes)] through the SMs' L2 path: a GEMM phase's operand bytes (operand_bytes) plus its
    epilogues' bytes; a memory-bound phase (dispatch, combine, router gradient) its HBM bytes."""
    epi = _epilogue_bytes(p, T, weight_grads)
    out = []
    for pss, name, flops, nbytes in phases(p, T, weight_grads, dispatch):
        # (every HBM byte crosses the L2 path too: at small T the weights, read once, outweigh the tiles' count)
        out.append((pss, name, max(operand_bytes(flops, tile_rows) + epi[name], nbytes) if name in epi else nbytes))
    return out


def summarize(rows, tflops, hbm_tbs, l2=None, l2_tbs=10.0):
    def floor_ms(flops, nbytes):
        return flops / (tflops * 1e12) * 1e3, nbytes / (hbm_tbs * 1e12) * 1e3
    out = {"phases": [], "passes": {}}
    for pss, name, flops, nbytes in rows:
        c, m = floor_ms(flops, nbytes)
        out["phases"].append({"pass": pss, "phase": name, "flops": flops, "bytes": nbytes,
                              "compute_ms": c, "hbm_ms": m})
    for pss in ("forward", "backward"):
        f = sum(r[2] for r in rows if r[0] == pss)
        b = sum(r[3] for r in rows if r[0] == pss)
        c, m = floor_ms(f, b)
        # Per phase the floor is its max; a pass is no faster than the sum of its phases' maxima only if the
        # phases cannot overlap, so the pass floor is max(compute, HBM) of its totals (perfect overlap).
        out["passes"][pss] = {"flops": f, "bytes": b, "compute_ms": c, "hbm_ms": m,
                              "floor_ms": max(c, m), "no_overlap_ms": c + m}
    if l2 is not None:  # the L2 path's bytes and time per pass (not part of floor_ms: a measured rate, not a spec)
        for pss in ("forward", "backward"):
            b = sum(r[2] for r in l2 if r[0] == pss)
            out["passes"][pss].update(l2_bytes=b, l2_ms=b / (l2_tbs * 1e12) * 1e3)
    fw, bw = out["passes"]["forward"], out["passes"]["backward"]
    out["passes"]["forward+backward"] = {
        "flops": fw["flops"] + bw["flops"], "bytes": fw["bytes"] + bw["bytes"],
        "compute_ms": fw["compute_ms"] + bw["compute_ms"], "hbm_ms": fw["hbm_ms"] + bw["hbm_ms"],
        "floor_ms": fw["floor_ms"] + bw["floor_ms"], "no_overlap_ms": fw["no_overlap_ms"] + bw["no_overlap_ms"]}
    if l2 is not None:
        out["passes"]["forward+backward"].update(l2_bytes=fw["l2_bytes"] + bw["l2_bytes"],
                                                 l2_ms=fw["l2_ms"] + bw["l2_ms"])
    return out


def hidden_share(measured_ms, r):
    """The share of the smaller of the compute and HBM floors that a measured time hid under the other one:
    1 at the perfect-overlap floor, 0 at the no-overlap sum, negative above the sum."""
    return (r["no_overlap_ms"] - measured_ms) / min(r["compute_ms"], r["hbm_ms"])


def bench_table(path, data_dir, tflops, hbm_tbs):
    rows = []
    for n, line in enumerate(open(path), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise SystemExit(f"floors.py: error: {path} line {n}: not JSON ({e})")
        if row.get("backend") == "megakernel":
            rows.append(row)
    if not rows:
        raise SystemExit(f"floors.py: error: {path}: no megakernel rows")
    print(f"{tflops:g} TFLOP/s, {hbm_tbs:g} TB/s; hidden: the share of the smaller floor under the other (1 = perfect overlap, 0 = none)")
    print(f"{'preset':20} {'T':>6} {'dW':10} {'pass':17} {'measured':>9} {'floor':>7} {'no overlap':>10} {'hidden':>7}")
    out = []
    for row in rows:
        p = load_preset(row["preset"], data_dir)
        wg, disp = row.get("weight_grads", "accumulate"), row.get("dispatch", "push")
        s = summarize(phases(p, int(row["tokens"]), wg, disp), tflops, hbm_tbs)["passes"]
        for name, key in (("forward", "forward_ms"), ("forward+backward", "forward_backward_ms")):
            r, m = s[name], float(row[key])
            h = hidden_share(m, r)
            out.append({"preset": row["preset"], "tokens": row["tokens"], "weight_grads": wg, "pass": name,
                        "measured_ms": m, "floor_ms": r["floor_ms"], "no_overlap_ms": r["no_overlap_ms"], "hidden": h})
            print(f"{row['preset']:20} {row['tokens']:>6} {wg:10} {name:17} {m:9.2f} {r['floor_ms']:7.2f} "
                  f"{r['no_overlap_ms']:10.2f} {h * 100:6.0f}%")
    return out


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", help="a preset of data/presets (e.g. qwen3-30b-a3b)")
    ap.add_argument("--tokens", type=int, help="tokens T, >= 1")
    ap.add_argument("--bench", help="a bench.jsonl: its megakernel rows against their floors (no --preset)")
    ap.add_argument("--weight-grads", choices=["accumulate", "overwrite"], default="accumulate",
                    help="accumulate: dW += ... (read and written); overwrite: dW = ... (written)")
    ap.add_argument("--dispatch", choices=["push", "pull"], default="push", help="the forward's dispatch")
    ap.add_argument("--tflops", type=float, default=800.0, help="dense bf16 rate, TFLOP/s (> 0; default 800)")
    ap.add_argument("--hbm-tbs", type=float, default=4.0, help="HBM bandwidth, TB/s (> 0; default 4.0)")
    ap.add_argument("--l2-tbs", type=float, default=10.0,
                    help="the L2 path's aggregate rate with every SM loading, TB/s (> 0; default 10, measured)")
    ap.add_argument("--tile-rows", type=int, choices=[128, 192], default=128,
                    help="rows of a GEMM tile (256 columns) for the L2 path's operand bytes (default 128)")
    ap.add_argument("--data-dir", default=os.environ.get("CALICO_DATA_DIR", os.path.join(here, "..", "data")))
    ap.add_argument("--json", help="also write the numbers to this file")
    a = ap.parse_args(argv)
    if not a.tflops > 0 or not a.hbm_tbs > 0 or not a.l2_tbs > 0:
        ap.error(f"--tflops, --hbm-tbs and --l2-tbs must be > 0, got {a.tflops}, {a.hbm_tbs} and {a.l2_tbs}")
    if a.bench:
        if a.preset or a.tokens is not None:
            ap.error("--bench takes the presets and token counts from its rows: no --preset / --tokens")
        if not os.path.isfile(a.bench):
            ap.error(f"--bench: no file {a.bench}")
        out = bench_table(a.bench, a.data_dir, a.tflops, a.hbm_tbs)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(out, f, indent=1)
        return 0
    if a.preset is None or a.tokens is None:
        ap.error("--preset and --tokens are required (or --bench FILE)")
    if a.tokens < 1:
        ap.error(f"--tokens must be >= 1, got {a.tokens}")
    p = load_preset(a.preset, a.data_dir)
    s = summarize(phases(p, a.tokens, a.weight_grads, a.dispatch), a.tflops, a.hbm_tbs,
                  l2_path(p, a.tokens, a.weight_grads, a.dispatch, a.tile_rows), a.l2_tbs)
    s.update(preset=a.preset, tokens=a.tokens, weight_grads=a.weight_grads, dispatch=a.dispatch,
             tflops=a.tflops, hbm_tbs=a.hbm_tbs, l2_tbs=a.l2_tbs, tile_rows=a.tile_rows)
    print(f"{a.preset} T={a.tokens} ({a.dispatch} dispatch, dW {a.weight_grads}; {a.tflops:g} TFLOP/s, {a.hbm_tbs:g} TB/s)")
    print(f"{'pass':9} {'phase':32} {'GFLOP':>9} {'GB':>8} {'compute ms':>11} {'HBM ms':>8}")
    for r in s["phases"]:
        print(f"{r['pass']:9} {r['phase']:32} {r['flops'] / 1e9:9.1f} {r['bytes'] / 1e9:8.2f} {r['compute_ms']:11.3f} {r['hbm_ms']:8.3f}")
    for name, r in s["passes"].items():
        print(f"{name:17}: compute {r['compute_ms']:.2f} ms, HBM {r['hbm_ms']:.2f} ms ({r['bytes'] / 1e9:.2f} GB): "
              f"floor {r['floor_ms']:.2f} ms with perfect overlap, {r['no_overlap_ms']:.2f} ms with none; "
              f"L2 path {r['l2_ms']:.2f} ms ({r['l2_bytes'] / 1e9:.1f} GB at {a.l2_tbs:g} TB/s, {a.tile_rows} x 256 tiles)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(s, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
