#!/usr/bin/env python3
"""MNIST MLP SGD training throughput on the H200: RLX cuda vs PyTorch CUDA vs JAX jit.

Same MLPs (784-128-10, 784-512-512-10; ReLU; softmax cross-entropy; plain SGD lr 0.1; f32), batch
128 and 1024, one synthetic batch resident on the GPU (uniform [0,1) pixels, random labels), as the
RLX "device-resident" rows do. Timing: N steps back to back, synchronized once, five rounds; p50/p90
over rounds; img/s = batch / ms-per-step. Peers:
  pytorch eager             forward + backward + torch.optim.SGD(foreach) step
  pytorch CUDA graph        the same step captured once with torch.cuda.graph and replayed
  jax jit                   value_and_grad + SGD update in one jitted function (donated params)
Merges bench/h200_mnist.cpp's rows (RLX_DIR/rlx_rows.jsonl, rlx_checks.jsonl) into the results file.

  h200_mnist.py RLX_DIR OUT.json [steps=2000]
"""
import datetime, json, os, platform, sys, time
import numpy as np

from mlp_peers import init, jax_loss, torch_loss

MLPS = [[784, 128, 10], [784, 512, 512, 10]]
BATCHES = [128, 1024]
LR = 0.1


WALL_STEPS = "host wall clock around N steps back to back + synchronize; p50 of 5 rounds"
EVENTS_STEPS = "CUDA events around N replays of the captured step; p50 of 5 rounds"


def data(B, seed=1):
    rng = np.random.default_rng(seed)
    return rng.random((B, 784), dtype=np.float32), rng.integers(0, 10, B).astype(np.int64)


def rounds(run_n, steps, sync, n_rounds=5):
    ms = []
    for _ in range(n_rounds):
        sync()
        t0 = time.perf_counter()
        run_n(steps)
        sync()
        ms.append((time.perf_counter() - t0) * 1e3 / steps)
    ms.sort()
    return ms[len(ms) // 2], ms[-1]


def torch_rows(sizes, B, steps):
    import torch
    dev = "cuda"
    x_np, y_np = data(B)
    x, y = torch.from_numpy(x_np).to(dev), torch.from_numpy(y_np).to(dev)
    out = []
    for variant in ["eager", "CUDA graph"]:
        ps = [torch.from_numpy(p).to(dev).requires_grad_() for p in init(sizes)]
        opt = torch.optim.SGD(ps, lr=LR, foreach=True)

        def step():
            loss = torch_loss(ps, x, y)
            opt.zero_grad(set_to_none=False)
            loss.backward()
            opt.step()
            return loss

        if variant == "eager":
            for _ in range(20):
                step()
            run_n = lambda n: [step() for _ in range(n)]
        else:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(5):
                    step()
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                static_loss = step()
            for _ in range(20):
                g.replay()
            run_n = lambda n: [g.replay() for _ in range(n)]
        p50, p90 = rounds(run_n, steps if variant != "eager" else max(200, steps // 4), torch.cuda.synchronize)
        out.append(row("pytorch", variant + " (torch.optim.SGD foreach)", sizes, B, p50, p90))
        print(f"torch {variant} {'-'.join(map(str, sizes))} b{B}: {p50:.4f} ms/step ({B / p50 / 1e3:.2f} M img/s)",
              flush=True)
    return out


def jax_rows(sizes, B, steps):
    """JAX jit at its default matmul precision (TF32 on this GPU) and at "highest" (full f32)."""
    import jax, jax.numpy as jnp
    precs = os.environ.get("JAX_MATMUL_PRECISIONS", "default,highest").split(",")
    x_np, y_np = data(B)
    x, y = jnp.asarray(x_np), jnp.asarray(y_np)
    out = []
    for prec in precs:
        ps = [jnp.asarray(p) for p in init(sizes)]
        with jax.default_matmul_precision(None if prec == "default" else prec):
            def step(ps, x, y):
                loss, g = jax.value_and_grad(jax_loss)(ps, x, y)
                return [p - LR * gp for p, gp in zip(ps, g)], loss

            step = jax.jit(step, donate_argnums=0)
            state = {"ps": ps}

            def run_n(n):
                p = state["ps"]
                for _ in range(n):
                    p, loss = step(p, x, y)
                state["ps"] = p

            run_n(20)
            sync = lambda: jax.block_until_ready(state["ps"])
            p50, p90 = rounds(run_n, steps, sync)
        label = "default (TF32 on this GPU)" if prec == "default" else prec
        print(f"jax jit [{label}] {'-'.join(map(str, sizes))} b{B}: {p50:.4f} ms/step ({B / p50 / 1e3:.2f} M img/s) "
              f"on {jax.devices()[0]}", flush=True)
        out.append(row("jax", f"jit (donated params), {jax.__version__}, matmul precision {label}", sizes, B, p50, p90))
    return out


def row(system, variant, sizes, B, p50, p90):
    return {"system": system, "variant": variant, "device": "cuda",
            "workload": f"mnist mlp {'-'.join(map(str, sizes))} sgd train step", "dtype": "f32", "batch": B,
            "seq": None, "method": WALL_STEPS, "p50_ms": round(p50, 5), "p90_ms": round(p90, 5), "throughput": round(B / (p50 / 1000), 1),
            "unit": "img/s", "peak_rss_mb": None}


def main():
    rlx_dir, out_path = sys.argv[1], sys.argv[2]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
    rows, notes = [], []
    for sizes in MLPS:
        for B in BATCHES:
            peers = os.environ.get("PEERS", "torch,jax").split(",")  # e.g. PEERS=jax for a precision rerun
            for fn in [f for name, f in (("torch", torch_rows), ("jax", jax_rows)) if name in peers]:
                try:
                    rows += fn(sizes, B, steps)
                except Exception as e:  # a missing peer is reported, the others still count
                    notes.append(f"{fn.__name__} {sizes} b{B}: {type(e).__name__}: {e}")
                    print(notes[-1], flush=True)
    rl, checks = [], []
    # RLX_DIR holds the full-f32 run; RLX_DIR_tf32, when present, the same run with RLX_ALLOW_TF32=1.
    for d, tag in ((rlx_dir, ""), (rlx_dir.rstrip("/") + "_tf32", ", RLX_ALLOW_TF32=1")):
        if os.path.exists(f"{d}/rlx_rows.jsonl"):
            for x in open(f"{d}/rlx_rows.jsonl"):
                if x.strip():
                    r = json.loads(x)
                    r["variant"] += tag
                    r["method"] = WALL_STEPS if "Trainer" in r["variant"] else EVENTS_STEPS
                    rl.append(r)
        if os.path.exists(f"{d}/rlx_checks.jsonl"):
            checks += [dict(json.loads(x), tf32=bool(tag)) for x in open(f"{d}/rlx_checks.jsonl") if x.strip()]
    try:
        import torch
        dev = f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}"
    except Exception:
        dev = "unknown GPU"
    res = {"benchmark": "h200_mnist", "machine": f"{dev}, {platform.node()}",
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "rows": rl + rows, "checks": checks, "notes": notes}
    json.dump(res, open(out_path, "w"), indent=1)
    print(f"wrote {out_path}")
    print(f"{'system':8} {'variant':45} {'workload':34} {'batch':>5} {'ms/step':>9} {'M img/s':>8}")
    for r in res["rows"]:
        print(f"{r['system']:8} {r['variant'][:45]:45} {r['workload'][10:44]:34} {r['batch']:5d} {r['p50_ms']:9.4f} "
              f"{r['throughput'] / 1e6:8.2f}")


if __name__ == "__main__":
    main()
