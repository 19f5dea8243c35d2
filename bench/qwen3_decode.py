#!/usr/bin/env python3
"""Qwen3 decode throughput: rlx (cpu; f32 safetensors and GGUF F16/Q8_0/Q4_0 packed) vs PyTorch
(HF transformers Qwen3ForCausalLM.generate with its KV cache), same random weights and prompt.

    python3 bench/qwen3_decode.py [--rlx build-qwen/bin/rlx] [--hidden 256 --layers 4 --vocab 2048]

Needs torch, transformers, gguf. Writes bench/results/qwen3_decode.json (the shared results shape).
Decode throughput = generated tokens per second over the decode steps (prefill excluded).
"""
import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
from gguf import GGMLQuantizationType as QT
from transformers import Qwen3Config, Qwen3ForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "models", "qwen3"))
from make_goldens import write_gguf  # noqa: E402


def pct(xs, p):
    return float(np.percentile(np.array(xs), p))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rlx", default=os.path.join(HERE, "..", "build-qwen", "bin", "rlx"))
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--prompt", type=int, default=32)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "qwen3_decode.json"))
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(os.cpu_count())
    heads = max(2, a.hidden // 64)
    cfg = Qwen3Config(vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=a.hidden * 3,
                      num_hidden_layers=a.layers, num_attention_heads=heads, num_key_value_heads=max(1, heads // 2),
                      head_dim=64, max_position_embeddings=4096, rope_theta=10000.0, tie_word_embeddings=False)
    model = Qwen3ForCausalLM(cfg).eval().float()
    workload = f"qwen3 h{a.hidden} L{a.layers} V{a.vocab} prompt{a.prompt} new{a.new}"
    rows = []
    prompt = list(np.random.default_rng(0).integers(0, a.vocab, size=a.prompt))
    with tempfile.TemporaryDirectory() as tmp:
        mdir = os.path.join(tmp, "hf")
        model.save_pretrained(mdir, safe_serialization=True)
        variants = [("f32-safetensors", mdir, "f32")]
        for qt in [QT.F16, QT.Q8_0, QT.Q4_0]:
            p = os.path.join(tmp, f"m-{qt.name}.gguf")
            write_gguf(model, p, qt)
            variants.append((f"gguf-{qt.name}", p, qt.name))
        for name, path, dt in variants:
            rates = []
            for _ in range(a.reps + 1):  # first run is warm-up
                r = subprocess.run([a.rlx, "generate", "--model", path, "--prompt-ids", ",".join(map(str, prompt)),
                                    "--max-new", str(a.new), "--stats"], capture_output=True, text=True, check=True)
                m = re.search(r"decode (\d+) steps in ([\d.]+) ms", r.stderr)
                rates.append(float(m.group(2)) / int(m.group(1)))
            ms = rates[1:]
            rows.append({"system": "rlx", "variant": name, "device": "cpu", "workload": workload, "dtype": dt,
                         "batch": 1, "seq": a.prompt, "p50_ms": pct(ms, 50), "p90_ms": pct(ms, 90),
                         "throughput": 1000.0 / pct(ms, 50), "unit": "tokens/s (decode)", "peak_rss_mb": None})
            print(f"rlx {name:18s} {1000.0 / pct(ms, 50):8.1f} tok/s  ({pct(ms, 50):.2f} ms/token)")
    ids = torch.tensor([prompt])
    per_tok = []
    with torch.no_grad():
        for rep in range(a.reps + 1):
            t0 = time.perf_counter()
            model.generate(ids, max_new_tokens=1, min_new_tokens=1, do_sample=False, pad_token_id=0, eos_token_id=None)
            t1 = time.perf_counter()
            model.generate(ids, max_new_tokens=a.new, min_new_tokens=a.new, do_sample=False, pad_token_id=0, eos_token_id=None)
            t2 = time.perf_counter()
            if rep:
                per_tok.append(((t2 - t1) - (t1 - t0)) * 1000.0 / (a.new - 1))
    rows.append({"system": "pytorch", "variant": "transformers generate (KV cache)", "device": "cpu", "workload": workload,
                 "dtype": "f32", "batch": 1, "seq": a.prompt, "p50_ms": pct(per_tok, 50), "p90_ms": pct(per_tok, 90),
                 "throughput": 1000.0 / pct(per_tok, 50), "unit": "tokens/s (decode)", "peak_rss_mb": None})
    print(f"pytorch f32             {1000.0 / pct(per_tok, 50):8.1f} tok/s  ({pct(per_tok, 50):.2f} ms/token)")
    res = {"benchmark": "qwen3_decode", "machine": f"{platform.node()} {platform.processor() or platform.machine()} "
           f"{os.cpu_count()} cores", "date": datetime.date.today().isoformat(), "rows": rows}
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    print("wrote", a.out)


if __name__ == "__main__":
    main()
