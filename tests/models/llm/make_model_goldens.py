#!/usr/bin/env python3
"""Tiny random llama / qwen2 / mistral models written by transformers, with greedy-generation and
logit goldens for tests/unit/test_decoder.cpp. Each model: vocab 256, hidden 64, 2 layers, 4 query /
2 KV heads (head_dim 16), SwiGLU 128.
  llama:   untied head, Llama-3 RoPE scaling (factor 8, original context 32, so every band applies)
  qwen2:   QKV bias, tied embeddings, rope_theta 1e6
  mistral: sliding window 16 (a 72-token run crosses it), untied
Saves <arch>/ (config.json + model.safetensors, f32) and goldens_<arch>.npz: prompt ids [1,8], HF greedy
`generate` of 64 new tokens, and HF logits [1, 72, 256] over prompt + generated (teacher-forced).
  llama_text: a tied llama with vocab 768 carrying tok_gpt2's tokenizer.json and a ChatML
           tokenizer_config.json, for text in / text out from an HF directory; its golden is HF greedy
           generate from the chat prompt ids that pip tokenizers gave (tokenizer_goldens.json).
Needs torch + transformers (eager attention). `make_model_goldens.py NAME...` writes only those.
"""
import json
import os
import shutil
import sys

import numpy as np
import torch
from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM, Qwen2Config,
                          Qwen2ForCausalLM)

HERE = os.path.dirname(os.path.abspath(__file__))
COMMON = dict(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
              intermediate_size=128, max_position_embeddings=512, rms_norm_eps=1e-6, bos_token_id=1, eos_token_id=2)

MODELS = {
    "llama": (LlamaForCausalLM, LlamaConfig(**COMMON, rope_theta=10000.0, tie_word_embeddings=False,
                                             rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                           "high_freq_factor": 4.0,
                                                           "original_max_position_embeddings": 32})),
    "qwen2": (Qwen2ForCausalLM, Qwen2Config(**COMMON, rope_theta=1e6, tie_word_embeddings=True, use_sliding_window=False)),
    "mistral": (MistralForCausalLM, MistralConfig(**COMMON, rope_theta=10000.0, sliding_window=16,
                                                   tie_word_embeddings=False)),
    "llama_text": (LlamaForCausalLM, LlamaConfig(**dict(COMMON, vocab_size=768), rope_theta=10000.0,
                                                  tie_word_embeddings=True)),
}

CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
          "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def main():
    only = sys.argv[1:]
    for arch, (cls, cfg) in MODELS.items():
        if only and arch not in only:
            continue
        torch.manual_seed(7)
        cfg._attn_implementation = "eager"
        m = cls(cfg).eval()
        with torch.no_grad():
            for p in m.parameters():  # larger weights than the default init, so logits spread out
                p.normal_(0.0, 0.15 if p.dim() > 1 else 1.0)
            for n, p in m.named_parameters():
                if "norm" in n:
                    p.copy_(1.0 + 0.1 * torch.randn_like(p))
        m.save_pretrained(os.path.join(HERE, arch), safe_serialization=True)
        g = torch.Generator().manual_seed(11)
        ids = torch.randint(3, 256, (1, 8), generator=g)
        if arch == "llama_text":
            d = os.path.join(HERE, arch)
            shutil.copy(os.path.join(HERE, "tok_gpt2", "tokenizer.json"), d)
            with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
                json.dump({"chat_template": CHATML, "eos_token": "<|im_end|>", "bos_token": None}, f, indent=1)
            chat = json.load(open(os.path.join(HERE, "tokenizer_goldens.json"), encoding="utf-8"))["chat_prompt"]
            ids = torch.tensor([chat["ids"]])
        with torch.no_grad():
            out = m.generate(ids, max_new_tokens=64, min_new_tokens=64, do_sample=False, pad_token_id=0,
                             eos_token_id=None)
            logits = m(out).logits.float().numpy()
        np.savez(os.path.join(HERE, f"goldens_{arch}.npz"), ids=ids.numpy().astype(np.int64),
                 generated=out[:, ids.shape[1]:].numpy().astype(np.int64), logits=logits)
        print(arch, out.shape, "distinct generated:", len(set(out[0, 8:].tolist())))


if __name__ == "__main__":
    main()
