#!/usr/bin/env python3
"""scripts/timeline_gaps.py on traces built here, whose gaps are known by construction: two CTAs with a start
wait, gaps between tasks and an end wait; the per-stage percentiles; the busy fraction. Negative controls: a
trace whose records of one CTA overlap is refused (so the accounting check can fail), and moving one record
changes the gaps it reports. CLI: plain and gzipped files, errors naming the file. Exit 1 on any failure."""
import gzip
import json
import os
import subprocess
import sys
import tempfile

from script_checks import check, failures, load_script, script_path

SCRIPT = script_path("timeline_gaps.py")
tg = load_script("timeline_gaps.py")


def trace(records):
    """A trace as calico bench --timeline writes it: metadata rows plus one slice per (cta, stage, ts, dur)."""
    ev = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "forward"}}]
    ev += [{"ph": "X", "name": s, "cat": "forward", "pid": 1, "tid": c, "ts": t, "dur": d, "args": {}}
           for c, s, t, d in records]
    return {"displayTimeUnit": "ns", "traceEvents": ev}


# CTA 0: dispatch [0, 10], gate_up [12, 20], combine [20, 30]; CTA 1: gate_up [5, 15], down [16, 28].
RECORDS = [(0, "dispatch", 0.0, 10.0), (0, "gate_up", 12.0, 8.0), (0, "combine", 20.0, 10.0),
           (1, "gate_up", 5.0, 10.0), (1, "down", 16.0, 12.0)]
ev = [{"pass": "forward", "cta": c, "stage": s, "ts": t, "dur": d} for c, s, t, d in RECORDS]
a = tg.analyze(ev)["forward"]
check("span 30 us over 2 CTAs", a["span"] == 30.0 and a["ctas"] == 2)
check("busy 50 us of 60", a["busy"] == 50.0)
g = a["gaps"]
check("CTA 1 waits 5 us for its first task", g[("start", "gate_up")] == [5.0])
check("CTA 0 starts at once", g[("start", "dispatch")] == [0.0])
check("dispatch -> gate_up 2 us, gate_up -> down 1 us, gate_up -> combine 0",
      g[("dispatch", "gate_up")] == [2.0] and g[("gate_up", "down")] == [1.0] and g[("gate_up", "combine")] == [0.0])
check("CTA 1 ends 2 us before the pass", g[("down", "end")] == [2.0] and g[("combine", "end")] == [0.0])
check("gate_up durations: two records, p50 the larger (nearest rank below of [8, 10])",
      a["stages"]["gate_up"] == (2, 8.0, 10.0, 10.0, 10.0))
moved = [dict(e) for e in ev]
moved[1]["ts"] = 10.0  # negative control: gate_up of CTA 0 right after its dispatch
check("moving a record moves its gaps", tg.analyze(moved)["forward"]["gaps"][("dispatch", "gate_up")] == [0.0])
overlap = [dict(e) for e in ev]
overlap[1]["ts"] = 8.0  # negative control: overlaps the dispatch
try:
    tg.analyze(overlap)
    check("overlapping records of one CTA are refused", False)
except SystemExit as e:
    check("overlapping records of one CTA are refused, naming the pass", "forward" in str(e) and "overlap" in str(e))

with tempfile.TemporaryDirectory() as d:
    plain, zipped = os.path.join(d, "t.json"), os.path.join(d, "t.json.gz")
    with open(plain, "w") as fh:
        json.dump(trace(RECORDS), fh)
    with gzip.open(zipped, "wt") as fh:
        json.dump(trace(RECORDS), fh)
    for path in (plain, zipped):
        out = subprocess.run([sys.executable, SCRIPT, path], capture_output=True, text=True)
        check(f"CLI {os.path.basename(path)}: exit 0, busy 83.3%", out.returncode == 0 and "busy 83.3%" in out.stdout)
        check(f"CLI {os.path.basename(path)}: the start wait per CTA (5 us / 2 = 2.50)",
              "start -> gate_up" in out.stdout and "2.50" in out.stdout)
    out = subprocess.run([sys.executable, SCRIPT, os.path.join(d, "missing.json")], capture_output=True, text=True)
    check("CLI: a missing file is an error naming it", out.returncode != 0 and "missing.json" in out.stderr)
    bad = os.path.join(d, "bad.json")
    with open(bad, "w") as fh:
        fh.write('{"records": []}')
    out = subprocess.run([sys.executable, SCRIPT, bad], capture_output=True, text=True)
    check("CLI: a JSON file that is not a trace is an error naming it", out.returncode != 0 and "bad.json" in out.stderr
          and "traceEvents" in out.stderr)
    out = subprocess.run([sys.executable, SCRIPT, plain, "--top", "0"], capture_output=True, text=True)
    check("CLI: --top 0 is an error naming the argument", out.returncode != 0 and "--top" in out.stderr)
sys.exit(1 if failures else 0)
