#!/usr/bin/env python3
"""Time and SM cycles of `calico bench --json` rows, per iteration (forward_ms_each, forward_mhz_each, ...).

Why: under sustained load the H200 lowers its SM clock at its power cap (1.3-1.7 GHz of 1.98 on our shapes,
2026-12-03), and the clock of a run depends on what ran before it, so two medians of time differ by 5-10%
between identical binaries. The cycles of an iteration (ms x MHz: CTA 0's cycles over its lifetime in the
pass) vary far less, which makes them the A/B measure of a kernel change; the time is what a user gets.
Usage: scripts/bench_cycles.py FILE.json|FILE.jsonl [...]   (a table: medians of ms, MHz and Mcycles)"""
import json
import statistics
import sys


def rows_of(path):
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        sys.exit(f"{path}: {e.strerror}")
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                sys.exit(f"{path}:{n}: not a JSON line ({e.msg})")
    return rows


def pass_stats(row, key):
    """(median ms, median MHz, median Mcycles, min ms) of one pass, or None without per-iteration data."""
    ms, mhz = row.get(f"{key}_ms_each"), row.get(f"{key}_mhz_each")
    if not ms or not mhz or len(ms) != len(mhz):
        return None
    cycles = [t * f / 1e3 for t, f in zip(ms, mhz)]  # ms x MHz = 1e3 cycles; / 1e3 -> Mcycles
    return statistics.median(ms), statistics.median(mhz), statistics.median(cycles), min(ms)


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    print(f"{'row (variant or file)':40} {'preset':20} {'fwd ms':>7} {'MHz':>5} {'Mcyc':>7} | {'f+b ms':>7} {'MHz':>5} {'Mcyc':>7}")
    for path in argv:
        for r in rows_of(path):
            name = r.get("variant") or path[-40:]  # scripts/variants.sh tags its rows
            f, b = pass_stats(r, "forward"), pass_stats(r, "forward_backward")
            if f is None or b is None:
                print(f"{name:40} {r.get('preset', '?'):20} (no per-iteration times or clocks: an older calico)")
                continue
            print(f"{name:40} {r.get('preset', '?'):20} {f[0]:7.3f} {f[1]:5.0f} {f[2]:7.3f} | {b[0]:7.3f} {b[1]:5.0f} {b[2]:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
