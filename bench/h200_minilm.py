#!/usr/bin/env python3
"""MiniLM-L6-shaped BERT encoder on the H200: RLX cuda vs PyTorch eager and torch.compile.

Same seeded random weights and token ids for every system (seq 128; batch 1/32/128; fp32/fp16);
p50/p90 after warm-up. Every system is timed the same ways, and each row names its method:
  cuda-events     CUDA events recorded around one call on the current stream (device time of the
                  work that call enqueues, launch gaps included); the RLX "device-resident" rows
                  are the same measurement of its replayed CUDA graph
  wall-sync       host wall clock around one call plus a stream synchronize
  wall-host-io    wall clock of host ids -> GPU -> hidden states back on the host (RLX "end-to-end")
PyTorch runs eager, eager captured in a torch.cuda.CUDAGraph and replayed, and torch.compile
(max-autotune, whose CUDA graphs are checked to be in use). Writes the DESIGN.md §7 results file.

  h200_minilm.py weights DIR                     write weights + ids (numpy, seed 0)
  h200_minilm.py peers DIR RLX_DIR OUT.json      time the peers, check parity, merge the rlx rows
"""
import datetime, glob, json, os, platform, sys, time
import numpy as np

L, HID, HEADS, FFN, VOCAB, MAXPOS, SEQ = 6, 384, 12, 1536, 30522, 512, 128
BATCHES = [1, 32, 128]
DTYPES = os.environ.get("DTYPES", "f16,f32").split(",")  # the same selection as the RLX side


def write_weights(d):
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(0)
    def save(n, shape, scale=0.05):
        np.save(f"{d}/{n}.npy", (rng.standard_normal(shape) * scale).astype(np.float32))
    save("word_embeddings", (VOCAB, HID), 0.5)
    np.save(f"{d}/position_embeddings.npy", (rng.standard_normal((MAXPOS, HID)) * 0.5).astype(np.float32)[:SEQ])
    np.save(f"{d}/token_type_embeddings.npy", (rng.standard_normal((HID,)) * 0.5).astype(np.float32))
    def ln(n):
        np.save(f"{d}/{n}_g.npy", (1 + 0.1 * rng.standard_normal(HID)).astype(np.float32))
        np.save(f"{d}/{n}_b.npy", (0.1 * rng.standard_normal(HID)).astype(np.float32))
    ln("emb_ln")
    for l in range(L):
        p = f"l{l}_"
        for n in "qkvo":
            save(p + "w" + n, (HID, HID)); save(p + "b" + n, (HID,), 0.02)
        save(p + "w1", (FFN, HID)); save(p + "b1", (FFN,), 0.02)
        save(p + "w2", (HID, FFN)); save(p + "b2", (HID,), 0.02)
        ln(p + "ln1"); ln(p + "ln2")
    for b in BATCHES:
        np.save(f"{d}/input_ids_b{b}.npy", rng.integers(0, VOCAB, size=(b, SEQ), dtype=np.int64))


def torch_model(d, dtype):
    import torch, torch.nn.functional as F
    W = {f[:-4]: torch.from_numpy(np.load(f"{d}/{f}")).cuda().to(dtype) for f in os.listdir(d)
         if f.endswith(".npy") and not f.startswith("input_ids")}

    def fwd(ids):
        B = ids.shape[0]
        x = F.embedding(ids, W["word_embeddings"]) + W["position_embeddings"] + W["token_type_embeddings"]
        x = F.layer_norm(x, (HID,), W["emb_ln_g"], W["emb_ln_b"], 1e-12)
        def heads(t):
            return t.view(B, SEQ, HEADS, HID // HEADS).transpose(1, 2)
        for l in range(L):
            p = f"l{l}_"
            q, k, v = (heads(F.linear(x, W[p + "w" + n], W[p + "b" + n])) for n in "qkv")
            a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, SEQ, HID)
            x = F.layer_norm(x + F.linear(a, W[p + "wo"], W[p + "bo"]), (HID,), W[p + "ln1_g"], W[p + "ln1_b"], 1e-12)
            f = F.linear(F.gelu(F.linear(x, W[p + "w1"], W[p + "b1"])), W[p + "w2"], W[p + "b2"])
            x = F.layer_norm(x + f, (HID,), W[p + "ln2_g"], W[p + "ln2_b"], 1e-12)
        return x
    return fwd


def time_events(fn, warmup=20, iters=100):
    """p50/p90 ms of CUDA events recorded around each call (method cuda-events)."""
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    evs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for a, b in evs:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    return pct(sorted(a.elapsed_time(b) for a, b in evs))


def time_wall(fn, iters=100):
    """p50/p90 ms of host wall clock around each call followed by a synchronize (wall-sync / wall-host-io)."""
    import torch
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) * 1000)
    return pct(sorted(ts))


def pct(ts):
    return ts[len(ts) // 2], ts[int(0.9 * (len(ts) - 1))]


def capture_graph(fwd, ids):
    """fwd(ids) captured once in a torch.cuda.CUDAGraph; returns (replay, static output)."""
    import torch
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fwd(ids)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fwd(ids)
    return g.replay, out


def compiled_cudagraphs_in_use(mode):
    """True when the compile mode turns inductor's CUDA graphs on (a mode's options are applied per
    compile, not to the global config) and no graph of the compiled function was skipped."""
    import torch
    from torch._dynamo.utils import counters
    on = torch._inductor.list_mode_options(mode).get("triton.cudagraphs", torch._inductor.config.triton.cudagraphs)
    return bool(on) and not counters["inductor"].get("cudagraph_skips", 0)


def peers(d, rlx_dir, out_path):
    import torch
    deadline = time.time() + float(os.environ.get("PEER_BUDGET_S", "240"))
    rows, checks = [], []
    dev = torch.cuda.get_device_name(0)
    for dn in DTYPES:
        dtype = torch.float32 if dn == "f32" else torch.float16
        fwd = torch_model(d, dtype)
        for b in BATCHES:
            ids_host = torch.from_numpy(np.load(f"{d}/input_ids_b{b}.npy")).pin_memory()
            ids = ids_host.cuda()
            with torch.inference_mode():
                ref = fwd(ids).float().cpu().numpy()
                for p in sorted(glob.glob(f"{rlx_dir}/rlx_out_*{dn}_b{b}.npy")):
                    on = os.path.basename(p)[len("rlx_out_"):-len(f"{dn}_b{b}.npy")].rstrip("_") or "cuda"
                    err = float(np.abs(np.load(p) - ref).max())
                    checks.append({"check": f"parity rlx {on} vs pytorch eager", "dtype": dn, "batch": b,
                                   "max_abs_err": err, "ref_max_abs": float(np.abs(ref).max())})
                    print(f"parity {on} {dn} b{b}: max |rlx - torch| = {err:.3g}", flush=True)

                def add(variant, method, fn, timer):
                    p50, p90 = timer(fn)
                    rows.append(row("pytorch", variant, dn, b, p50, p90, method))
                    print(f"torch {variant} [{method}] {dn} b{b}: p50 {p50:.4f} ms p90 {p90:.4f}", flush=True)

                add("eager", "cuda-events", lambda: fwd(ids), time_events)
                add("eager", "wall-sync", lambda: fwd(ids), time_wall)
                replay, static_out = capture_graph(fwd, ids)
                add("eager captured in torch.cuda.CUDAGraph, replayed", "cuda-events", replay, time_events)

                def host_io():
                    ids.copy_(ids_host, non_blocking=True)
                    replay()
                    return static_out.cpu()
                add("eager captured in torch.cuda.CUDAGraph, replayed", "wall-host-io", host_io, time_wall)
                mode = os.environ.get("TORCH_COMPILE_MODE", "max-autotune")
                only = os.environ.get("COMPILE_ONLY")  # e.g. "f16:128,f32:32": compile just these
                wanted = not only or f"{dn}:{b}" in only.split(",")
                if wanted and time.time() < deadline:
                    try:
                        t0 = time.time()
                        torch._dynamo.reset()
                        from torch._dynamo.utils import counters
                        counters.clear()
                        cf = torch.compile(fwd, mode=mode, dynamic=False)
                        for _ in range(3):
                            cf(ids)
                        torch.cuda.synchronize()
                        graphs = compiled_cudagraphs_in_use(mode)
                        variant = f"torch.compile mode={mode}, CUDA graphs {'in use' if graphs else 'NOT in use'}"
                        add(variant, "cuda-events", lambda: cf(ids), time_events)
                        print(f"  (compile {time.time() - t0:.0f} s)", flush=True)
                    except Exception as e:  # keep going: the eager rows and rlx rows still count
                        print(f"torch.compile {dn} b{b} failed: {e}", flush=True)
                else:
                    print(f"torch.compile {dn} b{b}: skipped ({'not selected' if not wanted else 'peer time budget spent'})",
                          flush=True)
    rl = [json.loads(x) for f in sorted(glob.glob(f"{rlx_dir}/rlx_rows*.jsonl")) for x in open(f) if x.strip()]
    res = {"benchmark": "h200_minilm", "machine": f"{dev}, {platform.node()}, torch {torch.__version__}",
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "methods": {"cuda-events": "CUDA events around one call, p50 of 100 after 20 warm-ups",
                       "wall-sync": "host wall clock around one call + stream synchronize",
                       "wall-host-io": "host wall clock: ids host->GPU, run, output GPU->host"},
           "rows": rl + rows, "checks": checks}
    json.dump(res, open(out_path, "w"), indent=1)
    print(f"wrote {out_path}")


def row(system, variant, dn, b, p50, p90, method):
    return {"system": system, "variant": variant, "method": method, "device": "cuda", "workload": "minilm-l6 encoder (random weights)",
            "dtype": dn, "batch": b, "seq": SEQ, "p50_ms": round(p50, 4), "p90_ms": round(p90, 4),
            "throughput": round(b / (p50 / 1000), 1), "unit": "seq/s", "peak_rss_mb": None}


if __name__ == "__main__":
    if sys.argv[1] == "weights":
        write_weights(sys.argv[2])
    else:
        peers(sys.argv[2], sys.argv[3], sys.argv[4])
