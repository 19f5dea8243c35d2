"""`rlx serve` continuous batching and admission: concurrent generations share decode steps and give
the same tokens as the same requests one at a time (temperature 0); connections beyond --threads are
answered 429 at once instead of waiting; a non-streamed generation whose client hangs up is
cancelled, and a queued embedding request of a client that left is dropped; a generation past
--timeout ends with finish_reason "length"."""
import concurrent.futures as cf
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


def chat(i, max_tokens=5):
    return {"model": "smollm2", "messages": [{"role": "user", "content": f"Tell me fact number {i} about Paris."}],
            "max_tokens": max_tokens, "temperature": 0}


@pytest.fixture(scope="module")
def server():
    s = Server([f"smollm2={smollm2_gguf()}"], "--quiet")
    yield s
    assert s.terminate() == 0
    s.close()


def test_batched_decode_matches_one_at_a_time(server):
    alone = []
    for i in range(4):  # prompts of one length: one prefill graph
        st, body = server.request("POST", "/v1/chat/completions", chat(i))
        assert st == 200
        alone.append(body["choices"][0]["message"]["content"])
    steps0 = metric(server, 'rlx_decode_batch_size_count{model="smollm2"}')
    rows0 = metric(server, 'rlx_decode_batch_size_sum{model="smollm2"}')
    with cf.ThreadPoolExecutor(4) as ex:
        together = list(ex.map(lambda i: server.request("POST", "/v1/chat/completions", chat(i)), range(4)))
    assert all(st == 200 for st, _ in together)
    assert [b["choices"][0]["message"]["content"] for _, b in together] == alone
    steps = metric(server, 'rlx_decode_batch_size_count{model="smollm2"}') - steps0
    rows = metric(server, 'rlx_decode_batch_size_sum{model="smollm2"}') - rows0
    # 4 x 4 decode tokens (the prefill gives the first); had every step carried one sequence,
    # rows == steps.
    assert rows == 4 * 4 and steps < rows, (steps, rows)


def test_connections_beyond_threads_get_429_at_once():
    s = Server([f"smollm2={smollm2_gguf()}"], "--threads", "4", "--quiet")
    idle = []
    try:
        host, port = urllib.parse.urlparse(s.url).hostname, urllib.parse.urlparse(s.url).port
        # Four connections that send nothing hold the four workers (each waits for its request).
        idle = [socket.create_connection((host, port)) for _ in range(4)]
        time.sleep(0.3)
        t0 = time.time()
        st, body = s.request("POST", "/v1/chat/completions", chat(0, 2))
        assert st == 429 and body["error"]["code"] == "server_busy", body
        assert time.time() - t0 < 5  # answered, not queued behind the idle connections
        for c in idle:
            c.close()
        assert wait_until(lambda: s.request("GET", "/health")[0] == 200)
        assert s.request("POST", "/v1/chat/completions", chat(0, 2))[0] == 200
        assert metric(s, 'rlx_rejected_total{reason="busy"}') >= 1
        assert s.terminate() == 0
    finally:
        for c in idle:
            c.close()
        s.close()


def test_default_threads_bound_the_connections():
    # At the defaults (64 workers) a burst of 64 connections that hold their worker makes the next
    # one a 429: nothing waits in httplib's unbounded connection queue.
    s = Server([f"smollm2={smollm2_gguf()}"], "--quiet")
    idle = []
    try:
        host, port = urllib.parse.urlparse(s.url).hostname, urllib.parse.urlparse(s.url).port
        idle = [socket.create_connection((host, port)) for _ in range(64)]
        time.sleep(0.5)
        st, body = s.request("GET", "/v1/models")
        assert st == 429 and body["error"]["type"] == "rate_limit_error"
    finally:
        for c in idle:
            c.close()
        s.close()


def test_non_streamed_client_disconnect_cancels(server):
    before = metric(server, 'rlx_cancelled_total{model="smollm2",reason="client_gone"}')
    host, port = urllib.parse.urlparse(server.url).hostname, urllib.parse.urlparse(server.url).port
    c = socket.create_connection((host, port))
    body = json.dumps(chat(1, 400)).encode()
    c.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    assert wait_until(lambda: metric(server, 'rlx_active_sequences{model="smollm2"}') == 1)
    c.close()
    assert wait_until(lambda: metric(server, 'rlx_cancelled_total{model="smollm2",reason="client_gone"}') > before,
                      timeout=20)
    assert wait_until(lambda: metric(server, 'rlx_active_sequences{model="smollm2"}') == 0)


def test_queued_embedding_of_a_gone_client_is_dropped():
    # One request per forward pass (--batch-tokens 1): of eight long requests sent at once, most
    # wait in the queue; their clients hang up and they leave it without running.
    s = Server([f"minilm={minilm_dir()}"], "--batch-tokens", "1", "--quiet")
    try:
        host, port = urllib.parse.urlparse(s.url).hostname, urllib.parse.urlparse(s.url).port
        body = json.dumps({"model": "minilm", "input": [" ".join(["word"] * 250)]}).encode()
        req = (b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        socks = [socket.create_connection((host, port)) for _ in range(8)]
        for c in socks:
            c.sendall(req)
        assert wait_until(lambda: metric(s, 'rlx_queue_depth{model="minilm"}') >= 3)
        for c in socks:
            c.close()
        assert wait_until(lambda: metric(s, 'rlx_cancelled_total{model="minilm",reason="client_gone"}') >= 1)
        assert wait_until(lambda: metric(s, 'rlx_queue_depth{model="minilm"}') == 0)
        assert s.request("POST", "/v1/embeddings", {"model": "minilm", "input": "still here"})[0] == 200
        assert s.terminate() == 0
    finally:
        s.close()


def test_timeout_ends_a_generation():
    s = Server([f"smollm2={smollm2_gguf()}"], "--timeout", "1.5", "--quiet")
    try:
        t0 = time.time()
        st, body = s.request("POST", "/v1/chat/completions", chat(2, 1000))
        assert st == 200 and body["choices"][0]["finish_reason"] == "length"
        assert body["usage"]["completion_tokens"] < 1000 and time.time() - t0 < 30
        assert metric(s, 'rlx_cancelled_total{model="smollm2",reason="timeout"}') == 1
    finally:
        s.close()
