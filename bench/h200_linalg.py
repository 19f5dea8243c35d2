"""Peers of bench/h200_linalg.cpp on the H200: CuPy (cupy.linalg.cholesky) and torch.linalg.cholesky
on the same shapes and dtypes, inputs resident on the GPU, `iters` calls back to back between CUDA
events, five rounds, p50/p90 over rounds; merges RLX's rows (OUT_DIR/rlx_linalg_rows.jsonl) into one
results file with ratios. Usage: python3 bench/h200_linalg.py OUT_DIR RESULT_JSON [iters=50]"""
import datetime
import json
import os
import subprocess
import sys

import numpy as np

CASES = [(10000, 8, "f64"), (10000, 8, "f32"), (10000, 32, "f64"), (10000, 32, "f32"),
         (1, 2048, "f64"), (1, 2048, "f32"), (1, 4096, "f32")]


def spd(batch, n, dt):
    rng = np.random.default_rng(3)
    m = rng.uniform(-1, 1, (batch, n, n))
    return (m @ np.swapaxes(m, -1, -2) / n + np.eye(n)).astype(dt)


def time_rounds(fn, sync, iters, start_ev, end_ev):
    fn(), sync()
    out = []
    for _ in range(5):
        start_ev()
        for _ in range(iters):
            fn()
        out.append(end_ev() / iters)
    out.sort()
    return out[2], out[4]


def main():
    out_dir, result, iters = sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 50
    rows = []
    try:
        import torch
        for batch, n, dt in CASES:
            a = torch.from_numpy(spd(batch, n, np.float64 if dt == "f64" else np.float32)).cuda()
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

            def end():
                e1.record()
                torch.cuda.synchronize()
                return e0.elapsed_time(e1)
            k = max(3, iters // 10) if n >= 2048 else iters
            p50, p90 = time_rounds(lambda: torch.linalg.cholesky(a), torch.cuda.synchronize, k, e0.record, end)
            rows.append(dict(system="pytorch", variant=f"torch.linalg.cholesky {torch.__version__}", device="cuda",
                             workload=f"cholesky {n}x{n}", dtype=dt, batch=batch, seq=None, p50_ms=p50, p90_ms=p90,
                             throughput=None, unit=None, peak_rss_mb=None))
            print(rows[-1]["workload"], dt, batch, "torch", round(p50, 4), flush=True)
    except Exception as e:  # a peer that is missing is reported, not fatal
        print("torch peer skipped:", e)
    try:
        import cupy
        for batch, n, dt in CASES:
            a = cupy.asarray(spd(batch, n, np.float64 if dt == "f64" else np.float32))
            e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()

            def end():
                e1.record()
                e1.synchronize()
                return cupy.cuda.get_elapsed_time(e0, e1)
            k = max(3, iters // 10) if n >= 2048 else iters
            p50, p90 = time_rounds(lambda: cupy.linalg.cholesky(a), cupy.cuda.Device().synchronize, k, e0.record, end)
            rows.append(dict(system="cupy", variant=f"cupy.linalg.cholesky {cupy.__version__}", device="cuda",
                             workload=f"cholesky {n}x{n}", dtype=dt, batch=batch, seq=None, p50_ms=p50, p90_ms=p90,
                             throughput=None, unit=None, peak_rss_mb=None))
            print(rows[-1]["workload"], dt, batch, "cupy", round(p50, 4), flush=True)
    except Exception as e:
        print("cupy peer skipped:", e)
    path = os.path.join(out_dir, "rlx_linalg_rows.jsonl")
    if os.path.exists(path):
        rows += [json.loads(line) for line in open(path) if line.strip()]
    by = {(r["workload"], r["dtype"], r["batch"], r["system"]): r["p50_ms"] for r in rows}
    ratios = [dict(workload=w, dtype=d, batch=b, peer=s, peer_over_rlx=round(t / by[(w, d, b, "rlx")], 3))
              for (w, d, b, s), t in by.items() if s != "rlx" and (w, d, b, "rlx") in by]
    for r in ratios:
        print(r)
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    json.dump(dict(benchmark="h200_linalg", machine=gpu, date=datetime.datetime.now(datetime.timezone.utc).isoformat(),
                   rows=rows, ratios=ratios), open(result, "w"), indent=1)


if __name__ == "__main__":
    main()
