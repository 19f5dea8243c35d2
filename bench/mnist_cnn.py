#!/usr/bin/env python3
"""MNIST CNN training step on the CPU: RLX (`rlx train-mnist --model cnn --bench-steps N`) vs PyTorch.

The model is RLX's models::cnn_loss_graph: conv 1->8 3x3 stride 2 pad 1, bias, ReLU; conv 8->16 3x3
stride 2 pad 1, bias, ReLU; flatten; linear 784->10; softmax cross-entropy; plain SGD lr 0.1; batch
128 of the same MNIST 8k split as bench/mnist_train.py, unshuffled. A step is forward, backward,
update and reading the loss back as a float. PyTorch CPU eager runs the same architecture with the
same uniform init bounds (1/sqrt(fan_in)). PyTorch need not be in this interpreter: --torch-python
names one that has it (the peers venv), and the torch side runs there as a child.

The two systems take turns over --rounds rounds (a fresh child each), because the machine is
shared; a row reports the median of the rounds' p50s, the best round's p50, every round's p50 and
the 1-minute load average before each round. Writes bench/results/mnist_cnn_cpu.json.

  python3 bench/mnist_cnn.py [--rounds 5] [--steps 60] [--threads 2] [--torch-python /work/peers-venv/bin/python]
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BATCH = 128


def loadavg1() -> float:
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def load_train():
    """The 8k split bench/mnist_train.py and `rlx train-mnist --bench-steps` step through."""
    import gzip
    import numpy as np
    data = os.path.join(ROOT, "..", "shared", "data", "mnist")
    with gzip.open(os.path.join(data, "t10k-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)[:8000].astype(np.float32) / 255.0
    with gzip.open(os.path.join(data, "t10k-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)[:8000].astype(np.int64)
    return x, y


def torch_child(steps: int, threads: int) -> dict:
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    x_all, y_all = load_train()

    def uni(shape, k):
        return torch.empty(shape).uniform_(-k, k).requires_grad_()

    c1, c2 = 8, 16
    params = [uni((c1, 1, 3, 3), 1 / 3), uni((c1,), 1 / 3), uni((c2, c1, 3, 3), (9 * c1) ** -0.5),
              uni((c2,), (9 * c1) ** -0.5), uni((c2 * 49, 10), (49 * c2) ** -0.5), uni((10,), (49 * c2) ** -0.5)]
    F = torch.nn.functional

    def step(x, y):
        w1, b1, w2, b2, w3, b3 = params
        h = F.relu(F.conv2d(x.view(-1, 1, 28, 28), w1, b1, stride=2, padding=1))
        h = F.relu(F.conv2d(h, w2, b2, stride=2, padding=1))
        loss = F.cross_entropy(h.reshape(x.shape[0], -1) @ w3 + b3, y)
        for p in params:
            p.grad = None
        loss.backward()
        with torch.no_grad():
            for p in params:
                p -= 0.1 * p.grad
        return float(loss)

    per_epoch = len(x_all) // BATCH
    ms = []
    for s in range(steps + 5):
        i = (s % per_epoch) * BATCH
        x, y = torch.from_numpy(x_all[i:i + BATCH]), torch.from_numpy(y_all[i:i + BATCH])
        t0 = time.perf_counter()
        step(x, y)
        if s >= 5:
            ms.append((time.perf_counter() - t0) * 1e3)
    ms.sort()
    return {"p50_ms": ms[len(ms) // 2], "min_ms": ms[0], "version": torch.__version__}


def rlx_child(rlx: str, steps: int, env: dict) -> dict:
    r = subprocess.run([rlx, "train-mnist", "--model", "cnn", "--batch", str(BATCH), "--bench-steps", str(steps)],
                       env=env, capture_output=True, text=True, check=True)
    line = [l for l in r.stdout.splitlines() if l.startswith("{")][-1]
    return json.loads(line)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rlx", default=os.path.join(ROOT, "build", "bin", "rlx"))
    ap.add_argument("--torch-python", default=sys.executable)
    ap.add_argument("--output", default=os.path.join(HERE, "results", "mnist_cnn_cpu.json"))
    ap.add_argument("--torch-child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.torch_child:
        print(json.dumps(torch_child(a.steps, a.threads)))
        return 0
    n = str(a.threads)
    env = dict(os.environ, RLX_NUM_THREADS=n, OMP_NUM_THREADS=n, OPENBLAS_NUM_THREADS=n, MKL_NUM_THREADS=n)
    env.pop("RLX_PROFILE", None)
    got = {"rlx": [], "pytorch": []}
    loads = {"rlx": [], "pytorch": []}
    version = None
    for rnd in range(a.rounds):
        for system in (("rlx", "pytorch") if rnd % 2 == 0 else ("pytorch", "rlx")):
            loads[system].append(loadavg1())
            if system == "rlx":
                r = rlx_child(a.rlx, a.steps, env)
            else:
                out = subprocess.run([a.torch_python, os.path.abspath(__file__), "--torch-child", "--steps",
                                      str(a.steps), "--threads", n], env=env, capture_output=True, text=True,
                                     check=True).stdout
                r = json.loads(out.strip().splitlines()[-1])
                version = r["version"]
            got[system].append(r["p50_ms"])
            print(f"[cnn] round {rnd + 1} {system}: p50 {r['p50_ms']:.3f} ms (load {loads[system][-1]:.1f})",
                  file=sys.stderr, flush=True)
    rows = []
    for system, ps in got.items():
        ps_sorted = sorted(ps)
        med = ps_sorted[len(ps) // 2]
        rows.append({"system": system, "variant": "rlx train-mnist --model cnn" if system == "rlx" else
                     f"torch {version} CPU eager", "device": "cpu", "workload": "mnist_cnn_train_step",
                     "dtype": "f32", "batch": BATCH, "seq": None, "p50_ms": round(med, 4),
                     "best_round_p50_ms": round(ps_sorted[0], 4), "rounds_p50_ms": [round(v, 4) for v in ps],
                     "throughput": round(BATCH * 1000.0 / med, 1), "unit": "img/s", "load_avg_1m": loads[system]})
    speedup = rows[1]["p50_ms"] / rows[0]["p50_ms"]
    cpu, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    isa = " ".join(f for f in ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_vnni", "amx_bf16") if f in flags)
    doc = {"benchmark": "mnist_cnn_cpu", "machine": f"{cpu}, {os.cpu_count()} logical CPUs, ISA: {isa}",
           "date": datetime.datetime.now().isoformat(timespec="seconds"), "threads": a.threads,
           "timing": (f"{a.rounds} rounds, the systems alternating (fresh child each); per round 5 warm-up steps, "
                      f"then {a.steps} timed steps (wall time of one step incl. reading the loss); a row's p50 is the "
                      f"median of the rounds' p50s"),
           "rows": rows, "speedup_vs_pytorch": round(speedup, 3)}
    os.makedirs(os.path.dirname(a.output), exist_ok=True)
    with open(a.output, "w") as f:
        json.dump(doc, f, indent=1)
    for r in rows:
        print(f"{r['system']:<8} p50 {r['p50_ms']:8.3f} ms  best round {r['best_round_p50_ms']:8.3f} ms  "
              f"{r['throughput']:9.1f} img/s")
    print(f"RLX speedup over PyTorch (p50): {speedup:.2f}x; wrote {a.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
