"""Bad input to `rlx serve` gets a 4xx with an OpenAI error object and never takes the server down:
malformed JSON, wrong types, empty input, an oversized body, prompts past the context, unknown
models and routes; a full queue is refused with 429."""
import json
import threading

import pytest

from serve_helpers import Server, minilm_dir, smollm2_gguf, wait_until


@pytest.fixture(scope="module")
def server():
    s = Server([f"minilm={minilm_dir()}", f"smollm2={smollm2_gguf()}"], "--max-body", "4096", "--quiet")
    yield s
    assert s.terminate() == 0
    s.close()


def check_error(resp, status, code=None, param=None):
    got, body = resp
    assert got == status, body
    assert isinstance(body, dict) and set(body["error"]) == {"message", "type", "param", "code"}, body
    assert body["error"]["message"]
    if code:
        assert body["error"]["code"] == code, body
    if param:
        assert body["error"]["param"] == param, body
    return body["error"]


CHAT = {"model": "smollm2", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
EMB = {"model": "minilm", "input": "hello"}


@pytest.mark.parametrize("path", ["/v1/embeddings", "/v1/chat/completions", "/v1/completions"])
def test_malformed_json(server, path):
    check_error(server.request("POST", path, raw=b'{"model": "minilm", "input": '), 400, "invalid_json")
    check_error(server.request("POST", path, raw=b"[1, 2]"), 400, "invalid_json")


@pytest.mark.parametrize("path,body,param", [
    ("/v1/embeddings", {"model": 5, "input": "x"}, "model"),
    ("/v1/embeddings", {"model": "minilm", "input": 5}, "input"),
    ("/v1/embeddings", {"model": "minilm", "input": ["ok", 3]}, "input"),
    ("/v1/embeddings", {"model": "minilm", "input": "x", "encoding_format": "int8"}, "encoding_format"),
    ("/v1/chat/completions", dict(CHAT, messages="hi"), "messages"),
    ("/v1/chat/completions", dict(CHAT, max_tokens="2"), "max_tokens"),
    ("/v1/chat/completions", dict(CHAT, max_tokens=0), "max_tokens"),
    ("/v1/chat/completions", dict(CHAT, temperature=5), "temperature"),
    ("/v1/chat/completions", dict(CHAT, top_p="high"), "top_p"),
    ("/v1/chat/completions", dict(CHAT, stream="yes"), "stream"),
    ("/v1/chat/completions", dict(CHAT, stop=[1]), "stop"),
    ("/v1/chat/completions", dict(CHAT, seed=1.5), "seed"),
    ("/v1/chat/completions", dict(CHAT, messages=[{"role": "wizard", "content": "x"}]), "messages[0].role"),
    ("/v1/completions", {"model": "smollm2", "prompt": {"text": "x"}}, "prompt"),
])
def test_wrong_types_and_values(server, path, body, param):
    check_error(server.request("POST", path, body), 400, param=param)


@pytest.mark.parametrize("path,body,param", [
    ("/v1/embeddings", {"model": "minilm", "input": ""}, "input"),
    ("/v1/embeddings", {"model": "minilm", "input": []}, "input"),
    ("/v1/embeddings", {"model": "minilm"}, "input"),
    ("/v1/chat/completions", dict(CHAT, messages=[]), "messages"),
    ("/v1/completions", {"model": "smollm2", "prompt": ""}, "prompt"),
    ("/v1/embeddings", {"input": "x"}, "model"),
])
def test_empty_or_missing_input(server, path, body, param):
    check_error(server.request("POST", path, body), 400, param=param)


def test_oversized_body(server):
    big = json.dumps({"model": "minilm", "input": "word " * 2000}).encode()
    assert len(big) > 4096
    err = check_error(server.request("POST", "/v1/embeddings", raw=big), 413, "request_too_large")
    assert "4096" in err["message"]


def test_prompt_past_the_context(server):
    # MiniLM takes 256 tokens (its max_seq_length); SmolLM2's context is 8192 tokens.
    err = check_error(server.request("POST", "/v1/embeddings", {"model": "minilm", "input": "word " * 300}), 400,
                      "context_length_exceeded")
    assert "256" in err["message"]
    err = check_error(server.request("POST", "/v1/chat/completions", dict(CHAT, max_tokens=100000)), 400,
                      "context_length_exceeded", "max_tokens")
    assert "8192" in err["message"]


def test_unknown_model_and_route(server):
    err = check_error(server.request("POST", "/v1/embeddings", dict(EMB, model="nope")), 404, "model_not_found")
    assert "minilm" in err["message"]  # names what the server has
    check_error(server.request("POST", "/v1/chat/completions", dict(CHAT, model="minilm")), 400, "wrong_model_kind")
    check_error(server.request("POST", "/v1/embeddings", dict(EMB, model="smollm2")), 400, "wrong_model_kind")
    check_error(server.request("GET", "/v1/nothing"), 404, "not_found")


def test_server_survives_and_still_answers(server):
    status, body = server.request("POST", "/v1/embeddings", dict(EMB, encoding_format="float"))
    assert status == 200 and len(body["data"][0]["embedding"]) == 384
    status, body = server.request("GET", "/health")
    assert status == 200 and body["status"] == "ok"
    assert server.proc.poll() is None


def test_full_queue_is_429():
    s = Server([f"smollm2={smollm2_gguf()}"], "--max-active", "1", "--max-queue", "1", "--quiet")
    try:
        long = dict(CHAT, max_tokens=12, messages=[{"role": "user", "content": "Count from one to fifty."}])
        results = []
        t1 = threading.Thread(target=lambda: results.append(s.request("POST", "/v1/chat/completions", long)))
        t1.start()
        # The first is being decoded (active), the second waits in the queue, the third is refused.
        assert wait_until(lambda: "rlx_active_sequences{model=\"smollm2\"} 1" in s.request("GET", "/metrics")[1])
        t2 = threading.Thread(target=lambda: results.append(s.request("POST", "/v1/chat/completions", CHAT)))
        t2.start()
        assert wait_until(lambda: "rlx_queue_depth{model=\"smollm2\"} 1" in s.request("GET", "/metrics")[1])
        check_error(s.request("POST", "/v1/chat/completions", CHAT), 429, "rate_limit_exceeded")
        t1.join(60)
        t2.join(60)
        assert sorted(r[0] for r in results) == [200, 200]
        assert s.terminate() == 0
    finally:
        s.close()
