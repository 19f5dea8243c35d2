#!/usr/bin/env python3
"""A metadata-only GGUF carrying tok_llama2's vocabulary the way llama.cpp stores a SentencePiece
vocabulary (tokenizer.ggml.model = llama: tokens, scores, token types, no merges; merges become
scores, earlier merge = higher score). tests/unit/test_bpe.cpp compares its ids with the tokenizers
goldens of tok_llama2. Needs gguf + numpy. Writes tok_llama2.gguf.
"""
import json
import os

import gguf

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    j = json.load(open(os.path.join(HERE, "tok_llama2", "tokenizer.json"), encoding="utf-8"))
    vocab = j["model"]["vocab"]
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    rank = {}
    for r, m in enumerate(j["model"]["merges"]):
        a, b = m.split(" ") if isinstance(m, str) else m
        rank.setdefault(a + b, r)
    scores, types = [], []
    for i, t in enumerate(tokens):
        if t == "<unk>":
            types.append(2)
        elif t in ("<s>", "</s>"):
            types.append(3)
        elif t.startswith("<0x") and len(t) == 6:
            types.append(6)
        else:
            types.append(1)
        scores.append(-float(rank[t]) if t in rank else (0.0 if types[-1] != 1 else -1e6))
    w = gguf.GGUFWriter(os.path.join(HERE, "tok_llama2.gguf"), "llama")
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_space_prefix(True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print("wrote tok_llama2.gguf,", len(tokens), "tokens")


if __name__ == "__main__":
    main()
