"""RLX: a tensor compiler and runtime, from Python.

Build a graph, compile it for a device, run it on numpy arrays::

    import numpy as np, rlx

    g = rlx.Graph("mlp")
    x = g.input("x", "f32", ["batch", 4])
    w = g.constant(_np.ones((8, 4), _np.float32))      # linear weights are [out, in]
    y = g.op("linear", [x, w], activation="relu")    # kwargs become op attributes
    g.output(y, "y")
    print(g)                                         # the text form (.rlx)

    m = rlx.compile(g, device="cpu")
    out = m.run({"x": _np.zeros((2, 4), _np.float32)})  # -> {"y": ndarray}
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

from typing import Any as _Any, Iterable as _Iterable, Mapping as _Mapping, Sequence as _Sequence, Union as _Union

import numpy as _np

from . import _rlx
from ._rlx import DType, Error

__all__ = [
    "DType", "Error", "Graph", "Value", "CompiledModel", "InferenceSession", "NodeArg", "dtype", "dtypes",
    "ops", "op_schema", "parse", "load", "model_kind", "compile", "devices", "reference_run", "read_npy",
    "write_npy", "read_npz", "write_npz", "jvp", "vmap", "embed", "LanguageModel", "llm", "linalg", "sparse", "splat", "train", "__version__",
]

__version__: str = _rlx.version()  # the CMake project version

# rlx dtype name -> numpy dtype (bf16 travels as float32).
_NUMPY = {
    "f32": _np.float32, "f16": _np.float16, "bf16": _np.float32, "f64": _np.float64,
    "c64": _np.complex64, "i8": _np.int8, "u8": _np.uint8, "i16": _np.int16, "i32": _np.int32,
    "i64": _np.int64, "bool": _np.bool_, "u16": _np.uint16, "u32": _np.uint32, "u64": _np.uint64,
}
_FROM_NUMPY = {_np.dtype(v): k for k, v in _NUMPY.items() if k != "bf16"}

_DTypeLike = _Union[str, DType, _np.dtype, type]


def dtype(name: _DTypeLike) -> DType:
    """The RLX dtype for a name ("f32", "bf16", "bool", ...), a DType, or a numpy dtype."""
    if isinstance(name, DType):
        return name
    if isinstance(name, str):
        return _rlx.dtype(name)
    try:
        npd = _np.dtype(name)
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


def _array(a: _Any) -> _np.ndarray:
    """A numpy array in native byte order (the copy into RLX happens in C++). Objects that speak
    DLPack (PyTorch and JAX CPU arrays, CuPy on the host, ...) are viewed through it, without a copy."""
    if not isinstance(a, _np.ndarray) and hasattr(a, "__dlpack__"):
        try:
            a = _np.from_dlpack(a)
        except (TypeError, RuntimeError, BufferError) as e:
            raise Error(f"[python] cannot read {type(a).__name__} through DLPack: {e} (RLX reads host "
                        f"memory: move the array to the CPU first)") from None
    arr = _np.asarray(a)
    if arr.dtype.byteorder not in ("=", "|"):
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return arr


def _attr(v: _Any) -> _Any:
    """Plain Python values for the C++ attribute converter (numpy scalars, dtypes, tuples)."""
    if isinstance(v, (DType, str, bool, int, float)):
        return v
    if isinstance(v, _np.ndarray):
        return _array(v)
    if isinstance(v, _np.generic):
        return v.item()
    if isinstance(v, _np.dtype) or (isinstance(v, type) and issubclass(v, _np.generic)):
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


_ValueLike = _Union[Value, int]


class Graph:
    """A graph builder over RLX's HIR/MIR graph. ``str(g)`` is its text form."""

    def __init__(self, name: str = "main", _g: _Any = None):
        self._g = _g if _g is not None else _rlx.Graph()
        if _g is None:
            self._g.name = name

    @property
    def name(self) -> str:
        return self._g.name

    def _id(self, v: _ValueLike) -> int:
        if isinstance(v, Value):
            if v.graph is not self and v.graph._g is not self._g:
                raise Error(f"[python] value {v!r} belongs to graph '{v.graph.name}', not this "
                            f"graph '{self.name}'")
            return v.id
        if isinstance(v, (int, _np.integer)) and not isinstance(v, bool):
            return int(v)
        raise Error(f"[python] expected a Value or value id, got {v!r}")

    def input(self, name: str, dtype: _DTypeLike, shape: _Sequence[_Union[int, str]]) -> Value:
        """Adds a graph input; `shape` holds ints and/or symbol names ("batch")."""
        return Value(self, self._g.add_input(name, _dtype(dtype), [_attr(d) for d in shape]))

    def op(self, op: str, inputs: _Iterable[_ValueLike], *, node_name: str = "",
           **attrs: _Any) -> _Union[Value, tuple]:
        """Appends `op` (any op of the table, e.g. "linear", "add", "dot_general").

        Keyword arguments are the op's attributes, converted by its schema (rlx.op_schema(op)):
        ints, floats, strings, lists of ints/floats, dims (ints or symbol names), dtypes
        (rlx.dtype("f16"), "f16" or _np.float16) and tensors (numpy arrays). Returns a Value, or a
        tuple of Values for multi-output ops (sort, topk).
        """
        ids = [self._id(v) for v in inputs]
        out = self._g.add_node(op, ids, {k: _attr(v) for k, v in attrs.items()}, node_name)
        vals = tuple(Value(self, i) for i in out)
        return vals[0] if len(vals) == 1 else vals

    def constant(self, value: _Any, dtype: _DTypeLike | None = None) -> Value:
        """A constant from an array (copied). `dtype` casts first; bf16 rounds from float32."""
        if dtype is not None:
            dt = _dtype(dtype)
            arr = _np.asarray(value, dtype=_NUMPY[dt.name])
            return Value(self, self._g.add_constant(_array(arr), dt))
        return Value(self, self._g.add_constant(_array(value), None))

    def output(self, value: _ValueLike, name: str | None = None) -> None:
        """Marks a value as a graph output; `name` names it in the dicts run() returns."""
        self._g.add_output(self._id(value), name or None)

    def type(self, value: _ValueLike) -> tuple:
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


def load(path: str, *, bind: _Mapping[str, int] | None = None,
         input_shapes: _Mapping[str, _Sequence[int]] | None = None, batch: int = 1, seq: int = 8) -> Graph:
    """Loads a model into a Graph, picking the reader by the file:

    * ``.rlx`` (the text form), ``.onnx``, ``.rten``: the graph as stored; ``bind`` sizes symbolic
      dims ({"batch": 2}) and ``input_shapes`` fixes input shapes ({"x": [2, 3]}) at import.
    * a Hugging Face folder (``config.json`` with ``model_type`` bert or qwen3): a BERT encoder
      (inputs input_ids, attention_mask, token_type_ids; output last_hidden_state), or a Qwen3
      forward step over ``seq`` tokens of ``batch`` sequences (inputs ids, positions; outputs the
      logits of every position, then each layer's K/V).
    * ``.gguf``: a Qwen3 forward step as above, quantized projections kept packed.

    Anything else raises rlx.Error naming the known formats.
    """
    return Graph(_g=_rlx.load_model(str(path), dict(bind or {}),
                                    {str(k): [int(d) for d in v] for k, v in (input_shapes or {}).items()},
                                    int(batch), int(seq)))


def model_kind(path: str) -> str:
    """What rlx.load would read `path` as: "rlx", "onnx", "rten", "gguf", "hf-bert" or "hf-qwen3"."""
    return _rlx.model_kind(str(path))


class CompiledModel:
    """A graph compiled for one device. Each concrete input shape is specialized once and cached."""

    def __init__(self, graph: Graph, device: str = "cpu", force_common: _Iterable[str] = (),
                 force_native: _Iterable[str] = (), fuse: bool = True, verify: bool = True,
                 fallback: str = ""):
        # fallback="cpu": nodes the device cannot run are placed on cpu (the report shows the copies)
        self.graph = graph.copy()  # later edits to `graph` do not affect the compiled model
        self._m = _rlx.CompiledModel(graph._g, device, list(force_common), list(force_native),
                                     verify, fuse, fallback)

    @property
    def device(self) -> str:
        return self._m.device

    def run(self, inputs: _Union[_Mapping[str, _Any], _Sequence[_Any], _np.ndarray]):
        """Runs the model.

        A dict {input name: array} returns a dict {output name: array} (an output is named by its
        value name, else "output_i"); a list of arrays in graph-input order returns a list.
        """
        if isinstance(inputs, _Mapping):
            return self._m.run_dict({str(k): _array(v) for k, v in inputs.items()})
        if isinstance(inputs, _np.ndarray):
            inputs = [inputs]
        return list(self._m.run_list([_array(a) for a in inputs]))

    __call__ = run

    def output_names(self) -> list[str]:
        """The keys run() uses for outputs, in order."""
        return list(self._m.output_names())

    def report(self, bindings: _Mapping[str, int] | None = None) -> str:
        """The dispatch table: per op and dtype, the path taken (native/common-IR/rewritten) and why.

        `bindings` sizes the symbolic dims ({"batch": 2}) when the model has not run yet.
        """
        return self._m.report_table(dict(bindings or {}))

    def report_rows(self, bindings: _Mapping[str, int] | None = None) -> list[dict]:
        """The dispatch report as dicts with keys op, dtype, path, count (int), reason."""
        return list(self._m.report_rows(dict(bindings or {})))

    def report_notes(self, bindings: _Mapping[str, int] | None = None) -> list[str]:
        """Specializations, cache hits and rewrites applied."""
        return list(self._m.report_notes(dict(bindings or {})))

    def dump(self, level: str = "hir", bindings: _Mapping[str, int] | None = None) -> str:
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


def compile(graph: Graph, device: str = "cpu", force_common: _Iterable[str] = (),  # noqa: A001
            force_native: _Iterable[str] = (), fuse: bool = True, verify: bool = True,
            fallback: str = "") -> CompiledModel:
    """Compiles `graph` for `device`. force_common/force_native take op names (e.g. ["linear"]);
    fallback="cpu" places the nodes the device cannot run on cpu instead of failing."""
    return CompiledModel(graph, device, force_common, force_native, fuse, verify, fallback)


def devices() -> list[dict]:
    """Every target RLX knows, as dicts: name, status, reason, description, can_execute."""
    return list(_rlx.devices())


def reference_run(graph: Graph, inputs: _Union[_Sequence[_Any], _Mapping[str, _Any]]) -> list[_np.ndarray]:
    """Runs the reference interpreter (the oracle every device is tested against)."""
    if isinstance(inputs, _Mapping):
        names = [v.name for v in graph.inputs]
        missing = [n for n in names if n not in inputs]
        if missing:
            raise Error(f"[python] missing inputs {missing} (graph takes {names})")
        inputs = [inputs[n] for n in names]
    return list(_rlx.reference_run(graph._g, [_array(a) for a in inputs]))


def read_npy(path: str) -> _np.ndarray:
    """Reads a .npy file with RLX's own reader (the one the C++ tools use)."""
    return _rlx.read_npy(str(path))


def write_npy(path: str, array: _Any) -> None:
    """Writes a .npy file atomically."""
    _rlx.write_npy(str(path), _array(array))


def read_npz(path: str) -> dict[str, _np.ndarray]:
    """Reads a .npz archive (stored or deflated entries) into a dict in archive order."""
    return _rlx.read_npz(str(path))


def write_npz(path: str, arrays: _Union[_Mapping[str, _Any], _Sequence[tuple]]) -> None:
    """Writes a .npz archive (stored entries, in order) atomically."""
    items = arrays.items() if isinstance(arrays, _Mapping) else arrays
    _rlx.write_npz(str(path), {str(k): _array(v) for k, v in items})


# ---- ONNX Runtime-style sessions ---------------------------------------------------------------

_ORT_TYPES = {"f32": "float", "f16": "float16", "bf16": "bfloat16", "f64": "double", "c64": "complex64",
              "i8": "int8", "u8": "uint8", "i16": "int16", "i32": "int32", "i64": "int64", "bool": "bool",
              "u16": "uint16", "u32": "uint32", "u64": "uint64"}


class NodeArg:
    """An input or output of a session: ``name``, ``shape`` (ints, or symbol names for symbolic
    dims), ``type`` in ONNX Runtime's spelling ("tensor(float)") and ``dtype`` (RLX's, "f32")."""

    __slots__ = ("name", "shape", "type", "dtype")

    def __init__(self, name: str, shape: list, dtype: str):
        self.name, self.shape, self.dtype = name, shape, dtype
        self.type = f"tensor({_ORT_TYPES.get(dtype, dtype)})"

    def __repr__(self) -> str:
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape!r})"


class InferenceSession:
    """A model compiled for one device, run the way ONNX Runtime runs one::

        sess = rlx.InferenceSession("model.onnx", device="cpu")
        [i.name for i in sess.get_inputs()]
        (y,) = sess.run(None, {"x": x})            # None: every output, in order
        y = sess.run(["y"], {"x": x})[0]

    ``model`` is a path (anything rlx.load reads; ``load_options`` go to it) or an rlx.Graph. Each new
    input shape compiles once and is cached. Arrays may be numpy or any DLPack host array; results
    are numpy arrays (hand them to ``torch.from_dlpack`` / ``jax.dlpack`` without a copy).
    """

    def __init__(self, model: _Union[str, Graph], device: str = "cpu", *, force_common: _Iterable[str] = (),
                 force_native: _Iterable[str] = (), fuse: bool = True, **load_options: _Any):
        self.graph = model if isinstance(model, Graph) else load(str(model), **load_options)
        self._model = CompiledModel(self.graph, device, force_common, force_native, fuse)
        g = self._model.graph
        self._inputs = [NodeArg(v.name, v.shape, v.dtype) for v in g.inputs]
        names = self._model.output_names()
        self._outputs = [NodeArg(n, v.shape, v.dtype) for n, v in zip(names, g.outputs)]

    @property
    def device(self) -> str:
        return self._model.device

    def get_inputs(self) -> list[NodeArg]:
        return list(self._inputs)

    def get_outputs(self) -> list[NodeArg]:
        return list(self._outputs)

    def get_providers(self) -> list[str]:
        """The device, in the place ONNX Runtime lists execution providers."""
        return [self.device]

    def run(self, output_names: _Sequence[str] | None, input_feed: _Mapping[str, _Any]) -> list[_np.ndarray]:
        """The outputs named in `output_names` (None or []: all), in that order."""
        if not isinstance(input_feed, _Mapping):
            raise Error("[python] InferenceSession.run takes (output_names, {input name: array})")
        known = [i.name for i in self._inputs]
        extra = [k for k in input_feed if k not in known]
        if extra:
            raise Error(f"[python] unknown input(s) {extra}; the model's inputs are {known}")
        missing = [k for k in known if k not in input_feed]
        if missing:
            raise Error(f"[python] missing input(s) {missing}; the model's inputs are {known}")
        out = self._model.run({k: input_feed[k] for k in known})
        want = list(output_names) if output_names else [o.name for o in self._outputs]
        bad = [n for n in want if n not in out]
        if bad:
            raise Error(f"[python] unknown output(s) {bad}; the model's outputs are {[o.name for o in self._outputs]}")
        return [out[n] for n in want]

    def report(self, bindings: _Mapping[str, int] | None = None) -> str:
        """The dispatch table of the compiled model (see CompiledModel.report)."""
        return self._model.report(bindings)

    def __repr__(self) -> str:
        return f"<rlx.InferenceSession '{self.graph.name}' on {self.device}: {len(self._inputs)} inputs>"


# ---- model helpers --------------------------------------------------------------------------

_EMBEDDERS: dict = {}


def embed(model: str, sentences: _Union[str, _Sequence[str]], *, device: str = "cpu",
          batch_size: int = 32) -> _np.ndarray:
    """Sentence embeddings f32 [N, hidden] from a Hugging Face / sentence-transformers BERT folder
    (e.g. all-MiniLM-L6-v2): WordPiece tokenization, the encoder, the folder's pooling and
    normalization, as `rlx embed` computes them. The compiled model is kept per (folder, device)."""
    key = (str(model), device)
    if key not in _EMBEDDERS:
        _EMBEDDERS[key] = _rlx.SentenceEmbedder(str(model), device)
    return _EMBEDDERS[key].embed([sentences] if isinstance(sentences, str) else list(sentences), int(batch_size))


class LanguageModel:
    """A Qwen3 decoder (HF folder or .gguf, quantized weights kept packed) with a KV cache::

        lm = rlx.LanguageModel("tiny-Q4_0.gguf", device="cpu")
        lm.generate([1, 2, 3], max_new=8)               # greedy -> list of new token ids

    Token ids in and out; rlx.llm.load(path).generate("text") is text in and text out with the
    model's own tokenizer and chat template.
    """

    def __init__(self, path: str, device: str = "cpu", keep_packed: bool = True):
        self.path, self.device = str(path), device
        self._m = _rlx.Qwen3Model(self.path, device, keep_packed)

    @property
    def vocab(self) -> int:
        return self._m.vocab

    @property
    def context(self) -> int:
        """Positions the model was trained for (0: not stated)."""
        return self._m.context

    def generate(self, prompt_ids: _Sequence, max_new: int = 32, *, temperature: float = 0.0, top_k: int = 0,
                 top_p: float = 1.0, seed: int = 0, eos: int = -1) -> list:
        """New token ids after `prompt_ids` (one prompt: a list of ids; several of equal length: a
        list of lists, answered in kind). Greedy at temperature 0, else seeded sampling."""
        rows = [list(prompt_ids)] if prompt_ids and not isinstance(prompt_ids[0], (list, tuple, _np.ndarray)) \
            else [list(p) for p in prompt_ids]
        out = self._m.generate([[int(t) for t in r] for r in rows], int(max_new), float(temperature), int(top_k),
                               float(top_p), int(seed), int(eos))
        return out[0] if rows and len(rows) == 1 and not isinstance(prompt_ids[0], (list, tuple, _np.ndarray)) \
            else out

    def __repr__(self) -> str:
        return f"<rlx.LanguageModel {self.path!r} on {self.device}>"


# ---- program transforms (src/autodiff) -------------------------------------------------------

def jvp(graph: Graph) -> Graph:
    """Forward mode: inputs = graph's inputs then one tangent per float input ("t_<name>");
    outputs = graph's outputs then the tangent of each float output."""
    return Graph(_g=_rlx.jvp(graph._g))


def vmap(graph: Graph, size: int, batched: _Sequence[int] = ()) -> Graph:
    """Every input listed in `batched` (default: all) gains a leading axis of `size`; so does every
    output. Batching rules where they exist, per-element unrolling elsewhere (never fails)."""
    return Graph(_g=_rlx.vmap(graph._g, int(size), [int(i) for i in batched]))


# stop_gradient: identity in value; autodiff (rlx.train.value_and_grad, the Trainer) passes
# no gradient through it.
def stop_gradient(x: Value) -> Value:
    """``x`` unchanged in value, treated as a constant by autodiff (the op ``stop_gradient``)."""
    if not isinstance(x, Value):
        raise Error("[python] stop_gradient takes a Value of a Graph")
    return x.graph.op("stop_gradient", [x])


__all__.append("stop_gradient")


def quantize(model: str, out: str, *, calib: _Union[int, str] = 8, method: str = "minmax",
             per_channel: bool = False, percentile: float = 99.99, bind: _Mapping[str, int] | None = None,
             device: str = "cpu", reduce_range: str = "auto", keep_float: str = "", budget: float = 0.99) -> dict:
    """Post-training static int8 of an ONNX model into a QDQ model at ``out`` (as ``rlx quantize``).

    ``calib``: a number of random batches, or a .npz with one array [batches, ...] per model input.
    ``method``: minmax | percentile | mse | entropy. ``reduce_range``: auto | on | off (7-bit weights).
    ``keep_float``: "" | "auto" | comma-separated layer names; auto keeps the fewest layers (worst
    local SQNR first) in float that bring the output cosine on the first batch to ``budget``.
    Returns {"layers": [{"name", "int8", "why", "sqnr_db", "cosine", "local_sqnr_db"}], "output_sqnr_db",
    "output_cosine", "all_int8_cosine", "kept_float", "evaluations", "reduce_range", "batches"}.
    """
    n, f = (calib, "") if isinstance(calib, int) else (0, str(calib))
    return _rlx.quantize_onnx(str(model), str(out), method, float(percentile), bool(per_channel), int(n), f,
                              {str(k): int(v) for k, v in (bind or {}).items()}, device, str(reduce_range),
                              str(keep_float), float(budget))


__all__.append("quantize")

# Dense linear algebra with numpy in and out: rlx.linalg.cholesky, solve, eigh, ... (python/rlx/linalg.py)
from . import linalg  # noqa: E402

# Training: rlx.train.Trainer, rlx.train.value_and_grad, ... (python/rlx/train.py)
from . import train  # noqa: E402
# Sparse CSR matrices, ops and solvers: rlx.sparse (python/rlx/sparse.py)
from . import sparse  # noqa: E402
from . import splat  # noqa: E402  (rlx.splat: gaussian splatting)
from . import llm  # noqa: E402  (rlx.llm.load: decoder LLMs, text in and text out)

del annotations  # the __future__ import; not part of the API
