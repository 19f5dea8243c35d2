"""gsplat on the H200 (run by scripts/device/h200_splat.sh): writes

  $OUT/gsplat_case.npz  one seeded scene + camera, gsplat's image/alpha and the gradients of
                        sum(image * weights) w.r.t. means, log-scales, quats, opacity logits, SH
                        (compared against RLX here by bench/splat_compare.py);
  $OUT/h200_splat.json  forward and forward+backward ms at 100k and 1M Gaussians, 1920x1080.

Parameters are 3DGS's (log-scales, opacity logits, SH degree 3); gsplat.rasterization gets
exp(log_scales) and sigmoid(logits), so autograd gives the same gradients RLX's VJPs compute.

With --splatcuda RLX_BIN (scripts/device/h200_splatcuda.sh) it instead benchmarks RLX's cuda kernels
beside gsplat in one run: writes the 100k/1M scenes for RLX's bench/h200_splatcuda.cpp, runs it,
writes $OUT/h200_splatcuda.json with the RLX rows at once (so they survive a gsplat compile that
runs out of time), then times gsplat on the same data (CUDA events, p50 of 20 after 3 warm-ups)
and rewrites the file with both and the ratios gsplat_ms / rlx_ms (> 1: RLX faster).
"""
import datetime
import json
import os
import sys
import time

import subprocess

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from splat_scene import camera, scene  # noqa: E402

OUT = os.environ.get("OUT", "/tmp/rlx-out")
torch = gsplat = dev = None


def load_gsplat():
    global torch, gsplat, dev
    import torch as t  # noqa: E402
    import gsplat as g  # noqa: E402
    torch, gsplat, dev = t, g, t.device("cuda")


def render(p, view, K, w, h, bg):
    means, ls, q, ol, sh = p
    img, alpha, _ = gsplat.rasterization(
        means, q, torch.exp(ls), torch.sigmoid(ol), sh, view[None], K[None], w, h, near_plane=0.01,
        far_plane=1e10, eps2d=0.3, sh_degree=3, packed=False, tile_size=16, backgrounds=bg[None],
        rasterize_mode="classic")
    return img[0], alpha[0, ..., 0]


def tensors(arrs, grad):
    return [torch.tensor(a, device=dev, requires_grad=grad) for a in arrs]


def parity():
    w, h = 320, 240
    p_np = scene(3000, seed=1, scale=0.03)
    view_np, K_np = camera(w, h)
    bg_np = np.array([0.1, 0.2, 0.3], np.float32)
    weights = np.random.default_rng(2).uniform(-1, 1, (h, w, 3)).astype(np.float32)
    p = tensors(p_np, True)
    view = torch.tensor(view_np, dtype=torch.float32, device=dev)
    K = torch.tensor(K_np, dtype=torch.float32, device=dev)
    img, alpha = render(p, view, K, w, h, torch.tensor(bg_np, device=dev))
    (img * torch.tensor(weights, device=dev)).sum().backward()
    names = ["means", "log_scales", "quats", "opacity_logits", "sh"]
    out = {n: a for n, a in zip(names, p_np)}
    out.update({"grad_" + n: t.grad.detach().cpu().numpy() for n, t in zip(names, p)})
    out.update(viewmat=view_np.astype(np.float32), K=K_np.astype(np.float32), background=bg_np, weights=weights,
               image=img.detach().cpu().numpy(), alpha=alpha.detach().cpu().numpy(),
               width=np.int64(w), height=np.int64(h))
    np.savez(os.path.join(OUT, "gsplat_case.npz"), **out)
    print(f"parity case: {w}x{h}, 3000 Gaussians, image mean {float(img.mean()):.4f}")


def timeit(fn, warm=3, iters=20):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) * 1e3)
    return float(np.percentile(ts, 50)), float(np.percentile(ts, 90))


def bench():
    w, h = 1920, 1080
    view_np, K_np = camera(w, h)
    view = torch.tensor(view_np, dtype=torch.float32, device=dev)
    K = torch.tensor(K_np, dtype=torch.float32, device=dev)
    bg = torch.zeros(3, device=dev)
    rows = []
    for n in (100_000, 1_000_000):
        p = tensors(scene(n, seed=3, scale=0.01), True)

        def fwd():
            with torch.no_grad():
                render(p, view, K, w, h, bg)

        def fwd_bwd():
            img, _ = render(p, view, K, w, h, bg)
            img.sum().backward()

        for variant, fn in (("forward", fwd), ("forward+backward", fwd_bwd)):
            p50, p90 = timeit(fn)
            rows.append({"system": "gsplat", "variant": variant, "device": "cuda (H200)",
                         "workload": f"{n} Gaussians, SH3, {w}x{h}", "dtype": "f32", "batch": 1, "seq": None,
                         "p50_ms": p50, "p90_ms": p90, "throughput": None, "unit": None, "peak_rss_mb": None})
            print(f"gsplat {variant:17s} N={n:8d}: p50 {p50:.2f} ms  p90 {p90:.2f} ms")
    res = {"benchmark": "splat", "machine": torch.cuda.get_device_name(0) + ", gsplat " + gsplat.__version__ +
           ", torch " + torch.__version__, "date": datetime.date.today().isoformat(), "rows": rows,
           "notes": "RLX has no cuda splat kernels yet: no rlx rows on cuda."}
    with open(os.path.join(OUT, "h200_splat.json"), "w") as f:
        json.dump(res, f, indent=1)


SIZES = (100_000, 1_000_000)


def event_time(fn, warm=3, iters=20):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1))
    return float(np.percentile(ts, 50)), float(np.percentile(ts, 90))


def write_splatcuda(rows, notes):
    by = {(r["system"], r["variant"], r["workload"]): r for r in rows}
    ratios = []
    for (system, variant, workload), r in by.items():
        g = by.get(("gsplat", variant, workload))
        if system == "rlx" and g:
            ratios.append({"variant": variant, "workload": workload, "rlx_p50_ms": r["p50_ms"],
                           "gsplat_p50_ms": g["p50_ms"], "speedup_vs_gsplat": g["p50_ms"] / r["p50_ms"]})
    machine = "NVIDIA H200"
    if torch is not None:
        machine = torch.cuda.get_device_name(0) + ", gsplat " + gsplat.__version__ + ", torch " + torch.__version__
    res = {"benchmark": "h200_splatcuda", "machine": machine,
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="minutes"),
           "rows": rows, "ratios": ratios, "notes": notes}
    with open(os.path.join(OUT, "h200_splatcuda.json"), "w") as f:
        json.dump(res, f, indent=1)
    for q in ratios:
        print(f"ratio {q['variant']:17s} {q['workload']}: rlx {q['rlx_p50_ms']:.2f} ms, gsplat "
              f"{q['gsplat_p50_ms']:.2f} ms, speedup {q['speedup_vs_gsplat']:.2f}x")


def splatcuda(rlx_bin):
    w, h = 1920, 1080
    view_np, K_np = camera(w, h)
    sdir = os.path.join("/tmp", "splatcuda_scenes")
    os.makedirs(sdir, exist_ok=True)
    scenes = {}
    for n in SIZES:
        p = scene(n, seed=3, scale=0.01)
        scenes[n] = p
        campos = -view_np[:3, :3].T @ view_np[:3, 3]
        with open(os.path.join(sdir, f"scene_{n}.f32"), "wb") as f:
            for a in p + [view_np, K_np, campos]:
                f.write(np.ascontiguousarray(a, np.float32).tobytes())
    jl = os.path.join(OUT, "rlx_splat_rows.jsonl")
    t0 = time.time()
    rc = subprocess.call([rlx_bin, sdir, jl, "20", ",".join(map(str, SIZES))])
    print(f"=== rlx bench rc={rc} after {time.time() - t0:.0f} s", flush=True)
    rows = [json.loads(l) for l in open(jl)] if os.path.exists(jl) else []
    notes = ("RLX: bench/h200_splatcuda.cpp, render graph and value_and_grad of the L1 loss w.r.t. the 5 parameter "
             "groups, resident inputs, CUDA events per run (p50/p90 of 20 after 3 warm-ups). gsplat: "
             "rasterization(classic, packed=False, tile 16) forward under no_grad, forward+backward as "
             "img.sum().backward(), CUDA events per call (p50/p90 of 20 after 3 warm-ups), same Gaussians and camera.")
    write_splatcuda(rows, notes + " gsplat: not timed (not carried, failed, or its first-use compile ran out of the time box: see log.txt).")
    load_gsplat()
    view = torch.tensor(view_np, dtype=torch.float32, device=dev)
    K = torch.tensor(K_np, dtype=torch.float32, device=dev)
    bg = torch.zeros(3, device=dev)
    t0 = time.time()
    render(tensors(scene(10, seed=0), False), view, K, 64, 48, bg)  # gsplat compiles its CUDA here
    torch.cuda.synchronize()
    print(f"=== gsplat ready after {time.time() - t0:.0f} s", flush=True)
    for n in SIZES:
        p = tensors(scenes[n], True)

        def fwd():
            with torch.no_grad():
                render(p, view, K, w, h, bg)

        def fwd_bwd():
            img, _ = render(p, view, K, w, h, bg)
            img.sum().backward()

        for variant, fn in (("forward", fwd), ("forward+backward", fwd_bwd)):
            p50, p90 = event_time(fn)
            rows.append({"system": "gsplat", "variant": variant, "device": "cuda (H200)",
                         "workload": f"{n} Gaussians, SH3, {w}x{h}", "dtype": "f32", "batch": 1, "seq": None,
                         "p50_ms": p50, "p90_ms": p90, "throughput": None, "unit": None, "peak_rss_mb": None,
                         "iters": 20})
            print(f"gsplat {variant:17s} N={n:8d}: p50 {p50:.2f} ms  p90 {p90:.2f} ms", flush=True)
            write_splatcuda(rows, notes)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--splatcuda":
        splatcuda(sys.argv[2])
    else:
        load_gsplat()
        parity()
        bench()
