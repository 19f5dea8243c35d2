#!/usr/bin/env python3
"""MNIST MLP training throughput: RLX (one compiled training-step graph) vs peers, side by side.

Identical data (the MNIST 8k training split in ../shared/data/mnist, unshuffled, float32 in [0,1]),
same MLP (PyTorch-style uniform init), same batch, plain SGD lr 0.1, softmax cross-entropy. Each
system runs warm-up steps, then N timed steps; a step includes reading the loss back as a float.
Peers: PyTorch CPU eager (+ torch.compile when it works), NumPy + BLAS with hand-written backprop,
JAX CPU jit. Peers that are not installed are reported as skipped. Writes
bench/results/mnist_train_cpu.json in the DESIGN.md section 7 schema.

  python3 bench/mnist_train.py [--rlx build/bin/rlx] [--steps 50] [--quick] [--no-torch-compile] [--threads N]
                               [--only rlx,numpy] [--models 784-128-10] [--batches 128] [--reps 3]
--only keeps the named systems (rlx, numpy, pytorch, jax); --reps R runs each cell R times, the
systems interleaved, and reports the median of the R p50s (a shared machine's load drifts).
"""
import argparse, datetime, gzip, json, os, platform, resource, subprocess, sys, time

# --threads N pins every system to N threads: BLAS/OpenMP pools are sized when numpy/torch/jax load,
# so the variables are set and the script re-executed before they are imported.
if "--threads" in sys.argv and os.environ.get("RLX_BENCH_THREADS") is None:
    n = sys.argv[sys.argv.index("--threads") + 1]
    env = dict(os.environ, RLX_BENCH_THREADS=n, RLX_NUM_THREADS=n, OMP_NUM_THREADS=n, OPENBLAS_NUM_THREADS=n,
               MKL_NUM_THREADS=n, XLA_FLAGS=(os.environ.get("XLA_FLAGS", "") + (
                   " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" if n == "1" else "")).strip())
    os.execvpe(sys.executable, [sys.executable] + sys.argv, env)
import numpy as np

from mlp_peers import init, jax_loss, torch_loss

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "..", "shared", "data", "mnist")


def load_train():
    with gzip.open(os.path.join(DATA, "t10k-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)[:8000].astype(np.float32) / 255.0
    with gzip.open(os.path.join(DATA, "t10k-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)[:8000].astype(np.int64)
    return x, y


def timed(step, batches, steps, warm=5):
    ms = []
    for s in range(warm + steps):
        x, y = batches[s % len(batches)]
        t0 = time.perf_counter()
        step(x, y)
        if s >= warm:
            ms.append((time.perf_counter() - t0) * 1e3)
    ms.sort()
    return ms[len(ms) // 2], ms[min(len(ms) - 1, len(ms) * 9 // 10)]


def numpy_step_fn(sizes, lr=0.1):
    ps = init(sizes)

    def step(x, y):
        hs = [x]
        h = x
        n = len(ps) // 2
        for i in range(n):
            h = h @ ps[2 * i] + ps[2 * i + 1]
            if i + 1 < n:
                h = np.maximum(h, 0)
            hs.append(h)
        z = h - h.max(1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(1, keepdims=True)
        B = x.shape[0]
        loss = float(-np.log(p[np.arange(B), y] + 1e-30).mean())
        g = p
        g[np.arange(B), y] -= 1
        g /= B
        for i in reversed(range(n)):
            a = hs[i]
            gw, gb = a.T @ g, g.sum(0)
            if i > 0:
                g = (g @ ps[2 * i].T) * (hs[i] > 0)
            ps[2 * i] -= lr * gw
            ps[2 * i + 1] -= lr * gb
        return loss

    return step


def torch_step_fn(sizes, compiled, lr=0.1):
    import torch
    if os.environ.get("RLX_BENCH_THREADS"):
        torch.set_num_threads(int(os.environ["RLX_BENCH_THREADS"]))
    torch.manual_seed(0)
    ps = [torch.from_numpy(p.copy()).requires_grad_() for p in init(sizes)]
    opt = torch.optim.SGD(ps, lr=lr)

    def fwd(x, y):
        return torch_loss(ps, x, y)

    f = torch.compile(fwd) if compiled else fwd

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = f(x, y)
        loss.backward()
        opt.step()
        return loss.item()

    return step, (lambda a: torch.from_numpy(a))


def jax_step_fn(sizes, lr=0.1):
    import jax, jax.numpy as jnp
    ps = [jnp.asarray(p) for p in init(sizes)]

    @jax.jit
    def upd(ps, x, y):
        l, g = jax.value_and_grad(jax_loss)(ps, x, y)
        return [p - lr * gp for p, gp in zip(ps, g)], l

    state = {"ps": ps}

    def step(x, y):
        state["ps"], l = upd(state["ps"], x, y)
        return float(l)

    return step, jnp.asarray


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rlx", default=os.path.join(ROOT, "build", "bin", "rlx"))
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--quick", action="store_true", help="only 784-128-10 at batch 128")
    ap.add_argument("--no-torch-compile", action="store_true", help="skip torch.compile (slow to compile)")
    ap.add_argument("--threads", type=int, default=0, help="threads for every system (default: all cores)")
    ap.add_argument("--append", action="store_true", help="keep the rows already in --out (another thread setting)")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "mnist_train_cpu.json"))
    ap.add_argument("--only", default="", help="comma-separated systems to run: rlx,numpy,pytorch,jax (default all)")
    ap.add_argument("--models", default="", help="comma-separated MLPs, e.g. 784-128-10 (default both)")
    ap.add_argument("--batches", default="", help="comma-separated batch sizes (default 128,1024)")
    ap.add_argument("--reps", type=int, default=1, help="repetitions per cell; the median p50 is reported")
    a = ap.parse_args()
    x, y = load_train()
    models = {"784-128-10": [784, 128, 10], "784-512-512-10": [784, 512, 512, 10]}
    batches_ = [128, 1024]
    if a.quick:
        models, batches_ = {"784-128-10": [784, 128, 10]}, [128]
    if a.models:
        models = {m: [int(v) for v in m.split("-")] for m in a.models.split(",")}
    if a.batches:
        batches_ = [int(v) for v in a.batches.split(",")]
    only = set(a.only.split(",")) if a.only else {"rlx", "numpy", "pytorch", "jax"}
    rows = []

    def row(system, variant, wl, B, p50, p90):
        rows.append({"system": system, "variant": variant, "device": "cpu", "workload": f"mnist_train_mlp_{wl}",
                     "dtype": "f32", "batch": B, "seq": None, "p50_ms": round(p50, 4), "p90_ms": round(p90, 4),
                     "throughput": round(B * 1000.0 / p50, 1), "unit": "images/s",
                     "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                     "threads": a.threads or os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 2)})
        print(f"  {system:8s} {variant:14s} {wl:16s} batch {B:5d}  p50 {p50:8.3f} ms  {B * 1000.0 / p50:10.0f} img/s",
              flush=True)

    def median_of(runs):  # runs: [(p50, p90)] over repetitions -> the repetition with the median p50
        runs = sorted(runs)
        return runs[len(runs) // 2]

    for wl, sizes in models.items():
        for B in batches_:
            nb = 8000 // B
            npb = [(x[i * B:(i + 1) * B], y[i * B:(i + 1) * B]) for i in range(nb)]
            hidden = ",".join(str(s) for s in sizes[1:-1])
            cmd = [a.rlx, "train-mnist", "--data", "mnist", "--data-dir", DATA, "--batch", str(B), "--hidden", hidden,
                   "--lr", "0.1", "--bench-steps", str(a.steps), "--quiet"]
            res = {}  # (system, variant) -> [(p50, p90)] over repetitions
            steps = {}
            if "numpy" in only:
                steps[("numpy", "hand-backprop")] = (numpy_step_fn(sizes), npb)
            if "pytorch" in only:
                for compiled in (False,) if a.no_torch_compile else (False, True):
                    try:
                        step, conv = torch_step_fn(sizes, compiled)
                        steps[("pytorch", "compile" if compiled else "eager")] = (step, [(conv(bx), conv(by)) for bx, by in npb])
                    except Exception as e:  # noqa: BLE001
                        print(f"  pytorch {'compile' if compiled else 'eager'}: skipped ({type(e).__name__}: {e})"[:200])
            if "jax" in only:
                try:
                    step, conv = jax_step_fn(sizes)
                    steps[("jax", "jit")] = (step, [(conv(bx), conv(by)) for bx, by in npb])
                except Exception as e:  # noqa: BLE001
                    print(f"  jax: skipped ({type(e).__name__}: {e})"[:200])
            for _ in range(max(1, a.reps)):
                if "rlx" in only:
                    try:
                        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
                        r = json.loads(out.strip().splitlines()[-1])
                        res.setdefault(("rlx", "graph-fused"), []).append((r["p50_ms"], r["p90_ms"]))
                    except Exception as e:  # noqa: BLE001
                        print(f"  rlx: failed: {e}", file=sys.stderr)
                for key, (step, bs) in list(steps.items()):
                    try:
                        res.setdefault(key, []).append(timed(step, bs, a.steps))
                    except Exception as e:  # noqa: BLE001 (e.g. torch.compile failing at its first call)
                        print(f"  {key[0]} {key[1]}: skipped ({type(e).__name__}: {e})"[:200])
                        del steps[key]
            for (system, variant), runs in res.items():
                if runs:
                    row(system, variant, wl, B, *median_of(runs))
    by = {(r["system"], r["variant"], r["workload"], r["batch"]): r for r in rows}
    load = os.getloadavg()
    print(f"\n| workload | batch | system | variant | p50 ms | images/s | rlx / this |  (load avg {load[0]:.1f})")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        mine = by.get(("rlx", "graph-fused", r["workload"], r["batch"]))
        ratio = f"{mine['throughput'] / r['throughput']:.2f}x" if mine else "-"
        print(f"| {r['workload'][16:]} | {r['batch']} | {r['system']} | {r['variant']} | {r['p50_ms']:.3f} | "
              f"{r['throughput']:.0f} | {ratio} |")
    print("ratios (rlx images/s over peer):")
    for (s, v, wl, B), r in sorted(by.items()):
        if s == "rlx":
            continue
        mine = by.get(("rlx", "graph-fused", wl, B))
        if mine:
            print(f"  vs {s:8s} {v:14s} {wl:16s} batch {B:5d}: {mine['throughput'] / r['throughput']:.2f}x")
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    if a.append and os.path.exists(a.out):
        with open(a.out) as f:
            rows[:0] = json.load(f).get("rows", [])
    with open(a.out, "w") as f:
        json.dump({"benchmark": "mnist_train", "machine": f"{platform.node()} ({os.cpu_count()} cpus)",
                   "date": datetime.datetime.now().isoformat(timespec="seconds"),
                   "setting": {"threads": a.threads or os.cpu_count(), "steps": a.steps, "warmup": 5, "lr": 0.1, "optimizer": "sgd",
                               "data": "MNIST t10k first 8000 images, unshuffled", "load_avg_1_5_15": list(load)},
                   "rows": rows}, f, indent=1)
    print("wrote", a.out)


if __name__ == "__main__":
    main()
