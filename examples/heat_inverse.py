#!/usr/bin/env python3
"""Differentiating through a sparse linear solve: recover a rod's conductivity from temperatures.

Steady heat conduction on a 1-D rod of n interior nodes, -(k u')' = q with u = 0 at both ends, is
the sparse system A(k) u = q, where A's values are a linear function of the n + 1 edge
conductivities k = exp(θ) (A = Σ_e k_e (e_i - e_j)(e_i - e_j)ᵀ / h²). Given temperatures measured
for a hidden conductivity profile, gradient descent on θ minimises |u(θ) - u_measured|². The graph
is θ -> k -> values = P k (sparse_matvec with a fixed assembly matrix P) -> u = sparse_solve(A, q)
-> loss, and rlx.train.grad differentiates all of it: the solve by its implicit adjoint (one
transposed solve), the assembly by the transposed SpMV.

    PYTHONPATH=build/python python3 examples/heat_inverse.py --n 64 --steps 300
"""
import argparse

import numpy as np

import rlx
import rlx.sparse as rs


def assembly(n: int):
    """A's CSR pattern (tridiagonal n x n) and P [nnz, n + 1] with values = P k."""
    h = 1.0 / (n + 1)
    rows, cols = [], []
    for i in range(n):
        for j in (i - 1, i, i + 1):
            if 0 <= j < n:
                rows.append(i)
                cols.append(j)
    a = rs.coo_to_csr(np.array(rows), np.array(cols), np.ones(len(rows)), (n, n))
    pos = {(i, j): p for p, (i, j) in enumerate(zip(np.repeat(np.arange(n), np.diff(a.row_ptr)), a.col_indices))}
    pr, pc, pv = [], [], []
    for e in range(n + 1):  # edge e joins nodes e - 1 and e (node -1 and n are the fixed ends)
        ends = [v for v in (e - 1, e) if 0 <= v < n]
        for i in ends:
            pr.append(pos[(i, i)]); pc.append(e); pv.append(1 / h**2)
        if len(ends) == 2:
            i, j = ends
            for r in (pos[(i, j)], pos[(j, i)]):
                pr.append(r); pc.append(e); pv.append(-1 / h**2)
    p = rs.coo_to_csr(np.array(pr), np.array(pc), np.array(pv), (a.nnz, n + 1))
    return a, p


def build(n: int, q: np.ndarray, target: np.ndarray, method: str):
    a, p = assembly(n)
    g = rlx.Graph("heat_inverse")
    theta = g.input("theta", "f64", [n + 1])
    k = g.op("exp", [theta])
    pm = rs.SparseInput(g, g.constant(p.values), g.constant(p.col_indices), g.constant(p.row_ptr), p.shape)
    vals = pm.matvec(k)
    am = rs.SparseInput(g, vals, g.constant(a.col_indices), g.constant(a.row_ptr), a.shape)
    u = am.solve(g.constant(q), method=method)
    d = g.op("sub", [u, g.constant(target)])
    loss = g.op("reduce_sum", [g.op("mul", [d, d])], axes=[0])
    g.output(loss, "loss")
    g.output(u, "u")
    return g


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--method", default="auto", help="sparse_solve method (auto, klu, umfpack, dense)")
    args = ap.parse_args(argv)
    n = args.n
    x = np.linspace(0, 1, n + 2)
    xe = (x[:-1] + x[1:]) / 2  # edge midpoints
    true_theta = np.log(1.0 + 0.8 * np.sin(2 * np.pi * xe) ** 2)
    q = np.ones(n) * 10.0
    # The measurement: the forward model at the hidden profile.
    g0 = build(n, q, np.zeros(n), args.method)
    u_meas = rlx.compile(g0).run([true_theta])[1]
    g = build(n, q, u_meas, args.method)
    vg = rlx.compile(rlx.train.value_and_grad(g, [0]))
    theta = np.zeros(n + 1)
    m = np.zeros_like(theta)
    v = np.zeros_like(theta)
    hist = []
    for t in range(1, args.steps + 1):  # Adam
        loss, _, gr = vg.run([theta])
        hist.append(float(loss))
        m = 0.9 * m + 0.1 * gr
        v = 0.999 * v + 0.001 * gr * gr
        theta -= args.lr * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-12)
    # One gradient entry by central differences, to show the adjoint is exact.
    f = rlx.compile(g)
    e = np.zeros(n + 1)
    e[n // 3] = 1e-6
    fd = (f.run([theta + e])[0] - f.run([theta - e])[0]) / 2e-6
    an = vg.run([theta])[2][n // 3]
    err = float(np.max(np.abs(theta - true_theta)))
    print(f"heat inverse problem, n={n}: loss {hist[0]:.3e} -> {hist[-1]:.3e} in {args.steps} Adam steps; "
          f"max |θ - θ_true| = {err:.3f}; gradient check d/dθ[{n // 3}]: adjoint {an:.6e}, "
          f"finite difference {float(fd):.6e}")
    return {"loss_first": hist[0], "loss_last": hist[-1], "theta_err": err, "grad": float(an), "fd": float(fd)}


if __name__ == "__main__":
    main()
