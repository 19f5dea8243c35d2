#!/usr/bin/env python3
"""MiniLM-L6-shaped BERT encoder on the H200: RLX cuda vs PyTorch eager and torch.compile.

Same seeded random weights and token ids for every system (seq 128; batch 1/32/128; fp32/fp16);
p50/p90 after warm-up, each iteration synchronized; inputs and outputs stay on the GPU for the
PyTorch rows (compare with the rlx "device-resident" rows). Writes the DESIGN.md §7 results file.

  h200_minilm.py weights DIR                     write weights + ids (numpy, seed 0)
  h200_minilm.py peers DIR RLX_DIR OUT.json      time the peers, check parity, merge the rlx rows
"""
import json, os, sys, time, platform, datetime
import numpy as np

L, HID, HEADS, FFN, VOCAB, MAXPOS, SEQ = 6, 384, 12, 1536, 30522, 512, 128
BATCHES, DTYPES = [1, 32, 128], ["f16", "f32"]


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


def timeit(fn, warmup=20, iters=100):
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) * 1000)
    ts.sort()
    return ts[len(ts) // 2], ts[int(0.9 * (len(ts) - 1))]


def peers(d, rlx_dir, out_path):
    import torch
    deadline = time.time() + float(os.environ.get("PEER_BUDGET_S", "240"))
    rows, checks = [], []
    dev = torch.cuda.get_device_name(0)
    for dn in DTYPES:
        dtype = torch.float32 if dn == "f32" else torch.float16
        fwd = torch_model(d, dtype)
        for b in BATCHES:
            ids = torch.from_numpy(np.load(f"{d}/input_ids_b{b}.npy")).cuda()
            with torch.inference_mode():
                ref = fwd(ids).float().cpu().numpy()
                # fp32 reference in float64 on the same weights, for honest parity numbers
                p = f"{rlx_dir}/rlx_out_{dn}_b{b}.npy"
                if os.path.exists(p):
                    got = np.load(p)
                    err = float(np.abs(got - ref).max())
                    checks.append({"check": "parity rlx vs pytorch eager", "dtype": dn, "batch": b,
                                   "max_abs_err": err, "ref_max_abs": float(np.abs(ref).max())})
                    print(f"parity {dn} b{b}: max |rlx - torch| = {err:.3g}", flush=True)
                p50, p90 = timeit(lambda: fwd(ids))
                rows.append(row("pytorch", "eager", dn, b, p50, p90))
                print(f"torch eager {dn} b{b}: p50 {p50:.3f} ms p90 {p90:.3f}", flush=True)
                mode = os.environ.get("TORCH_COMPILE_MODE", "max-autotune")
                only = os.environ.get("COMPILE_ONLY")  # e.g. "f16:128,f32:32": compile just these
                wanted = not only or f"{dn}:{b}" in only.split(",")
                if wanted and time.time() < deadline:
                    try:
                        t0 = time.time()
                        cf = torch.compile(fwd, mode=mode, dynamic=False)
                        for _ in range(3):
                            cf(ids)
                        torch.cuda.synchronize()
                        p50, p90 = timeit(lambda: cf(ids))
                        rows.append(row("pytorch", f"torch.compile mode={mode}", dn, b, p50, p90))
                        print(f"torch.compile[{mode}] {dn} b{b}: p50 {p50:.3f} ms p90 {p90:.3f} "
                              f"(compile {time.time() - t0:.0f} s)", flush=True)
                    except Exception as e:  # keep going: the eager row and rlx rows still count
                        print(f"torch.compile {dn} b{b} failed: {e}", flush=True)
                else:
                    print(f"torch.compile {dn} b{b}: skipped ({'not selected' if not wanted else 'peer time budget spent'})",
                          flush=True)
    rl = []
    if os.path.exists(f"{rlx_dir}/rlx_rows.jsonl"):
        rl = [json.loads(x) for x in open(f"{rlx_dir}/rlx_rows.jsonl") if x.strip()]
    res = {"benchmark": "h200_minilm", "machine": f"{dev}, {platform.node()}, torch {torch.__version__}",
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "rows": rl + rows, "checks": checks}
    json.dump(res, open(out_path, "w"), indent=1)
    print(f"wrote {out_path}")


def row(system, variant, dn, b, p50, p90):
    return {"system": system, "variant": variant, "device": "cuda", "workload": "minilm-l6 encoder (random weights)",
            "dtype": dn, "batch": b, "seq": SEQ, "p50_ms": round(p50, 4), "p90_ms": round(p90, 4),
            "throughput": round(b / (p50 / 1000), 1), "unit": "seq/s", "peak_rss_mb": None}


if __name__ == "__main__":
    if sys.argv[1] == "weights":
        write_weights(sys.argv[2])
    else:
        peers(sys.argv[2], sys.argv[3], sys.argv[4])
