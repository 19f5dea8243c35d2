#!/usr/bin/env python3
"""ONNX model-zoo CNNs on the CPU: RLX vs ONNX Runtime, batch 1 and 8.

The models are the "light" model-zoo graphs the pip `onnx` wheel ships under
onnx/backend/test/data/light/ (AlexNet, DenseNet-121, Inception v1/v2, ResNet-50, ShuffleNet,
SqueezeNet, VGG-19, ZFNet-512): the real architectures, with every weight a ConstantOfShape fill.
Each weight fill is replaced by a seeded random initializer of its shape (random_weights: He-scaled
conv/Gemm weights, BatchNorm statistics near 1/0), as in a model zoo file with trained weights, so the
outputs are not degenerate and the weights are constants for both systems. Their input is fixed at
[1, 3, 224, 224]; for batch 8 the input/output batch dim and each Reshape
target whose first entry is 1 are rewritten to 8 (onnx python API). The input of the final Softmax
is added as a second output so the agreement check sees the logits, not a saturated softmax.

Both systems get the same seeded N(0, 1) input and run in their own child processes (peak RSS is per
system) with 2 threads (RLX_NUM_THREADS=2; ORT intra_op_num_threads=2, inter_op 1, ORT_ENABLE_ALL),
taking turns over --rounds rounds so that a change in the machine's load hits both: per round
warm-up runs, then timed runs of the run call alone (sessions/compiles built before); p50/p90 of
wall time over all rounds. RLX runs through bench/onnx_zoo_rlx.cpp (target rlx_bench_onnx_zoo; --rlx-bin or
$RLX_BENCH_BIN). Outputs must agree: max |rlx - ort| / max |ort| per output, reported per row.
Writes bench/results/onnx_zoo.json (DESIGN.md section 7 schema) and prints a table with RLX/ORT.

Usage: python3 bench/onnx_zoo.py [--models resnet50,vgg19] [--batches 1,8] [--runs 20] [--warmup 2]
                                 [--budget 15] [--threads 2] [--quick]
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
MODELS = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet", "squeezenet",
          "vgg19", "zfnet512"]


def light_dir() -> str:
    import onnx
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def machine() -> str:
    model, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model in ("", platform.machine(), platform.processor()):
                    model = line.split(":", 1)[1].strip()
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    isa = [f for f in ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_vnni", "amx_tile") if f in flags]
    return f"{model}, {os.cpu_count()} logical CPUs, ISA: {' '.join(isa) or 'unknown'}"


def loadavg1() -> float:
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except OSError:
        return -1.0


def random_weights(g, seed: int) -> int:
    """Replaces each ConstantOfShape fill whose shape is an initializer by a seeded random initializer
    of that shape, scaled by what reads it (through Unsqueeze/Reshape): conv and Gemm weights
    N(0, 2/fan_in) and N(0, 1/fan_in); BatchNormalization scale and variance, and Mul operands,
    U(0.5, 1.5); biases, means and Add operands U(-0.1, 0.1); anything else keeps its fill value.
    Returns how many were replaced."""
    import onnx
    from onnx import numpy_helper as nh

    inits = {t.name: t for t in g.initializer}
    readers = {}
    for n in g.node:
        for i, name in enumerate(n.input):
            readers.setdefault(name, []).append((n, i))

    def role(name, depth=0):
        for n, i in readers.get(name, []):
            if n.op_type in ("Unsqueeze", "Reshape", "Identity") and i == 0 and depth < 3:
                r = role(n.output[0], depth + 1)
                if r:
                    return r
            return n.op_type, i, n
        return None

    rng = np.random.default_rng(seed)
    listed = any(i.name in inits for i in g.input)
    keep, replaced = [], 0
    for n in g.node:
        if n.op_type != "ConstantOfShape" or n.input[0] not in inits:
            keep.append(n)
            continue
        shape = [int(v) for v in nh.to_array(inits[n.input[0]])]
        fill = float(nh.to_array(n.attribute[0].t).ravel()[0]) if n.attribute else 0.0
        r = role(n.output[0])
        op, i, node = r if r else (None, -1, None)
        size = int(np.prod(shape)) if shape else 1
        if op == "Conv" and i == 1:
            a = rng.standard_normal(size) * np.sqrt(2.0 / max(1, size // shape[0]))
        elif op == "Gemm" and i == 1:
            trans_b = any(at.name == "transB" and at.i for at in node.attribute)
            fan_in = shape[1] if trans_b else shape[0]
            a = rng.standard_normal(size) * np.sqrt(1.0 / fan_in)
        elif (op == "BatchNormalization" and i in (1, 4)) or op == "Mul":
            a = rng.uniform(0.5, 1.5, size)
        elif (op == "BatchNormalization" and i in (2, 3)) or op in ("Add", "Conv", "Gemm", "Sum"):
            a = rng.uniform(-0.1, 0.1, size)
        else:
            a = np.full(size, fill)
        g.initializer.append(nh.from_array(a.astype(np.float32).reshape(shape), n.output[0]))
        if listed:  # IR < 4: every initializer is also a graph input
            g.input.append(onnx.helper.make_tensor_value_info(n.output[0], onnx.TensorProto.FLOAT, shape))
        replaced += 1
    del g.node[:]
    g.node.extend(keep)
    used = {x for n in g.node for x in n.input}
    names = [t.name for t in g.initializer]
    for name in names:  # the fills' shape tensors are no longer read
        if name not in used and name.endswith("__SHAPE"):
            g.initializer.remove(next(t for t in g.initializer if t.name == name))
            for i in [i for i in g.input if i.name == name]:
                g.input.remove(i)
    return replaced


def prepare_model(name: str, batch: int, tmp: str, seed: int) -> tuple[str, list[int], str]:
    """The model with random weights, the logits as an extra output, and batch `batch`; returns
    (path, input shape, note)."""
    import onnx
    from onnx import numpy_helper as nh

    m = onnx.load(os.path.join(light_dir(), f"light_{name}.onnx"))
    g = m.graph
    nrand = random_weights(g, seed)
    inits = {t.name for t in g.initializer}
    inp = [i for i in g.input if i.name not in inits][0]
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    note = ""
    if batch != shape[0]:
        if shape[0] != 1:
            raise RuntimeError(f"{name}: input batch dim is {shape[0]}, not 1")
        inp.type.tensor_type.shape.dim[0].dim_value = batch
        for o in g.output:
            if o.type.tensor_type.shape.dim:
                o.type.tensor_type.shape.dim[0].dim_value = batch
        reshape_targets = {n.input[1] for n in g.node if n.op_type == "Reshape"}
        for i, t in enumerate(g.initializer):
            if t.name in reshape_targets:
                a = nh.to_array(t)
                if a.ndim == 1 and a.size and a[0] == 1:
                    a = a.copy()
                    a[0] = batch
                    g.initializer[i].CopyFrom(nh.from_array(a, t.name))
        note = f"batch dim and Reshape targets rewritten 1 -> {batch}; "
        shape[0] = batch
    note += f"{nrand} ConstantOfShape fills replaced by seeded random initializers"
    soft = [n for n in g.node if n.op_type == "Softmax"]
    if soft:
        logits = onnx.helper.make_tensor_value_info(soft[-1].input[0], onnx.TensorProto.FLOAT, None)
        g.output.append(logits)
    path = os.path.join(tmp, f"{name}_b{batch}.onnx")
    onnx.save(m, path)
    return path, shape, note


def percentiles(times: list[float]) -> tuple[float, float]:
    return float(np.percentile(times, 50)), float(np.percentile(times, 90))


def peak_rss_mb() -> float:
    """This process's peak resident set (VmHWM, which starts afresh at exec; ru_maxrss would carry
    the parent's high-water mark into the child)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return float(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def ort_child(args):
    """Times ONNX Runtime on one model and input; writes OUT.json and OUT.npz."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    t0 = time.perf_counter()
    sess = ort.InferenceSession(args.model, so, providers=["CPUExecutionProvider"])
    x = np.load(args.input)
    feed = {sess.get_inputs()[0].name: x}
    outs = sess.run(None, feed)
    compile_s = time.perf_counter() - t0
    for _ in range(1, args.warmup):
        outs = sess.run(None, feed)
    times, spent = [], 0.0
    while len(times) < args.runs and (len(times) < 5 or spent < args.budget):
        a = time.perf_counter()
        outs = sess.run(None, feed)
        ms = (time.perf_counter() - a) * 1000.0
        times.append(ms)
        spent += ms / 1000.0
    names = [o.name for o in sess.get_outputs()]
    np.savez(args.out + ".npz", **{n: o for n, o in zip(names, outs)})
    with open(args.out + ".json", "w") as f:
        json.dump({"times_ms": times, "compile_s": compile_s, "peak_rss_mb": peak_rss_mb(),
                   "output_names": names, "version": ort.__version__}, f)


def agreement(rlx: dict, ort: dict, names: list[str]) -> dict:
    """Per ORT output: max |rlx - ort| / max |ort| (NaN/inf compared as equal only to themselves)."""
    res = {}
    rlx_vals = list(rlx.values())
    for i, n in enumerate(names):
        b = ort[n].astype(np.float64)
        a = (rlx[n] if n in rlx else rlx_vals[i]).astype(np.float64).reshape(b.shape)
        fin = np.isfinite(a) & np.isfinite(b)
        same_nonfinite = bool(np.all((~np.isfinite(a) & ~np.isfinite(b) & ((a == b) | (np.isnan(a) & np.isnan(b))))
                                     | fin))
        scale = float(np.max(np.abs(b[fin]))) if fin.any() else 0.0
        err = float(np.max(np.abs(a[fin] - b[fin]))) / scale if fin.any() and scale > 0 else 0.0
        res[n] = {"max_rel_err": err, "nonfinite_agree": same_nonfinite, "max_abs_ort": scale}
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--budget", type=float, default=15.0, help="seconds of timed runs per system and row (>= 5 runs)")
    ap.add_argument("--rounds", type=int, default=2, help="turns each system takes per row (fresh child each)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="5 runs, 1 warm-up (smoke test, not a result)")
    ap.add_argument("--output", default=os.path.join(HERE, "results", "onnx_zoo.json"))
    ap.add_argument("--rlx-bin", default=os.environ.get("RLX_BENCH_BIN", os.path.join(ROOT, "build", "bin",
                                                                                        "rlx_bench_onnx_zoo")))
    # child mode (ONNX Runtime)
    ap.add_argument("--ort-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--input", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.quick:
        args.runs, args.warmup = 5, 1
    if args.ort_child:
        return ort_child(args)

    import onnxruntime as ort
    tmp = tempfile.mkdtemp(prefix="rlx_onnx_zoo_")
    env = dict(os.environ, RLX_NUM_THREADS=str(args.threads), OMP_NUM_THREADS=str(args.threads),
               OPENBLAS_NUM_THREADS="1")
    env.pop("RLX_PROFILE", None)
    rows, table, details = [], [], []
    for name in args.models.split(","):
        for batch in (int(b) for b in args.batches.split(",")):
            try:
                path, shape, note = prepare_model(name, batch, tmp, args.seed)
            except Exception as e:  # noqa: BLE001
                details.append({"workload": name, "batch": batch, "skipped": str(e)})
                print(f"[bench] {name} b{batch}: skipped ({e})", file=sys.stderr, flush=True)
                continue
            x = np.random.default_rng(args.seed + batch).standard_normal(shape, dtype=np.float32)
            xin = os.path.join(tmp, f"{name}_b{batch}_x.npy")
            np.save(xin, x)
            # The systems take turns over `rounds` rounds (order flipped each round), each round a
            # fresh child with its share of the runs, so a change in the machine's load hits both.
            res, load = {}, {"rlx": [], "onnxruntime": []}
            runs_r = max(5, -(-args.runs // args.rounds))
            for rnd in range(args.rounds):
                for system in (("rlx", "onnxruntime") if rnd % 2 == 0 else ("onnxruntime", "rlx")):
                    if system in res and res[system] is None:
                        continue
                    out = os.path.join(tmp, f"{name}_b{batch}_{system}")
                    budget = str(args.budget / args.rounds)
                    if system == "rlx":
                        cmd = [args.rlx_bin, path, xin, out, str(args.warmup), str(runs_r), budget]
                    else:
                        cmd = [sys.executable, os.path.abspath(__file__), "--ort-child", "--model", path, "--input",
                               xin, "--out", out, "--threads", str(args.threads), "--runs", str(runs_r), "--warmup",
                               str(args.warmup), "--budget", budget]
                    before = loadavg1()
                    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
                    load[system].append([before, loadavg1()])
                    if r.returncode != 0:
                        print(f"[bench] {name} b{batch} {system} failed:\n{r.stderr[-2000:]}", file=sys.stderr,
                              flush=True)
                        res[system] = None
                        continue
                    with open(out + ".json") as f:
                        one = json.load(f)
                    one["outputs"] = dict(np.load(out + ".npz"))
                    if system not in res:
                        res[system] = one
                    else:
                        res[system]["times_ms"] += one["times_ms"]
                        res[system]["peak_rss_mb"] = max(res[system]["peak_rss_mb"], one["peak_rss_mb"])
            if not res.get("rlx") or not res.get("onnxruntime"):
                details.append({"workload": name, "batch": batch, "skipped": "a system failed (see stderr)"})
                continue
            agree = agreement(res["rlx"]["outputs"], res["onnxruntime"]["outputs"], res["onnxruntime"]["output_names"])
            for system in res:
                res[system].pop("outputs")
            worst = max(a["max_rel_err"] for a in agree.values())
            p = {}
            for system in ("rlx", "onnxruntime"):
                p50, p90 = percentiles(res[system]["times_ms"])
                p[system] = p50
                variant = ("cpu f32, own im2col/direct conv + packed AVX2 GEMM" if system == "rlx" else
                           f"onnxruntime {res[system]['version']} CPUExecutionProvider, ORT_ENABLE_ALL")
                rows.append({"system": system, "variant": variant, "device": "cpu", "workload": name, "dtype": "f32",
                             "batch": batch, "seq": None, "p50_ms": round(p50, 3), "p90_ms": round(p90, 3),
                             "min_ms": round(min(res[system]["times_ms"]), 3),
                             "loadavg1": round(float(np.mean(load[system])), 2),
                             "throughput": round(batch * 1000.0 / p50, 2), "unit": "img/s",
                             "peak_rss_mb": round(res[system]["peak_rss_mb"], 1)})
            details.append({"workload": name, "batch": batch, "note": note, "agreement": agree,
                            "runs": {s: len(res[s]["times_ms"]) for s in res},
                            "compile_s": {s: round(res[s]["compile_s"], 3) for s in res},
                            "loadavg1_before_after": load})
            table.append((name, batch, p["rlx"], p["onnxruntime"], worst))
            print(f"[bench] {name} b{batch}: rlx {p['rlx']:.2f} ms, ort {p['onnxruntime']:.2f} ms, "
                  f"ratio {p['rlx'] / p['onnxruntime']:.2f}, max rel err {worst:.2e}", file=sys.stderr, flush=True)
    doc = {"benchmark": "onnx_zoo", "machine": machine(),
           "date": datetime.datetime.now().isoformat(timespec="seconds"),
           "threads": args.threads, "onnxruntime_version": ort.__version__,
           "timing": f"{args.rounds} rounds per row, the systems taking turns (a fresh child each time); per round "
                     f"{args.warmup} warm-up runs, then {max(5, -(-args.runs // args.rounds))} timed runs (fewer, but at "
                     f"least 5, once {args.budget / args.rounds:g} s have passed); wall time of the run call alone; "
                     f"p50/p90 and min over all rounds' runs; loadavg1: the 1-minute load average around the "
                     f"system's children, averaged",
           "rows": rows, "details": details, "loadavg_at_end": loadavg1()}
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"\n{doc['machine']}, {args.threads} threads, p50 ms")
    print(f"{'model':<14} {'batch':>5} {'RLX':>10} {'ORT':>10} {'RLX/ORT':>8} {'min ratio':>9} {'max rel err':>12}")
    mins = {(r["workload"], r["batch"], r["system"]): r["min_ms"] for r in rows}
    for name, batch, r, o, err in table:
        mr = mins[(name, batch, "rlx")] / mins[(name, batch, "onnxruntime")]
        print(f"{name:<14} {batch:>5} {r:>10.2f} {o:>10.2f} {r / o:>8.2f} {mr:>9.2f} {err:>12.2e}")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    sys.exit(main())
