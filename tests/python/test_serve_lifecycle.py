"""`rlx serve` under concurrency and shutdown: concurrent embedding requests share forward passes,
a short generation finishes while a long one is still decoding, a client that hangs up mid-stream
cancels its sequence, and SIGTERM lets an in-flight stream finish before exiting 0."""
import concurrent.futures as cf
import http.client
import json
import re
import socket
import time
import urllib.parse

import pytest

from serve_helpers import Server, minilm_dir, smollm2_gguf, wait_until


def metric(server, name):
    text = server.request("GET", "/metrics")[1]
    m = re.search("^" + re.escape(name) + r" (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def open_stream(server, max_tokens, content="Count from one to fifty, one number per line."):
    u = urllib.parse.urlparse(server.url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    body = {"model": "smollm2", "messages": [{"role": "user", "content": content}], "max_tokens": max_tokens,
            "temperature": 0, "stream": True}
    c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200 and r.getheader("Content-Type").startswith("text/event-stream")
    return c, r


def events(resp):
    """Yields each SSE data payload of a streamed response as it arrives."""
    for raw in resp:
        line = raw.decode().strip()
        if line.startswith("data: "):
            yield line[6:]


@pytest.fixture(scope="module")
def server():
    s = Server([f"minilm={minilm_dir()}", f"smollm2={smollm2_gguf()}"])
    yield s
    assert s.terminate() == 0
    s.close()


def test_concurrent_embeddings_are_batched(server):
    before_batches = metric(server, 'rlx_embed_batch_size_count{model="minilm"}')
    before_rows = metric(server, 'rlx_embed_batch_size_sum{model="minilm"}')
    body = lambda i: {"model": "minilm", "input": [f"sentence number {i} about batching"], "encoding_format": "float"}
    with cf.ThreadPoolExecutor(24) as ex:
        res = list(ex.map(lambda i: server.request("POST", "/v1/embeddings", body(i)), range(48)))
    assert all(st == 200 and len(b["data"]) == 1 for st, b in res)
    batches = metric(server, 'rlx_embed_batch_size_count{model="minilm"}') - before_batches
    rows = metric(server, 'rlx_embed_batch_size_sum{model="minilm"}') - before_rows
    assert rows == 48
    assert batches < 48  # some forward passes carried more than one request
    # Each request got its own sentence's embedding back: equal inputs give equal rows.
    again = server.request("POST", "/v1/embeddings", body(5))[1]["data"][0]["embedding"]
    assert max(abs(a - b) for a, b in zip(again, res[5][1]["data"][0]["embedding"])) < 1e-4


def test_short_generation_is_not_blocked_by_a_long_one(server):
    c, r = open_stream(server, 20)
    ev = events(r)
    next(ev)  # the long one is decoding
    t0 = time.time()
    st, body = server.request("POST", "/v1/chat/completions", {
        "model": "smollm2", "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 2, "temperature": 0})
    short_s = time.time() - t0
    assert st == 200 and body["usage"]["completion_tokens"] <= 2
    rest = list(ev)  # the long one still had tokens left when the short one finished
    assert rest[-1] == "[DONE]" and len(rest) > 3, (short_s, len(rest))
    c.close()


def test_client_disconnect_cancels(server):
    before = metric(server, 'rlx_cancelled_total{model="smollm2",reason="client_gone"}')
    c, r = open_stream(server, 200)
    ev = events(r)
    next(ev)
    c.sock.shutdown(socket.SHUT_RDWR)
    c.close()
    assert wait_until(lambda: metric(server, 'rlx_cancelled_total{model="smollm2",reason="client_gone"}') > before)
    assert wait_until(lambda: metric(server, 'rlx_active_sequences{model="smollm2"}') == 0)


def test_sigterm_finishes_in_flight_then_exits_0():
    s = Server([f"smollm2={smollm2_gguf()}"])
    try:
        c, r = open_stream(s, 10)
        ev = events(r)
        first = json.loads(next(ev))
        pieces = [first["choices"][0]["delta"].get("content", "")]
        s.proc.send_signal(15)
        # New connections are refused once the listener has closed...
        host, port = urllib.parse.urlparse(s.url).hostname, urllib.parse.urlparse(s.url).port

        def refused():
            try:
                socket.create_connection((host, port), timeout=1).close()
                return False
            except OSError:
                return True

        assert wait_until(refused, timeout=10)
        # ...while the stream in flight runs to its end.
        rest = list(ev)
        assert rest[-1] == "[DONE]"
        chunks = [json.loads(x) for x in rest[:-1]]
        pieces += [ch["choices"][0]["delta"].get("content", "") for ch in chunks if ch["choices"]]
        assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")
        assert len("".join(pieces)) > 0
        assert s.proc.wait(30) == 0
        assert any("SIGTERM" in l for l in s.log)
    finally:
        s.close()
