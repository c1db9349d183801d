#!/usr/bin/python3
"""The CLI bad-input suite (issue 9): every case of bad_input_cases.txt runs the `calico` binary in a fresh
folder holding the fixtures below, and must end with the expected exit code and a message containing the
expected text. After every case: no file named INJECTED exists (no shell ever saw user text), no temporary
`.NAME.tmp-PID` file is left behind, and the case's `exists:` / `absent:` files are (not) there.

Usage: bad_input.py CALICO CASES WORKDIR
Case lines: EXIT | TEXT | ARGUMENTS (shell words, split by shlex, never run by a shell) [| exists:F  absent:F]
(checks separated by two spaces: file names may hold single spaces and quotes)
"""
import json
import re
import os
import shlex
import shutil
import subprocess
import sys


def fixtures(data_dir):
    """name -> file content (bytes or str), written into every case's folder."""
    f = {}
    ok_matrix = {"configs": [{"backend": "reference", "ranks": 1}]}
    f["m_ranks0.json"] = json.dumps({"configs": [{"backend": "reference", "ranks": 0}]})
    f["m_tokens_frac.json"] = json.dumps({"tokens": 64.5, **ok_matrix})
    f["m_tokens_huge.json"] = '{"tokens": 1e12, "configs": [{"ranks": 1}]}'
    f["m_tokens_big.json"] = json.dumps({"tokens": 1 << 25, **ok_matrix})
    f["m_key_typo.json"] = json.dumps({"configs": [{"backend": "reference", "rank": 2}]})
    f["m_top_typo.json"] = json.dumps({"token": 16, **ok_matrix})
    f["m_not_json.json"] = '{"configs": [ '
    f["m_no_configs.json"] = json.dumps({"configs": []})
    f["m_configs_number.json"] = json.dumps({"configs": 3})
    f["m_ranks_string.json"] = json.dumps({"configs": [{"ranks": "2"}]})
    f["m_runs_neg.json"] = json.dumps({"runs": -1, **ok_matrix})
    f["m_dtype_bad.json"] = json.dumps({"configs": [{"ranks": 1, "dtype": "fp4"}]})
    f["m_comm_sms0.json"] = json.dumps({"configs": [{"ranks": 1, "comm_sms": 0}]})
    f["m_seed_neg.json"] = json.dumps({"seed": -3, **ok_matrix})
    f["m_array.json"] = "[1, 2]"
    f["m_ranks_wrap.json"] = json.dumps({"configs": [{"ranks": 4294967297}]})
    # Presets live in the data folder (CALICO_DATA_DIR points at a copy with these added).
    tiny = json.load(open(os.path.join(data_dir, "presets", "tiny.json")))
    presets = {
        "p_frac": {**tiny, "hidden": 64.7},
        "p_wrap": {**tiny, "hidden": 4294967360},
        "p_typo": {k: v for k, v in {**tiny, "hiddn": 64}.items() if k != "hidden"},
        "p_extra": {**tiny, "topk": 4},
        "p_string": {**tiny, "hidden": "64"},
        "p_neg": {**tiny, "experts": -16},
        "p_k_gt_e": {**tiny, "top_k": 17},
    }
    topo = json.load(open(os.path.join(data_dir, "topologies", "h200x2.json")))

    def topo_with(**changes):
        t = json.loads(json.dumps(topo))
        for k, v in changes.items():
            if k in ("name", "description", "gpu"):
                t[k] = v
            else:
                t["params"][k]["value"] = v
        return json.dumps(t)

    f["t_sms_frac.json"] = topo_with(sms=132.9)
    f["t_huge.json"] = topo_with(hop_latency_ns=1e300)
    f["t_tiny_rate.json"] = topo_with(link_gbps=1e-300)
    f["t_neg.json"] = topo_with(fence_ns=-5)
    f["t_quote.json"] = topo_with(name="x';touch INJECTED;'\"")
    t = json.loads(topo_with())
    t["params"]["sms"]["valeu"] = 1
    f["t_typo.json"] = json.dumps(t)
    cal = json.load(open(os.path.join(data_dir, "calibration", "h200x2.json")))
    c = json.loads(json.dumps(cal)); c["measurements"][0]["value"] = 1e300
    f["c_huge.json"] = json.dumps(c)
    c = json.loads(json.dumps(cal)); c["measurements"][0]["vlaue"] = 3
    f["c_typo.json"] = json.dumps(c)
    c = json.loads(json.dumps(cal)); c["measurements"][0]["value"] = "fast"
    f["c_string.json"] = json.dumps(c)
    f["tl_nonnum.csv"] = "rank,sm,role,pass,stage,minibatch,start_ns,end_ns\n0,0,comm,forward,dispatch,0,abc,10\n"
    f["tl_frac.json"] = json.dumps([{"rank": 0, "stage": "dispatch", "minibatch": 0, "start_ns": 1.5, "end_ns": 9}])
    f["tl_typo.json"] = json.dumps([{"rank": 0, "stage": "dispatch", "minibatch": 0, "start_ns": 1, "end_ns": 9,
                                     "strat": 1}])
    f["text.h5"] = "not an HDF5 file\n"
    f["afile"] = "a plain file\n"
    return f, presets


def make_h5(path, shape, write):
    import h5py  # python3-h5py, installed by scripts/install-deps.sh
    with h5py.File(path, "w") as h:
        g = h.create_group("routing")
        a = g.create_dataset("topk_experts", shape=shape, dtype="i4")
        b = g.create_dataset("router_weights", shape=shape, dtype="f4")
        if write:
            a[...] = 0
            b[...] = 1.0


def main():
    calico, cases_path, work = sys.argv[1:4]
    calico = os.path.abspath(calico)
    real_data = os.environ.get("CALICO_DATA_DIR") or os.path.join(os.path.dirname(__file__), "..", "..", "data")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    data = os.path.join(work, "data")
    for sub in ("presets", "topologies", "calibration"):
        shutil.copytree(os.path.join(real_data, sub), os.path.join(data, sub))
    # The plotting scripts sit beside the data folder, as in the source tree and the install tree.
    shutil.copytree(os.path.join(real_data, "..", "scripts"), os.path.join(work, "scripts"))
    files, presets = fixtures(real_data)
    for name, p in presets.items():
        with open(os.path.join(data, "presets", name + ".json"), "w") as out:
            json.dump(p, out)
    shared = os.path.join(work, "shared")
    os.makedirs(shared)
    make_h5(os.path.join(shared, "r_huge.h5"), (1 << 31, 4), write=False)  # claims 32 GiB, holds nothing
    make_h5(os.path.join(shared, "r_3d.h5"), (4, 2, 2), write=True)
    env = dict(os.environ, CALICO_DATA_DIR=data, OMP_NUM_THREADS="2")
    good = os.path.join(shared, "good.h5")
    subprocess.run([calico, "run", "--tokens", "16", "--out", good], env=env, check=True, capture_output=True)
    with open(good, "rb") as src, open(os.path.join(shared, "truncated.h5"), "wb") as dst:
        dst.write(src.read(3000))

    fails = total = 0
    for lineno, line in enumerate(open(cases_path), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        cols = [c.strip() for c in line.split("|")]
        want, text, args = int(cols[0]), cols[1], shlex.split(cols[2])
        checks = re.split(r"\s{2,}", cols[3].strip()) if len(cols) > 3 and cols[3].strip() else []
        total += 1
        case = os.path.join(work, f"case-{lineno}")
        os.makedirs(os.path.join(case, "adir"))
        for name, content in files.items():
            with open(os.path.join(case, name), "w") as out:
                out.write(content)
        for name in os.listdir(shared):
            shutil.copy(os.path.join(shared, name), case)
        pid = None
        # NOTE: each case gets its own TMPDIR, so a gate folder another (concurrent) test left behind under
        # a recycled PID cannot be taken for this case's.
        case_tmp = os.path.join(case, "tmp")
        os.makedirs(case_tmp, exist_ok=True)
        case_env = dict(env, TMPDIR=case_tmp)
        with subprocess.Popen([calico] + args, cwd=case, env=case_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) as p:
            pid = p.pid
            try:
                out, _ = p.communicate(timeout=120)
                rc = p.returncode
            except subprocess.TimeoutExpired:
                p.kill()
                out, _ = p.communicate()
                rc = "timeout"
        problems = []
        if rc != want:
            problems.append(f"exit {rc}, want {want}")
        if text and text not in out:
            problems.append(f"output lacks {text!r}")
        left = []
        for root, _, names in os.walk(case):
            for n in names:
                if n == "INJECTED":
                    problems.append(f"INJECTED exists in {root}: a shell ran user text")
                if ".tmp-" in n:
                    left.append(os.path.join(root, n))
        if left:
            problems.append(f"temporary files left: {left}")
        for c in checks:
            kind, _, name = c.partition(":")
            there = os.path.exists(os.path.join(case, name))
            if (kind == "exists") != there:
                problems.append(f"{name} should {'exist' if kind == 'exists' else 'not exist'}")
        gate_dir = os.path.join(case_tmp, f"calico-gate-{pid}")
        if pid and os.path.exists(gate_dir):  # a gate's temporary trace folder must not outlive it
            problems.append(f"left {gate_dir}")
            shutil.rmtree(gate_dir, ignore_errors=True)
        if problems:
            fails += 1
            print(f"FAIL line {lineno}: calico {cols[2]}\n     " + "; ".join(problems))
            print("     " + out.strip().replace("\n", "\n     ")[-1500:])
        else:
            print(f"ok   line {lineno}: exit {rc}: calico {cols[2]}")
            shutil.rmtree(case, ignore_errors=True)
    print(f"{total} cases, {fails} failure(s)")
    if total < 60:
        print("FAIL: the suite must hold at least 60 cases")
        fails += 1
    if fails == 0:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
