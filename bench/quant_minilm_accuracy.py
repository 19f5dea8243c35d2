#!/usr/bin/env python3
"""MiniLM (all-MiniLM-L6-v2) static int8 accuracy with `rlx.quantize`: embeddings of real English
sentences, RLX int8 against RLX fp32 (cosine per sentence: mean and minimum), for the calibration
methods and --keep-float choices given.

Sentences: the prose of this repository's docs/*.md, README.md and src/**/README.md, split at sentence ends, 5 to 40
words, deduplicated, in file order; the first --calib-sentences calibrate (batches of 8) and the next
--sentences are measured (never the same ones). Tokenized with the model's own tokenizer.json
(pip `tokenizers`), padded / truncated to --seq tokens. The float model is bench/quant_minilm.py's
ONNX export of the real weights. Quantization: u8 asymmetric activations per tensor, i8 symmetric
weights per output channel, 7-bit weights where the host's int8 GEMM wants them (reduce_range auto).
For reference, onnxruntime.quantization.quantize_static on the same calibration sentences and scheme
(it also quantizes each MatMul's output), run by RLX and by ORT. Writes
bench/results/quant_minilm_accuracy.json.

Usage: python3 bench/quant_minilm_accuracy.py [--sentences 1000] [--methods minmax,mse,entropy]
"""
from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import re
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import quant_minilm as qm  # noqa: E402


def sentences() -> list[str]:
    out, seen = [], set()
    paths = sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))) + [os.path.join(ROOT, "README.md")]
    paths += sorted(glob.glob(os.path.join(ROOT, "src", "**", "README.md"), recursive=True))
    for path in paths:
        text = open(path, encoding="utf-8").read()
        text = re.sub(r"```.*?```", " ", text, flags=re.S)  # code blocks
        text = re.sub(r"[`*#|>\[\]()_]", " ", text)
        for s in re.split(r"(?<=[.!?])\s+", re.sub(r"\s+", " ", text)):
            words = s.split()
            if 5 <= len(words) <= 40 and sum(w.isalpha() for w in words) >= len(words) // 2 and s not in seen:
                seen.add(s)
                out.append(s)
    return out


def tokenize(texts: list[str], seq: int) -> dict[str, np.ndarray]:
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(qm.model_dir(), "tokenizer.json"))
    tok.enable_truncation(seq)
    tok.enable_padding(length=seq)
    enc = tok.encode_batch(texts)
    return {"input_ids": np.array([e.ids for e in enc], np.int64),
            "attention_mask": np.array([e.attention_mask for e in enc], np.int64)}


def embed(path: str, feed: dict[str, np.ndarray], batch: int) -> np.ndarray:
    import rlx
    m = rlx.CompiledModel(rlx.load(path, bind={"batch": batch}))
    n = len(feed["input_ids"])
    outs = [m.run({k: v[i:i + batch] for k, v in feed.items()})["embedding"] for i in range(0, n, batch)]
    return np.concatenate(outs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sentences", type=int, default=1000)
    ap.add_argument("--calib-sentences", type=int, default=64)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--methods", default="minmax,mse,entropy")
    ap.add_argument("--keep-float", default="none,auto", help="comma list of: none, auto")
    ap.add_argument("--budget", type=float, default=0.99)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "quant_minilm_accuracy.json"))
    args = ap.parse_args()
    os.environ["RLX_NUM_THREADS"] = str(args.threads)
    import rlx

    all_s = sentences()
    calib_s = all_s[:args.calib_sentences]
    eval_s = all_s[args.calib_sentences:args.calib_sentences + args.sentences]
    eval_s = eval_s[:len(eval_s) // args.batch * args.batch]
    print(f"  {len(all_s)} sentences: {len(calib_s)} calibrate, {len(eval_s)} measured", file=sys.stderr, flush=True)
    tmp = tempfile.mkdtemp(prefix="quant_acc_")
    fp = os.path.join(tmp, "minilm.onnx")
    qm.build_onnx(fp, args.seq)
    cal = tokenize(calib_s, args.seq)
    nb = len(calib_s) // 8
    npz = os.path.join(tmp, "calib.npz")
    np.savez(npz, **{k: v[:nb * 8].reshape(nb, 8, args.seq) for k, v in cal.items()})
    feed = tokenize(eval_s, args.seq)
    t0 = time.perf_counter()
    ref = embed(fp, feed, args.batch)
    print(f"  fp32: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    rows = []
    for method in args.methods.split(","):
        for kf in args.keep_float.split(","):
            qp = os.path.join(tmp, f"q_{method}_{kf}.onnx")
            t0 = time.perf_counter()
            r = rlx.quantize(fp, qp, calib=npz, method=method, per_channel=True, bind={"batch": 8},
                             keep_float="" if kf == "none" else kf, budget=args.budget)
            tq = time.perf_counter() - t0
            e = embed(qp, feed, args.batch)
            cos = (e * ref).sum(-1) / np.linalg.norm(e, axis=-1) / np.linalg.norm(ref, axis=-1)
            int8 = sum(l["int8"] for l in r["layers"])
            row = dict(method=method, keep_float=kf, budget=args.budget if kf == "auto" else None,
                       per_channel=True, reduce_range=r["reduce_range"], int8_layers=int8, layers=len(r["layers"]),
                       kept_float=r["kept_float"], calib_output_cosine=round(r["output_cosine"], 6),
                       calib_all_int8_cosine=round(r["all_int8_cosine"], 6), evaluations=r["evaluations"],
                       quantize_s=round(tq, 1), sentences=len(eval_s), seq=args.seq,
                       cosine_mean=round(float(cos.mean()), 6), cosine_min=round(float(cos.min()), 6),
                       worst_local_sqnr=sorted((round(l["local_sqnr_db"], 2), l["name"]) for l in r["layers"])[:3])
            rows.append(row)
            print(f"  {method:8s} keep-float {kf:5s}: int8 {int8}/{len(r['layers'])}  cosine mean {row['cosine_mean']:.5f} "
                  f"min {row['cosine_min']:.5f}  (kept {r['kept_float']}, {tq:.0f} s)", file=sys.stderr, flush=True)
    # Reference: onnxruntime.quantization.quantize_static on the same calibration sentences, the same
    # scheme (QDQ, u8 activations, i8 per-channel weights, MinMax, MatMul only, the same reduce_range),
    # which also quantizes each MatMul's output; run by RLX (fuse-qdq) and by ORT.
    from onnxruntime import quantization as oq
    import onnxruntime as ort

    class Reader(oq.CalibrationDataReader):
        def __init__(self):
            self.it = iter([{k: v[i:i + 8] for k, v in cal.items()} for i in range(0, nb * 8, 8)])

        def get_next(self):
            return next(self.it, None)

    op = os.path.join(tmp, "ort_q.onnx")
    rr = rows[0]["reduce_range"] if rows else False
    oq.quantize_static(fp, op, Reader(), quant_format=oq.QuantFormat.QDQ, per_channel=True, reduce_range=rr,
                       activation_type=oq.QuantType.QUInt8, weight_type=oq.QuantType.QInt8,
                       op_types_to_quantize=["MatMul"], calibrate_method=oq.CalibrationMethod.MinMax)
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    sess = ort.InferenceSession(op, so, providers=["CPUExecutionProvider"])
    for runner, e in (("rlx", embed(op, feed, args.batch)),
                      ("onnxruntime", np.concatenate([sess.run(None, {k: v[i:i + args.batch] for k, v in feed.items()})[0]
                                                      for i in range(0, len(eval_s), args.batch)]))):
        cos = (e * ref).sum(-1) / np.linalg.norm(e, axis=-1) / np.linalg.norm(ref, axis=-1)
        rows.append(dict(method="onnxruntime quantize_static minmax (MatMul inputs and outputs)", keep_float="none",
                         per_channel=True, reduce_range=rr, run_by=runner, sentences=len(eval_s), seq=args.seq,
                         cosine_mean=round(float(cos.mean()), 6), cosine_min=round(float(cos.min()), 6)))
        print(f"  ort quantize_static, run by {runner}: cosine mean {cos.mean():.5f} min {cos.min():.5f}", file=sys.stderr, flush=True)
    res = {"benchmark": "quant_minilm_accuracy", "machine": f"{qm.cpu_model()}, {os.cpu_count()} vCPU, {qm.rlx_isa(rlx)}",
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "workload": "all-MiniLM-L6-v2 embeddings (real weights), RLX int8 vs RLX fp32 on the same sentences",
           "calibration": f"{nb} batches of 8 sentences (held out from the measured ones)", "rows": rows}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
