#!/usr/bin/env python3
"""2-D Poisson solve by conjugate gradients with rlx.sparse.

Solves -Δu = f on the unit square with u = 0 on the boundary, on an m x m grid of interior points
(the 5-point finite-difference Laplacian, n = m^2 unknowns), for f = 2π² sin(πx) sin(πy), whose
exact solution is u = sin(πx) sin(πy). Prints the CG iterations, the final relative residual, the
solve time and the max error against the exact solution (O(h²)).

    PYTHONPATH=build/python python3 examples/poisson_cg.py --m 1000            # 1M unknowns
    PYTHONPATH=build/python python3 examples/poisson_cg.py --m 64 --precond ic0
"""
import argparse
import time

import numpy as np

import rlx.sparse as rs


def poisson2d(m: int, dtype=np.float64) -> rs.CSRMatrix:
    """The 5-point Laplacian (scaled by 1/h²) in CSR, assembled from COO triplets in C++."""
    h = 1.0 / (m + 1)
    idx = np.arange(m * m, dtype=np.int64).reshape(m, m)
    rows, cols, vals = [idx.ravel()], [idx.ravel()], [np.full(m * m, 4.0)]
    for a, b in ((idx[1:, :], idx[:-1, :]), (idx[:, 1:], idx[:, :-1])):  # vertical, horizontal neighbours
        for r, c in ((a, b), (b, a)):
            rows.append(r.ravel())
            cols.append(c.ravel())
            vals.append(np.full(r.size, -1.0))
    a = rs.coo_to_csr(np.concatenate(rows), np.concatenate(cols), np.concatenate(vals) / h**2, (m * m, m * m),
                      dtype=dtype)
    return a


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--m", type=int, default=1000, help="grid points per side (n = m^2 unknowns)")
    p.add_argument("--tol", type=float, default=1e-8, help="relative residual tolerance")
    p.add_argument("--precond", default="none", choices=["none", "jacobi", "ic0"])
    p.add_argument("--dtype", default="f64", choices=["f32", "f64"])
    args = p.parse_args(argv)
    dt = np.float64 if args.dtype == "f64" else np.float32
    m, h = args.m, 1.0 / (args.m + 1)
    t0 = time.perf_counter()
    a = poisson2d(m, dt)
    xs = np.arange(1, m + 1) * h
    exact = np.outer(np.sin(np.pi * xs), np.sin(np.pi * xs)).ravel()
    f = (2 * np.pi**2 * exact).astype(dt)
    t1 = time.perf_counter()
    u, info = rs.cg(a, f, tol=args.tol, precond=args.precond)
    t2 = time.perf_counter()
    err = float(np.max(np.abs(u - exact)))
    out = {"unknowns": m * m, "nnz": a.nnz, "iterations": info["iterations"], "residual": info["residual"],
           "converged": info["converged"], "assemble_s": t1 - t0, "solve_s": t2 - t1, "max_error": err}
    print(f"Poisson 2-D, {m}x{m} grid ({m * m} unknowns, {a.nnz} nonzeros), CG precond={args.precond}: "
          f"{info['iterations']} iterations, residual {info['residual']:.2e}, {t2 - t1:.3f} s; "
          f"max error vs exact {err:.2e} (h² = {h * h:.2e})")
    return out


if __name__ == "__main__":
    main()
