#!/usr/bin/env python3
"""Where a megakernel launch's time goes between and within its tasks, from the Perfetto trace of
`calico bench --timeline FILE` (plain or gzipped JSON; megakernel/MEGAKERNEL.md, "Timeline").

Per pass (forward, backward): the launch's span; per stage the record count and the duration percentiles
(p10 / p50 / p90 / max, us); and every CTA's idle time cut by what came before and after it: ("start", s) is
a CTA's wait from the pass's first record to its first task s, (a, b) the gaps between consecutive records
a and b of one CTA, (a, "end") a CTA's wait from its last record to the pass's last. The gap totals and the
records' durations of a pass add up to its span times the CTA count (checked: an error otherwise).

  usage: scripts/timeline_gaps.py TRACE.json[.gz] [--top N]
"""
import argparse
import collections
import gzip
import json
import sys


def load_events(path):
    """The trace's slices ("ph": "X") as dicts; a file that is not a calico timeline is an error naming it."""
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt") as fh:
            trace = json.load(fh)
    except (OSError, ValueError, EOFError) as e:
        raise SystemExit(f"{path}: not a readable JSON trace ({e})")
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise SystemExit(f"{path}: no 'traceEvents' list (not a `calico bench --timeline` trace)")
    events = []
    for i, e in enumerate(trace["traceEvents"]):
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        try:
            events.append({"pass": str(e["cat"]), "cta": int(e["tid"]), "stage": str(e["name"]),
                           "ts": float(e["ts"]), "dur": float(e["dur"])})
        except (KeyError, TypeError, ValueError):
            raise SystemExit(f"{path}: traceEvents[{i}] is a slice without cat, tid, name, ts and dur")
        if events[-1]["dur"] < 0:
            raise SystemExit(f"{path}: traceEvents[{i}] has a negative duration")
    return events


def percentile(sorted_values, q):
    """The q-quantile by the nearest rank below (q in [0, 1]) of a sorted, non-empty list."""
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def analyze(events):
    """{pass: {"span", "ctas", "stages": {stage: (n, p10, p50, p90, max)}, "gaps": {(a, b): [us, ...]},
    "busy": sum of durations}} for the events of each pass."""
    out = {}
    for name in sorted({e["pass"] for e in events}, key=lambda p: (p != "forward", p)):
        mine = [e for e in events if e["pass"] == name]
        t0 = min(e["ts"] for e in mine)
        t1 = max(e["ts"] + e["dur"] for e in mine)
        by_cta = collections.defaultdict(list)
        for e in mine:
            by_cta[e["cta"]].append(e)
        gaps = collections.defaultdict(list)
        for records in by_cta.values():
            records.sort(key=lambda e: e["ts"])
            gaps[("start", records[0]["stage"])].append(records[0]["ts"] - t0)
            for a, b in zip(records, records[1:]):
                gaps[(a["stage"], b["stage"])].append(b["ts"] - (a["ts"] + a["dur"]))
            gaps[(records[-1]["stage"], "end")].append(t1 - (records[-1]["ts"] + records[-1]["dur"]))
        stages = {}
        for stage in sorted({e["stage"] for e in mine}):
            d = sorted(e["dur"] for e in mine if e["stage"] == stage)
            stages[stage] = (len(d), percentile(d, 0.1), percentile(d, 0.5), percentile(d, 0.9), d[-1])
        busy = sum(e["dur"] for e in mine)
        total = busy + sum(sum(v) for v in gaps.values())
        expected = (t1 - t0) * len(by_cta)
        if any(g < -1e-3 for v in gaps.values() for g in v) or abs(total - expected) > 1e-6 * max(1.0, expected):
            raise SystemExit(f"pass '{name}': records of one CTA overlap (durations + gaps {total:.3f} us, "
                             f"span x CTAs {expected:.3f} us)")
        out[name] = {"span": t1 - t0, "ctas": len(by_cta), "stages": stages, "gaps": dict(gaps), "busy": busy}
    return out


def report(analysis, top):
    lines = []
    for name, a in analysis.items():
        idle = a["span"] * a["ctas"] - a["busy"]
        lines.append(f"{name}: span {a['span']:.1f} us, {a['ctas']} CTAs, busy "
                     f"{100 * a['busy'] / (a['span'] * a['ctas']):.1f}%, idle {idle / a['ctas']:.1f} us per CTA")
        lines.append(f"  {'stage':<16}{'records':>8}{'p10 us':>10}{'p50 us':>10}{'p90 us':>10}{'max us':>10}")
        for stage, (n, p10, p50, p90, mx) in a["stages"].items():
            lines.append(f"  {stage:<16}{n:>8}{p10:>10.2f}{p50:>10.2f}{p90:>10.2f}{mx:>10.2f}")
        lines.append(f"  {'gap (before -> after)':<34}{'count':>8}{'us per CTA':>12}{'mean us':>10}{'max us':>10}")
        ranked = sorted(a["gaps"].items(), key=lambda kv: -sum(kv[1]))
        for (before, after), v in ranked[:top]:
            lines.append(f"  {before + ' -> ' + after:<34}{len(v):>8}{sum(v) / a['ctas']:>12.2f}"
                         f"{sum(v) / len(v):>10.2f}{max(v):>10.2f}")
    return "\n".join(lines)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace", help="the trace of `calico bench --timeline` (.json or .json.gz)")
    ap.add_argument("--top", type=int, default=12, help="gap kinds shown per pass, largest total first (>= 1)")
    args = ap.parse_args(argv)
    if args.top < 1:
        ap.error(f"--top must be >= 1, got {args.top}")
    events = load_events(args.trace)
    if not events:
        raise SystemExit(f"{args.trace}: no task records")
    print(report(analyze(events), args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
