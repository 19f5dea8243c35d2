"""Dense linear algebra with numpy in and out: ``rlx.linalg.cholesky(a)``, ``solve``, ``eigh``, ...

Each function runs the op of the same name from RLX's op table (docs/linalg.md) on a device
("cpu" by default), batched over leading dims. Called with an ``rlx.Value`` instead of an array, it
adds the op to that value's Graph (so it can be differentiated with ``rlx.train.value_and_grad``).

Dtypes: float32, float64 and complex64 (complex128 input is rounded to complex64: RLX has no
complex128 dtype); lstsq and matrix_exp are real only. For complex input cholesky factors the
Hermitian part, eigh's eigenvalues and svd's singular values are float32.

Errors follow the op table's policy, not numpy's exceptions: a matrix that is not positive definite
gives a NaN factor (``cholesky(a, return_info=True)`` also returns LAPACK's info per matrix), and a
singular ``solve``/``inv`` gives NaN; ``det`` is 0 and ``slogdet`` is (0, -inf).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from . import Error, Graph, Value, compile as _compile

__all__ = ["cholesky", "solve_triangular", "lu", "qr", "eigh", "eigvalsh", "svd", "solve", "inv", "det",
           "slogdet", "lstsq", "matrix_exp", "expm"]

_cache: dict = {}


def _float(a: Any) -> np.ndarray:
    arr = np.asarray(a)
    if arr.dtype not in (np.float32, np.float64, np.complex64):
        # RLX's one complex dtype is c64: complex128 input is rounded to complex64.
        arr = arr.astype(np.complex64 if np.iscomplexobj(arr) else np.float64)
    return np.ascontiguousarray(arr)


_DT = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64", np.dtype(np.complex64): "c64"}


def _run(op: str, arrays: list, device: str, attrs: dict, nout: int):
    key = (op, device, tuple((a.dtype.str, a.shape) for a in arrays), tuple(sorted(attrs.items())))
    cm = _cache.get(key)
    if cm is None:
        g = Graph(op)
        ins = [g.input(f"x{i}", _DT[a.dtype], list(a.shape)) for i, a in enumerate(arrays)]
        outs = g.op(op, ins, **attrs)
        for o in (outs if isinstance(outs, tuple) else (outs,)):
            g.output(o)
        cm = _compile(g, device)
        if len(_cache) > 256:
            _cache.clear()
        _cache[key] = cm
    res = cm.run(arrays)
    return res if nout > 1 else res[0]


def _apply(op: str, args: list, nout: int, device: str, **attrs):
    if any(isinstance(a, Value) for a in args):
        g = next(a.graph for a in args if isinstance(a, Value))
        return g.op(op, list(args), **attrs)
    arrays = [_float(a) for a in args]
    if len(arrays) == 2 and arrays[0].dtype != arrays[1].dtype:
        t = np.result_type(arrays[0], arrays[1])
        arrays = [a.astype(t) for a in arrays]
    return _run(op, arrays, device, attrs, nout)


def _batch2(a: np.ndarray, b: np.ndarray):
    """Broadcasts the leading (batch) dims of a [..., m, n] and b [..., r, k] against each other."""
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return (np.ascontiguousarray(np.broadcast_to(a, batch + a.shape[-2:])),
            np.ascontiguousarray(np.broadcast_to(b, batch + b.shape[-2:])))


def cholesky(a, *, return_info: bool = False, device: str = "cpu"):
    """Lower Cholesky factor of (a + aᴴ)/2; NaN for a matrix that is not positive definite."""
    l, info = _apply("cholesky", [a], 2, device)
    return (l, info) if return_info else l


def solve_triangular(a, b, *, lower: bool = True, trans=False, unit_diagonal: bool = False,
                     left_side: bool = True, device: str = "cpu"):
    """X with op(a) X = b (left_side) or X op(a) = b. trans as scipy's: False/0/"N" op(a) = a,
    True/1/"T" aᵀ, 2/"C" aᴴ. b may be a vector."""
    modes = {False: (0, 0), 0: (0, 0), "N": (0, 0), True: (1, 0), 1: (1, 0), "T": (1, 0), 2: (1, 1), "C": (1, 1)}
    if trans not in modes:
        raise Error(f"[linalg] solve_triangular: trans {trans!r} (N, T or C)")
    tr, cj = modes[trans]
    if isinstance(a, Value) or isinstance(b, Value):
        return _apply("triangular_solve", [a, b], 1, device, left_side=int(left_side), lower=int(lower),
                      transpose_a=tr, unit_diagonal=int(unit_diagonal), conjugate_a=cj)
    a, b = _float(a), _float(b)
    vec = b.ndim == a.ndim - 1
    if vec:
        b = b[..., :, None] if left_side else b[..., None, :]
    a, b = _batch2(a, b)
    x = _apply("triangular_solve", [a, b], 1, device, left_side=int(left_side), lower=int(lower),
               transpose_a=tr, unit_diagonal=int(unit_diagonal), conjugate_a=cj)
    return (x[..., 0] if left_side else x[..., 0, :]) if vec else x


def lu(a, *, return_info: bool = False, device: str = "cpu"):
    """Packed LU with partial pivoting: (lu, pivots, permutation) as jax.lax.linalg.lu, 0-based."""
    r = _apply("lu", [a], 4, device)
    return tuple(r) if return_info else tuple(r[:3])


def qr(a, mode: str = "reduced", *, device: str = "cpu"):
    """(q, r) with numpy's modes "reduced" and "complete"; "r" returns r only."""
    if mode not in ("reduced", "complete", "r"):
        raise Error(f"[linalg] qr: mode '{mode}' (reduced, complete or r)")
    q, r = _apply("qr", [a], 2, device, full_matrices=int(mode == "complete"))
    return r if mode == "r" else (q, r)


def eigh(a, *, device: str = "cpu"):
    """(w, v) of (a + aᴴ)/2: ascending eigenvalues, eigenvectors as columns (largest entry real positive)."""
    return tuple(_apply("eigh", [a], 2, device))


def eigvalsh(a, *, device: str = "cpu"):
    return eigh(a, device=device)[0]


def svd(a, full_matrices: bool = False, compute_uv: bool = True, *, device: str = "cpu"):
    """Thin SVD (u, s, vh), s descending; full_matrices=True is not supported (raises)."""
    if full_matrices:
        raise Error("[linalg] svd: only full_matrices=False (the thin SVD) is implemented")
    u, s, vh = _apply("svd", [a], 3, device)
    return (u, s, vh) if compute_uv else s


def solve(a, b, *, device: str = "cpu"):
    """x with a x = b; b is [..., n] (a vector) or [..., n, k]. NaN for an exactly singular a."""
    if isinstance(a, Value) or isinstance(b, Value):
        return _apply("solve", [a, b], 1, device)
    a, b = _float(a), _float(b)
    vec = b.ndim == a.ndim - 1 or b.ndim == 1
    if vec:
        b = b[..., None]
    a, b = _batch2(a, b)
    x = _apply("solve", [a, b], 1, device)
    return x[..., 0] if vec else x


def inv(a, *, device: str = "cpu"):
    return _apply("inv", [a], 1, device)


def det(a, *, device: str = "cpu"):
    return _apply("det", [a], 1, device)


def slogdet(a, *, device: str = "cpu"):
    """(sign, log|det|); (0, -inf) for a singular matrix."""
    return tuple(_apply("slogdet", [a], 2, device))


def lstsq(a, b, rcond=None, *, device: str = "cpu"):
    """Minimum-norm least squares as numpy.linalg.lstsq: (x, residuals, rank, s). Given rlx.Values
    (b [..., m, k]) it adds the op and returns its outputs (x, rank, s)."""
    rc = -1.0 if rcond is None else float(rcond)
    if isinstance(a, Value) or isinstance(b, Value):
        return _apply("lstsq", [a, b], 3, device, rcond=rc)
    a, b = _float(a), _float(b)
    vec = b.ndim == 1
    if vec:
        b = b[:, None]
    x, rank, s = _apply("lstsq", [a, b], 3, device, rcond=rc)
    m, n = a.shape[-2:]
    if a.ndim == 2 and int(rank) == n and m > n:
        residuals = np.sum((a @ x - b) ** 2, axis=0)
    else:
        residuals = np.empty((0,), dtype=x.dtype)
    if vec:
        x = x[:, 0]
        residuals = residuals[:1] if residuals.size else residuals
    return x, residuals, rank if a.ndim > 2 else int(rank), s


def matrix_exp(a, *, device: str = "cpu"):
    """exp(a) by Pade(13) scaling and squaring (scipy.linalg.expm)."""
    return _apply("matrix_exp", [a], 1, device)


expm = matrix_exp
