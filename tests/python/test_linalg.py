"""rlx.linalg against NumPy/SciPy (f64 to ~1e-10 relative, f32 to ~1e-5) on well- and ill-conditioned
matrices, the error policy (NaN + info), and gradients against JAX (jax.grad, float64)."""
import numpy as np
import pytest
import scipy.linalg

import rlx
from rlx import linalg as la

RNG = np.random.default_rng(7)
TOL = {np.float64: 1e-10, np.float32: 2e-5}


def spd(batch, n, dtype=np.float64, cond=None):
    if cond is None:
        m = RNG.standard_normal((*batch, n, n))
        a = m @ np.swapaxes(m, -1, -2) + n * np.eye(n)
    else:  # eigenvalues spread over [1/cond, 1]
        q, _ = np.linalg.qr(RNG.standard_normal((*batch, n, n)))
        w = np.logspace(0, -np.log10(cond), n)
        a = (q * w[..., None, :]) @ np.swapaxes(q, -1, -2)
        a = 0.5 * (a + np.swapaxes(a, -1, -2))
    return a.astype(dtype)


def general(batch, m, n, dtype=np.float64, cond=None):
    a = RNG.standard_normal((*batch, m, n))
    if cond is not None:
        u, _, vh = np.linalg.svd(a, full_matrices=False)
        s = np.logspace(0, -np.log10(cond), min(m, n))
        a = (u * s[..., None, :]) @ vh
    return a.astype(dtype)


def rel(x, y):
    return np.max(np.abs(np.asarray(x, np.float64) - y)) / max(1.0, np.max(np.abs(y)))


def signed(v):
    """Columns signed so the largest-magnitude entry is positive (the convention of rlx.linalg)."""
    idx = np.argmax(np.abs(v), axis=-2)
    s = np.sign(np.take_along_axis(v, idx[..., None, :], axis=-2))
    return v * np.where(s == 0, 1, s)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n", [3, 8, 33])
def test_factorizations_match_numpy(dtype, n):
    tol = TOL[dtype]
    a = spd((2, 3), n, dtype)
    assert rel(la.cholesky(a), np.linalg.cholesky(a.astype(np.float64))) < tol * 10
    w, v = la.eigh(a)
    w0, v0 = np.linalg.eigh(a.astype(np.float64))
    assert rel(w, w0) < tol * 10
    assert rel(v, signed(v0)) < tol * 100
    g = general((2,), n + 2, n, dtype)
    u, s, vh = la.svd(g)
    u0, s0, vh0 = np.linalg.svd(g.astype(np.float64), full_matrices=False)
    assert rel(s, s0) < tol * 10
    assert rel(u * s[..., None, :] @ vh, g) < tol * 10
    q, r = la.qr(g)
    q0, r0 = np.linalg.qr(g.astype(np.float64))
    assert rel(q, q0) < tol * 100 and rel(r, r0) < tol * 100  # LAPACK's reflector signs
    b = RNG.standard_normal((2, 3, n, 2)).astype(dtype)
    assert rel(la.solve(a, b), np.linalg.solve(a.astype(np.float64), b)) < tol * 10
    assert rel(la.inv(a), np.linalg.inv(a.astype(np.float64))) < tol * 10
    ad = (a / n).astype(dtype)  # a determinant inside f32's range
    d0 = np.linalg.det(ad.astype(np.float64))
    assert np.max(np.abs(la.det(ad) - d0) / np.abs(d0)) < tol * 10
    sg, ld = la.slogdet(a)
    sg0, ld0 = np.linalg.slogdet(a.astype(np.float64))
    assert np.array_equal(sg, sg0) and rel(ld, ld0) < tol * 10
    lu, piv, perm = la.lu(a[0, 0])
    p, l0, u0 = scipy.linalg.lu(a[0, 0].astype(np.float64))
    assert rel(np.tril(lu, -1) + np.eye(n), l0) < tol * 10 and rel(np.triu(lu), u0) < tol * 10
    assert np.array_equal(np.argmax(p, axis=0), perm)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_triangular_lstsq_expm_match_scipy(dtype):
    tol = TOL[dtype]
    a = general((), 6, 6, dtype) + 6 * np.eye(6, dtype=dtype)
    b = RNG.standard_normal((6, 3)).astype(dtype)
    for lower in (True, False):
        for trans in (False, True):
            x0 = scipy.linalg.solve_triangular(a.astype(np.float64), b, lower=lower, trans=int(trans))
            assert rel(la.solve_triangular(a, b, lower=lower, trans=trans), x0) < tol * 10
    g = general((), 9, 4, dtype)
    y = RNG.standard_normal(9).astype(dtype)
    x, res, rank, s = la.lstsq(g, y)
    x0, res0, rank0, s0 = np.linalg.lstsq(g.astype(np.float64), y.astype(np.float64), rcond=None)
    assert rank == rank0 and rel(x, x0) < tol * 10 and rel(s, s0) < tol * 10 and rel(res, res0) < tol * 100
    m = 0.7 * general((), 5, 5, dtype)
    assert rel(la.expm(m), scipy.linalg.expm(m.astype(np.float64))) < tol * 10
    big = 6.0 * general((), 5, 5, dtype)  # scaling and squaring
    assert rel(la.expm(big), scipy.linalg.expm(big.astype(np.float64))) < tol * 1e3


@pytest.mark.parametrize("cond", [1e6, 1e10])
def test_ill_conditioned_f64(cond):
    a = spd((4,), 12, cond=cond)
    eps = np.finfo(np.float64).eps
    l = la.cholesky(a)
    assert rel(l @ np.swapaxes(l, -1, -2), a) < 100 * eps  # backward error stays at rounding level
    x_true = RNG.standard_normal((4, 12, 1))
    b = a @ x_true
    x = la.solve(a, b)
    x0 = np.linalg.solve(a, b)
    assert rel(x, x0) < 100 * cond * eps  # forward error bounded by cond * eps, as LAPACK's
    w, _ = la.eigh(a)
    assert np.max(np.abs(w - np.linalg.eigvalsh(a))) < 100 * eps
    g = general((2,), 10, 6, cond=cond)
    assert rel(la.svd(g, compute_uv=False), np.linalg.svd(g, compute_uv=False)) < 100 * eps


def test_error_policy():
    a = spd((3,), 5)
    a[1, 2, 2] = -10.0
    l, info = la.cholesky(a, return_info=True)
    assert list(info) == [0, 3, 0]
    assert np.isnan(l[1]).all() and np.isfinite(l[0]).all()
    s = np.ones((4, 4))
    assert np.isnan(la.solve(s, np.ones(4))).all()
    assert la.det(s) == 0
    assert la.slogdet(s) == (0.0, -np.inf)
    assert la.lu(s, return_info=True)[3] > 0
    with pytest.raises(rlx.Error, match="square"):
        la.cholesky(np.ones((3, 4)))


def test_values_build_graph_ops():
    g = rlx.Graph("chol")
    x = g.input("a", "f64", [4, 4])
    l, info = la.cholesky(x, return_info=True)
    g.output(l)
    assert "cholesky" in g.node_ops()
    a = spd((), 4)
    assert rel(rlx.compile(g).run([a])[0], np.linalg.cholesky(a)) < 1e-12


# ---- gradients against JAX ------------------------------------------------------------------
jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy


def rlx_grad(build, arrays):
    """d/d(inputs) of sum(w * f(...)) built by `build(g, inputs)` -> scalar Value, on cpu."""
    g = rlx.Graph("f")
    ins = [g.input(f"x{i}", "f64", list(a.shape)) for i, a in enumerate(arrays)]
    g.output(build(g, ins))
    vg = rlx.train.value_and_grad(g)
    return rlx.compile(vg).run(list(arrays))[1:]


def wsum(g, y, w):
    p = g.op("mul", [y, g.constant(w)])
    return g.op("reduce_sum", [p], axes=list(range(len(w.shape))), keepdims=0)


CASES = {
    "cholesky": ([spd((2,), 4)], lambda g, x, w: wsum(g, la.cholesky(x[0]), w[0]),
                 lambda x, w: jnp.sum(w[0] * jnp.linalg.cholesky(x[0]))),
    "solve": ([spd((2,), 4), RNG.standard_normal((2, 4, 3))], lambda g, x, w: wsum(g, la.solve(x[0], x[1]), w[0]),
              lambda x, w: jnp.sum(w[0] * jnp.linalg.solve(x[0], x[1]))),
    "inv": ([spd((2,), 3)], lambda g, x, w: wsum(g, la.inv(x[0]), w[0]),
            lambda x, w: jnp.sum(w[0] * jnp.linalg.inv(x[0]))),
    "det": ([general((3,), 3, 3) + 2 * np.eye(3)], lambda g, x, w: wsum(g, la.det(x[0]), w[0]),
            lambda x, w: jnp.sum(w[0] * jnp.linalg.det(x[0]))),
    "slogdet": ([general((3,), 3, 3) + 2 * np.eye(3)], lambda g, x, w: wsum(g, la.slogdet(x[0])[1], w[0]),
                lambda x, w: jnp.sum(w[0] * jnp.linalg.slogdet(x[0])[1])),
    "triangular_solve": ([general((2,), 4, 4) + 4 * np.eye(4), RNG.standard_normal((2, 4, 2))],
                         lambda g, x, w: wsum(g, la.solve_triangular(x[0], x[1], lower=True), w[0]),
                         lambda x, w: jnp.sum(w[0] * jax.scipy.linalg.solve_triangular(x[0], x[1], lower=True))),
    # V enters squared: sign conventions of eigenvectors differ between libraries
    "eigh": ([spd((2,), 4)],
             lambda g, x, w: g.op("add", [wsum(g, la.eigh(x[0])[0], w[0]),
                                          wsum(g, g.op("mul", [la.eigh(x[0])[1], la.eigh(x[0])[1]]), w[1])]),
             lambda x, w: jnp.sum(w[0] * jnp.linalg.eigh(x[0])[0]) + jnp.sum(w[1] * jnp.linalg.eigh(x[0])[1] ** 2)),
    "qr": ([general((2,), 5, 3)],
           lambda g, x, w: g.op("add", [wsum(g, la.qr(x[0])[0], w[0]), wsum(g, la.qr(x[0])[1], w[1])]),
           lambda x, w: jnp.sum(w[0] * jnp.linalg.qr(x[0])[0]) + jnp.sum(w[1] * jnp.linalg.qr(x[0])[1])),
    "svd": ([general((2,), 5, 3)],
            lambda g, x, w: g.op("add", [wsum(g, la.svd(x[0])[1], w[0]),
                                         g.op("add", [wsum(g, g.op("mul", [la.svd(x[0])[0]] * 2), w[1]),
                                                      wsum(g, g.op("mul", [la.svd(x[0])[2]] * 2), w[2])])]),
            lambda x, w: (jnp.sum(w[0] * jnp.linalg.svd(x[0], full_matrices=False)[1])
                          + jnp.sum(w[1] * jnp.linalg.svd(x[0], full_matrices=False)[0] ** 2)
                          + jnp.sum(w[2] * jnp.linalg.svd(x[0], full_matrices=False)[2] ** 2))),
    "lu": ([general((2,), 4, 4)], lambda g, x, w: wsum(g, la.lu(x[0])[0], w[0]),
           lambda x, w: jnp.sum(w[0] * jax.lax.linalg.lu(x[0])[0])),
    "lstsq": ([general((2,), 5, 3), RNG.standard_normal((2, 5, 2))], lambda g, x, w: wsum(g, la.lstsq(x[0], x[1])[0], w[0]),
              lambda x, w: jnp.sum(w[0] * jax.vmap(lambda a, b: jnp.linalg.lstsq(a, b)[0])(x[0], x[1]))),
    "matrix_exp": ([0.5 * general((2,), 3, 3)], lambda g, x, w: wsum(g, la.expm(x[0]), w[0]),
                   lambda x, w: jnp.sum(w[0] * jax.scipy.linalg.expm(x[0]))),
}


@pytest.mark.parametrize("name", list(CASES))
def test_gradients_match_jax(name):
    arrays, build, jfn = CASES[name]
    out_shapes = {"det": [(3,)], "slogdet": [(3,)], "eigh": [(2, 4), (2, 4, 4)], "qr": [(2, 5, 3), (2, 3, 3)],
                  "svd": [(2, 3), (2, 5, 3), (2, 3, 3)], "lstsq": [(2, 3, 2)]}
    shapes = out_shapes.get(name, [arrays[-1].shape if name in ("solve", "triangular_solve") else arrays[0].shape])
    ws = [RNG.standard_normal(s) for s in shapes]
    got = rlx_grad(lambda g, ins: build(g, ins, ws), arrays)
    want = jax.grad(lambda xs: jfn(xs, [jnp.asarray(w) for w in ws]))([jnp.asarray(a) for a in arrays])
    for gi, wi in zip(got, want):
        wi = np.asarray(wi)
        if name in ("cholesky", "eigh"):  # both factor (A + Aᵀ)/2: compare the symmetric part
            wi = 0.5 * (wi + np.swapaxes(wi, -1, -2))
        assert rel(gi, wi) < 1e-9, name
