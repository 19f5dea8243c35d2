#!/usr/bin/env python3
"""Sparse benchmarks on cpu, RLX vs SciPy side by side in one run on identical inputs:

  * CG on the 2-D Poisson matrix (5-point, m x m grid; default m = 1000: 1M unknowns), no
    preconditioner, same rtol and maxiter: rlx.sparse.cg vs scipy.sparse.linalg.cg (both report
    their iteration counts; the RLX residual is re-checked here with SciPy's matvec).
  * Sparse direct solve (factor + solve of one right-hand side) on generated matrices (2-D mesh,
    3-D mesh, circuit-like): RLX sparse_solve with KLU and UMFPACK vs scipy.sparse.linalg.splu
    (SuperLU, COLAMD ordering) + solve.
  * SpMV GFLOP/s (2 nnz flops per product): RLX sparse_matvec with the matrix as graph constants vs
    scipy's A @ x.

Timing: time.perf_counter around the whole call, warm-up first, then `--repeats` runs in
alternation (RLX, SciPy, RLX, ...); medians reported. The machine is shared, so the load average is
recorded before and after, and every row keeps all its samples.

    PYTHONPATH=build/python python3 bench/sparse.py [--m 1000] [--repeats 5] [--out bench/results/sparse_cpu.json]
"""
import argparse
import datetime
import json
import os

# NumPy/SciPy's OpenBLAS at one thread: its threaded dot products thrash on a shared 2-core machine
# (SciPy's CG was 10x slower per iteration at n = 160k with the default). Set before numpy loads;
# RLX's sparse kernels do not use OpenBLAS.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import platform
import statistics
import subprocess
import sys
import time

import numpy as np
import scipy
import scipy.sparse as sp
import scipy.sparse.linalg as spla

import rlx
import rlx.sparse as rs


def machine() -> dict:
    info = {"python": platform.python_version(), "numpy": np.__version__, "scipy": scipy.__version__}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            k, _, v = line.partition(":")
            if k.strip() in ("Model name", "CPU(s)", "Thread(s) per core"):
                info[k.strip()] = v.strip()
            if k.strip() == "Flags":
                fl = v.split()
                info["isa"] = " ".join(f for f in ("avx2", "fma", "avx512f") if f in fl)
    except OSError:
        pass
    info["rlx_threads"] = os.environ.get("RLX_NUM_THREADS", str(os.cpu_count()))
    info["scipy_threads"] = "1 (SciPy's sparse kernels are single-threaded; OPENBLAS_NUM_THREADS=" + \
        os.environ.get("OPENBLAS_NUM_THREADS", "") + ")"
    return info


def load() -> float:
    return os.getloadavg()[0]


def poisson2d(m):
    t = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(m, m))
    return (sp.kron(sp.eye(m), t) + sp.kron(t, sp.eye(m))).tocsr()


def poisson3d(m):
    t = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(m, m))
    e = sp.eye(m)
    return (sp.kron(sp.kron(e, e), t) + sp.kron(sp.kron(e, t), e) + sp.kron(sp.kron(t, e), e)).tocsr()


def circuit_like(n, seed=0):
    """Unsymmetric, very sparse, a few hub rows/columns (supply nets), diagonally dominant: the kind
    of matrix KLU is built for."""
    rng = np.random.default_rng(seed)
    k = 2 * n
    r = rng.integers(0, n, k)
    c = np.clip(r + rng.integers(-50, 51, k), 0, n - 1)  # mostly local connections
    hubs = rng.integers(0, n, 8)
    hr = np.repeat(hubs, n // 200)
    hc = rng.integers(0, n, hr.size)
    rows = np.concatenate([r, hr, hc])
    cols = np.concatenate([c, hc, hr])
    vals = -rng.uniform(0.1, 1.0, rows.size)
    a = sp.coo_matrix((vals, (rows, cols)), shape=(n, n)).tocsr()
    a.setdiag(0)
    a.eliminate_zeros()
    d = np.asarray(abs(a).sum(axis=1)).ravel() + 1.0
    return (a + sp.diags(d)).tocsr()


def timed(fn, repeats):
    fn()  # warm-up (compiles the RLX graph, pages memory in)
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return ts


def alternate(fns, repeats, warmup=True):
    for f in fns if warmup else ():
        f()
    ts = [[] for _ in fns]
    for _ in range(repeats):
        for i, f in enumerate(fns):
            t = time.perf_counter()
            f()
            ts[i].append(time.perf_counter() - t)
    return ts


def row(name, rlx_t, peer_t, peer, extra):
    r = {"workload": name, "peer": peer, "rlx_median_s": statistics.median(rlx_t),
         "peer_median_s": statistics.median(peer_t), "rlx_samples_s": rlx_t, "peer_samples_s": peer_t}
    r["speedup"] = r["peer_median_s"] / r["rlx_median_s"]
    r.update(extra)
    print(f"{name:44s} rlx {r['rlx_median_s'] * 1e3:9.2f} ms   {peer} {r['peer_median_s'] * 1e3:9.2f} ms   "
          f"x{r['speedup']:.2f}  {extra}", flush=True)
    return r


def bench_cg(m, repeats, tol):
    a = poisson2d(m)
    n = a.shape[0]
    b = np.random.default_rng(1).standard_normal(n)
    ar = rs.CSRMatrix.from_scipy(a)
    maxiter = 10 * n
    out = {}

    def run_rlx():
        out["rlx"] = rs.cg(ar, b, tol=tol, maxiter=maxiter)

    it = {"n": 0}

    def cb(_):
        it["n"] += 1

    def run_scipy():
        it["n"] = 0
        out["scipy"] = spla.cg(a, b, rtol=tol, atol=0.0, maxiter=maxiter, callback=cb)

    rs.cg(ar, b, tol=tol, maxiter=2)  # compiles a model of the same shapes (the timed runs compile theirs: ms)
    tr, ts = alternate([run_rlx, run_scipy], repeats, warmup=False)
    x, info = out["rlx"]
    res = float(np.linalg.norm(b - a @ x) / np.linalg.norm(b))
    xs, _ = out["scipy"]
    res_s = float(np.linalg.norm(b - a @ xs) / np.linalg.norm(b))
    return row(f"cg poisson2d {m}x{m} (n={n}, nnz={a.nnz}) f64", tr, ts, "scipy.sparse.linalg.cg",
               {"rtol": tol, "rlx_iterations": info["iterations"], "scipy_iterations": it["n"],
                "rlx_true_residual": res, "scipy_true_residual": res_s})


def bench_direct(name, a, repeats):
    n = a.shape[0]
    b = np.random.default_rng(2).standard_normal(n)
    ar = rs.CSRMatrix.from_scipy(a)
    ac = a.tocsc()
    rows = []
    for method in ("klu", "umfpack"):
        out = {}

        def run_rlx():
            out["x"] = rs.spsolve(ar, b, method=method)

        def run_scipy():
            out["xs"] = spla.splu(ac).solve(b)

        tr, ts = alternate([run_rlx, run_scipy], repeats)
        res = float(np.linalg.norm(b - a @ out["x"]) / np.linalg.norm(b))
        res_s = float(np.linalg.norm(b - a @ out["xs"]) / np.linalg.norm(b))
        rows.append(row(f"direct {name} (n={n}, nnz={a.nnz}) {method}", tr, ts, "scipy splu+solve",
                        {"method": method, "rlx_residual": res, "scipy_residual": res_s}))
    return rows


def bench_spmv(m, repeats, dtype):
    a = poisson2d(m).astype(dtype)
    n = a.shape[0]
    x = np.random.default_rng(3).standard_normal(n).astype(dtype)
    ar = rs.CSRMatrix.from_scipy(a, dtype=dtype)
    g = rlx.Graph("spmv")
    s = rs.SparseInput(g, g.constant(ar.values), g.constant(ar.col_indices), g.constant(ar.row_ptr), ar.shape)
    xv = g.input("x", "f64" if dtype == np.float64 else "f32", [n])
    g.output(s.matvec(xv), "y")
    cm = rlx.compile(g)
    reps = 50
    y = {}

    def run_rlx():
        for _ in range(reps):
            y["r"] = cm.run([x])[0]

    def run_scipy():
        for _ in range(reps):
            y["s"] = a @ x

    tr, ts = alternate([run_rlx, run_scipy], repeats)
    tr = [t / reps for t in tr]
    ts = [t / reps for t in ts]
    err = float(np.max(np.abs(y["r"] - y["s"])) / np.max(np.abs(y["s"])))
    gf = lambda t: 2 * a.nnz / t / 1e9
    return row(f"spmv poisson2d {m}x{m} (nnz={a.nnz}) {np.dtype(dtype).name}", tr, ts, "scipy A @ x",
               {"rlx_gflops": gf(statistics.median(tr)), "scipy_gflops": gf(statistics.median(ts)),
                "max_rel_diff": err, "note": "per call, incl. copying x in and y out"})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--m", type=int, default=1000, help="2-D Poisson grid side for CG and SpMV")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--cg-repeats", type=int, default=0, help="repeats of the CG row (default: --repeats)")
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "sparse_cpu.json"))
    args = ap.parse_args()
    if args.quick:
        args.m, args.repeats = 100, 2
    l0 = load()
    rows = [bench_cg(args.m, args.cg_repeats or args.repeats, args.tol)]
    sz = (0.1 if args.quick else 1.0)
    mats = [("mesh2d 5-pt", poisson2d(int(300 * sz ** 0.5))), ("mesh3d 7-pt", poisson3d(int(25 * sz ** 0.34))),
            ("circuit-like", circuit_like(int(100000 * sz)))]
    for name, a in mats:
        rows += bench_direct(name, a, max(3, args.repeats))
    for dt in (np.float64, np.float32):
        rows.append(bench_spmv(args.m, args.repeats, dt))
    res = {"benchmark": "sparse_cpu", "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "machine": machine(), "load_avg_1m": {"before": l0, "after": load()},
           "settings": {"repeats": args.repeats, "timing": "perf_counter around each call, alternating, median",
                        "cg_rtol": args.tol, "m": args.m},
           "rows": rows}
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    print(f"wrote {args.out} (load average {l0:.1f} -> {load():.1f})")


if __name__ == "__main__":
    sys.exit(main())
