"""`rlx serve` answering the pip `openai` client: embeddings against sentence-transformers' goldens,
chat and completions (plain and streamed) from SmolLM2, /v1/models, /health and /metrics."""
import base64
import json
import os

import numpy as np
import openai
import pytest

from serve_helpers import Server, minilm_dir, smollm2_gguf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join(ROOT, "tests", "models", "minilm")
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def server():
    s = Server([f"minilm={minilm_dir()}", f"smollm2={smollm2_gguf()}"])
    yield s
    assert s.terminate() == 0
    s.close()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=60)


def test_models_and_health(server, client):
    ids = {m.id for m in client.models.list().data}
    assert ids == {"minilm", "smollm2"}
    status, body = server.request("GET", "/health")
    assert status == 200 and body["status"] == "ok" and sorted(body["models"]) == ["minilm", "smollm2"]


def test_embeddings_match_sentence_transformers(client):
    sentences = json.load(open(os.path.join(GOLDEN, "sentences.json")))["sentences"][:6]
    want = np.load(os.path.join(GOLDEN, "embeddings.npy"))[: len(sentences)]
    # Without encoding_format the client asks for base64 and decodes it; explicit "float" is JSON
    # numbers; explicit "base64" hands back the base64 text (little-endian f32).
    for fmt in (None, "float", "base64"):
        kw = {"encoding_format": fmt} if fmt else {}
        r = client.embeddings.create(model="minilm", input=sentences, **kw)
        if fmt == "base64":
            got = np.stack([np.frombuffer(base64.b64decode(d.embedding), "<f4") for d in r.data])
        else:
            got = np.array([d.embedding for d in r.data], dtype=np.float32)
        assert [d.index for d in r.data] == list(range(len(sentences)))
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, atol=2e-4)
        assert r.usage.prompt_tokens > len(sentences) and r.model == "minilm"
    one = client.embeddings.create(model="minilm", input=sentences[0], encoding_format="float")
    np.testing.assert_allclose(np.array(one.data[0].embedding), want[0], atol=2e-4)


def test_chat_completion(client):
    r = client.chat.completions.create(model="smollm2", messages=QUESTION, max_tokens=8, temperature=0)
    text = r.choices[0].message.content
    assert "Paris" in text
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].finish_reason in ("stop", "length")
    assert 0 < r.usage.completion_tokens <= 8 and r.usage.prompt_tokens > 5
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_chat_streaming_equals_plain(client):
    plain = client.chat.completions.create(model="smollm2", messages=QUESTION, max_tokens=8, temperature=0)
    pieces, reasons, usage = [], [], None
    stream = client.chat.completions.create(model="smollm2", messages=QUESTION, max_tokens=8, temperature=0,
                                            stream=True, stream_options={"include_usage": True})
    for ch in stream:
        if ch.usage:
            usage = ch.usage
        for c in ch.choices:
            if c.delta.content:
                pieces.append(c.delta.content)
            if c.finish_reason:
                reasons.append(c.finish_reason)
    assert len(pieces) > 1  # streamed piece by piece, not in one chunk
    assert "".join(pieces) == plain.choices[0].message.content
    assert reasons == [plain.choices[0].finish_reason]
    assert usage is not None and usage.completion_tokens == plain.usage.completion_tokens


def test_stop_max_tokens_and_seed(client):
    r = client.chat.completions.create(model="smollm2", messages=QUESTION, max_tokens=8, temperature=0,
                                       stop=["Paris"])
    assert "Paris" not in r.choices[0].message.content and r.choices[0].finish_reason == "stop"
    r = client.chat.completions.create(model="smollm2", messages=QUESTION, max_tokens=2, temperature=0)
    assert r.usage.completion_tokens == 2 and r.choices[0].finish_reason == "length"
    kw = dict(model="smollm2", prompt="Once upon a time", max_tokens=4, temperature=1.0, top_p=0.9)
    a = client.completions.create(seed=7, **kw).choices[0].text
    b = client.completions.create(seed=7, **kw).choices[0].text
    assert a == b and a  # sampling is seeded per request


def test_completions_plain_and_streamed(client):
    r = client.completions.create(model="smollm2", prompt="The capital of France is", max_tokens=3, temperature=0)
    text = r.choices[0].text
    assert text and r.object == "text_completion" and r.usage.completion_tokens <= 3
    streamed = "".join(c.choices[0].text for c in client.completions.create(
        model="smollm2", prompt="The capital of France is", max_tokens=3, temperature=0, stream=True) if c.choices)
    assert streamed == text


def test_metrics_and_log_lines(server, client):
    client.embeddings.create(model="minilm", input=["metrics please"])
    status, text = server.request("GET", "/metrics")
    assert status == 200
    for family in ("rlx_requests_total", "rlx_tokens_total", "rlx_queue_depth", "rlx_embed_batch_size",
                   "rlx_request_duration_seconds", "rlx_time_to_first_token_seconds"):
        assert f"# TYPE {family} " in text, family
    lines = dict(l.rsplit(" ", 1) for l in text.splitlines() if l and not l.startswith("#"))
    assert float(lines['rlx_requests_total{endpoint="/v1/embeddings",status="200"}']) >= 3
    assert float(lines['rlx_tokens_total{model="smollm2",kind="completion"}']) > 0
    assert float(lines['rlx_request_duration_seconds_count{endpoint="/v1/chat/completions"}']) >= 1
    assert 'rlx_embed_batch_size_bucket{model="minilm",le="+Inf"}' in lines
    recs = [r for r in server.log_records() if r["path"] == "/v1/embeddings"]
    assert recs and recs[-1]["status"] == 200 and recs[-1]["model"] == "minilm" and recs[-1]["prompt_tokens"] > 0
