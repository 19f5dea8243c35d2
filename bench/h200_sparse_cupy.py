#!/usr/bin/env python3
"""Sparse on the H200, CuPy side, on the inputs of bench/h200_sparse.cpp (2-D Poisson, m x m):
cupyx.scipy.sparse SpMV (A @ x, cuSPARSE underneath) and SpMM timed with CUDA events over `reps`
back-to-back calls, and cupyx.scipy.sparse.linalg.cg (same rtol, b, x0 = 0) timed on the wall
including the b upload and x download, median of 3. Merges the RLX rows (RLX_ROWS.jsonl) into one
results file.

  h200_sparse_cupy.py RLX_ROWS.jsonl OUT.json [m=1000] [reps=200]
"""
import datetime
import json
import os
import platform
import sys
import time

import numpy as np


def poisson2d(m, sp, dtype):
    t = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(m, m))
    return (sp.kron(sp.eye(m), t) + sp.kron(t, sp.eye(m))).tocsr().astype(dtype)


def main():
    import cupy as cp
    import cupyx.scipy.sparse as csp
    import cupyx.scipy.sparse.linalg as cspla
    import scipy.sparse as sp

    rlx_rows, out_path = sys.argv[1], sys.argv[2]
    m = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    reps = int(sys.argv[4]) if len(sys.argv) > 4 else 200
    rows = []
    for dn, dt in (("f64", np.float64), ("f32", np.float32)):
        a_h = poisson2d(m, sp, dt)
        a_h.sort_indices()
        a = csp.csr_matrix(a_h)
        n = a.shape[0]
        x = cp.asarray(np.sin(0.001 * np.arange(n)).astype(dt))

        def events(fn, r):
            for _ in range(3):
                fn()
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            e0.record()
            for _ in range(r):
                fn()
            e1.record()
            e1.synchronize()
            return cp.cuda.get_elapsed_time(e0, e1) / r

        ms = events(lambda: a @ x, reps)
        gf = 2 * a.nnz / ms / 1e6
        print(f"cupy spmv {dn} n={n} nnz={a.nnz}: {ms:.4f} ms ({gf:.1f} GFLOP/s)", flush=True)
        rows.append({"system": "cupy", "variant": "cupyx.scipy.sparse csr @ x", "workload": f"spmv poisson2d {m}x{m}",
                     "dtype": dn, "ms": ms, "gflops": gf})
        for k in (8, 32):
            X = cp.asarray(np.random.default_rng(0).standard_normal((n, k)).astype(dt))
            mk = events(lambda: a @ X, max(10, reps // 10))
            rows.append({"system": "cupy", "variant": "cupyx.scipy.sparse csr @ X", "workload":
                         f"spmm poisson2d {m}x{m} k={k}", "dtype": dn, "ms": mk, "gflops": 2 * a.nnz * k / mk / 1e6})
            print(f"cupy spmm {dn} k={k}: {mk:.4f} ms", flush=True)
        b_h = np.cos(0.37 * np.arange(n)).astype(dt)
        tol = 1e-6 if dn == "f64" else 1e-4
        it = {"n": 0}

        def cb(_):
            it["n"] += 1

        def solve():
            it["n"] = 0
            b = cp.asarray(b_h)
            try:
                xs, info = cspla.cg(a, b, tol=tol, atol=0.0, maxiter=10 * n, callback=cb)
            except TypeError:  # newer CuPy spells it rtol
                xs, info = cspla.cg(a, b, rtol=tol, atol=0.0, maxiter=10 * n, callback=cb)
            return cp.asnumpy(xs)

        solve()
        ts = []
        for _ in range(3):
            t0 = time.perf_counter()
            xs = solve()
            ts.append((time.perf_counter() - t0) * 1e3)
        ts.sort()
        res = float(np.linalg.norm(b_h.astype(np.float64) - a_h.astype(np.float64) @ xs.astype(np.float64)) /
                    np.linalg.norm(b_h.astype(np.float64)))
        print(f"cupy cg {dn}: {it['n']} iterations, true residual {res:.2e}, {ts[1]:.1f} ms", flush=True)
        rows.append({"system": "cupy", "variant": "cupyx.scipy.sparse.linalg.cg", "workload": f"cg poisson2d {m}x{m}",
                     "dtype": dn, "rtol": tol, "ms": ts[1], "iterations": it["n"], "true_residual": res,
                     "timing": "wall, incl. b upload and x download, median of 3"})
    rl = [json.loads(x) for x in open(rlx_rows) if x.strip()] if os.path.exists(rlx_rows) else []
    for r in rl:  # ratio vs the matching CuPy row
        for c in rows:
            if c["workload"] == r["workload"] and c["dtype"] == r["dtype"]:
                r["speedup_vs_cupy"] = c["ms"] / r["ms"]
    res = {"benchmark": "h200_sparse", "machine": f"{cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, "
           f"{platform.node()}, cupy {cp.__version__}",
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "rows": rl + rows}
    json.dump(res, open(out_path, "w"), indent=1)
    print(f"wrote {out_path}")


if __name__ == "__main__":
    main()
