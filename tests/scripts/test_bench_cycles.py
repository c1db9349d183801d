#!/usr/bin/env python3
"""scripts/bench_cycles.py: the cycles of an iteration are its ms times its MHz (checked on rows built here,
whose answer is known: 2 ms at 1500 MHz is 3 Mcycles), the median is over iterations, rows without clocks are
named, not guessed; negative control: a row whose clocks were shuffled against its times gives another
median (so the pairing is what the check sees). Exit 1 on any failure."""
import json
import os
import subprocess
import sys
import tempfile

from script_checks import check, failures, load_script, script_path

SCRIPT = script_path("bench_cycles.py")
bc = load_script("bench_cycles.py")


row = {"preset": "p", "forward_ms_each": [2.0, 2.5, 3.0], "forward_mhz_each": [1500.0, 1200.0, 1000.0],
       "forward_backward_ms_each": [8.0, 8.0, 9.0], "forward_backward_mhz_each": [1500.0, 1500.0, 1000.0]}
f = bc.pass_stats(row, "forward")
check("forward: 2 ms at 1500 MHz, 2.5 at 1200, 3 at 1000 are 3 Mcycles each", abs(f[2] - 3.0) < 1e-9)
check("median ms 2.5, median MHz 1200, min ms 2.0", f[0] == 2.5 and f[1] == 1200.0 and f[3] == 2.0)
b = bc.pass_stats(row, "forward_backward")
check("forward+backward: cycles 12, 12, 9 -> median 12", abs(b[2] - 12.0) < 1e-9)
shuffled = dict(row, forward_mhz_each=[1000.0, 1500.0, 1200.0])  # negative control: clocks of other iterations
check("clocks paired with other iterations give another median (cycles 2, 3.75, 3.6 -> 3.6, not 3)",
      abs(bc.pass_stats(shuffled, "forward")[2] - 3.6) < 1e-9)
check("mismatched lengths are no data", bc.pass_stats(dict(row, forward_mhz_each=[1.0]), "forward") is None)
check("an older row (no clocks) is no data", bc.pass_stats({"forward_ms": 2.0}, "forward") is None)

with tempfile.TemporaryDirectory() as d:
    good = os.path.join(d, "a.json")
    with open(good, "w") as fh:
        fh.write(json.dumps(row) + "\n" + json.dumps({"preset": "old", "forward_ms": 1.0}) + "\n")
    out = subprocess.run([sys.executable, SCRIPT, good], capture_output=True, text=True)
    check("CLI: exit 0 and a row with 3.000 Mcycles", out.returncode == 0 and "3.000" in out.stdout)
    check("CLI: the old row is named as having no clocks", "no per-iteration times or clocks" in out.stdout)
    bad = os.path.join(d, "bad.json")
    with open(bad, "w") as fh:
        fh.write("{not json\n")
    out = subprocess.run([sys.executable, SCRIPT, bad], capture_output=True, text=True)
    check("CLI: a broken line is an error naming the file and line", out.returncode != 0 and "bad.json:1" in out.stderr)
    out = subprocess.run([sys.executable, SCRIPT, os.path.join(d, "missing.json")], capture_output=True, text=True)
    check("CLI: a missing file is an error naming it", out.returncode != 0 and "missing.json" in out.stderr)
sys.exit(1 if failures else 0)
