#!/usr/bin/env python3
"""Attention on the H200: PyTorch scaled_dot_product_attention on the shapes of bench/h200_attention.cpp,
timed the same way (N calls back to back between CUDA events, five rounds, p50), merged with the RLX
rows into one results file (DESIGN.md section 7 schema; throughput in TFLOP/s, causal counts half).

  h200_attention.py RLX_DIR OUT.json [iters=200]
"""
import datetime, json, os, platform, sys

CASES = [(32, 12, 128, 32, "f16", "none"), (128, 12, 128, 32, "f16", "none"), (8, 16, 1024, 64, "f16", "none"),
         (8, 16, 1024, 64, "f16", "causal"), (4, 16, 2048, 128, "f16", "causal"), (4, 16, 2048, 128, "bf16", "causal"),
         (32, 12, 128, 32, "f32", "none")]


def main():
    import torch
    import torch.nn.functional as F
    rlx_dir, out_path = sys.argv[1], sys.argv[2]
    iters = int(sys.argv[3]) if len(sys.argv) > 3 else 200
    dts = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}
    rows = []
    g = torch.Generator(device="cuda").manual_seed(3)
    for B, H, S, D, dn, mask in CASES:
        q, k, v = (torch.rand(B, H, S, D, device="cuda", generator=g, dtype=torch.float32).mul_(2).sub_(1).to(dts[dn])
                   for _ in range(3))
        causal = mask == "causal"
        fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
        ms = []
        for _ in range(5):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            for _ in range(iters):
                fn()
            e1.record()
            torch.cuda.synchronize()
            ms.append(e0.elapsed_time(e1) / iters)
        ms.sort()
        flops = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)
        print(f"torch sdpa {dn} B{B} H{H} S{S} D{D} {mask}: {ms[2]:.4f} ms ({flops / ms[2] / 1e9:.1f} TFLOP/s)",
              flush=True)
        rows.append({"system": "pytorch", "variant": "F.scaled_dot_product_attention (eager)", "device": "cuda",
                     "workload": f"attention B{B} H{H} S{S} D{D} mask={mask}", "dtype": dn, "batch": B, "seq": S,
                     "p50_ms": round(ms[2], 5), "p90_ms": round(ms[4], 5), "throughput": round(flops / ms[2] / 1e9, 2),
                     "unit": "TFLOP/s", "peak_rss_mb": None})
    rl = []
    p = f"{rlx_dir}/rlx_attention_rows.jsonl"
    if os.path.exists(p):
        rl = [json.loads(x) for x in open(p) if x.strip()]
    res = {"benchmark": "h200_attention",
           "machine": f"{torch.cuda.get_device_name(0)}, {platform.node()}, torch {torch.__version__}",
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "rows": rl + rows}
    json.dump(res, open(out_path, "w"), indent=1)
    print(f"wrote {out_path}")


if __name__ == "__main__":
    main()
