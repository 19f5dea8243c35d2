"""Dense linear algebra side by side in one run: RLX (rlx.linalg, cpu) vs NumPy/SciPy vs JAX CPU
(jit) on identical seeded inputs, and the large factorizations vs the LAPACK RLX links (LAPACKE on
OpenBLAS) called directly through ctypes. Timing: median (p50) and p90 of N runs after warm-up, wall
clock, inputs already in memory (RLX and NumPy take numpy arrays in and out; JAX's inputs are placed
on its device beforehand and the result is waited for).

  PYTHONPATH=build/python python3 bench/linalg.py [--quick] [--out bench/results/linalg_cpu.json]
"""
from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import datetime
import json
import os
import platform
import subprocess
import time

import numpy as np
import scipy.linalg

import rlx

try:
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
except ImportError:  # benchmark peer; the row is left out
    jax = None


def timeit(fn, reps: int, warm: int = 2):
    for _ in range(warm):
        fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return float(np.percentile(ts, 50)), float(np.percentile(ts, 90))


def machine() -> str:
    model, flags = platform.processor(), ""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
            if line.startswith("Flags:"):
                f = line.split()
                flags = "avx512f" if "avx512f" in f else ("avx2+fma" if "avx2" in f else "sse")
    except OSError:
        pass
    return f"{model}; ISA {flags}; {os.cpu_count()} threads; load avg {os.getloadavg()[0]:.1f}"


def numpy_blas_threads(n: int) -> bool:
    """Sets the thread count of numpy's bundled OpenBLAS (numpy.libs); False when not found.
    Batched np.linalg loops over the matrices and calls LAPACK per matrix; OpenBLAS threading each
    tiny call (dsyevd's dlaed3_parallel) oversubscribes a loaded machine, so the batched rows run it
    on one thread, as XLA's and RLX's per-matrix calls do."""
    import glob
    libs = glob.glob(os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs", "libscipy_openblas*.so"))
    for path in libs:
        lib = ctypes.CDLL(path)
        for name in ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads"):
            fn = getattr(lib, name, None)
            if fn is not None:
                fn(n)
                return True
    return False


def spd(rng, batch, n, dtype):
    m = rng.standard_normal((batch, n, n))
    return (m @ np.swapaxes(m, -1, -2) + n * np.eye(n)).astype(dtype)


class Lapack:
    """LAPACKE from the library RLX links, called directly (column-major, no RLX code in between)."""

    def __init__(self):
        self.lib = ctypes.CDLL(ctypes.util.find_library("lapacke") or "liblapacke.so.3")
        self.blas = ctypes.CDLL(ctypes.util.find_library("openblas") or "libopenblas.so.0")
        P = ctypes.POINTER(ctypes.c_double)
        i, c = ctypes.c_int, ctypes.c_char
        self.lib.LAPACKE_dpotrf.argtypes = [i, c, i, P, i]
        self.lib.LAPACKE_dgeqrf.argtypes = [i, i, i, P, i, P]
        self.lib.LAPACKE_dorgqr.argtypes = [i, i, i, i, P, i, P]
        self.lib.LAPACKE_dgesdd.argtypes = [i, c, i, i, P, i, P, P, i, P, i]

    @staticmethod
    def p(a):
        return a.ctypes.data_as(ctypes.POINTER(ctypes.c_double))

    def threads(self, n):
        self.blas.openblas_set_num_threads(n)

    def potrf(self, a):  # a: Fortran-ordered copy
        return self.lib.LAPACKE_dpotrf(102, b"L", a.shape[0], self.p(a), a.shape[0])

    def qr(self, a):
        m, n = a.shape
        tau = np.empty(min(m, n))
        self.lib.LAPACKE_dgeqrf(102, m, n, self.p(a), m, self.p(tau))
        r = np.triu(a[: min(m, n)])
        self.lib.LAPACKE_dorgqr(102, m, min(m, n), min(m, n), self.p(a), m, self.p(tau))
        return a, r

    def svd(self, a):
        m, n = a.shape
        k = min(m, n)
        s, u, vt = np.empty(k), np.empty((m, k), order="F"), np.empty((k, n), order="F")
        self.lib.LAPACKE_dgesdd(102, b"S", m, n, self.p(a), m, self.p(s), self.p(u), m, self.p(vt), k)
        return u, s, vt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--large-n", type=int, default=2048, help="size of the large dense cases")
    ap.add_argument("--out", default="bench/results/linalg_cpu.json")
    ap.add_argument("--small-only", action="store_true", help="only the batched small-matrix rows")
    args = ap.parse_args()
    reps = 5 if args.quick else 15
    rng = np.random.default_rng(0)
    rows = []
    threads = os.environ.get("RLX_NUM_THREADS") or str(os.cpu_count())

    def row(system, variant, workload, dtype, batch, p50, p90, device="cpu"):
        rows.append(dict(system=system, variant=variant, device=device, workload=workload, dtype=dtype, batch=batch,
                         seq=None, p50_ms=round(p50, 4), p90_ms=round(p90, 4), throughput=None, unit=None,
                         peak_rss_mb=None))
        print(f"{workload:28s} {dtype:4s} b={batch:<6d} {system:8s} {variant:18s} p50 {p50:9.3f} ms  p90 {p90:9.3f} ms",
              flush=True)

    # ---- batched small matrices ----
    np_single = numpy_blas_threads(1)
    for n in (8, 32):
        for dt in (np.float64, np.float32):
            name = "f64" if dt == np.float64 else "f32"
            batch = 10000
            a = spd(rng, batch, n, dt)
            b = rng.standard_normal((batch, n, 1)).astype(dt)
            cases = {
                "cholesky": (lambda: rlx.linalg.cholesky(a), lambda: np.linalg.cholesky(a),
                             (lambda x: jnp.linalg.cholesky(x)) if jax else None, (a,)),
                "solve": (lambda: rlx.linalg.solve(a, b), lambda: np.linalg.solve(a, b),
                          (lambda x, y: jnp.linalg.solve(x, y)) if jax else None, (a, b)),
                "eigh": (lambda: rlx.linalg.eigh(a), lambda: np.linalg.eigh(a),
                         (lambda x: jnp.linalg.eigh(x)) if jax else None, (a,)),
            }
            for op, (fr, fn, fj, ins) in cases.items():
                wl = f"{op} {n}x{n}"
                row("rlx", "cpu", wl, name, batch, *timeit(fr, reps))
                row("numpy", "np.linalg" + (" (OpenBLAS 1 thread)" if np_single else ""), wl, name, batch,
                    *timeit(fn, reps))
                if fj is not None:
                    jf = jax.jit(fj)
                    jins = [jax.device_put(x) for x in ins]
                    row("jax", "jit cpu", wl, name, batch,
                        *timeit(lambda: jax.block_until_ready(jf(*jins)), reps))

    # ---- large dense: RLX vs the LAPACK it links, called directly; SciPy and JAX alongside ----
    large = () if args.small_only else ("cholesky", "qr", "svd")
    numpy_blas_threads(os.cpu_count() or 1)
    n = args.large_n
    lp = Lapack()
    a = spd(rng, 1, n, np.float64)[0]
    g = rng.standard_normal((n, n))
    big_reps = 3 if args.quick else 7
    nt = int(threads)

    def direct(fn, x):
        def run():
            xf = np.asfortranarray(x)  # the copy LAPACK overwrites (RLX copies its input too)
            lp.threads(nt)
            fn(xf)
            lp.threads(1)
        return run

    for op, x, fr, fd, fs, fj in (
        ("cholesky", a, lambda: rlx.linalg.cholesky(a), lp.potrf, lambda: scipy.linalg.cholesky(a, lower=True),
         (lambda y: jnp.linalg.cholesky(y)) if jax else None),
        ("qr", g, lambda: rlx.linalg.qr(g), lp.qr, lambda: scipy.linalg.qr(g, mode="economic"),
         (lambda y: jnp.linalg.qr(y)) if jax else None),
        ("svd", g, lambda: rlx.linalg.svd(g), lp.svd, lambda: scipy.linalg.svd(g, full_matrices=False),
         (lambda y: jnp.linalg.svd(y, full_matrices=False)) if jax else None),
    ):
        if op not in large:
            continue
        wl = f"{op} {n}x{n}"
        reps_op = max(3, big_reps // (3 if op == "svd" else 1))
        row("rlx", "cpu (LAPACKE)", wl, "f64", 1, *timeit(fr, reps_op, warm=1))
        row("lapack", "LAPACKE direct", wl, "f64", 1, *timeit(direct(fd, x), reps_op, warm=1))
        row("scipy", "scipy.linalg", wl, "f64", 1, *timeit(fs, reps_op, warm=1))
        if fj is not None:
            jf = jax.jit(fj)
            jx = jax.device_put(x)
            row("jax", "jit cpu", wl, "f64", 1, *timeit(lambda: jax.block_until_ready(jf(jx)), reps_op, warm=1))

    # ratios: peer p50 / rlx p50 (> 1: RLX faster)
    ratios = []
    by = {(r["workload"], r["dtype"], r["system"]): r["p50_ms"] for r in rows}
    for (wl, dt, sysname), t in by.items():
        if sysname == "rlx":
            continue
        base = by.get((wl, dt, "rlx"))
        if base:
            ratios.append(dict(workload=wl, dtype=dt, peer=sysname, peer_over_rlx=round(t / base, 3)))
    for r in ratios:
        print(f"{r['workload']:28s} {r['dtype']:4s} {r['peer']:8s}/rlx = {r['peer_over_rlx']:.2f}")
    res = dict(benchmark="linalg_cpu", machine=machine(), date=datetime.datetime.now(datetime.timezone.utc).isoformat(),
               settings=dict(threads=threads, reps=reps, timing="wall clock p50/p90 after warm-up",
                             jax=jax.__version__ if jax else None, numpy=np.__version__, scipy=scipy.__version__),
               rows=rows, ratios=ratios)
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
