#!/usr/bin/env python3
"""Writes the tiny llama of this folder (llama/, from make_model_goldens.py) as GGUF files the way
llama.cpp's converter lays a llama out: q/k projection rows of each head reordered for
interleaved-pair RoPE, the Llama-3 RoPE scaling as a `rope_freqs.weight` tensor of per-frequency
divisors, llama.* metadata. llama-{F32,Q8_0,Q4_1}.gguf; and the tiny qwen2 (qwen2-F32.gguf: rows kept
for rotate-half RoPE, q/k/v biases, tied head so no output.weight). Needs gguf + numpy only.
"""
import json
import math
import os
import struct

import gguf
import numpy as np
from gguf import GGMLQuantizationType as QT

HERE = os.path.dirname(os.path.abspath(__file__))


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        assert v["dtype"] == "F32", v["dtype"]
        a, b = v["data_offsets"]
        out[k] = np.frombuffer(data[a:b], dtype=np.float32).reshape(v["shape"])
    return out


def to_interleaved(w, heads):
    """Rows of each head go from (first half, second half) to (pair 0, pair 1, ...)."""
    d = w.shape[0] // heads
    return w.reshape(heads, 2, d // 2, -1).swapaxes(1, 2).reshape(w.shape)


def rope_divisors(c, head_dim):
    s = c["rope_scaling"]
    factor, lo, hi, old = s["factor"], s["low_freq_factor"], s["high_freq_factor"], s["original_max_position_embeddings"]
    out = []
    for i in range(0, head_dim, 2):
        wl = 2 * math.pi / (c["rope_theta"] ** (-i / head_dim))
        if wl < old / hi:
            out.append(1.0)
        elif wl > old / lo:
            out.append(factor)
        else:
            sm = (old / wl - lo) / (hi - lo)
            out.append(1.0 / ((1 - sm) / factor + sm))
    return np.array(out, dtype=np.float32)


def write(qtype, arch="llama"):
    c = json.load(open(os.path.join(HERE, arch, "config.json")))
    sd = read_safetensors(os.path.join(HERE, arch, "model.safetensors"))
    hd = c["hidden_size"] // c["num_attention_heads"]
    llama = arch == "llama"
    w = gguf.GGUFWriter(os.path.join(HERE, f"{arch}-{qtype.name}.gguf"), arch)
    w.add_block_count(c["num_hidden_layers"])
    w.add_context_length(c["max_position_embeddings"])
    w.add_embedding_length(c["hidden_size"])
    w.add_feed_forward_length(c["intermediate_size"])
    w.add_head_count(c["num_attention_heads"])
    w.add_head_count_kv(c["num_key_value_heads"])
    w.add_rope_dimension_count(hd)
    w.add_rope_freq_base(c["rope_theta"])
    w.add_layer_norm_rms_eps(c["rms_norm_eps"])
    w.add_file_type(int(qtype))

    def put(name, arr, quant):
        if quant and qtype != QT.F32:
            q = gguf.quants.quantize(arr, qtype)
            w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=qtype)
        else:
            w.add_tensor(name, np.ascontiguousarray(arr))

    put("token_embd.weight", sd["model.embed_tokens.weight"], False)
    if llama:
        put("rope_freqs.weight", rope_divisors(c, hd), False)
    order = to_interleaved if llama else (lambda x, heads: x)
    for l in range(c["num_hidden_layers"]):
        p, b = f"model.layers.{l}.", f"blk.{l}."
        put(b + "attn_norm.weight", sd[p + "input_layernorm.weight"], False)
        put(b + "ffn_norm.weight", sd[p + "post_attention_layernorm.weight"], False)
        put(b + "attn_q.weight", order(sd[p + "self_attn.q_proj.weight"], c["num_attention_heads"]), True)
        put(b + "attn_k.weight", order(sd[p + "self_attn.k_proj.weight"], c["num_key_value_heads"]), True)
        if not llama:
            for x in "qkv":
                put(b + f"attn_{x}.bias", sd[p + f"self_attn.{x}_proj.bias"], False)
        for src, dst in [("self_attn.v_proj", "attn_v"), ("self_attn.o_proj", "attn_output"), ("mlp.gate_proj", "ffn_gate"),
                         ("mlp.up_proj", "ffn_up"), ("mlp.down_proj", "ffn_down")]:
            put(b + dst + ".weight", sd[p + src + ".weight"], True)
    put("output_norm.weight", sd["model.norm.weight"], False)
    if "lm_head.weight" in sd and not c.get("tie_word_embeddings", False):
        put("output.weight", sd["lm_head.weight"], True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    for q in (QT.F32, QT.Q8_0, QT.Q4_1):
        write(q)
    write(QT.F32, "qwen2")
    print("wrote llama-{F32,Q8_0,Q4_1}.gguf, qwen2-F32.gguf")
