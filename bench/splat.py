"""Gaussian splatting on the cpu: forward (render) and forward+backward (value_and_grad of the L1
loss) at 100k Gaussians, 640x480, SH degree 3, f32; p50/p90 after warm-up.

    PYTHONPATH=build/python python3 bench/splat.py [--n 100000] [--iters 5] [--out bench/results/splat_cpu.json]

No cpu peer runs here (gsplat is CUDA-only; its pure-PyTorch path needs torch, which this machine
lacks); the gsplat rows come from the H200 (bench/splat_gsplat.py). The load average at the start and
end of the run is recorded, since the machine is shared.
"""
import argparse
import datetime
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rlx  # noqa: E402
import rlx.splat as gs  # noqa: E402
import rlx.train  # noqa: E402
from splat_scene import camera, scene  # noqa: E402
from machine import cpu_model  # noqa: E402



def timeit(fn, warm, iters):
    for _ in range(warm):
        fn()
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return float(np.percentile(ts, 50)), float(np.percentile(ts, 90))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--width", type=int, default=640)
    ap.add_argument("--height", type=int, default=480)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warm", type=int, default=1)
    ap.add_argument("--out", default="bench/results/splat_cpu.json")
    a = ap.parse_args()
    w, h, n = a.width, a.height, a.n
    p = scene(n, seed=3, scale=0.01)
    view, K = camera(w, h)
    view, K = view.astype(np.float32), K.astype(np.float32)
    data = [view, K, gs.camera_center(view).astype(np.float32), np.zeros(3, np.float32)]
    load0 = os.getloadavg()
    fwd = rlx.compile(gs.render_graph(n, 16, w, h, 3))
    target = fwd.run(p + data)[0]
    vg = rlx.compile(rlx.train.value_and_grad(gs.loss_graph(n, 16, w, h, 3), [0, 1, 2, 3, 4]))
    fb_in = p + data + [np.zeros((n, 2), np.float32), np.clip(target + 0.05, 0, 1)]
    rows = []
    for variant, fn in (("forward", lambda: fwd.run(p + data)), ("forward+backward", lambda: vg.run(fb_in))):
        p50, p90 = timeit(fn, a.warm, a.iters)
        rows.append({"system": "rlx", "variant": variant, "device": "cpu", "workload": f"{n} Gaussians, SH3, {w}x{h}",
                     "dtype": "f32", "batch": 1, "seq": None, "p50_ms": p50, "p90_ms": p90, "throughput": None,
                     "unit": None, "peak_rss_mb": None})
        print(f"rlx cpu {variant:17s} N={n}: p50 {p50:.1f} ms  p90 {p90:.1f} ms")
    load1 = os.getloadavg()
    threads = os.environ.get("RLX_NUM_THREADS", str(os.cpu_count()))
    res = {"benchmark": "splat_cpu",
           "machine": f"{cpu_model()}, {os.cpu_count()} cpus, RLX_NUM_THREADS={threads}, load average "
                      f"{load0[0]:.1f} at start / {load1[0]:.1f} at end (shared machine)",
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="minutes"), "rows": rows}
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    print("wrote", a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
