"""RLX: a tensor compiler and runtime, from Python.

Build a graph, compile it for a device, run it on numpy arrays::

    import numpy as np, rlx

    g = rlx.Graph("mlp")
    x = g.input("x", "f32", ["batch", 4])
    w = g.constant(np.ones((8, 4), np.float32))      # linear weights are [out, in]
    y = g.op("linear", [x, w], activation="relu")    # kwargs become op attributes
    g.output(y, "y")
    print(g)                                         # the text form (.rlx)

    m = rlx.compile(g, device="cpu")
    out = m.run({"x": np.zeros((2, 4), np.float32)})  # -> {"y": ndarray}
    print(m.report({"batch": 2}))                    # how each op was dispatched

Conventions:
  * Values are ``rlx.Value`` handles; they also work as plain int ids (``__index__``).
  * Arrays are copied in and out; results never alias RLX memory.
  * An input array's dtype must equal the graph input's dtype (no silent casts), except that bf16
    inputs accept float32 arrays (rounded to nearest even), because numpy has no bf16. bf16
    outputs come back as float32 arrays.
  * Every RLX failure raises ``rlx.Error`` (a ``RuntimeError`` subclass) with RLX's message intact,
    e.g. ``[python] input 'x': expected dtype f32, got numpy float64 (...)``.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence, Union

import numpy as np

from . import _rlx
from ._rlx import DType, Error

__all__ = [
    "DType", "Error", "Graph", "Value", "CompiledModel", "dtype", "dtypes", "ops", "op_schema",
    "parse", "load", "compile", "devices", "reference_run", "read_npy", "write_npy", "read_npz",
    "write_npz",
]

# rlx dtype name -> numpy dtype (bf16 travels as float32).
_NUMPY = {
    "f32": np.float32, "f16": np.float16, "bf16": np.float32, "f64": np.float64,
    "c64": np.complex64, "i8": np.int8, "u8": np.uint8, "i16": np.int16, "i32": np.int32,
    "i64": np.int64, "bool": np.bool_, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
}
_FROM_NUMPY = {np.dtype(v): k for k, v in _NUMPY.items() if k != "bf16"}

DTypeLike = Union[str, DType, np.dtype, type]


def dtype(name: DTypeLike) -> DType:
    """The RLX dtype for a name ("f32", "bf16", "bool", ...), a DType, or a numpy dtype."""
    if isinstance(name, DType):
        return name
    if isinstance(name, str):
        return _rlx.dtype(name)
    try:
        npd = np.dtype(name)
    except TypeError:
        raise Error(f"[python] not a dtype: {name!r}") from None
    if npd not in _FROM_NUMPY:
        raise Error(f"[python] numpy dtype {npd} has no RLX dtype")
    return _rlx.dtype(_FROM_NUMPY[npd])


_dtype = dtype  # methods below take a `dtype` parameter that shadows the function


def dtypes() -> list[str]:
    """Names of every RLX dtype."""
    return list(_rlx.dtype_names())


def ops() -> list[str]:
    """Names of every op in the op table (HIR and MIR)."""
    return list(_rlx.op_names())


def op_schema(op: str) -> dict:
    """The op table entry of `op`: level, arity, accepted dtypes and attribute kinds."""
    return _rlx.op_schema(op)


def _array(a: Any) -> np.ndarray:
    """A numpy array in native byte order (the copy into RLX happens in C++)."""
    arr = np.asarray(a)
    if arr.dtype.byteorder not in ("=", "|"):
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return arr


def _attr(v: Any) -> Any:
    """Plain Python values for the C++ attribute converter (numpy scalars, dtypes, tuples)."""
    if isinstance(v, (DType, str, bool, int, float)):
        return v
    if isinstance(v, np.ndarray):
        return _array(v)
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.dtype) or (isinstance(v, type) and issubclass(v, np.generic)):
        return _dtype(v)
    if isinstance(v, (list, tuple)):
        return [_attr(x) for x in v]
    return v


class Value:
    """A handle to one SSA value of a Graph. Usable wherever a value id (int) is expected."""

    __slots__ = ("graph", "id")

    def __init__(self, graph: "Graph", id: int):
        self.graph = graph
        self.id = int(id)

    def __index__(self) -> int:
        return self.id

    def __int__(self) -> int:
        return self.id

    @property
    def dtype(self) -> str:
        return self.graph._g.value_dtype(self.id).name

    @property
    def shape(self) -> list:
        """Dimensions: ints, or symbol names (str) for symbolic dims."""
        return self.graph._g.value_shape(self.id)

    @property
    def name(self) -> str:
        return self.graph._g.value_name(self.id)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Value):
            return other.graph is self.graph and other.id == self.id
        return isinstance(other, int) and not isinstance(other, bool) and other == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    def __repr__(self) -> str:
        shape = ",".join(str(d) for d in self.shape)
        return f"<rlx.Value {self.graph._g.value_label(self.id)}: {self.dtype}[{shape}]>"


ValueLike = Union[Value, int]


class Graph:
    """A graph builder over RLX's HIR/MIR graph. ``str(g)`` is its text form."""

    def __init__(self, name: str = "main", _g: Any = None):
        self._g = _g if _g is not None else _rlx.Graph()
        if _g is None:
            self._g.name = name

    @property
    def name(self) -> str:
        return self._g.name

    def _id(self, v: ValueLike) -> int:
        if isinstance(v, Value):
            if v.graph is not self and v.graph._g is not self._g:
                raise Error(f"[python] value {v!r} belongs to graph '{v.graph.name}', not this "
                            f"graph '{self.name}'")
            return v.id
        if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
            return int(v)
        raise Error(f"[python] expected a Value or value id, got {v!r}")

    def input(self, name: str, dtype: DTypeLike, shape: Sequence[Union[int, str]]) -> Value:
        """Adds a graph input; `shape` holds ints and/or symbol names ("batch")."""
        return Value(self, self._g.add_input(name, _dtype(dtype), [_attr(d) for d in shape]))

    def op(self, op: str, inputs: Iterable[ValueLike], *, node_name: str = "",
           **attrs: Any) -> Union[Value, tuple]:
        """Appends `op` (any op of the table, e.g. "linear", "add", "dot_general").

        Keyword arguments are the op's attributes, converted by its schema (rlx.op_schema(op)):
        ints, floats, strings, lists of ints/floats, dims (ints or symbol names), dtypes
        (rlx.dtype("f16"), "f16" or np.float16) and tensors (numpy arrays). Returns a Value, or a
        tuple of Values for multi-output ops (sort, topk).
        """
        ids = [self._id(v) for v in inputs]
        out = self._g.add_node(op, ids, {k: _attr(v) for k, v in attrs.items()}, node_name)
        vals = tuple(Value(self, i) for i in out)
        return vals[0] if len(vals) == 1 else vals

    def constant(self, value: Any, dtype: DTypeLike | None = None) -> Value:
        """A constant from an array (copied). `dtype` casts first; bf16 rounds from float32."""
        if dtype is not None:
            dt = _dtype(dtype)
            arr = np.asarray(value, dtype=_NUMPY[dt.name])
            return Value(self, self._g.add_constant(_array(arr), dt))
        return Value(self, self._g.add_constant(_array(value), None))

    def output(self, value: ValueLike, name: str | None = None) -> None:
        """Marks a value as a graph output; `name` names it in the dicts run() returns."""
        self._g.add_output(self._id(value), name or None)

    def type(self, value: ValueLike) -> tuple:
        """(dtype name, shape text) of a value, e.g. ("f32", "[batch,4]")."""
        v = Value(self, self._id(value))
        return v.dtype, "[" + ",".join(str(d) for d in v.shape) + "]"

    @property
    def inputs(self) -> list[Value]:
        return [Value(self, i) for i in self._g.inputs]

    @property
    def outputs(self) -> list[Value]:
        return [Value(self, i) for i in self._g.outputs]

    @property
    def num_nodes(self) -> int:
        return self._g.num_nodes

    def node_ops(self) -> list[str]:
        """Op names of the nodes, in order."""
        return list(self._g.node_ops())

    def symbols(self) -> list[str]:
        """Symbolic dims used by the inputs, first-seen order."""
        return list(self._g.symbols())

    def text(self) -> str:
        """The text form (what rlx.parse reads back)."""
        return self._g.text()

    def verify(self, mir_only: bool = False) -> None:
        """Runs the structural verifier; raises rlx.Error naming the problem."""
        self._g.verify(mir_only)

    def copy(self) -> "Graph":
        return Graph(_g=self._g.copy())

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return f"<rlx.Graph '{self.name}': {len(self._g.inputs)} inputs, {self._g.num_nodes} nodes>"


def parse(text: str, filename: str = "<text>") -> Graph:
    """Parses the text form; errors name line and column ("[parse] line 3:14: ...")."""
    return Graph(_g=_rlx.parse(text, filename))


def load(path: str) -> Graph:
    """Loads a .rlx text file."""
    return Graph(_g=_rlx.load(str(path)))


class CompiledModel:
    """A graph compiled for one device. Each concrete input shape is specialized once and cached."""

    def __init__(self, graph: Graph, device: str = "cpu", force_common: Iterable[str] = (),
                 force_native: Iterable[str] = (), fuse: bool = True, verify: bool = True):
        self.graph = graph.copy()  # later edits to `graph` do not affect the compiled model
        self._m = _rlx.CompiledModel(graph._g, device, list(force_common), list(force_native),
                                     verify, fuse)

    @property
    def device(self) -> str:
        return self._m.device

    def run(self, inputs: Union[Mapping[str, Any], Sequence[Any], np.ndarray]):
        """Runs the model.

        A dict {input name: array} returns a dict {output name: array} (an output is named by its
        value name, else "output_i"); a list of arrays in graph-input order returns a list.
        """
        if isinstance(inputs, Mapping):
            return self._m.run_dict({str(k): _array(v) for k, v in inputs.items()})
        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        return list(self._m.run_list([_array(a) for a in inputs]))

    __call__ = run

    def output_names(self) -> list[str]:
        """The keys run() uses for outputs, in order."""
        return list(self._m.output_names())

    def report(self, bindings: Mapping[str, int] | None = None) -> str:
        """The dispatch table: per op and dtype, the path taken (native/common-IR/rewritten) and why.

        `bindings` sizes the symbolic dims ({"batch": 2}) when the model has not run yet.
        """
        return self._m.report_table(dict(bindings or {}))

    def report_rows(self, bindings: Mapping[str, int] | None = None) -> list[dict]:
        """The dispatch report as dicts with keys op, dtype, path, count (int), reason."""
        return list(self._m.report_rows(dict(bindings or {})))

    def report_notes(self, bindings: Mapping[str, int] | None = None) -> list[str]:
        """Specializations, cache hits and rewrites applied."""
        return list(self._m.report_notes(dict(bindings or {})))

    def dump(self, level: str = "hir", bindings: Mapping[str, int] | None = None) -> str:
        """The text of one level ("hir", "mir" or "lir") after lowering for `bindings`."""
        return self._m.dump(level, dict(bindings or {}))

    @property
    def cache_size(self) -> int:
        """Number of shape specializations compiled so far."""
        return self._m.cache_size

    def profile(self) -> str:
        """Per-kernel times of the last run (when RLX_PROFILE=1)."""
        return self._m.profile()

    def __repr__(self) -> str:
        return f"<rlx.CompiledModel '{self.graph.name}' on {self.device}>"


def compile(graph: Graph, device: str = "cpu", force_common: Iterable[str] = (),  # noqa: A001
            force_native: Iterable[str] = (), fuse: bool = True, verify: bool = True) -> CompiledModel:
    """Compiles `graph` for `device`. force_common/force_native take op names (e.g. ["linear"])."""
    return CompiledModel(graph, device, force_common, force_native, fuse, verify)


def devices() -> list[dict]:
    """Every target RLX knows, as dicts: name, status, reason, description, can_execute."""
    return list(_rlx.devices())


def reference_run(graph: Graph, inputs: Union[Sequence[Any], Mapping[str, Any]]) -> list[np.ndarray]:
    """Runs the reference interpreter (the oracle every device is tested against)."""
    if isinstance(inputs, Mapping):
        names = [v.name for v in graph.inputs]
        missing = [n for n in names if n not in inputs]
        if missing:
            raise Error(f"[python] missing inputs {missing} (graph takes {names})")
        inputs = [inputs[n] for n in names]
    return list(_rlx.reference_run(graph._g, [_array(a) for a in inputs]))


def read_npy(path: str) -> np.ndarray:
    """Reads a .npy file with RLX's own reader (the one the C++ tools use)."""
    return _rlx.read_npy(str(path))


def write_npy(path: str, array: Any) -> None:
    """Writes a .npy file atomically."""
    _rlx.write_npy(str(path), _array(array))


def read_npz(path: str) -> dict[str, np.ndarray]:
    """Reads a .npz archive (stored or deflated entries) into a dict in archive order."""
    return _rlx.read_npz(str(path))


def write_npz(path: str, arrays: Union[Mapping[str, Any], Sequence[tuple]]) -> None:
    """Writes a .npz archive (stored entries, in order) atomically."""
    items = arrays.items() if isinstance(arrays, Mapping) else arrays
    _rlx.write_npz(str(path), {str(k): _array(v) for k, v in items})


# stop_gradient: identity in value; autodiff (rlx.train.value_and_grad, the Trainer) passes
# no gradient through it.
def stop_gradient(x: Value) -> Value:
    """``x`` unchanged in value, treated as a constant by autodiff (the op ``stop_gradient``)."""
    if not isinstance(x, Value):
        raise Error("[python] stop_gradient takes a Value of a Graph")
    return x.graph.op("stop_gradient", [x])


__all__.append("stop_gradient")

# Dense linear algebra with numpy in and out: rlx.linalg.cholesky, solve, eigh, ... (python/rlx/linalg.py)
from . import linalg  # noqa: E402

# Training: rlx.train.Trainer, rlx.train.value_and_grad, ... (python/rlx/train.py)
from . import train  # noqa: E402
