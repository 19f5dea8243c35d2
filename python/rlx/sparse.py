"""rlx.sparse: CSR matrices, sparse ops and solvers, with scipy.sparse / numpy in and out.

A CSR matrix is three arrays (values [nnz] f32/f64, col_indices [nnz] and row_ptr [rows+1], both
int32 or both int64) plus its shape. In a graph it travels as three ordinary values and every
sparse op takes the shape as its ``shape`` attribute (see docs/sparse.md)::

    import numpy as np, scipy.sparse as sp, rlx.sparse as rs

    A = rs.CSRMatrix.from_scipy(sp.random(100, 100, 0.05, format="csr") + 4 * sp.eye(100))
    y = A @ np.ones(100)                       # sparse_matvec on cpu
    x, info = rs.cg(A, y, tol=1e-10, precond="ic0")
    x = rs.spsolve(A, y, method="klu")         # SuiteSparse

    g = rlx.Graph("f")                         # the same ops inside a graph (differentiable)
    a = rs.input(g, "A", A)                    # three graph inputs: A_values, A_col, A_row_ptr
    b = g.input("b", "f64", [100])
    x, iters, res = a.cg(b, tol=1e-12)
"""
from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

import numpy as np

from . import CompiledModel, Error, Graph, Value, _rlx

__all__ = [
    "CSRMatrix", "coo_to_csr", "read_mtx", "write_mtx", "parse_mtx", "matvec", "matmul", "add_dense",
    "transpose", "cg", "bicgstab", "spsolve", "direct_methods", "input", "SparseInput",
]

_VALUE_DTYPES = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
_INDEX_DTYPES = {np.dtype(np.int32): "i32", np.dtype(np.int64): "i64"}


class CSRMatrix:
    """A CSR matrix: ``values``, ``col_indices``, ``row_ptr`` (numpy arrays) and ``shape``.

    The arrays are checked on construction (dtypes, lengths; with ``check=True`` also ranges and
    sorted columns, the canonical form every op accepts)."""

    def __init__(self, values: Any, col_indices: Any, row_ptr: Any, shape: Sequence[int], check: bool = True):
        self.values = np.ascontiguousarray(values)
        self.col_indices = np.ascontiguousarray(col_indices)
        self.row_ptr = np.ascontiguousarray(row_ptr)
        self.shape = (int(shape[0]), int(shape[1]))
        if self.values.dtype not in _VALUE_DTYPES:
            raise Error(f"[sparse] values must be float32 or float64, got {self.values.dtype}")
        if self.col_indices.dtype not in _INDEX_DTYPES or self.row_ptr.dtype != self.col_indices.dtype:
            raise Error(f"[sparse] col_indices and row_ptr must both be int32 or both int64, got "
                        f"{self.col_indices.dtype} and {self.row_ptr.dtype}")
        if self.values.ndim != 1 or self.col_indices.shape != self.values.shape:
            raise Error(f"[sparse] values {self.values.shape} and col_indices {self.col_indices.shape} "
                        "must both be [nnz]")
        if self.row_ptr.shape != (self.shape[0] + 1,):
            raise Error(f"[sparse] row_ptr has {self.row_ptr.shape[0]} entries, expected rows + 1 = "
                        f"{self.shape[0] + 1}")
        if check:
            self.check()

    def check(self) -> None:
        """Raises rlx.Error naming the first structural problem (row_ptr, ranges, order)."""
        rp, ci, (n, m) = self.row_ptr, self.col_indices, self.shape
        if rp[0] != 0 or rp[-1] != ci.shape[0]:
            raise Error(f"[sparse] row_ptr must run from 0 to nnz = {ci.shape[0]}, got {rp[0]}..{rp[-1]}")
        if np.any(np.diff(rp) < 0):
            raise Error(f"[sparse] row_ptr decreases at row {int(np.argmax(np.diff(rp) < 0))}")
        if ci.size and (ci.min() < 0 or ci.max() >= m):
            k = int(np.argmax((ci < 0) | (ci >= m)))
            raise Error(f"[sparse] column index {int(ci[k])} at entry {k} is out of range [0, {m})")
        if ci.size > 1:
            step = np.diff(ci.astype(np.int64))
            row_start = np.zeros(ci.size, bool)
            row_start[rp[1:-1][rp[1:-1] < ci.size]] = True
            bad = (step <= 0) & ~row_start[1:]
            if np.any(bad):
                k = int(np.argmax(bad)) + 1
                raise Error(f"[sparse] columns not strictly increasing at entry {k}; use "
                            "CSRMatrix.from_scipy (sums duplicates, sorts)")

    @property
    def nnz(self) -> int:
        return int(self.values.shape[0])

    @property
    def dtype(self) -> np.dtype:
        return self.values.dtype

    @property
    def index_dtype(self) -> np.dtype:
        return self.col_indices.dtype

    @classmethod
    def from_scipy(cls, m: Any, dtype: Any = None, index_dtype: Any = None) -> "CSRMatrix":
        """From any scipy.sparse matrix/array (converted to canonical CSR: duplicates summed,
        columns sorted). Index dtype: int32 unless given or too large."""
        import scipy.sparse as sp

        c = sp.csr_matrix(m, copy=True)
        c.sum_duplicates()
        c.sort_indices()
        vals = c.data.astype(dtype if dtype is not None else (c.data.dtype if c.data.dtype in _VALUE_DTYPES
                                                                else np.float64))
        it = np.dtype(index_dtype) if index_dtype is not None else (
            np.int32 if c.nnz < 2**31 and max(c.shape) < 2**31 else np.int64)
        return cls(vals, c.indices.astype(it), c.indptr.astype(it), c.shape, check=False)

    def to_scipy(self):
        import scipy.sparse as sp

        return sp.csr_matrix((self.values, self.col_indices, self.row_ptr), shape=self.shape)

    @classmethod
    def from_dense(cls, d: Any, index_dtype: Any = np.int32) -> "CSRMatrix":
        import scipy.sparse as sp

        d = np.asarray(d)
        return cls.from_scipy(sp.csr_matrix(d), dtype=d.dtype if d.dtype in _VALUE_DTYPES else np.float64,
                              index_dtype=index_dtype)

    def todense(self) -> np.ndarray:
        return self.to_scipy().toarray()

    def astype(self, dtype: Any = None, index_dtype: Any = None) -> "CSRMatrix":
        it = index_dtype if index_dtype is not None else self.index_dtype
        return CSRMatrix(self.values.astype(dtype if dtype is not None else self.dtype),
                         self.col_indices.astype(it), self.row_ptr.astype(it), self.shape, check=False)

    @property
    def T(self) -> "CSRMatrix":
        return transpose(self)

    def __matmul__(self, x: Any) -> np.ndarray:
        x = np.asarray(x)
        return matvec(self, x) if x.ndim == 1 else matmul(self, x)

    def __repr__(self) -> str:
        return (f"CSRMatrix(shape={self.shape}, nnz={self.nnz}, dtype={self.dtype}, "
                f"index_dtype={self.index_dtype})")


def _as_csr(a: Any) -> CSRMatrix:
    if isinstance(a, CSRMatrix):
        return a
    try:
        import scipy.sparse as sp
        if sp.issparse(a):
            return CSRMatrix.from_scipy(a)
    except ImportError:  # pragma: no cover
        pass
    raise Error(f"[sparse] expected a CSRMatrix or scipy.sparse matrix, got {type(a).__name__}")


def coo_to_csr(row: Any, col: Any, values: Any, shape: Sequence[int], index_dtype: str = "i32",
               dtype: Any = np.float64) -> CSRMatrix:
    """Assembles COO triplets (any order, duplicates summed) into canonical CSR (in C++)."""
    v, c, r = _rlx.sparse_coo_to_csr(int(shape[0]), int(shape[1]), np.ascontiguousarray(row, np.int64),
                                     np.ascontiguousarray(col, np.int64),
                                     np.ascontiguousarray(values, np.float64), index_dtype)
    return CSRMatrix(v.astype(dtype), c, r, shape, check=False)


def read_mtx(path: str, dtype: Any = np.float64, index_dtype: str = "i32") -> CSRMatrix:
    """Reads a Matrix Market coordinate file (real/integer/pattern; general/symmetric/
    skew-symmetric). Errors name the file and line."""
    rows, cols, r, c, v = _rlx.sparse_read_mtx(str(path))
    return coo_to_csr(r, c, v, (rows, cols), index_dtype, dtype)


def parse_mtx(text: str, dtype: Any = np.float64, index_dtype: str = "i32") -> CSRMatrix:
    rows, cols, r, c, v = _rlx.sparse_parse_mtx(text)
    return coo_to_csr(r, c, v, (rows, cols), index_dtype, dtype)


def write_mtx(path: str, a: Any) -> None:
    a = _as_csr(a)
    _rlx.sparse_write_mtx(str(path), a.shape[0], a.shape[1], a.values.astype(np.float64),
                          a.col_indices.astype(np.int64), a.row_ptr.astype(np.int64))


def direct_methods() -> list:
    """The direct solvers of this build: "klu", "umfpack", "cholmod" (SuiteSparse) and "dense"."""
    return list(_rlx.sparse_direct_methods())


# ---- graph-level: a CSR matrix as three graph values -----------------------------------------------

class SparseInput:
    """A CSR matrix inside a Graph: values/col/row_ptr Values and the static shape. Its methods
    append sparse ops to the graph (all differentiable w.r.t. values and the dense operands)."""

    def __init__(self, g: Graph, values: Value, col: Value, row_ptr: Value, shape: Sequence[int]):
        self.graph, self.values, self.col, self.row_ptr = g, values, col, row_ptr
        self.shape = [int(shape[0]), int(shape[1])]

    def _op(self, op: str, extra: Sequence[Value], **attrs: Any):
        return self.graph.op(op, [self.values, self.col, self.row_ptr, *extra], shape=self.shape, **attrs)

    def matvec(self, x: Value, transpose: bool = False) -> Value:
        return self._op("sparse_matvec", [x], transpose=int(transpose))

    def matmul(self, x: Value, transpose: bool = False) -> Value:
        return self._op("sparse_matmul", [x], transpose=int(transpose))

    def add_dense(self, d: Value) -> Value:
        return self._op("sparse_add_dense", [d])

    def cg(self, b: Value, tol: float = 1e-8, maxiter: int = 0, precond: str = "none", atol: float = 0.0,
           x0: Optional[Value] = None):
        """(x, iterations, relative residual) Values."""
        return self._op("sparse_cg", [b] + ([x0] if x0 is not None else []), tol=float(tol), atol=float(atol),
                        maxiter=int(maxiter), precond=precond)

    def bicgstab(self, b: Value, tol: float = 1e-8, maxiter: int = 0, precond: str = "none", atol: float = 0.0,
                 x0: Optional[Value] = None):
        return self._op("sparse_bicgstab", [b] + ([x0] if x0 is not None else []), tol=float(tol),
                        atol=float(atol), maxiter=int(maxiter), precond=precond)

    def solve(self, b: Value, method: str = "auto", transpose: bool = False) -> Value:
        return self._op("sparse_solve", [b], method=method, transpose=int(transpose))


def input(g: Graph, name: str, like: Any) -> SparseInput:  # noqa: A001
    """Adds graph inputs ``<name>_values``, ``<name>_col``, ``<name>_row_ptr`` with ``like``'s
    pattern size, dtypes and shape (``like``: a CSRMatrix or scipy.sparse matrix). Feed them with
    ``A.values, A.col_indices, A.row_ptr``."""
    a = _as_csr(like)
    vt, it = _VALUE_DTYPES[a.dtype], _INDEX_DTYPES[a.index_dtype]
    v = g.input(f"{name}_values", vt, [a.nnz])
    c = g.input(f"{name}_col", it, [a.nnz])
    r = g.input(f"{name}_row_ptr", it, [a.shape[0] + 1])
    return SparseInput(g, v, c, r, a.shape)


# ---- eager: one small compiled graph per (op, shapes, dtypes, attributes), cached ----------------

_CACHE: dict = {}


def _run(op: str, a: CSRMatrix, dense: Sequence[np.ndarray], device: str, **attrs: Any) -> list:
    key = (op, a.shape, a.nnz, str(a.dtype), str(a.index_dtype), tuple((d.shape, str(d.dtype)) for d in dense),
           tuple(sorted(attrs.items())), device)
    m = _CACHE.get(key)
    if m is None:
        g = Graph(op)
        s = input(g, "A", a)
        ins = [g.input(f"d{i}", _VALUE_DTYPES[d.dtype], list(d.shape)) for i, d in enumerate(dense)]
        outs = s._op(op, ins, **attrs)
        for i, o in enumerate(outs if isinstance(outs, tuple) else (outs,)):
            g.output(o, f"out{i}")
        m = _CACHE[key] = CompiledModel(g, device=device)
    return m.run([a.values, a.col_indices, a.row_ptr, *dense])


def _dense(x: Any, a: CSRMatrix, what: str) -> np.ndarray:
    x = np.ascontiguousarray(x)
    if x.dtype != a.dtype:
        if not np.can_cast(x.dtype, a.dtype, "same_kind"):
            raise Error(f"[sparse] {what} has dtype {x.dtype}, the matrix {a.dtype}")
        x = x.astype(a.dtype)
    return x


def matvec(a: Any, x: Any, transpose: bool = False, device: str = "cpu") -> np.ndarray:
    a = _as_csr(a)
    return _run("sparse_matvec", a, [_dense(x, a, "x")], device, transpose=int(transpose))[0]


def matmul(a: Any, x: Any, transpose: bool = False, device: str = "cpu") -> np.ndarray:
    a = _as_csr(a)
    return _run("sparse_matmul", a, [_dense(x, a, "X")], device, transpose=int(transpose))[0]


def add_dense(a: Any, d: Any, device: str = "cpu") -> np.ndarray:
    a = _as_csr(a)
    return _run("sparse_add_dense", a, [_dense(d, a, "D")], device)[0]


def transpose(a: Any, device: str = "cpu") -> CSRMatrix:
    a = _as_csr(a)
    v, c, r = _run("sparse_transpose", a, [], device)
    return CSRMatrix(v, c, r, (a.shape[1], a.shape[0]), check=False)


def _iterative(op: str, a: Any, b: Any, x0: Any, tol: float, atol: float, maxiter: int, precond: str,
               device: str) -> Tuple[np.ndarray, dict]:
    a = _as_csr(a)
    dense = [_dense(b, a, "b")] + ([_dense(x0, a, "x0")] if x0 is not None else [])
    x, it, res = _run(op, a, dense, device, tol=float(tol), atol=float(atol), maxiter=int(maxiter),
                      precond=precond)
    # The solver stops on its recursive residual; the reported one is recomputed (|b - A x| / |b|)
    # and may drift a little above the tolerance, hence the factor 10.
    bn = float(np.linalg.norm(np.asarray(b, np.float64)))
    info = {"iterations": int(it), "residual": float(res),
            "converged": bool(bn == 0 or float(res) <= 10 * max(tol, atol / bn))}
    return x, info


def cg(a: Any, b: Any, x0: Any = None, tol: float = 1e-8, atol: float = 0.0, maxiter: int = 0,
       precond: str = "none", device: str = "cpu") -> Tuple[np.ndarray, dict]:
    """Conjugate gradients (A SPD). precond: "none", "jacobi" or "ic0". Returns (x, info) with
    info = {iterations, residual (|b - A x| / |b|), converged}; a non-SPD A stops early with
    converged False (never raises for it)."""
    return _iterative("sparse_cg", a, b, x0, tol, atol, maxiter, precond, device)


def bicgstab(a: Any, b: Any, x0: Any = None, tol: float = 1e-8, atol: float = 0.0, maxiter: int = 0,
             precond: str = "none", device: str = "cpu") -> Tuple[np.ndarray, dict]:
    """BiCGSTAB for general square A. precond: "none" or "jacobi"."""
    return _iterative("sparse_bicgstab", a, b, x0, tol, atol, maxiter, precond, device)


def spsolve(a: Any, b: Any, method: str = "auto", transpose: bool = False, device: str = "cpu") -> np.ndarray:
    """Direct solve of A x = b (b [n] or [n, k]): method "auto" (UMFPACK), "klu", "umfpack",
    "cholmod" (A SPD) or "dense". A singular matrix raises rlx.Error."""
    a = _as_csr(a)
    return _run("sparse_solve", a, [_dense(b, a, "b")], device, method=method, transpose=int(transpose))[0]
