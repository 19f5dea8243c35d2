#!/usr/bin/env python3
"""Writes a BERT (e.g. all-MiniLM-L6-v2) as the ONNX graph torch.onnx.export (TorchScript exporter,
opset 17, do_constant_folding=True, dynamic batch/seq axes) gives for transformers' BertModel --
without PyTorch: the graph is built node by node with onnx.helper from the folder's safetensors.

This MIMICS the exporter; it is not its output. The node pattern follows the exporter's symbolic
functions for the ops BertModel traces to:
  embeddings   Shape/Gather of input_ids for batch and seq, Slice of the position_ids and
               token_type_ids buffers, Expand, three Gathers, two Adds, LayerNormalization;
  mask         attention_mask[:, None, None, :] (two Unsqueezes), Expand to [B,1,S,S], Cast,
               Sub(1, m), then either Cast(bool) + Where(m, finfo.min, .) (--attention sdpa,
               transformers' _prepare_4d_attention_mask_for_sdpa) or Mul(finfo.min) (--attention eager);
  projections  MatMul(x, W^T) (the transposed weight folded into an initializer), Add(bias, .);
  head split   Reshape to x.size()[:-1] + (NH, D) (Shape/Gather/Unsqueeze/Concat), Transpose(0,2,1,3);
               the key's extra transpose(-1,-2) fused into one Transpose(0,2,3,1) (the exporter's
               consecutive-transpose peephole; --unfused-key-transpose keeps two);
  attention    sdpa: the aten::scaled_dot_product_attention symbolic: scale = 1/Sqrt(Cast(Shape(q)[-1])),
               Mul(q, Sqrt(scale)), Mul(k^T, Sqrt(scale)), MatMul, Add(mask), Softmax(-1), MatMul(., v);
               eager: MatMul(q, k^T), Div(sqrt(D)), Add(mask), Softmax(-1), MatMul(., v);
  head merge   Transpose(0,2,1,3), Reshape to (B, S, H) through Shape/Gather/Unsqueeze/Concat;
  GELU         the aten::gelu symbolic (approximate='none'): Div(x, sqrt 2), Erf, Add 1, Mul x, Mul 0.5;
  residual     Add(dense + bias, input), LayerNormalization(axis -1);
  pooling      --pooling mean (the bench's Embedder: sentence-transformers' mean pooling and
               F.normalize): Cast, Unsqueeze(-1), Mul, ReduceSum, Clip(min 1e-9), Div, ReduceL2,
               Clip(min 1e-12), Expand, Div; --pooling none: output last_hidden_state.
Known differences from a real export: node and value names, the exporter's own Constant nodes
(initializers here), no BertPooler output, and the exact Shape/Gather chains (the importer folds
them all to constants once the input shapes are fixed).

Usage: python3 bench/bert_onnx_export.py MODEL_DIR OUT.onnx [--attention sdpa|eager] [--pooling mean|none]
"""
from __future__ import annotations

import argparse
import json
import os
import struct
import sys

import numpy as np

F32_MIN = float(np.finfo(np.float32).min)


def read_safetensors(path: str) -> dict[str, np.ndarray]:
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
        out = {}
        for k, v in header.items():
            if k == "__metadata__":
                continue
            dt = {"F32": np.float32, "I64": np.int64}[v["dtype"]]
            a, b = v["data_offsets"]
            f.seek(base + a)
            out[k.removeprefix("bert.")] = np.frombuffer(f.read(b - a), dt).reshape(v["shape"])
        return out


def export_bert(model_dir: str, path: str, attention: str = "sdpa", pooling: str = "mean",
                fused_key_transpose: bool = True) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    W = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    H, NH, L, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"], cfg["layer_norm_eps"]
    D = H // NH
    inits, nodes, k = [], [], [0]

    def const(a, name=None):
        k[0] += 1
        name = name or f"onnx::c{k[0]}"
        inits.append(numpy_helper.from_array(np.array(a, order="C"), name))  # (ascontiguousarray makes 0-d 1-d)
        return name

    def op(t, ins, name=None, **attrs):
        k[0] += 1
        out = f"/{name or t}_{k[0]}_output_0"
        nodes.append(helper.make_node(t, ins, [out], name=f"/{name or t}_{k[0]}", **attrs))
        return out

    i64 = lambda *v: const(np.array(v, np.int64))  # noqa: E731
    f32 = lambda v: const(np.array(v, np.float32))  # noqa: E731
    dim = lambda x, i: op("Gather", [op("Shape", [x]), const(np.array(i, np.int64))], axis=0)  # noqa: E731
    unsq = lambda x: op("Unsqueeze", [x, i64(0)])  # noqa: E731

    # embeddings
    b, s = dim("input_ids", 0), dim("input_ids", 1)
    pos_buf = np.arange(cfg.get("max_position_embeddings", 512), dtype=np.int64)[None]
    pos = op("Slice", [const(pos_buf), i64(0), unsq(s), i64(1), i64(1)])
    tt = op("Slice", [const(np.zeros_like(pos_buf)), i64(0), unsq(s), i64(1), i64(1)])
    tt = op("Expand", [tt, op("Concat", [unsq(b), unsq(s)], axis=0)])
    e = op("Add", [op("Gather", [const(W["embeddings.word_embeddings.weight"]), "input_ids"]),
                   op("Gather", [const(W["embeddings.token_type_embeddings.weight"]), tt])])
    e = op("Add", [e, op("Gather", [const(W["embeddings.position_embeddings.weight"]), pos])])

    def ln(x, pre):
        return op("LayerNormalization", [x, const(W[pre + ".weight"]), const(W[pre + ".bias"])], axis=-1, epsilon=eps)

    x = ln(e, "embeddings.LayerNorm")

    # the additive mask [B, 1, S, S]
    mb, ms = dim("attention_mask", 0), dim("attention_mask", 1)
    m = op("Unsqueeze", [op("Unsqueeze", ["attention_mask", i64(1)]), i64(2)])
    m = op("Expand", [m, op("Concat", [unsq(mb), i64(1), unsq(s), unsq(ms)], axis=0)])
    inv = op("Sub", [f32(1.0), op("Cast", [m], to=TensorProto.FLOAT)])
    if attention == "sdpa":
        mask = op("Where", [op("Cast", [inv], to=TensorProto.BOOL), f32(F32_MIN), inv])
    else:
        mask = op("Mul", [inv, f32(F32_MIN)])

    def linear(v, pre):
        return op("Add", [const(W[pre + ".bias"]), op("MatMul", [v, const(W[pre + ".weight"].T.copy())])])

    def split_heads(v, perm=(0, 2, 1, 3)):
        shape = op("Concat", [unsq(dim(v, 0)), unsq(dim(v, 1)), i64(NH), i64(D)], axis=0)
        return op("Transpose", [op("Reshape", [v, shape])], perm=list(perm))

    for i in range(L):
        p = f"encoder.layer.{i}."
        q = split_heads(linear(x, p + "attention.self.query"))
        if fused_key_transpose:
            kt = split_heads(linear(x, p + "attention.self.key"), (0, 2, 3, 1))
        else:
            kt = op("Transpose", [split_heads(linear(x, p + "attention.self.key"))], perm=[0, 1, 3, 2])
        v = split_heads(linear(x, p + "attention.self.value"))
        if attention == "sdpa":
            qlast = op("Slice", [op("Shape", [q]), i64(-1), i64(np.iinfo(np.int64).max)])
            scale = op("Div", [f32([1.0]), op("Sqrt", [op("Cast", [qlast], to=TensorProto.FLOAT)])])
            scale = op("Cast", [scale], to=TensorProto.FLOAT)
            qs = op("Mul", [q, op("Sqrt", [scale])])
            ks = op("Mul", [kt, op("Sqrt", [scale])])
            sc = op("Add", [op("MatMul", [qs, ks]), mask])
        else:
            sc = op("Add", [op("Div", [op("MatMul", [q, kt]), f32(np.sqrt(D))]), mask])
        ctx = op("MatMul", [op("Softmax", [sc], axis=-1), v])
        ctx = op("Transpose", [ctx], perm=[0, 2, 1, 3])
        ctx = op("Reshape", [ctx, op("Concat", [unsq(dim(x, 0)), unsq(dim(x, 1)), i64(H)], axis=0)])
        x = ln(op("Add", [linear(ctx, p + "attention.output.dense"), x]), p + "attention.output.LayerNorm")
        h = linear(x, p + "intermediate.dense")
        g = op("Add", [op("Erf", [op("Div", [h, f32(1.4142135623730951)])]), f32(1.0)])
        h = op("Mul", [op("Mul", [h, g]), f32(0.5)])
        x = ln(op("Add", [linear(h, p + "output.dense"), x]), p + "output.LayerNorm")

    if pooling == "mean":
        mf = op("Unsqueeze", [op("Cast", ["attention_mask"], to=TensorProto.FLOAT), i64(-1)])
        summed = op("ReduceSum", [op("Mul", [x, mf]), i64(1)], keepdims=0)
        cnt = op("Clip", [op("ReduceSum", [mf, i64(1)], keepdims=0), f32(1e-9), ""])
        mean = op("Div", [summed, cnt])
        nrm = op("Clip", [op("ReduceL2", [mean], axes=[1], keepdims=1), f32(1e-12), ""])
        nodes.append(helper.make_node("Div", [mean, op("Expand", [nrm, op("Shape", [mean])])], ["embedding"],
                                      name="/Div_out"))
        out = helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", H])
    else:
        nodes[-1].output[0] = "last_hidden_state"  # the last LayerNormalization
        out = helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", H])
    ins = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"]) for n in ("input_ids", "attention_mask")]
    g = helper.make_graph(nodes, "main_graph", ins, [out], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="bert_onnx_export.py")
    onnx.checker.check_model(model)
    onnx.save(model, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model_dir")
    ap.add_argument("out")
    ap.add_argument("--attention", choices=["sdpa", "eager"], default="sdpa")
    ap.add_argument("--pooling", choices=["mean", "none"], default="mean")
    ap.add_argument("--unfused-key-transpose", action="store_true")
    a = ap.parse_args()
    export_bert(a.model_dir, a.out, a.attention, a.pooling, not a.unfused_key_transpose)
    print(f"[bert_onnx_export] wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
