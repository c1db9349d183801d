#!/usr/bin/python3
"""Plot a `calico sweep` CSV: layer time vs communication SMs per minibatch size (best direction choice per
point), and the best layer time per forward/backward push-pull combination. Usage:
    /usr/bin/python3 scripts/plot_sweep.py sweep.csv sweep.png [--title TEXT]
"""
import argparse
import os
import csv
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("csv")
    ap.add_argument("png")
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    rows = list(csv.DictReader(open(a.csv)))
    if not rows:
        raise SystemExit(f"{a.csv}: no rows")
    best = defaultdict(lambda: float("inf"))  # (minibatch, sms) -> best layer us
    dirs = defaultdict(lambda: float("inf"))  # direction label -> best layer us
    for r in rows:
        mb, sms, t = int(r["minibatch"]), int(r["comm_sms"]), float(r["layer_us"])
        best[(mb, sms)] = min(best[(mb, sms)], t)
        label = (f"fwd {r['dispatch_fwd'][:4]}/{r['combine_fwd'][:4]}\n"
                 f"bwd {r['dispatch_bwd'][:4]}/{r['combine_bwd'][:4]}")
        dirs[label] = min(dirs[label], t)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5), gridspec_kw={"width_ratios": [3, 2]})
    for mb in sorted({k[0] for k in best}, reverse=True):
        pts = sorted((s, t) for (m, s), t in best.items() if m == mb)
        ax1.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"minibatch {mb}")
    ax1.set_xlabel("communication SMs per GPU")
    ax1.set_ylabel("layer time, forward + backward (us)")
    ax1.set_title("best push/pull choice per point")
    ax1.grid(True, alpha=0.3)
    ax1.legend(fontsize=8)
    labels = sorted(dirs, key=dirs.get)
    ax2.barh(range(len(labels)), [dirs[k] for k in labels], color="tab:blue")
    ax2.set_yticks(range(len(labels)))
    ax2.set_yticklabels(labels, fontsize=6)
    ax2.invert_yaxis()
    ax2.set_xlabel("best layer time (us)")
    ax2.set_title("dispatch/combine direction")
    lo = min(dirs.values())
    ax2.set_xlim(lo * 0.95, max(dirs.values()) * 1.02)
    fig.suptitle(a.title)
    fig.tight_layout()
    d, name = os.path.split(a.png)
    tmp = os.path.join(d, f".{name}.tmp-{os.getpid()}")
    try:  # the PNG appears only when complete
        fig.savefig(tmp, dpi=110, format="png")
        os.replace(tmp, a.png)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


if __name__ == "__main__":
    main()
