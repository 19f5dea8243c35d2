#!/usr/bin/env python3
"""Renders each benchmark results JSON (bench/results/*.json) to a bar chart PNG with matplotlib.

    python3 bench/plot.py [RESULTS.json ...] [--out DIR]   # default: every bench/results/*.json

A results file holds `rows`, one per (system, variant) and case, with `p50_ms` (and p90_ms,
throughput). Rows are grouped into cases by (workload, device, dtype, batch, seq). In a case that
has RLX and peers, each peer's bar is its p50 over RLX's best p50 in that case: above 1, RLX is
that many times faster; below 1, the peer is faster. A file without peers (RLX variants or devices
only) gets p50 bars on a log axis instead. An accuracy file (rows with `cosine_mean`, no `system`)
gets one bar per row: mean and minimum cosine to the float reference. Files without rows
(conformance summaries) are skipped.
The PNG goes to DIR/<name>.png (default bench/results/plots/).
"""
import argparse
import glob
import json
import os
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))


def case_key(r):
    return (r.get("workload"), r.get("device"), r.get("dtype"), r.get("batch"), r.get("seq"))


def case_label(key, keys):
    """The parts of a case key that differ between the cases of one file."""
    parts = []
    names = ("workload", "device", "dtype", "batch", "seq")
    for i, name in enumerate(names):
        if len({k[i] for k in keys}) > 1 and key[i] is not None:
            parts.append(str(key[i]) if name in ("workload", "device", "dtype") else f"{name} {key[i]}")
    return "\n".join(textwrap.fill(p, 18) for p in (parts or [str(key[0])]))


def peer_label(r, multi_variant):
    return f"{r['system']}: {r.get('variant', '')}"[:48] if r["system"] in multi_variant else r["system"]


def ratios(doc):
    """{case key: {peer label: peer p50 / best RLX p50}} for the cases that have RLX and a peer."""
    rows = [r for r in doc.get("rows") or [] if isinstance(r.get("p50_ms"), (int, float)) and r["p50_ms"] > 0]
    variants = {}
    for r in rows:
        if r["system"] != "rlx":
            variants.setdefault(r["system"], set()).add(r.get("variant"))
    multi = {s for s, v in variants.items() if len(v) > 1}
    out = {}
    for key in dict.fromkeys(case_key(r) for r in rows):
        case = [r for r in rows if case_key(r) == key]
        ours = [r["p50_ms"] for r in case if r["system"] == "rlx"]
        peers = [r for r in case if r["system"] != "rlx"]
        if ours and peers:
            out[key] = {peer_label(r, multi): r["p50_ms"] / min(ours) for r in peers}
    return out


def title_of(doc, path):
    name = doc.get("benchmark") or os.path.splitext(os.path.basename(path))[0]
    m = doc.get("machine")
    if isinstance(m, dict):  # {"cpu", "isa", "threads", ...}
        m = ", ".join(str(v) + (" threads" if k == "threads" else "") for k, v in m.items() if k in ("cpu", "isa", "threads"))
    bits = [str(v) for v in (m, doc.get("date")) if v]
    return name + ("\n" + ", ".join(bits) if bits else "")


def plot_file(path, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(path) as f:
        doc = json.load(f)
    png = os.path.join(out_dir, os.path.splitext(os.path.basename(path))[0] + ".png")
    acc = [r for r in doc.get("rows") or [] if isinstance(r, dict) and "cosine_mean" in r and "system" not in r]
    if acc:
        return plot_accuracy(doc, acc, path, png, plt)
    rows = [r for r in doc.get("rows") or [] if isinstance(r, dict) and "system" in r]
    if not rows:
        return None
    rat = ratios(doc)
    keys = list(rat) if rat else list(dict.fromkeys(case_key(r) for r in rows))
    width_in = max(7.0, 1.6 * len(keys) + 2)
    fig, ax = plt.subplots(figsize=(min(width_in, 16), 5.5), constrained_layout=True)
    if rat:
        peers = list(dict.fromkeys(p for v in rat.values() for p in v))
        w = 0.8 / len(peers)
        for j, p in enumerate(peers):
            xs = [i + (j - (len(peers) - 1) / 2) * w for i, k in enumerate(keys) if p in rat[k]]
            ys = [rat[k][p] for k in keys if p in rat[k]]
            bars = ax.bar(xs, ys, w, label=p)
            for b, y in zip(bars, ys):
                ax.annotate(f"{y:.2f}", (b.get_x() + b.get_width() / 2, y), textcoords="offset points",
                            xytext=(0, 2), ha="center", fontsize=7)
        ax.axhline(1.0, color="black", linewidth=1)
        ax.set_ylabel("peer p50 / RLX best p50  (> 1: RLX faster)")
        ax.legend(title="peer", fontsize=8)
    else:
        labels = list(dict.fromkeys(f"{r['system']}: {r.get('variant', '')}"[:40] for r in rows))
        w = 0.8 / len(labels)
        for j, lab in enumerate(labels):
            pts = [(i, r["p50_ms"]) for i, k in enumerate(keys) for r in rows
                   if case_key(r) == k and f"{r['system']}: {r.get('variant', '')}"[:40] == lab
                   and isinstance(r.get("p50_ms"), (int, float))]
            if pts:
                ax.bar([i + (j - (len(labels) - 1) / 2) * w for i, _ in pts], [v for _, v in pts], w, label=lab)
        ax.set_yscale("log")
        ax.set_ylabel("p50 latency (ms, log scale); no peers in this file")
        ax.legend(fontsize=7)
    ax.set_xticks(range(len(keys)))
    many = len(keys) > 12
    ax.set_xticklabels([case_label(k, keys) for k in keys], rotation=60 if many else 0,
                       ha="right" if many else "center", fontsize=7 if many else 8)
    ax.set_xlabel("case")
    ax.set_title(title_of(doc, path), fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    fig.savefig(png, dpi=100)
    plt.close(fig)
    return png


def plot_accuracy(doc, rows, path, png, plt):
    """Mean and minimum cosine to the float reference, one bar pair per row."""
    labels = [textwrap.shorten(" ".join(str(r[k]) for k in ("method", "keep_float", "run_by") if r.get(k) is not None), 48)
              for r in rows]
    fig, ax = plt.subplots(figsize=(min(max(7.0, 0.9 * len(rows) + 2), 16), 5.5), constrained_layout=True)
    xs = range(len(rows))
    ax.bar([x - 0.2 for x in xs], [r["cosine_mean"] for r in rows], 0.4, label="cosine mean")
    ax.bar([x + 0.2 for x in xs], [r.get("cosine_min", r["cosine_mean"]) for r in rows], 0.4, label="cosine min")
    lo = min(r.get("cosine_min", r["cosine_mean"]) for r in rows)
    ax.set_ylim(max(0.0, lo - 0.05), 1.0)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels, rotation=45, ha="right", fontsize=7)
    ax.set_ylabel("cosine to the float reference")
    ax.set_title(title_of(doc, path), fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.savefig(png, dpi=100)
    plt.close(fig)
    return png


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", nargs="*", help="results JSON files (default: bench/results/*.json)")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "plots"), help="folder for the PNGs")
    a = ap.parse_args(argv)
    files = a.results or sorted(glob.glob(os.path.join(HERE, "results", "*.json")))
    os.makedirs(a.out, exist_ok=True)
    for f in files:
        png = plot_file(f, a.out)
        print(f"{f}: {png}" if png else f"{f}: no benchmark rows, skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
