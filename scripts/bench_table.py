#!/usr/bin/env python3
"""The megakernel benchmark rows (scripts/bench_megakernel.sh's bench.jsonl) as a markdown table for reports/:
ms and TFLOP/s per row, and per megakernel row its ratio to the dense ceiling, to PyTorch of the same call and
to the anchors (SonicMoE, issue 8's goal; data/anchors/). Ratios are speedups: > 1 means the megakernel is
faster. Usage: scripts/bench_table.py BENCH.jsonl [--anchors data/anchors/h200-2026-12-01.json]"""
import argparse
import json
import os
import sys


def load_rows(path):
    rows = []
    if not os.path.isfile(path):
        sys.exit(f"{path}: no such file")
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                sys.exit(f"{path}:{n}: not a JSON line ({e.msg})")
    if not rows:
        sys.exit(f"{path}: no rows")
    return rows


def name_of(r):
    name = r["backend"]
    if "dispatch" in r:
        name += f" {r['dispatch']}"
    if "task_walk" in r:
        name += f" {r['task_walk']}"
    if r.get("weight_grads", "accumulate") != "accumulate":
        name += f" dW {r['weight_grads']}"
    return name


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bench", help="bench.jsonl from scripts/bench_megakernel.sh")
    ap.add_argument("--anchors", default=os.path.join(root, "data", "anchors", "h200-2026-12-01.json"),
                    help="anchor times per 'preset tokens' (default: %(default)s)")
    a = ap.parse_args()
    rows = load_rows(a.bench)
    try:
        anchors = json.load(open(a.anchors))["rows"] if a.anchors else {}
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"--anchors {a.anchors}: not an anchors file ({e})")
    shapes = []
    for r in rows:
        key = f"{r['preset']} {r['tokens']}"
        if key not in shapes:
            shapes.append(key)
    print("| shape | backend | forward ms (TFLOP/s) | fwd+bwd ms (TFLOP/s) | of dense (fwd / fwd+bwd) | "
          "vs PyTorch | vs SonicMoE | vs goal |")
    print("|---|---|---|---|---|---|---|---|")
    for key in shapes:
        group = [r for r in rows if f"{r['preset']} {r['tokens']}" == key]
        torch = next((r for r in group if r["backend"].startswith("pytorch")), None)
        dense = torch.get("dense_tflops") if torch else None
        anchor = anchors.get(key, {})

        def speedup(r, ref):
            if not ref:
                return "-"
            return f"{ref['forward_ms'] / r['forward_ms']:.2f}x / {ref['forward_backward_ms'] / r['forward_backward_ms']:.2f}x"

        for r in group:
            mk = r["backend"] == "megakernel"
            of_dense = (f"{r['forward_tflops'] / dense:.0%} / {r['forward_backward_tflops'] / dense:.0%}"
                        if dense and mk else "-")
            print(f"| {key} | {name_of(r)} | {r['forward_ms']:.2f} ({r['forward_tflops']:.0f}) | "
                  f"{r['forward_backward_ms']:.2f} ({r['forward_backward_tflops']:.0f}) | {of_dense} | "
                  f"{speedup(r, torch) if mk else '-'} | {speedup(r, anchor.get('sonicmoe')) if mk else '-'} | "
                  f"{speedup(r, anchor.get('goal')) if mk else '-'} |")
        if dense:
            print(f"| {key} | dense bf16 ceiling (same call) | {dense:.0f} TFLOP/s | | | | | |")


if __name__ == "__main__":
    main()
