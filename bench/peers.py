#!/usr/bin/env python3
"""RLX and its peers on one host, one timing method: MiniLM-L6-shaped BERT inference and the MNIST MLP step.

Workloads (identical for every system):
  minilm b1x16, b1x128, b32x128   the seeded MiniLM-L6-shaped encoder of bench/peers_model.py
                                  (weights drawn once, loaded by each system: the HF directory, the
                                  npz or the ONNX file; token inputs from bench/minilm_cpu.make_inputs),
                                  embedding out as a host array;
  mnist_mlp_784-128-10 train b128 one SGD step (bench/peers_mnist.py), loss read back.
Systems: RLX (its BERT builder and its ONNX importer, `rlx train-mnist`), ONNX Runtime, PyTorch eager
and torch.compile, TensorFlow (tf.function graph and XLA), JAX jit, OpenVINO, IREE, tinygrad, TVM,
MLX, NumPy (MNIST only), rten. A system that cannot run a workload gets a row with p50 null and the
reason (import error, compile error, no training API, ...).

Timing: each (system, variant) runs in a fresh child process per round and times the wall time of
the call (warm-up calls first, then N timed calls; p50/p90). The rounds alternate the systems
(rotating the order) because the machine is shared: a row reports the median over rounds of the
p50s (and of the p90s), the best round's p50 (the least disturbed one) and the 1-minute load
average seen before each round, over 5 rounds by default so that one loaded round cannot decide a
row. Every system's embeddings are checked
against a NumPy evaluation of the same encoder (min cosine, max abs error in the JSON).

Writes bench/results/peers_cpu.json and its chart bench/results/plots/peers_cpu.png (bench/plot.py).

  python3 bench/peers.py [--rounds 5] [--runs 20] [--warmup 3] [--systems rlx,onnxruntime,...]
      [--workloads minilm_1x16,minilm_1x128,minilm_32x128,mnist] [--python-for SYSTEM=PATH ...]
      [--rlx build/bin/rlx] [--rlx-bench-bin build/bin/rlx_bench_minilm_cpu] [--threads N]
The peers are bench dependencies (bench/requirements-peers.txt), installed in a venv: the peer
children run with --python-for SYSTEM=PATH if given, else $RLX_PEERS_PYTHON, else
/work/peers-venv/bin/python or ./.peers-venv/bin/python when present, else this interpreter.
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

# (system, variant, package whose version is reported, workloads it has no runner for -> reason)
NO_TRAIN = "inference-only runtime: no autodiff / training-step API"
SYSTEMS = [
    ("rlx", "builder", None, {}),
    ("rlx", "onnx-import", None, {"mnist": "the training step is RLX's own graph (the builder variant)"}),
    ("onnxruntime", "cpu-ep no-spin", "onnxruntime", {"mnist": "onnxruntime-training (ORT's training API) has no wheel for "
                                                        "this onnxruntime version; inference package only"}),
    ("pytorch", "eager", "torch", {}),
    ("pytorch", "compile", "torch", {}),
    ("tensorflow", "graph", "tensorflow-cpu", {}),
    ("tensorflow", "xla", "tensorflow-cpu", {}),
    ("jax", "jit", "jax", {}),
    ("openvino", "cpu-f32 no-pin", "openvino", {"mnist": NO_TRAIN}),
    ("iree", "llvm-cpu", "iree-base-runtime", {}),
    ("tinygrad", "jit", "tinygrad", {}),
    ("tvm", "relax-llvm", "apache-tvm", {"mnist": "TVM Relax's training pipeline (relax.training) is not wired "
                                                   "into this benchmark"}),
    ("mlx", "compile", "mlx", {}),
    ("numpy", "hand-backprop", "numpy", {w: "reference only (MNIST step)" for w in
                                         ("minilm_1x16", "minilm_1x128", "minilm_32x128")}),
]
RTEN_REASON = ("rten is a Rust crate: crates.io is not reachable from this machine (only Debian and PyPI), "
               "and PyPI has its model converter (rten-convert), not the runtime")
WORKLOADS = ["minilm_1x16", "minilm_1x128", "minilm_32x128", "mnist"]
WORKLOAD_NAME = {"mnist": "mnist_mlp_784-128-10 train step"}


def shape_of(w):
    b, s = w.split("_")[1].split("x")
    return int(b), int(s)


def workload_name(w):
    return WORKLOAD_NAME.get(w, "minilm_l6 seeded encoder (mean pool + L2)")


# ---- child -------------------------------------------------------------------------------------

def child(a):
    import traceback
    with open(a.spec) as f:
        cfg = json.load(f)
    system, variant, pkg = a.child, a.variant, cfg["package"]
    res = {"rows": [], "unavailable": {}, "version": None}
    try:
        if pkg:
            from importlib.metadata import version
            try:
                res["version"] = version(pkg)
            except Exception:  # noqa: BLE001  (tensorflow vs tensorflow-cpu)
                res["version"] = version(pkg.replace("-cpu", ""))
        else:
            res["version"] = cfg.get("rlx_version")
    except Exception as e:  # noqa: BLE001
        res["version"] = f"not installed ({type(e).__name__}: {e})"[:200]
    from minilm_cpu import make_inputs
    from peers_runners import Unavailable, minilm_framework, minilm_onnx, minilm_rlx
    shapes = [shape_of(w) for w in cfg["workloads"] if w.startswith("minilm")]
    outs = {}
    if shapes:
        inputs = {(b, s): make_inputs(b, s) for b, s in shapes}
        try:
            if system == "rlx":
                rows, outs = minilm_rlx(variant, cfg["paths"], inputs, cfg)
            elif system in ("onnxruntime", "openvino", "iree", "tvm"):
                rows, outs = minilm_onnx(system, variant, cfg["paths"], inputs, cfg)
            else:
                rows, outs = minilm_framework(system, variant, cfg["paths"], inputs, cfg)
            res["rows"] += [dict(r, workload=f"minilm_{r['batch']}x{r['seq']}") for r in rows]
            res["unavailable"].update(outs.pop("skipped", {}))
        except Unavailable as e:
            for b, s in shapes:
                res["unavailable"][f"minilm_{b}x{s}"] = str(e)
        except Exception as e:  # noqa: BLE001  (import errors, unsupported ops, compiler failures)
            traceback.print_exc()
            why = f"{type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e).strip() else ''}"[:400]
            done = {r["workload"] for r in res["rows"]}
            for b, s in shapes:
                if f"minilm_{b}x{s}" not in done:
                    res["unavailable"][f"minilm_{b}x{s}"] = why
    if "mnist" in cfg["workloads"]:
        try:
            import peers_mnist
            r = peers_mnist.run(system, variant, cfg)
            res["rows"].append(dict(r, workload="mnist", batch=peers_mnist.BATCH, seq=None))
            print(f"  {system}/{variant} mnist b128: p50 {r['p50_ms']:.3f} ms", file=sys.stderr, flush=True)
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            msg = str(e).strip().splitlines()[-1] if str(e).strip() else ""
            res["unavailable"]["mnist"] = f"{type(e).__name__}: {msg}"[:400]
    np.savez(a.out + ".npz", **outs)
    with open(a.out, "w") as f:
        json.dump(res, f)


# ---- driver ------------------------------------------------------------------------------------

def loadavg1():
    return os.getloadavg()[0]


def machine_info(threads):
    name, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and name in ("", platform.machine(), platform.processor()):
                    name = line.split(":", 1)[1].strip()
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    if "avx512f" in flags:
        isa = "x86-64-v4 (AVX-512" + (", VNNI" if "avx512_vnni" in flags else "") + \
              (", BF16" if "avx512_bf16" in flags else "") + (", AMX" if "amx_tile" in flags else "") + ")"
    elif {"avx2", "fma", "bmi2"} <= flags:
        isa = "x86-64-v3 (AVX2, FMA; no AVX-512)"
    elif "sse4_2" in flags:
        isa = "x86-64-v2 (SSE4.2)"
    else:
        isa = platform.machine()
    return {"cpu": name, "isa": isa, "cores": os.cpu_count(), "threads": threads}


def default_python():
    for p in (os.environ.get("RLX_PEERS_PYTHON"), "/work/peers-venv/bin/python",
              os.path.join(ROOT, ".peers-venv", "bin", "python")):
        if p and os.path.exists(p):
            return p
    return sys.executable


def rlx_version(rlx_bin):
    try:
        h = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout
        return f"git {h.strip()}" if h.strip() else os.path.basename(rlx_bin)
    except OSError:
        return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=20, help="timed calls per cell (fewer when --budget-s is reached)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--budget-s", type=float, default=20.0, help="time budget of one cell's timed calls")
    ap.add_argument("--mnist-steps", type=int, default=100)
    ap.add_argument("--max-call-s", type=float, default=30.0,
                    help="skip a MiniLM cell whose call the previous cell predicts longer than this (reason listed)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--systems", default="", help="comma-separated systems (default: all)")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--python-for", action="append", default=[], metavar="SYSTEM=PATH")
    ap.add_argument("--rlx", default=os.path.join(ROOT, "build", "bin", "rlx"))
    ap.add_argument("--rlx-bench-bin", default=os.environ.get("RLX_BENCH_BIN", os.path.join(
        ROOT, "build", "bin", "rlx_bench_minilm_cpu")))
    ap.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "rlx_peers_cache"),
                    help="the generated model and compiled artifacts (IREE, TVM) reused across rounds and runs")
    ap.add_argument("--timeout-s", type=int, default=1200, help="one child's limit")
    ap.add_argument("--output", default=os.path.join(HERE, "results", "peers_cpu.json"))
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--child")
    ap.add_argument("--variant")
    ap.add_argument("--spec")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.child:
        return child(a)

    from peers_model import NumpyOps, encoder, prepare, write_model
    from minilm_cpu import make_inputs
    workloads = a.workloads.split(",")
    wanted = set(a.systems.split(",")) if a.systems else None
    systems = [s for s in SYSTEMS if wanted is None or s[0] in wanted or f"{s[0]}/{s[1]}" in wanted]
    py_for = dict(p.split("=", 1) for p in a.python_for)
    peer_py = default_python()
    paths = write_model(a.cache)
    tmp = tempfile.mkdtemp(prefix="rlx_peers_")
    env = dict(os.environ, RLX_BENCH_THREADS=str(a.threads), RLX_NUM_THREADS=str(a.threads),
               OMP_NUM_THREADS=str(a.threads), OPENBLAS_NUM_THREADS=str(a.threads), MKL_NUM_THREADS=str(a.threads),
               OMP_WAIT_POLICY="PASSIVE",  # spinning OpenMP workers wait for CPUs other processes hold
               TF_NUM_INTRAOP_THREADS=str(a.threads), TF_NUM_INTEROP_THREADS="1", TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=HERE)
    ref = {}
    w = prepare(dict(np.load(paths["npz"])), lambda x: x)
    for wl in workloads:
        if wl.startswith("minilm"):
            b, s = shape_of(wl)
            cached = os.path.join(a.cache, f"numpy_ref_{b}x{s}.npy")  # minutes at b32x128 on a loaded host
            if not os.path.exists(cached):
                np.save(cached, encoder(NumpyOps, w, *make_inputs(b, s)))
            ref[f"{b}x{s}"] = np.load(cached)
    results = {}  # (system, variant) -> {"p50": {wl: [..]}, "p90": .., "n", "load": [..], "why": {wl: reason}}
    for rnd in range(a.rounds):
        k = rnd % max(1, len(systems))
        for system, variant, pkg, no_runner in systems[k:] + systems[:k]:
            key = (system, variant)
            st = results.setdefault(key, {"p50": {}, "p90": {}, "n": {}, "load": {}, "why": dict(no_runner),
                                          "version": None, "agree": {}})
            todo = [x for x in workloads if x not in no_runner and not (x in st["why"] and x not in st["p50"])]
            if not todo:
                continue
            spec = os.path.join(tmp, f"{system}_{variant}.spec.json")
            out = os.path.join(tmp, f"{system}_{variant}_r{rnd}.json")
            with open(spec, "w") as f:
                json.dump({"package": pkg, "workloads": todo, "paths": paths, "warmup": a.warmup, "runs": a.runs,
                           "budget_s": a.budget_s, "max_call_s": a.max_call_s, "steps": a.mnist_steps, "cache": a.cache, "tmp": tmp,
                           "rlx_bin": a.rlx, "rlx_bench_bin": a.rlx_bench_bin, "rlx_version": rlx_version(a.rlx)}, f)
            py = py_for.get(system, sys.executable if system == "rlx" else peer_py)
            cmd = [py, os.path.abspath(__file__), "--child", system, "--variant", variant, "--spec", spec, "--out", out]
            load = loadavg1()
            print(f"[peers] round {rnd + 1}/{a.rounds} {system}/{variant} (load {load:.1f}) ...", file=sys.stderr,
                  flush=True)
            t0 = time.time()
            try:
                r = subprocess.run(cmd, env=env, timeout=a.timeout_s, capture_output=True, text=True)
                sys.stderr.write("".join(l + "\n" for l in r.stderr.splitlines() if l.startswith("  ")))
                failed = r.returncode != 0 or not os.path.exists(out)
                tail = (r.stderr.strip().splitlines() or [""])[-1][:300]
            except subprocess.TimeoutExpired:
                failed, tail = True, f"child ran past {a.timeout_s} s"
            if failed:
                for x in todo:
                    st["why"].setdefault(x, f"child failed: {tail}")
                continue
            with open(out) as f:
                res = json.load(f)
            outs = dict(np.load(out + ".npz"))
            st["version"] = res["version"]
            for x, why in res["unavailable"].items():
                st["why"].setdefault(x, why)
            for row in res["rows"]:
                x = row["workload"]
                st["p50"].setdefault(x, []).append(row["p50_ms"])
                st["p90"].setdefault(x, []).append(row["p90_ms"])
                st["n"][x] = row["n"]
                st["load"].setdefault(x, []).append(round(load, 2))
                st["why"].pop(x, None)
                got, want = outs.get(f"{row['batch']}x{row['seq']}"), ref.get(f"{row['batch']}x{row['seq']}")
                if got is not None and want is not None:
                    got = got.reshape(want.shape)
                    cos = (got * want).sum(1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1))
                    st["agree"][x] = {"min_cosine": round(float(cos.min()), 6),
                                      "max_abs_err": float(np.abs(got - want).max())}
            print(f"[peers]   done in {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
            report(a, systems, results, workloads, tmp, f"round {rnd + 1} of {a.rounds} in progress", quiet=True)
    report(a, systems, results, workloads, tmp, "complete")


def report(a, systems, results, workloads, tmp, state, quiet=False):
    """Writes the JSON (after every child too, so that an interrupted run keeps what it measured)."""
    rows = []
    med = {}
    for (system, variant), st in results.items():
        for x in workloads:
            if x in st["p50"]:
                med[(system, variant, x)] = (float(np.median(st["p50"][x])), float(np.median(st["p90"][x])))
    best_rlx = {x: min([v[0] for (s, _, w), v in med.items() if s == "rlx" and w == x] or [float("nan")])
                for x in workloads}
    for system, variant, _, _ in systems:
        st = results.get((system, variant))
        if st is None:
            continue
        for x in workloads:
            b, s = (shape_of(x) if x.startswith("minilm") else (128, None))
            row = {"system": system, "version": st["version"], "variant": variant, "device": "cpu",
                   "workload": workload_name(x), "dtype": "f32", "batch": b, "seq": s}
            if (system, variant, x) in med:
                p50, p90 = med[(system, variant, x)]
                row.update(p50_ms=round(p50, 3), p90_ms=round(p90, 3), ratio_to_rlx=round(p50 / best_rlx[x], 3),
                           rounds_p50_ms=[round(v, 3) for v in st["p50"][x]],
                           best_round_p50_ms=round(min(st["p50"][x]), 3), n_timed=st["n"][x],
                           load_avg_1m=st["load"][x])
                if x in st["agree"]:
                    row["agreement_vs_numpy"] = st["agree"][x]
            else:
                row.update(p50_ms=None, p90_ms=None, ratio_to_rlx=None, reason=st["why"].get(x, "not run"))
            rows.append(row)
    if not a.systems or "rten" in a.systems:
        for x in workloads:
            b, s = (shape_of(x) if x.startswith("minilm") else (128, None))
            rows.append({"system": "rten", "version": None, "variant": "-", "device": "cpu", "workload": workload_name(x),
                         "dtype": "f32", "batch": b, "seq": s, "p50_ms": None, "p90_ms": None, "ratio_to_rlx": None,
                         "reason": RTEN_REASON})
    doc = {"benchmark": "peers_cpu", "machine": machine_info(a.threads),
           "date": datetime.datetime.now().isoformat(timespec="seconds"),
           "timing": (f"wall time of one call (MiniLM: inputs in, embedding out as a host array; MNIST: one SGD step "
                      f"incl. reading the loss) in a fresh child process per system and round; {a.warmup} warm-up "
                      f"calls (MNIST: 5 steps), then up to {a.runs} timed calls (MNIST: {a.mnist_steps} steps; fewer "
                      f"when a cell passes {a.budget_s:.0f} s, at least 3); p50/p90 per round; {a.rounds} rounds with "
                      f"the system order rotated; a row's p50 (p90) is the median of the rounds' p50s (p90s)"),
           "ratio": "ratio_to_rlx = this row's p50 / the best RLX p50 of the workload (> 1: RLX faster)",
           "reference": "embeddings checked against NumPy running the same encoder (agreement_vs_numpy)",
           "settings": {"threads": a.threads, "rounds": a.rounds, "runs": a.runs, "warmup": a.warmup,
                        "mnist_steps": a.mnist_steps, "loadavg_1_5_15_at_end": list(os.getloadavg())},
           "state": state, "rows": rows}
    os.makedirs(os.path.dirname(a.output), exist_ok=True)
    with open(a.output, "w") as f:
        json.dump(doc, f, indent=1)
    if quiet:
        return
    print_table(doc, workloads)
    print(f"wrote {a.output} (children's files in {tmp})")
    if not a.no_plot:
        import plot
        os.makedirs(os.path.join(os.path.dirname(a.output), "plots"), exist_ok=True)
        print("chart:", plot.plot_file(a.output, os.path.join(os.path.dirname(a.output), "plots")))


def print_table(doc, workloads):
    cols = [("minilm_l6", 1, 16), ("minilm_l6", 1, 128), ("minilm_l6", 32, 128), ("mnist", 128, None)]
    by = {}
    for r in doc["rows"]:
        by.setdefault((r["system"], r["variant"]), {})[(r["workload"][:9].split(" ")[0].replace("mnist_mlp", "mnist"),
                                                        r["batch"], r["seq"])] = r
    m = doc["machine"]
    print(f"\n{m['cpu']}, {m['isa']}, {m['threads']} threads; p50 ms (x = p50 / best RLX p50)")
    print("| system | variant | version | " + " | ".join(
        f"{'MiniLM' if c[0] != 'mnist' else 'MNIST step'} b{c[1]}" + (f"xs{c[2]}" if c[2] else "") for c in cols) + " |")
    print("|---|---|---|" + "---|" * len(cols))
    for (system, variant), cells in by.items():
        out = []
        for c in cols:
            r = cells.get(c)
            if r is None:
                out.append("")
            elif r["p50_ms"] is None:
                out.append("n/a")
            else:
                out.append(f"{r['p50_ms']:.3g} ({r['ratio_to_rlx']:.2f}x)")
        ver = str(cells[next(iter(cells))].get("version") or "")[:24]
        print(f"| {system} | {variant} | {ver} | " + " | ".join(out) + " |")
    print("\nnot run:")
    for r in doc["rows"]:
        if r["p50_ms"] is None:
            print(f"  {r['system']}/{r['variant']} {r['workload'][:12]} b{r['batch']} s{r['seq']}: {r['reason'][:160]}")


if __name__ == "__main__":
    sys.exit(main())
