"""The MiniLM-L6-shaped BERT encoder that bench/peers.py runs on every system, and its one set of weights.

`write_model(dir)` draws the weights once from a seeded generator (BERT-style N(0, 0.02) matrices,
LayerNorm gains near 1) and writes them three ways, all holding the same numbers:
  DIR/weights.npz          the arrays under Hugging Face BertModel names, read by the framework peers;
  DIR/hf/                  config.json + model.safetensors + modules.json (mean pooling, Normalize):
                           a sentence-transformers directory that RLX's BERT builder opens;
  DIR/minilm.onnx          the same encoder as an ONNX graph (opset 17, dynamic batch and sequence),
                           imported by ONNX Runtime, OpenVINO, IREE, TVM, tinygrad and RLX's importer.
The workload: token embeddings + positions + token type 0, LayerNorm, 6 x (12-head self-attention
with an additive padding mask, LayerNorm, erf-GELU FFN 384-1536-384, LayerNorm), mean pooling over
the unmasked tokens, L2 normalization; output [batch, 384].

`encoder(F, W, ids, mask)` is that computation written once against a small adapter F (matmul,
layer_norm, gelu, attention, ...) so that PyTorch, TensorFlow, JAX and MLX each run it with their own
native (fused where they have one) ops; bench/peers_runners.py holds the adapters.
"""
from __future__ import annotations

import json
import os
import struct

import numpy as np

CONFIG = {"architectures": ["BertModel"], "model_type": "bert", "hidden_act": "gelu", "hidden_size": 384,
          "intermediate_size": 1536, "layer_norm_eps": 1e-12, "max_position_embeddings": 512,
          "num_attention_heads": 12, "num_hidden_layers": 6, "pad_token_id": 0,
          "position_embedding_type": "absolute", "type_vocab_size": 2, "vocab_size": 30522}
GRAPH_NAME = "minilm_l6_seeded"  # the ONNX graph's name (IREE's import names its function after it)
MASK_NEG = -10000.0  # the additive bias of a padded key position (BERT's classic value)


def make_weights(seed: int = 0, vocab: int | None = None) -> dict[str, np.ndarray]:
    """vocab: a smaller word-embedding table (tests); the default is MiniLM's 30522 rows."""
    rng = np.random.default_rng(seed)
    H, I, L = CONFIG["hidden_size"], CONFIG["intermediate_size"], CONFIG["num_hidden_layers"]

    def mat(o, i):
        return (rng.standard_normal((o, i)) * 0.02).astype(np.float32)

    def vec(n, scale=0.02, base=0.0):
        return (base + rng.standard_normal(n) * scale).astype(np.float32)

    w = {"embeddings.word_embeddings.weight": mat(vocab or CONFIG["vocab_size"], H),
         "embeddings.position_embeddings.weight": mat(CONFIG["max_position_embeddings"], H),
         "embeddings.token_type_embeddings.weight": mat(CONFIG["type_vocab_size"], H),
         "embeddings.LayerNorm.weight": vec(H, 0.05, 1.0), "embeddings.LayerNorm.bias": vec(H)}
    for l in range(L):
        p = f"encoder.layer.{l}."
        for n in ("query", "key", "value"):
            w[p + f"attention.self.{n}.weight"], w[p + f"attention.self.{n}.bias"] = mat(H, H), vec(H)
        w[p + "attention.output.dense.weight"], w[p + "attention.output.dense.bias"] = mat(H, H), vec(H)
        w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"] = vec(H, 0.05, 1.0), vec(H)
        w[p + "intermediate.dense.weight"], w[p + "intermediate.dense.bias"] = mat(I, H), vec(I)
        w[p + "output.dense.weight"], w[p + "output.dense.bias"] = mat(H, I), vec(H)
        w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"] = vec(H, 0.05, 1.0), vec(H)
    return w


def write_safetensors(path: str, tensors: dict[str, np.ndarray]) -> None:
    """The safetensors layout: u64 header length, JSON header (dtype, shape, byte offsets), raw data."""
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for k, a in tensors.items():
        header[k] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for a in tensors.values():
            f.write(np.ascontiguousarray(a, np.float32).tobytes())


def write_hf_dir(d: str, w: dict[str, np.ndarray]) -> None:
    os.makedirs(os.path.join(d, "1_Pooling"), exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(CONFIG, f, indent=1)
    mods = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]
    with open(os.path.join(d, "modules.json"), "w") as f:
        json.dump(mods, f, indent=1)
    with open(os.path.join(d, "1_Pooling", "config.json"), "w") as f:
        json.dump({"word_embedding_dimension": 384, "pooling_mode_mean_tokens": True}, f)
    write_safetensors(os.path.join(d, "model.safetensors"), w)


def onnx_graph(w: dict[str, np.ndarray], batch=None, seq=None):
    """The encoder as an ONNX ModelProto built node by node (onnx.helper); with batch and seq, a copy
    with static input shapes and the position slice's end a constant (for shape-specializing compilers)."""
    from onnx import TensorProto, helper, numpy_helper

    H, heads, L = CONFIG["hidden_size"], CONFIG["num_attention_heads"], CONFIG["num_hidden_layers"]
    eps = CONFIG["layer_norm_eps"]
    nodes, inits, n = [], [], [0]

    def const(a, name=None):
        name = name or f"c{len(inits)}"
        inits.append(numpy_helper.from_array(np.asarray(a), name))
        return name

    def op(kind, ins, **attrs):
        n[0] += 1
        out = f"{kind.lower()}_{n[0]}"
        nodes.append(helper.make_node(kind, ins, [out], **attrs))
        return out

    def linear(x, p):  # x @ W^T + b with W stored [in, out]
        return op("Add", [op("MatMul", [x, const(w[p + ".weight"].T.copy(), p + ".wt")]), const(w[p + ".bias"], p + ".b")])

    def ln(x, p):
        return op("LayerNormalization", [x, const(w[p + ".weight"], p + ".g"), const(w[p + ".bias"], p + ".beta")],
                  axis=-1, epsilon=eps)

    i64 = lambda v: const(np.array(v, np.int64))  # noqa: E731
    f32 = lambda v: const(np.array(v, np.float32))  # noqa: E731
    dims = [batch or "batch", seq or "seq"]
    end = i64([seq]) if seq else op("Gather", [op("Shape", ["input_ids"]), i64([1])], axis=0)  # [S]
    pos = op("Slice", [const(w["embeddings.position_embeddings.weight"], "pos_emb"), i64([0]), end, i64([0])])
    x = op("Gather", [const(w["embeddings.word_embeddings.weight"], "word_emb"), "input_ids"], axis=0)
    x = op("Add", [op("Add", [x, pos]), const(w["embeddings.token_type_embeddings.weight"][0], "type0")])
    x = ln(x, "embeddings.LayerNorm")
    maskf = op("Cast", ["attention_mask"], to=TensorProto.FLOAT)  # [B,S]
    bias = op("Mul", [op("Sub", [f32(1.0), op("Unsqueeze", [maskf, i64([1, 2])])]), f32(MASK_NEG)])  # [B,1,1,S]
    split = i64([0, 0, heads, H // heads])
    for l in range(L):
        p = f"encoder.layer.{l}."
        q, k, v = (op("Reshape", [linear(x, p + f"attention.self.{t}"), split]) for t in ("query", "key", "value"))
        q = op("Transpose", [q], perm=[0, 2, 1, 3])
        k = op("Transpose", [k], perm=[0, 2, 3, 1])
        v = op("Transpose", [v], perm=[0, 2, 1, 3])
        s = op("Add", [op("Mul", [op("MatMul", [q, k]), f32(1.0 / np.sqrt(H // heads))]), bias])
        a = op("MatMul", [op("Softmax", [s], axis=-1), v])
        a = op("Reshape", [op("Transpose", [a], perm=[0, 2, 1, 3]), i64([0, 0, H])])
        x = ln(op("Add", [linear(a, p + "attention.output.dense"), x]), p + "attention.output.LayerNorm")
        h = linear(x, p + "intermediate.dense")
        h = op("Mul", [op("Mul", [h, op("Add", [op("Erf", [op("Div", [h, f32(np.sqrt(2.0))])]), f32(1.0)])]), f32(0.5)])
        x = ln(op("Add", [linear(h, p + "output.dense"), x]), p + "output.LayerNorm")
    m3 = op("Unsqueeze", [maskf, i64([2])])  # [B,S,1]
    summed = op("ReduceSum", [op("Mul", [x, m3]), i64([1])], keepdims=0)
    count = op("Max", [op("ReduceSum", [m3, i64([1])], keepdims=0), f32(1e-9)])
    e = op("Div", [summed, count])
    norm = op("Max", [op("Sqrt", [op("ReduceSum", [op("Mul", [e, e]), i64([1])], keepdims=1)]), f32(1e-12)])
    nodes.append(helper.make_node("Div", [e, norm], ["embedding"]))
    g = helper.make_graph(nodes, GRAPH_NAME,
                          [helper.make_tensor_value_info("input_ids", TensorProto.INT64, dims),
                           helper.make_tensor_value_info("attention_mask", TensorProto.INT64, dims)],
                          [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, [dims[0], H])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="rlx bench/peers_model.py",
                             ir_version=8)


def write_model(d: str, seed: int = 0) -> dict[str, str]:
    """Writes the weights (npz), the HF directory and the ONNX file once; returns their paths."""
    paths = {"npz": os.path.join(d, "weights.npz"), "hf": os.path.join(d, "hf"), "onnx": os.path.join(d, "minilm.onnx")}
    if all(os.path.exists(p) for p in paths.values()):
        return paths
    os.makedirs(d, exist_ok=True)
    import onnx

    w = make_weights(seed)
    np.savez(paths["npz"], **w)
    write_hf_dir(paths["hf"], w)
    onnx.save(onnx_graph(w), paths["onnx"])
    return paths


def static_onnx(paths: dict, dst: str, batch: int, seq: int) -> str:
    """The ONNX graph with static shapes, from the same weights (for compilers that specialize)."""
    import onnx

    if not os.path.exists(dst):
        onnx.save(onnx_graph(dict(np.load(paths["npz"])), batch, seq), dst)
    return dst


# ---- the encoder, written once against an adapter --------------------------------------------------

def prepare(w: dict[str, np.ndarray], to_array) -> dict:
    """Weights in the layout encoder() reads: matrices transposed to [in, out], arrays via to_array."""
    out = {}
    for k, a in w.items():
        matrix = k.endswith("dense.weight") or (".attention.self." in k and k.endswith(".weight"))
        out[k] = to_array(np.ascontiguousarray(a.T) if matrix else a)
    return out


def encoder(F, W, ids, mask):
    """MiniLM encoder + mean pooling + L2 norm. F: adapter (see bench/peers_runners.py); W: prepare()d."""
    H, heads, L = CONFIG["hidden_size"], CONFIG["num_attention_heads"], CONFIG["num_hidden_layers"]
    D, eps = H // heads, CONFIG["layer_norm_eps"]
    B, S = F.shape(ids)
    x = F.take(W["embeddings.word_embeddings.weight"], ids) + W["embeddings.position_embeddings.weight"][:S] + \
        W["embeddings.token_type_embeddings.weight"][0]
    x = F.layer_norm(x, W["embeddings.LayerNorm.weight"], W["embeddings.LayerNorm.bias"], eps)
    maskf = F.to_float(mask)
    bias = F.reshape((1.0 - maskf) * MASK_NEG, (B, 1, 1, S))

    def lin(t, p):
        return t @ W[p + ".weight"] + W[p + ".bias"]

    def heads_of(t):
        return F.transpose(F.reshape(t, (B, S, heads, D)), (0, 2, 1, 3))

    for l in range(L):
        p = f"encoder.layer.{l}."
        q, k, v = (heads_of(lin(x, p + f"attention.self.{t}")) for t in ("query", "key", "value"))
        a = F.reshape(F.transpose(F.attention(q, k, v, bias, 1.0 / np.sqrt(D)), (0, 2, 1, 3)), (B, S, H))
        x = F.layer_norm(lin(a, p + "attention.output.dense") + x, W[p + "attention.output.LayerNorm.weight"],
                         W[p + "attention.output.LayerNorm.bias"], eps)
        h = F.gelu(lin(x, p + "intermediate.dense"))
        x = F.layer_norm(lin(h, p + "output.dense") + x, W[p + "output.LayerNorm.weight"],
                         W[p + "output.LayerNorm.bias"], eps)
    m3 = F.reshape(maskf, (B, S, 1))
    e = F.sum(x * m3, 1) / F.maximum(F.sum(m3, 1), 1e-9)
    return e / F.maximum(F.sqrt(F.sum(e * e, 1, keepdims=True)), 1e-12)


class NumpyOps:
    """The adapter for numpy: the reference every system's embeddings are checked against."""
    shape = staticmethod(lambda t: t.shape)
    take = staticmethod(lambda tab, ids: tab[ids])
    to_float = staticmethod(lambda m: m.astype(np.float32))
    reshape = staticmethod(np.reshape)
    transpose = staticmethod(np.transpose)
    sum = staticmethod(lambda x, ax, keepdims=False: x.sum(ax, keepdims=keepdims))
    maximum = staticmethod(np.maximum)
    sqrt = staticmethod(np.sqrt)

    @staticmethod
    def layer_norm(x, g, b, eps):
        mu = x.mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps) * g + b

    @staticmethod
    def attention(q, k, v, bias, scale):
        s = q @ np.swapaxes(k, -1, -2) * scale + bias
        p = np.exp(s - s.max(-1, keepdims=True))
        return (p / p.sum(-1, keepdims=True)) @ v

    @staticmethod
    def gelu(x):
        try:
            from scipy.special import erf
        except ImportError:  # slower, same values
            import math
            erf = np.vectorize(math.erf, otypes=[np.float64])
        return (0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))).astype(np.float32)


def read_safetensors(path: str) -> dict[str, np.ndarray]:
    """The f32 tensors of a safetensors file (other dtypes, e.g. BERT's i64 position_ids, are left out)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in header.items():
        if k != "__metadata__" and v["dtype"] == "F32":
            a, b = v["data_offsets"]
            out[k] = np.frombuffer(data[a:b], np.float32).reshape(v["shape"]).copy()
    return out


def onnx_from_hf(model_dir: str, dst: str) -> str:
    """The encoder graph of onnx_graph() on a real MiniLM-L6 checkpoint's weights (no PyTorch needed)."""
    import onnx

    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    for k in ("hidden_size", "intermediate_size", "num_attention_heads", "num_hidden_layers", "layer_norm_eps"):
        if cfg.get(k) != CONFIG[k]:
            raise ValueError(f"[peers_model] {model_dir}: {k} = {cfg.get(k)}, the graph is built for {CONFIG[k]}")
    w = {k[5:] if k.startswith("bert.") else k: v for k, v in
         read_safetensors(os.path.join(model_dir, "model.safetensors")).items()}
    onnx.save(onnx_graph(w), dst)
    return dst
