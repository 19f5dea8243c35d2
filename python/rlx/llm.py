"""Decoder LLMs (llama, mistral, qwen2, qwen3) from a GGUF file or an HF directory, text in, text out::

    import rlx
    m = rlx.llm.load("SmolLM2-135M-Instruct.Q4_1.gguf")
    for piece in m.generate("What is the capital of France?", chat=True, max_new=32):
        print(piece, end="", flush=True)

``generate`` returns an iterator of text pieces as tokens are produced (greedy unless
``temperature`` > 0). ``chat=True`` renders the prompt through the model's chat template (or pass
``messages=[("system", ...), ("user", ...)]``). ``m.tokenizer.encode/decode`` and
``rlx.llm.ChatTemplate(src).render(messages, ...)`` are there on their own too.
"""
from __future__ import annotations

import json
from typing import Iterator, Optional, Sequence, Tuple

from . import _rlx

_llm = _rlx.llm
Tokenizer = _llm.Tokenizer

__all__ = ["load", "LLM", "Tokenizer", "ChatTemplate"]


class ChatTemplate:
    """A chat template (Jinja subset), rendered as transformers' apply_chat_template does."""

    def __init__(self, source: str):
        self._t = _llm.ChatTemplate(source)

    def render(self, messages, add_generation_prompt: bool = True, **context) -> str:
        ctx = dict(context, messages=[dict(m) for m in messages], add_generation_prompt=add_generation_prompt)
        return self._t.render_json(json.dumps(ctx))


class LLM:
    def __init__(self, native):
        self._m = native

    @property
    def tokenizer(self):
        return self._m.tokenizer

    @property
    def architecture(self) -> str:
        return self._m.architecture

    def apply_chat(self, messages: Sequence[Tuple[str, str]], add_generation_prompt: bool = True) -> str:
        return self._m.apply_chat(list(messages), add_generation_prompt)

    def generate(self, prompt: str = "", *, chat: bool = False, messages: Optional[Sequence[Tuple[str, str]]] = None,
                 max_new: int = 128, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
                 min_p: float = 0.0, repeat_penalty: float = 1.0, seed: int = 0,
                 stop: Sequence[str] = ()) -> Iterator[str]:
        """An iterator of text pieces, produced as the model generates them."""
        if messages is not None:
            text, is_chat = self.apply_chat(messages), True
        elif chat:
            text, is_chat = self.apply_chat([("user", prompt)]), True
        else:
            text, is_chat = prompt, False
        ids = self._m.encode_prompt(text, is_chat)
        s = self._m.session(ids, max_new, temperature, top_k, top_p, min_p, repeat_penalty, seed, list(stop))
        while True:
            piece = s.next()
            if piece is None:
                return
            yield piece


def load(path: str, device: str = "cpu") -> LLM:
    """A GGUF file or an HF directory (config.json, *.safetensors, tokenizer.json)."""
    return LLM(_llm.Llm.load(path, device))
