"""rlx.linalg on complex64 against NumPy/SciPy (complex128 on the same rounded input): cholesky of
Hermitian PD matrices, triangular solves with trans N/T/C, LU, QR, Hermitian eigh, SVD, solve, inv,
det/slogdet, batched, plus the real-only ops refusing complex input."""
import numpy as np
import pytest
import scipy.linalg

import rlx
from rlx import linalg as la

RNG = np.random.default_rng(11)
TOL = 2e-5  # complex64 holds float32 parts


def cgen(batch, m, n):
    return (RNG.standard_normal((*batch, m, n)) + 1j * RNG.standard_normal((*batch, m, n))).astype(np.complex64)


def hpd(batch, n):
    m = cgen(batch, n, n).astype(np.complex128)
    return (m @ np.conj(np.swapaxes(m, -1, -2)) + n * np.eye(n)).astype(np.complex64)


def rel(x, y):
    return np.max(np.abs(np.asarray(x, np.complex128) - y)) / max(1.0, np.max(np.abs(y)))


def phased(v):
    """Columns scaled so the largest-magnitude entry is real positive (the convention of rlx.linalg)."""
    idx = np.argmax(np.abs(v), axis=-2)
    p = np.take_along_axis(v, idx[..., None, :], axis=-2)
    return v * np.conj(p / np.abs(p))


def ct(x):
    return np.conj(np.swapaxes(x, -1, -2))


@pytest.mark.parametrize("n", [3, 8, 20])
def test_hermitian_factorizations_match_numpy(n):
    a = hpd((2, 2), n)
    a0 = a.astype(np.complex128)
    l = la.cholesky(a)
    assert l.dtype == np.complex64
    assert rel(l, np.linalg.cholesky(a0)) < TOL * 10
    w, v = la.eigh(a)
    w0, v0 = np.linalg.eigh(a0)
    assert w.dtype == np.float32
    assert rel(w, w0) < TOL * 10
    assert rel(v, phased(v0)) < TOL * 100


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4)])
def test_svd_qr_lu_match_numpy(shape):
    g = cgen((2,), *shape)
    g0 = g.astype(np.complex128)
    u, s, vh = la.svd(g)
    assert s.dtype == np.float32
    assert rel(s, np.linalg.svd(g0, compute_uv=False)) < TOL * 10
    assert rel((u * s[..., None, :]) @ vh, g0) < TOL * 10
    u0, _, _ = np.linalg.svd(g0, full_matrices=False)
    assert rel(u, phased(u0)) < TOL * 100
    q, r = la.qr(g)
    q0, r0 = np.linalg.qr(g0)
    assert rel(q, q0) < TOL * 10 and rel(r, r0) < TOL * 10  # LAPACK's reflectors: the same Q and R
    lu, piv, perm = la.lu(g)
    for b in range(2):
        p0, l0, u0 = scipy.linalg.lu(g0[b])
        k = min(shape)
        lb = np.tril(lu[b], -1)[:, :k] + np.eye(shape[0], k)
        ub = np.triu(lu[b])[:k, :]
        assert rel(lb, l0) < TOL * 10 and rel(ub, u0) < TOL * 10
        assert rel(g0[b][perm[b]], lb @ ub) < TOL * 10


def test_solve_inv_det_slogdet_triangular():
    a = (cgen((3,), 6, 6) + 4 * np.eye(6)).astype(np.complex64)
    a0 = a.astype(np.complex128)
    b = cgen((3,), 6, 2)
    assert rel(la.solve(a, b), np.linalg.solve(a0, b.astype(np.complex128))) < TOL * 10
    assert rel(la.solve(a, b[..., 0]), np.linalg.solve(a0, b[..., 0:1].astype(np.complex128))[..., 0]) < TOL * 10
    assert rel(la.inv(a), np.linalg.inv(a0)) < TOL * 10
    d0 = np.linalg.det(a0)
    assert np.max(np.abs(la.det(a) - d0) / np.abs(d0)) < TOL * 10
    sign, logabs = la.slogdet(a)
    s0, l0 = np.linalg.slogdet(a0)
    assert logabs.dtype == np.float32
    assert rel(sign, s0) < TOL * 10 and rel(logabs, l0) < TOL * 10
    t = np.tril(a[0])
    for trans in ("N", "T", "C"):
        x0 = scipy.linalg.solve_triangular(t.astype(np.complex128), b[0].astype(np.complex128), lower=True, trans=trans)
        assert rel(la.solve_triangular(t, b[0], lower=True, trans=trans), x0) < TOL * 10, trans


def test_complex128_rounds_to_complex64_and_real_only_ops_refuse():
    a = hpd((), 4).astype(np.complex128)
    assert la.cholesky(a).dtype == np.complex64
    with pytest.raises(rlx.Error, match="c64"):
        la.expm(a)
    with pytest.raises(rlx.Error, match="c64"):
        la.lstsq(a, a)
