#!/usr/bin/env python3
"""Regenerates the Qwen3 / GGUF test data in this folder (needs torch, transformers, gguf, numpy).

    python3 tests/models/qwen3/make_goldens.py

Writes:
  tiny/            small random Qwen3ForCausalLM (untied head) via save_pretrained (safetensors)
  tiny_tied/       same architecture with a tied LM head
  goldens.npz      ids_b{B}_s{S} (i64) and logits_b{B}_s{S} (f32, last position) for the parity grid,
                   gen_ids / gen_out (HF greedy generate) and tied_ids / tied_logits
  tiny-{F16,Q8_0,Q4_0}.gguf   the untied model in GGUF (llama.cpp qwen3 names), written by gguf's writer
  quant_blocks.gguf           one tensor per block type (random blocks, sane scales) + "<name>.ref"
                              holding gguf.quants.dequantize of it, for the C++ dequantizer tests
"""
import os
import numpy as np
import torch
import gguf
from gguf import GGMLQuantizationType as QT
from transformers import Qwen3Config, Qwen3ForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
GRID_B = [1, 2, 4]
GRID_S = [8, 32, 64, 128]


def make_model(tied, seed):
    torch.manual_seed(seed)
    cfg = Qwen3Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
                      rope_theta=10000.0, rms_norm_eps=1e-6, tie_word_embeddings=tied, attention_bias=False)
    m = Qwen3ForCausalLM(cfg).eval().float()
    with torch.no_grad():  # random norms so the q/k/layer norm weights matter
        for n, p in m.named_parameters():
            if "norm" in n:
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            else:
                p.copy_(0.08 * torch.randn_like(p))
    return m


def write_gguf(m, path, qtype):
    sd = {k: v.detach().numpy().astype(np.float32) for k, v in m.state_dict().items()}
    c = m.config
    w = gguf.GGUFWriter(path, "qwen3")
    w.add_block_count(c.num_hidden_layers)
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_head_count(c.num_attention_heads)
    w.add_head_count_kv(c.num_key_value_heads)
    w.add_key_length(c.head_dim)
    w.add_value_length(c.head_dim)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    w.add_file_type(int(qtype))

    def put(name, arr, quant):
        if quant and qtype != QT.F32:
            if qtype == QT.F16:
                w.add_tensor(name, arr.astype(np.float16))
            else:
                q = gguf.quants.quantize(arr, qtype)
                w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=qtype)
        else:
            w.add_tensor(name, arr)

    put("token_embd.weight", sd["model.embed_tokens.weight"], True)
    for l in range(c.num_hidden_layers):
        p = f"model.layers.{l}."
        b = f"blk.{l}."
        put(b + "attn_norm.weight", sd[p + "input_layernorm.weight"], False)
        put(b + "ffn_norm.weight", sd[p + "post_attention_layernorm.weight"], False)
        put(b + "attn_q_norm.weight", sd[p + "self_attn.q_norm.weight"], False)
        put(b + "attn_k_norm.weight", sd[p + "self_attn.k_norm.weight"], False)
        for src, dst in [("self_attn.q_proj", "attn_q"), ("self_attn.k_proj", "attn_k"), ("self_attn.v_proj", "attn_v"),
                         ("self_attn.o_proj", "attn_output"), ("mlp.gate_proj", "ffn_gate"), ("mlp.up_proj", "ffn_up"),
                         ("mlp.down_proj", "ffn_down")]:
            put(b + dst + ".weight", sd[p + src + ".weight"], True)
    put("output_norm.weight", sd["model.norm.weight"], False)
    if "lm_head.weight" in sd and not c.tie_word_embeddings:
        put("output.weight", sd["lm_head.weight"], True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# Byte offsets of the f16 scale fields inside each block, sanitized so random blocks stay finite.
F16_FIELDS = {QT.Q4_0: [0], QT.Q4_1: [0, 2], QT.Q5_0: [0], QT.Q5_1: [0, 2], QT.Q8_0: [0], QT.Q2_K: [80, 82],
              QT.Q3_K: [108], QT.Q4_K: [0, 2], QT.Q5_K: [0, 2], QT.Q6_K: [208]}


def write_quant_blocks(path):
    rng = np.random.default_rng(5)
    w = gguf.GGUFWriter(path, "rlx-quant-test")
    w.add_string("rlx.purpose", "dequantizer test vectors")
    rows = 3
    for qt, offs in F16_FIELDS.items():
        bs, ts = gguf.GGML_QUANT_SIZES[qt]
        nb = 256 // bs
        raw = rng.integers(0, 256, size=(rows, nb, ts), dtype=np.uint8)
        for o in offs:
            scale = (rng.uniform(-1, 1, size=(rows, nb)) * 0.5).astype(np.float16)
            raw[:, :, o:o + 2] = scale.view(np.uint8).reshape(rows, nb, 2)
        raw = raw.reshape(rows, nb * ts)
        ref = gguf.quants.dequantize(raw, qt).astype(np.float32)
        w.add_tensor(qt.name, raw, raw_shape=raw.shape, raw_dtype=qt)
        w.add_tensor(qt.name + ".ref", ref)
    x = rng.standard_normal((rows, 256)).astype(np.float32)
    w.add_tensor("F16", x.astype(np.float16))
    w.add_tensor("F16.ref", x.astype(np.float16).astype(np.float32))
    bf = gguf.quants.quantize(x, QT.BF16)
    w.add_tensor("BF16", bf, raw_shape=bf.shape, raw_dtype=QT.BF16)
    w.add_tensor("BF16.ref", gguf.quants.dequantize(bf, QT.BF16).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    torch.set_grad_enabled(False)
    m = make_model(False, 0)
    m.save_pretrained(os.path.join(HERE, "tiny"), safe_serialization=True)
    mt = make_model(True, 1)
    mt.save_pretrained(os.path.join(HERE, "tiny_tied"), safe_serialization=True)
    out = {}
    rng = np.random.default_rng(0)
    for B in GRID_B:
        for S in GRID_S:
            ids = rng.integers(0, 256, size=(B, S), dtype=np.int64)
            logits = m(torch.from_numpy(ids)).logits[:, -1, :].float().numpy()
            out[f"ids_b{B}_s{S}"] = ids
            out[f"logits_b{B}_s{S}"] = logits
    gid = rng.integers(0, 256, size=(2, 8), dtype=np.int64)
    gen = m.generate(torch.from_numpy(gid), max_new_tokens=16, do_sample=False, min_new_tokens=16,
                     attention_mask=torch.ones_like(torch.from_numpy(gid)), pad_token_id=0, eos_token_id=None)
    out["gen_ids"] = gid
    out["gen_out"] = gen[:, 8:].numpy()
    tid = rng.integers(0, 256, size=(2, 16), dtype=np.int64)
    out["tied_ids"] = tid
    out["tied_logits"] = mt(torch.from_numpy(tid)).logits[:, -1, :].float().numpy()
    np.savez(os.path.join(HERE, "goldens.npz"), **out)
    for qt in [QT.F16, QT.Q8_0, QT.Q4_0]:
        write_gguf(m, os.path.join(HERE, f"tiny-{qt.name}.gguf"), qt)
    write_quant_blocks(os.path.join(HERE, "quant_blocks.gguf"))
    print("wrote goldens to", HERE)


if __name__ == "__main__":
    main()
