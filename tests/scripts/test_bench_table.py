#!/usr/bin/env python3
"""scripts/bench_table.py on hand-made rows whose ratios are known by construction (the megakernel at half
PyTorch's time is a 2.00x speedup; 400 of 800 TFLOP/s is 50% of dense), plus its bad-input errors. Exit 1
on any failure."""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "bench_table.py")
failures = []


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


def check(what, ok):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


with tempfile.TemporaryDirectory() as d:
    rows = [
        {"backend": "megakernel", "preset": "p", "tokens": 8, "dispatch": "pull", "task_walk": "dynamic",
         "forward_ms": 1.0, "forward_tflops": 400.0, "forward_backward_ms": 4.0, "forward_backward_tflops": 200.0},
        {"backend": "pytorch-grouped-mm", "preset": "p", "tokens": 8, "forward_ms": 2.0, "forward_tflops": 200.0,
         "forward_backward_ms": 2.0, "forward_backward_tflops": 400.0, "dense_tflops": 800.0},
    ]
    bench = os.path.join(d, "bench.jsonl")
    with open(bench, "w") as f:
        f.write("\n".join(json.dumps(r) for r in rows) + "\n")
    anchors = os.path.join(d, "anchors.json")
    with open(anchors, "w") as f:
        json.dump({"rows": {"p 8": {"sonicmoe": {"forward_ms": 0.5, "forward_backward_ms": 8.0},
                                    "goal": {"forward_ms": 1.0, "forward_backward_ms": 4.0}}}}, f)
    r = run(bench, "--anchors", anchors)
    mk = next((l for l in r.stdout.splitlines() if "megakernel pull dynamic" in l), "")
    cells = [c.strip() for c in mk.split("|")]
    check("exit 0", r.returncode == 0)
    check("dense share 50% / 25%", "50% / 25%" in cells)
    check("vs PyTorch 2.00x / 0.50x", "2.00x / 0.50x" in cells)
    check("vs SonicMoE 0.50x / 2.00x", "0.50x / 2.00x" in cells)
    check("vs goal 1.00x / 1.00x", "1.00x / 1.00x" in cells)
    check("the ceiling row", "800 TFLOP/s" in r.stdout)
    # an overwrite-mode row is labelled as such; an accumulate row (or one without the field) is not
    rows.append(dict(rows[0], weight_grads="overwrite"))
    with open(bench, "w") as f:
        f.write("\n".join(json.dumps(x) for x in rows) + "\n")
    r = run(bench, "--anchors", anchors)
    labels = [l.split("|")[2].strip() for l in r.stdout.splitlines() if "megakernel" in l]
    check("overwrite row labelled, accumulate row not",
          labels == ["megakernel pull dynamic", "megakernel pull dynamic dW overwrite"])
    rows.pop()
    # negative control: the same rows with PyTorch twice as fast must not show 2.00x
    rows[1]["forward_ms"] = 0.5
    with open(bench, "w") as f:
        f.write("\n".join(json.dumps(x) for x in rows) + "\n")
    r = run(bench, "--anchors", anchors)
    check("negative control: a changed baseline changes the ratio", "2.00x / 0.50x" not in r.stdout and "0.50x / 0.50x" in r.stdout)
    # bad input: a line that is not JSON names the file and line; an empty file says so
    with open(bench, "w") as f:
        f.write(json.dumps(rows[0]) + "\n{oops\n")
    r = run(bench, "--anchors", anchors)
    check("bad line: exit != 0, names file:line", r.returncode != 0 and f"{bench}:2" in r.stderr)
    r = run(os.path.join(d, "missing.jsonl"), "--anchors", anchors)
    check("missing file: exit != 0, names it", r.returncode != 0 and "missing.jsonl: no such file" in r.stderr)
    with open(bench, "w") as f:
        f.write(json.dumps(rows[0]) + "\n")
    r = run(bench, "--anchors", os.path.join(d, "nope.json"))
    check("missing anchors: exit != 0, names --anchors", r.returncode != 0 and "--anchors" in r.stderr)
    open(bench, "w").close()
    r = run(bench, "--anchors", anchors)
    check("empty file: exit != 0, says no rows", r.returncode != 0 and "no rows" in r.stderr)

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
