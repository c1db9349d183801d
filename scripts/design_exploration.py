#!/usr/bin/python3
"""Design exploration of the simulator's second cut (issue 11): runs the sweeps, the per-stage push/pull
comparison and the sensitivity study, and writes CSV/HDF5/JSON data under reports/simulator-data-DATE/ and
plots under reports/. Usage (from the repository root, after building `calico`):

    /usr/bin/python3 scripts/design_exploration.py --calico build/cli/calico --date 2026-12-01 [--quick]

Every number comes from `calico sweep` / `calico simulate`; this script only runs them and tabulates.
"""
import argparse
import csv
import json
import os
import re
import subprocess
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MODELS = ["deepseek-v3", "qwen3-235b-a22b", "kimi-k2"]
RANKS = [8, 36, 72]
ROUTINGS = ["uniform", "zipf:0.8", "zipf:1.2"]
TOKENS = 4096
TOPO = "gb300-nvl72"


def sh(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def tag(model, R, routing):
    return f"{model}-R{R}-{routing.replace(':', '')}"


def sweeps(a, data):
    out = {}
    for model in MODELS:
        for R in RANKS:
            for routing in ROUTINGS:
                t = tag(model, R, routing)
                csvp = os.path.join(data, f"sweep-{t}.csv")
                if not os.path.exists(csvp) or a.force:
                    txt = sh([a.calico, "sweep", "--topology", TOPO, "--preset", model, "--ranks", str(R), "--tokens",
                              str(TOKENS), "--routing", routing, "--baseline", "--out", csvp, "--hdf5",
                              csvp.replace(".csv", ".h5"), "--no-plot"])
                    open(csvp.replace(".csv", ".txt"), "w").write(txt)
                rows = list(csv.DictReader(open(csvp)))
                txt = open(csvp.replace(".csv", ".txt")).read()
                m = re.search(r"baseline: ([0-9.]+) us", txt)
                out[(model, R, routing)] = (rows, float(m.group(1)) if m else float("nan"))
                print("sweep", t, len(rows), file=sys.stderr)
    return out


STAGE_RE = re.compile(r"^(forward|backward)\s+(\w+)\s+([0-9.]+)\s+([0-9.]+)$")


def simulate(a, model, R, routing, sms, mb, d, c, topo=TOPO, extra=()):
    txt = sh([a.calico, "simulate", "--topology", topo, "--preset", model, "--ranks", str(R), "--tokens", str(TOKENS),
              "--routing", routing, "--minibatch", str(mb), "--comm-sms", str(sms), "--dispatch", d, "--combine", c,
              "--forward-only", *extra])
    st = {}
    for line in txt.splitlines():
        m = STAGE_RE.match(line.strip())
        if m:
            st[m.group(2)] = (float(m.group(3)), float(m.group(4)))
    fwd = float(re.search(r"forward ([0-9.]+) us", txt).group(1))
    util = float(re.search(r"link utilisation mean ([0-9.]+)%", txt).group(1))
    return {"stages": st, "forward_us": fwd, "util": util}


def best(rows, pred=lambda r: True, key="layer_us"):
    c = [r for r in rows if pred(r)]
    return min(c, key=lambda r: float(r[key])) if c else None


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--calico", default="build/cli/calico")
    ap.add_argument("--date", default="2026-12-01")
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--tables-only", action="store_true", help="only re-read summary.json and write tables.md + plots")
    a = ap.parse_args()
    data = f"reports/simulator-data-{a.date}"
    os.makedirs(data, exist_ok=True)
    if a.tables_only:
        res = json.load(open(os.path.join(data, "summary.json")))
        plots(res, a.date)
        open(os.path.join(data, "tables.md"), "w").write(tables(res))
        return
    res = {"sweeps": {}, "stages": {}, "sensitivity": {}}
    sw = sweeps(a, data)
    # --- best configurations and per-stage choices from the sweeps ---
    for (model, R, routing), (rows, base) in sw.items():
        b = best(rows)
        per_stage = {}
        for col, key in [("dispatch_fwd", "forward_us"), ("combine_fwd", "forward_us"),
                         ("dispatch_bwd", "backward_us"), ("combine_bwd", "backward_us")]:
            per_stage[col] = {d: float(best(rows, lambda r, d=d, col=col: r[col] == d, key)[key]) for d in ("push", "pull")}
        mok = best(rows, lambda r: r["dispatch_fwd"] == "pull" and r["combine_fwd"] == "push", "forward_us")
        bf = best(rows, key="forward_us")
        per_mb = defaultdict(lambda: float("inf"))
        for r in rows:
            per_mb[int(r["minibatch"])] = min(per_mb[int(r["minibatch"])], float(r["layer_us"]))
        res["sweeps"][tag(model, R, routing)] = {
            "model": model, "R": R, "routing": routing, "best": b, "baseline_us": base,
            "speedup": base / float(b["layer_us"]), "per_stage": per_stage,
            "mok_forward_us": float(mok["forward_us"]), "best_forward": bf, "per_minibatch": dict(per_mb)}
    # --- per-stage push/pull at the best forward config: stage times (comm mean and max over GPUs) ---
    for (model, R, routing), (rows, _) in sw.items():
        bf = res["sweeps"][tag(model, R, routing)]["best_forward"]
        sms, mb = int(bf["comm_sms"]), int(bf["minibatch"])
        for sms_try in sorted({sms, 32}):
            for d in ("push", "pull"):
                for c in ("push", "pull"):
                    res["stages"][f"{tag(model, R, routing)}-sms{sms_try}-mb{mb}-{d}-{c}"] = dict(
                        model=model, R=R, routing=routing, sms=sms_try, mb=mb, d=d, c=c,
                        **simulate(a, model, R, routing, sms_try, mb, d, c))
        print("stages", tag(model, R, routing), file=sys.stderr)
    # --- sensitivity: one parameter at a time on the least certain values ---
    base_topo = json.load(open(f"data/topologies/{TOPO}.json"))
    variants = {
        "stage_fixed_ns": [0, 5000, 17000, 30000],
        "tma_pull_bytes_in_flight_per_sm": [16384, 32768, 65536, 90601, 131072],
        "tma_push_gbps_per_sm": [150, 300, 600],
        "port_peer_overhead": [0, 0.0419, 0.1],
        "sm_peer_overhead": [0, 0.0698, 0.15],
        "hop_latency_ns": [250, 415, 800],
        "poll_ns": [50, 100, 400],
    }
    for param, values in variants.items():
        for v in values:
            t = json.loads(json.dumps(base_topo))
            t["params"][param]["value"] = v
            path = os.path.join(data, f"topo-{param}-{v}.json")
            json.dump(t, open(path, "w"), indent=1)
            for model, R in [("deepseek-v3", 72), ("kimi-k2", 36)]:
                for routing in ("uniform", "zipf:1.2"):
                    csvp = os.path.join(data, f"sens-{param}-{v}-{model}-R{R}-{routing.replace(':', '')}.csv")
                    if not os.path.exists(csvp) or a.force:
                        sh([a.calico, "sweep", "--topology", path, "--preset", model, "--ranks", str(R), "--tokens",
                            str(TOKENS), "--routing", routing, "--comm-sms", "8,16,32", "--minibatches",
                            "1024,512,256", "--out", csvp, "--no-plot"])
                    rows = list(csv.DictReader(open(csvp)))
                    b, bf = best(rows), best(rows, key="forward_us")
                    mok = best(rows, lambda r: r["dispatch_fwd"] == "pull" and r["combine_fwd"] == "push", "forward_us")
                    pd = {d: float(best(rows, lambda r, d=d: r["dispatch_fwd"] == d, "forward_us")["forward_us"])
                          for d in ("push", "pull")}
                    res["sensitivity"][f"{param}={v}|{model}-R{R}|{routing}"] = dict(
                        param=param, value=v, model=model, R=R, routing=routing, best=b, best_forward=bf,
                        mok_forward_us=float(mok["forward_us"]), dispatch_fwd=pd)
                    os.remove(csvp)
            os.remove(path)
        print("sensitivity", param, file=sys.stderr)
    json.dump(res, open(os.path.join(data, "summary.json"), "w"), indent=1)
    res = json.load(open(os.path.join(data, "summary.json")))
    plots(res, a.date)
    open(os.path.join(data, "tables.md"), "w").write(tables(res))


def cfg(r, fwd_only=False):
    s = f"{r['comm_sms']}, {r['minibatch']}, {r['dispatch_fwd']}/{r['combine_fwd']}"
    return s if fwd_only else s + f", {r['dispatch_bwd']}/{r['combine_bwd']}"


def tables(res):
    out = []
    out.append("| model | R | routing | best layer (us) | comm SMs, minibatch, fwd disp/comb, bwd disp/comb | exposed comm (us) "
               "| link util | baseline (us) | speedup | MoK choice (fwd pull/push) vs best fwd |")
    out.append("|---|---|---|---|---|---|---|---|---|---|")
    for model in MODELS:
        for R in RANKS:
            for routing in ROUTINGS:
                s = res["sweeps"][tag(model, R, routing)]
                b = s["best"]
                bf = float(s["best_forward"]["forward_us"])
                out.append(f"| {model} | {R} | {routing} | {float(b['layer_us']):.0f} | {cfg(b)} | "
                           f"{float(b['exposed_comm_us']):.0f} | {100 * float(b['link_util_mean']):.1f}% | "
                           f"{s['baseline_us']:.0f} | {s['speedup']:.2f}x | {100 * (s['mok_forward_us'] / bf - 1):+.1f}% |")
    out.append("")
    out.append("Best time with each choice of one stage (all else free), us: forward time for forward stages, backward "
               "time for backward stages.")
    out.append("")
    out.append("| model | R | routing | fwd dispatch push / pull | fwd combine push / pull | bwd dispatch push / pull "
               "| bwd combine push / pull |")
    out.append("|---|---|---|---|---|---|---|")
    for model in MODELS:
        for R in RANKS:
            for routing in ROUTINGS:
                ps = res["sweeps"][tag(model, R, routing)]["per_stage"]
                cells = []
                for col in ("dispatch_fwd", "combine_fwd", "dispatch_bwd", "combine_bwd"):
                    a, b = ps[col]["push"], ps[col]["pull"]
                    cells.append(f"{a:.0f} / {b:.0f}" + (" **pull**" if b < a * 0.995 else (" **push**" if a < b * 0.995 else "")))
                out.append(f"| {model} | {R} | {routing} | " + " | ".join(cells) + " |")
    out.append("")
    out.append("Forward dispatch stage (communication task time per GPU, mean / max over GPUs, us) at 32 comm SMs and the "
               "best forward minibatch, combine push; and the forward time of the four direction pairs:")
    out.append("")
    out.append("| model | R | routing | minibatch | push dispatch mean / max | pull dispatch mean / max | fwd us push/push, "
               "push/pull, pull/push, pull/pull |")
    out.append("|---|---|---|---|---|---|---|")
    for model in MODELS:
        for R in RANKS:
            for routing in ROUTINGS:
                st = {(v["d"], v["c"]): v for v in res["stages"].values() if v["model"] == model and v["R"] == R
                      and v["routing"] == routing and v["sms"] == 32}
                if not st:
                    continue
                mb = next(iter(st.values()))["mb"]
                pd, qd = st[("push", "push")]["stages"]["dispatch"], st[("pull", "push")]["stages"]["dispatch"]
                fw = ", ".join(f"{st[k]['forward_us']:.0f}" for k in [("push", "push"), ("push", "pull"),
                                                                       ("pull", "push"), ("pull", "pull")])
                out.append(f"| {model} | {R} | {routing} | {mb} | {pd[0]:.0f} / {pd[1]:.0f} | {qd[0]:.0f} / {qd[1]:.0f} | {fw} |")
    out.append("")
    out.append("Sensitivity (one parameter at a time; reduced sweep: comm SMs 8/16/32, minibatch 1024/512/256, 16 "
               "directions): best layer, its configuration, best forward with push vs pull dispatch, and the MoK "
               "choice's forward penalty.")
    out.append("")
    out.append("| parameter | value | case | routing | best layer (us) | best config | fwd best push disp / pull disp (us) | MoK vs best fwd |")
    out.append("|---|---|---|---|---|---|---|---|")
    for k, v in res["sensitivity"].items():
        b, bf = v["best"], float(v["best_forward"]["forward_us"])
        out.append(f"| {v['param']} | {v['value']} | {v['model']} R{v['R']} | {v['routing']} | {float(b['layer_us']):.0f} | "
                   f"{cfg(b)} | {v['dispatch_fwd']['push']:.0f} / {v['dispatch_fwd']['pull']:.0f} | "
                   f"{100 * (v['mok_forward_us'] / bf - 1):+.1f}% |")
    return "\n".join(out) + "\n"


def plots(res, date):
    # 1: best layer time and speedup per model / R / routing
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), sharey=False)
    for ax, model in zip(axes, MODELS):
        for i, routing in enumerate(ROUTINGS):
            xs = [R + (i - 1) * 2 for R in RANKS]
            ys = [float(res["sweeps"][tag(model, R, routing)]["best"]["layer_us"]) / 1e3 for R in RANKS]
            bs = [res["sweeps"][tag(model, R, routing)]["baseline_us"] / 1e3 for R in RANKS]
            ax.bar(xs, ys, width=2, label=f"best overlapped, {routing}")
            ax.scatter(xs, bs, marker="_", s=200, color="k")
        ax.set_title(model)
        ax.set_xticks(RANKS)
        ax.set_xlabel("EP ranks R")
        ax.set_ylabel("layer ms (fwd + bwd); bars: best, dashes: baseline")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(f"reports/simulator-{date}-best.png", dpi=100)
    # 2: forward dispatch: push vs pull (mean and max over GPUs) per routing at 32 comm SMs
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for ax, model in zip(axes, MODELS):
        labels, push_m, pull_m, push_x, pull_x = [], [], [], [], []
        for R in RANKS:
            for routing in ROUTINGS:
                ks = [k for k, v in res["stages"].items() if v["model"] == model and v["R"] == R
                      and v["routing"] == routing and v["sms"] == 32 and v["c"] == "push"]
                by = {res["stages"][k]["d"]: res["stages"][k]["stages"]["dispatch"] for k in ks}
                labels.append(f"R{R}\n{routing}")
                push_m.append(by["push"][0])
                pull_m.append(by["pull"][0])
                push_x.append(by["push"][1])
                pull_x.append(by["pull"][1])
        x = range(len(labels))
        ax.bar([i - 0.2 for i in x], push_m, width=0.4, label="push mean")
        ax.bar([i + 0.2 for i in x], pull_m, width=0.4, label="pull mean")
        ax.scatter([i - 0.2 for i in x], push_x, marker="v", color="tab:blue", label="push max")
        ax.scatter([i + 0.2 for i in x], pull_x, marker="v", color="tab:orange", label="pull max")
        ax.set_xticks(list(x))
        ax.set_xticklabels(labels, fontsize=6)
        ax.set_ylabel("forward dispatch us per GPU (32 comm SMs)")
        ax.set_title(model)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(f"reports/simulator-{date}-dispatch-push-pull.png", dpi=100)
    # 3: best layer time vs minibatch
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for ax, model in zip(axes, MODELS):
        for R in RANKS:
            for routing in ("uniform", "zipf:1.2"):
                pm = res["sweeps"][tag(model, R, routing)]["per_minibatch"]
                xs = sorted(int(k) for k in pm)
                ax.plot(xs, [pm[k] / 1e3 if k in pm else pm[str(k)] / 1e3 for k in xs], marker="o",
                        ls="-" if routing == "uniform" else "--", label=f"R{R} {routing}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("minibatch tokens per rank")
        ax.set_ylabel("best layer ms")
        ax.set_title(model)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(f"reports/simulator-{date}-minibatch.png", dpi=100)


if __name__ == "__main__":
    main()
