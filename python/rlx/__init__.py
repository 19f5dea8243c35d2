"""RLX from Python: build or load a graph, compile it for a device, run it on numpy arrays.

Arrays keep their dtype (float32 -> f32, ...). numpy has no bfloat16: bf16 graph inputs accept
float32 arrays (rounded to bf16) and bf16 outputs come back as float32.
"""
import numpy as np

from . import _rlx
from ._rlx import Error, devices, parse, load  # noqa: F401

_NP = {"f32": np.float32, "f16": np.float16, "f64": np.float64, "c64": np.complex64, "i8": np.int8,
       "u8": np.uint8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "bool": np.bool_}
_RLX = {np.dtype(v): k for k, v in _NP.items()}


def _to_wire(a, want=None):
    a = np.asarray(a)
    if want == "bf16":
        f = np.ascontiguousarray(a, dtype=np.float32)
        bits = f.view(np.uint32)
        rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)  # round to nearest even
        return (rounded.tobytes(), "bf16", list(a.shape))
    if a.dtype not in _RLX:
        raise Error(f"[python] numpy dtype {a.dtype} has no RLX dtype")
    a = np.ascontiguousarray(a)
    return (a.tobytes(), _RLX[a.dtype], list(a.shape))


def _from_wire(w):
    data, dt, shape = w
    if dt == "bf16":
        bits = np.frombuffer(data, dtype=np.uint16).astype(np.uint32) << 16
        return bits.view(np.float32).reshape(shape).copy()
    return np.frombuffer(data, dtype=_NP[dt]).reshape(shape).copy()


class Graph:
    """A graph under construction. Values are integer ids returned by input/op/constant."""

    def __init__(self, name="main", _g=None):
        self._g = _g if _g is not None else _rlx.Graph()
        self._g.name = name if _g is None else self._g.name

    def input(self, name, dtype, shape):
        return self._g.input(name, str(dtype), list(shape))

    def op(self, name, inputs, **attrs):
        wired = {k: (_to_wire(v) if isinstance(v, np.ndarray) else v) for k, v in attrs.items()}
        outs = self._g.op(name, list(inputs), wired)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def constant(self, array):
        return self._g.constant(_to_wire(array))

    def output(self, value, name=""):
        self._g.output(value, name)

    def type(self, value):
        return self._g.type(value)

    def verify(self):
        self._g.verify()

    def text(self):
        return self._g.text()

    __str__ = text


def _wrap(g):
    return Graph(_g=g)


def parse(text):  # noqa: F811
    return _wrap(_rlx.parse(text))


def load(path):  # noqa: F811
    return _wrap(_rlx.load(path))


class CompiledModel:
    def __init__(self, graph, m):
        self._graph, self._m = graph, m

    def run(self, inputs):
        """inputs: dict name -> array (returns dict) or list in graph order (returns list)."""
        names = self._graph._g.input_names()
        if isinstance(inputs, dict):
            missing = [n for n in names if n not in inputs]
            extra = [k for k in inputs if k not in names]
            if missing or extra:
                raise Error(f"[run] missing inputs {missing}, unknown inputs {extra}")
            arrays = [inputs[n] for n in names]
        else:
            arrays = list(inputs)
        types = self._graph._g.input_dtypes()
        outs = [_from_wire(w) for w in self._m.run([_to_wire(a, t) for a, t in zip(arrays, types)])]
        if isinstance(inputs, dict):
            return dict(zip(self._m.output_names(), outs))
        return outs

    def report(self, bindings=None):
        return self._m.report(dict(bindings or {}))

    def report_rows(self, bindings=None):
        rows = self._m.report_rows(dict(bindings or {}))
        for r in rows:
            r["count"] = int(r["count"])
        return rows

    def dump(self, level, bindings=None):
        return self._m.dump(level, dict(bindings or {}))

    @property
    def cache_size(self):
        return self._m.cache_size


def compile(graph, device="cpu", force_common=(), force_native=(), fuse=True):  # noqa: A001
    return CompiledModel(graph, _rlx.compile(graph._g, device, list(force_common), list(force_native), fuse))


def reference_run(graph, inputs):
    return [_from_wire(w) for w in _rlx.reference_run(graph._g, [_to_wire(a) for a in inputs])]
