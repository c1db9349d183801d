#!/usr/bin/python3
"""Plots and HTML for a `calico gate` report.

Usage: /usr/bin/python3 scripts/plot_report.py reports/gate-NAME.json

Reads the gate's JSON (and, for each differing tensor, the two HDF5 traces with h5py when they still
exist) and writes next to it:
  gate-NAME-summary.png        configs x tensors: bitwise equal / different, per comparison
  gate-NAME-ulp-<i>.png        ULP histogram of differing tensor i
  gate-NAME-where-<i>.png      where its mismatches sit: by token (row), by column, and a (token, column) map
  gate-NAME.html               a self-contained page (plots inlined as base64 PNG)
Prints "plot: PATH" per PNG so the caller can link them. Needs matplotlib + numpy (+ h5py for the maps).
"""
import base64
import html
import json
import os
import sys

import matplotlib
import matplotlib.patches

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

MAX_DETAIL_PLOTS = 4



def save_atomic(fig, path):
    """Saves a figure to a temporary file beside `path`, then renames it: no half-written PNG."""
    d, name = os.path.split(path)
    tmp = os.path.join(d, f".{name}.tmp-{os.getpid()}")
    try:
        fig.savefig(tmp, dpi=110, format="png")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)

def summary_plot(rep, path):
    comps = rep["comparisons"]
    tensors = []
    for c in comps:
        for t in c.get("tensor_status", {}):
            if t not in tensors and not t.startswith("("):
                tensors.append(t)
    fig, ax = plt.subplots(figsize=(max(8, 0.42 * len(tensors) + 4), 0.32 * len(comps) + 2.2))
    if not comps:
        ax.text(0.5, 0.5, "no comparisons (every config failed to run)", ha="center")
        ax.axis("off")
    else:
        code = {"skipped": 0, "equal": 1, "within": 2, "different": 3}
        grid = np.full((len(comps), len(tensors)), -1.0)
        for i, c in enumerate(comps):
            for j, t in enumerate(tensors):
                st = c.get("tensor_status", {}).get(t)
                if st is not None:
                    grid[i, j] = code[st]
        cmap = matplotlib.colors.ListedColormap(["#ffffff", "#bbbbbb", "#3a9d4a", "#e0b030", "#c8352e"])
        ax.imshow(grid, cmap=cmap, vmin=-1.5, vmax=3.5, aspect="auto", interpolation="nearest")
        ax.set_yticks(range(len(comps)))
        ax.set_yticklabels([f'{c["kind"]}: {c["b"]}' + ("" if c["kind"] == "runs" else f' vs {c["a"]}')
                            for c in comps], fontsize=7)
        ax.set_xticks(range(len(tensors)))
        ax.set_xticklabels(tensors, rotation=40, ha="right", fontsize=7)
        ax.set_xticks(np.arange(-0.5, len(tensors)), minor=True)
        ax.set_yticks(np.arange(-0.5, len(comps)), minor=True)
        ax.grid(which="minor", color="white", linewidth=1)
        ax.tick_params(which="minor", length=0)
        handles = [matplotlib.patches.Patch(color=col, label=lab) for col, lab in
                   [("#3a9d4a", "bitwise equal"), ("#e0b030", "within tolerance"), ("#c8352e", "different"),
                    ("#bbbbbb", "not comparable by definition (d_ws_* at different R)")]]
        ax.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=4, fontsize=7, frameon=False)
    fig.suptitle("Gate: every comparison (rows) x tensor (columns)", fontsize=9)
    fig.tight_layout()
    save_atomic(fig, path)
    plt.close(fig)


def ulp_plot(d, title, path):
    hist = d.get("ulp_histogram", [])
    fig, ax = plt.subplots(figsize=(8, 3.2))
    labels = [h["label"] for h in hist]
    counts = [h["count"] for h in hist]
    ax.bar(range(len(hist)), counts, color="#c8352e")
    ax.set_xticks(range(len(hist)))
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    ax.set_xlabel("ULP distance")
    ax.set_ylabel("mismatching elements")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    save_atomic(fig, path)
    plt.close(fig)


def trace_map(rep, comp, d):
    """|ULP| map (global row x column) from the two traces, or None when they are gone or h5py is missing."""
    try:
        import h5py
    except ImportError:
        return None
    by_label = {c["label"]: c["trace"] for c in rep["configs"]}
    pa, pb = by_label.get(comp["a"]), by_label.get(comp["b"])
    if not pa or not pb or not os.path.exists(pa) or not os.path.exists(pb):
        return None

    def load(path, run):
        with h5py.File(path, "r") as f:
            grp = f["runs"][f"run_{run:03d}"]
            parts = [grp[k][d["tensor"]][()] for k in sorted(grp.keys())]
            return parts[0] if d["tensor"].startswith("ws_") else np.concatenate(parts, axis=0)

    fm = d.get("first_mismatch", {})
    a, b = load(pa, fm.get("run_a", 0)), load(pb, fm.get("run", 0))
    if a.shape != b.shape or a.dtype.itemsize not in (2, 4):
        return None
    a2 = a.reshape(-1, a.shape[-1]).view(np.uint16 if a.dtype == np.uint16 else np.uint32).astype(np.int64)
    b2 = b.reshape(-1, b.shape[-1]).view(np.uint16 if b.dtype == np.uint16 else np.uint32).astype(np.int64)
    bits = 16 if a.dtype == np.uint16 else 32

    def ordered(x):
        sign = (x >> (bits - 1)) & 1
        mag = x & ((1 << (bits - 1)) - 1)
        return np.where(sign == 1, -mag, mag)

    return np.abs(ordered(a2) - ordered(b2))


def where_plot(rep, comp, d, title, path):
    rows = np.array(d.get("mismatch_by_row", []), dtype=np.int64).reshape(-1, 2)
    cols = np.array(d.get("mismatch_by_column", []), dtype=np.int64).reshape(-1, 2)
    ulp_map = trace_map(rep, comp, d)
    base = d["tensor"][2:] if d["tensor"].startswith("d_") else d["tensor"]
    row_label = "global token" if base in ("x", "out", "topk_experts", "router_weights") else \
        "global row (all axes but the last, flattened)"
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    axes[0].bar(rows[:, 0], rows[:, 1], width=1.0, color="#c8352e")
    axes[0].set_xlim(-0.5, max(d["rows"], 1) - 0.5)
    axes[0].set_xlabel(row_label)
    axes[0].set_ylabel("mismatches")
    axes[1].bar(cols[:, 0], cols[:, 1], width=1.0, color="#c8352e")
    axes[1].set_xlim(-0.5, max(d["columns"], 1) - 0.5)
    axes[1].set_xlabel("column")
    if ulp_map is not None:
        im = axes[2].imshow(np.log2(1 + ulp_map), aspect="auto", interpolation="nearest", cmap="magma")
        fig.colorbar(im, ax=axes[2], label="log2(1 + ULP)")
        axes[2].set_title("|ULP| from the traces (h5py)", fontsize=8)
    else:
        sample = np.array(d.get("mismatch_sample", []), dtype=np.int64).reshape(-1, 2)
        axes[2].scatter(sample[:, 1], sample[:, 0], s=6, color="#c8352e")
        axes[2].set_xlim(-0.5, max(d["columns"], 1) - 0.5)
        axes[2].set_ylim(max(d["rows"], 1) - 0.5, -0.5)
        axes[2].set_title("mismatch positions (traces removed)", fontsize=8)
    axes[2].set_xlabel("column")
    axes[2].set_ylabel(row_label, fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.9))
    save_atomic(fig, path)
    plt.close(fig)


def img(path):
    with open(path, "rb") as f:
        return "data:image/png;base64," + base64.b64encode(f.read()).decode()


def write_html(rep, stem, plots, md_path):
    e = html.escape
    passed = rep["passed"]
    p = rep["provenance"]
    o = rep["options"]
    out = [
        "<!doctype html><html><head><meta charset='utf-8'><title>Calico gate</title><style>",
        "body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;font-size:13px}",
        "td,th{border:1px solid #bbb;padding:3px 8px}.pass{color:#2a7d3a}.fail{color:#c8352e}",
        "img{max-width:100%;border:1px solid #ddd;margin:6px 0}code{background:#f3f3f3}</style></head><body>",
        f"<h1>Calico determinism gate: <span class='{'pass' if passed else 'fail'}'>"
        f"{'PASSED' if passed else 'FAILED'}</span></h1>",
        f"<p>{e(p['created_utc'])} &middot; commit <code>{e(p['git_commit'])}</code> &middot; {e(p['host'])} "
        f"&middot; {e(p['cpu'])} &middot; {e(p['device'])}</p>",
        f"<p>preset <code>{e(o['preset'])}</code>, {o['tokens']} global tokens, routing <code>{e(o['routing'])}"
        f"</code>, seed {o['seed']}, {o['runs']} runs per config, baseline <code>{e(o['baseline'])}</code>, "
        f"tolerance {e(o['tolerance'])}</p>",
        "<h2>Configs</h2><table><tr><th>config</th><th>status</th><th>seconds</th></tr>",
    ]
    for c in rep["configs"]:
        status = "ran" if c["ok"] else "ERROR: " + c["error"]
        out.append(f"<tr><td>{e(c['label'])}</td><td>{e(status)}</td><td>{c['seconds']:.2f}</td></tr>")
    out.append("</table>")
    if rep["failures"]:
        out.append("<h2>Failures</h2><table><tr><th>comparison</th><th>tensor</th><th>first mismatch</th>"
                   "<th>mismatches</th><th>max ULP</th></tr>")
        for f in rep["failures"]:
            out.append(f"<tr><td>{e(f['kind'])}: {e(f['b'])} vs {e(f['a'])}</td><td><code>{e(f['tensor'])}</code>"
                       f"</td><td>{e(f['location'])}</td><td>{f['mismatches']}</td><td>{f['max_ulp']}</td></tr>")
        out.append("</table>")
    out.append("<h2>Plots</h2>")
    for path, caption in plots:
        out.append(f"<figure><img alt='{e(caption)}' src='{img(path)}'><figcaption>{e(caption)}</figcaption></figure>")
    if rep.get("notes"):
        out.append("<h2>Notes</h2><ul>" + "".join(f"<li>{e(n)}</li>" for n in rep["notes"]) + "</ul>")
    out.append(f"<p>Markdown: <code>{e(os.path.basename(md_path))}</code>, JSON: "
               f"<code>{e(os.path.basename(stem))}.json</code></p></body></html>")
    tmp = f"{stem}.html.tmp-{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            f.write("\n".join(out))
        os.replace(tmp, stem + ".html")  # the report appears only when complete
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    json_path = sys.argv[1]
    with open(json_path) as f:
        rep = json.load(f)
    stem = json_path[:-5] if json_path.endswith(".json") else json_path
    plots = []
    path = stem + "-summary.png"
    summary_plot(rep, path)
    plots.append((path, "Summary: every comparison and the tensors that differ"))
    n = 0
    for comp in rep["comparisons"]:
        for d in comp["differences"]:
            if n >= MAX_DETAIL_PLOTS or not d.get("ulp_histogram"):
                continue
            title = f"{d['tensor']}, {comp['kind']}: {comp['b']} ({d['b']}) vs {comp['a']} ({d['a']})\n" \
                    f"first mismatch: {d['first_mismatch']['location']}"
            path = f"{stem}-ulp-{n}.png"
            ulp_plot(d, "ULP histogram: " + title, path)
            plots.append((path, "ULP histogram, " + title))
            path = f"{stem}-where-{n}.png"
            where_plot(rep, comp, d, "Where mismatches sit: " + title, path)
            plots.append((path, "Where mismatches sit, " + title))
            n += 1
    write_html(rep, stem, plots, stem + ".md")
    for path, _ in plots:
        print("plot: " + path)


if __name__ == "__main__":
    main()
