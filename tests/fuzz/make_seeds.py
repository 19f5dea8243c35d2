#!/usr/bin/env python3
"""Writes the small seed corpora the fuzz targets start from (tests/fuzz/corpus/<format>/).

Seeds are tiny valid files of each format, so the fuzzer begins inside the parsers rather than at the
first magic-number check: ONNX models built with onnx.helper, their .rten conversions (rten-convert),
safetensors files and a GGUF file (the pip `gguf` writer). Re-run after changing it; commit the output.
Usage: make_seeds.py [OUT_DIR]   (default: tests/fuzz/corpus next to this script)
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np


def onnx_models():
    import onnx
    from onnx import TensorProto as T, helper as h, numpy_helper as nh

    rng = np.random.default_rng(0)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)
    models = {}

    def model(name, nodes, ins, outs, inits=(), opset=17):
        g = h.make_graph(nodes, name, ins, outs, list(inits))
        m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
        m.ir_version = 8
        onnx.checker.check_model(m)
        models[name] = m

    vi = h.make_tensor_value_info
    model("mlp", [h.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1), h.make_node("Relu", ["h"], ["r"]),
                  h.make_node("MatMul", ["r", "w2"], ["m"]), h.make_node("Softmax", ["m"], ["y"], axis=-1)],
          [vi("x", T.FLOAT, ["batch", 4])], [vi("y", T.FLOAT, ["batch", 3])],
          [nh.from_array(f32(8, 4), "w1"), nh.from_array(f32(8), "b1"), nh.from_array(f32(8, 3), "w2")])
    model("conv", [h.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
                   h.make_node("MaxPool", ["c"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
                   h.make_node("Flatten", ["p"], ["y"], axis=1)],
          [vi("x", T.FLOAT, [1, 2, 8, 8])], [vi("y", T.FLOAT, [1, 16])],
          [nh.from_array(f32(4, 2, 3, 3), "w"), nh.from_array(f32(4), "b")])
    model("shape_ops", [h.make_node("Shape", ["x"], ["s"]), h.make_node("Gather", ["s", "i"], ["g"], axis=0),
                        h.make_node("Unsqueeze", ["g", "a"], ["u"]), h.make_node("Concat", ["u", "k"], ["t"], axis=0),
                        h.make_node("Reshape", ["x", "t"], ["y"])],
          [vi("x", T.FLOAT, [2, 3, 4])], [vi("y", T.FLOAT, [2, 12])],
          [nh.from_array(np.array(0, np.int64), "i"), nh.from_array(np.array([0], np.int64), "a"),
           nh.from_array(np.array([-1], np.int64), "k")])
    model("where", [h.make_node("Less", ["x", "z"], ["c"]), h.make_node("Neg", ["x"], ["n"]),
                    h.make_node("Where", ["c", "n", "x"], ["y"]),
                    h.make_node("ReduceMean", ["y"], ["m"], axes=[1], keepdims=1)],
          [vi("x", T.FLOAT, [3, 5])], [vi("m", T.FLOAT, [3, 1])], [nh.from_array(np.zeros((), np.float32), "z")])
    return models


def main() -> int:
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
    for d in ("onnx", "rten", "safetensors", "gguf"):
        os.makedirs(os.path.join(out, d), exist_ok=True)
    import onnx

    for name, m in onnx_models().items():
        p = os.path.join(out, "onnx", name + ".onnx")
        onnx.save(m, p)
        for v1 in (False, True):
            q = os.path.join(out, "rten", name + ("_v1" if v1 else "") + ".rten")
            subprocess.run(["rten-convert", *(["--v1"] if v1 else []), p, q], check=True, capture_output=True)

    # safetensors: u64 header length, JSON header, data (written by hand: the format is that small).
    def safetensors(path, tensors, meta=None):
        header, data = {}, b""
        for k, a in tensors.items():
            dt = {np.float32: "F32", np.int64: "I64", np.float16: "F16"}[a.dtype.type]
            header[k] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [len(data), len(data) + a.nbytes]}
            data += a.tobytes()
        if meta:
            header["__metadata__"] = meta
        hb = json.dumps(header).encode()
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(hb)) + hb + data)

    safetensors(os.path.join(out, "safetensors", "two.safetensors"),
                {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "ids": np.array([1, 2], np.int64)}, {"format": "pt"})
    safetensors(os.path.join(out, "safetensors", "half.safetensors"), {"h": np.ones((4,), np.float16)})

    import gguf

    w = gguf.GGUFWriter(os.path.join(out, "gguf", "tiny.gguf"), "qwen3")
    w.add_block_count(1)
    w.add_context_length(16)
    w.add_string("general.name", "seed")
    w.add_tensor("token_embd.weight", np.arange(32, dtype=np.float32).reshape(4, 8))
    w.add_tensor("blk.0.q8", gguf.quants.quantize(np.linspace(-1, 1, 64, dtype=np.float32).reshape(2, 32),
                                                  gguf.GGMLQuantizationType.Q8_0), raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    for d in sorted(os.listdir(out)):
        print(d, sorted(os.listdir(os.path.join(out, d))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
