#!/usr/bin/env python3
"""Trains a float MNIST MLP (784-H-10, ReLU) with numpy, writes it as ONNX, and quantizes it to a
QDQ int8 model with `rlx quantize --calib` on real MNIST batches.

The data is the 10k MNIST test set in IDX form (../shared/data/mnist beside the checkout, or
RLX_MNIST_DIR): images 0..7999 train, 8000..9999 are held out, as src/data/idx.cpp splits them.
Pixels are scaled to [0, 1] (f32 / 255). Training is seeded and runs in a few seconds.

  python3 scripts/mnist_int8_mlp.py --out DIR [--hidden 64] [--epochs 8] [--rlx build/bin/rlx]
writes DIR/mlp_f32.onnx, DIR/calib.npz and DIR/mlp_int8.onnx (per-channel i8 weights, u8 activations).
"""
import argparse
import gzip
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def mnist_dir():
    return os.environ.get("RLX_MNIST_DIR") or os.path.join(HERE, "..", "..", "shared", "data", "mnist")


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_mnist():
    d = mnist_dir()
    x = read_idx(os.path.join(d, "t10k-images-idx3-ubyte.gz")).reshape(-1, 784).astype(np.float32) / np.float32(255)
    y = read_idx(os.path.join(d, "t10k-labels-idx1-ubyte.gz")).astype(np.int64)
    return x, y


def train(x, y, hidden, epochs=8, batch=64, lr=0.1, seed=0):
    rng = np.random.default_rng(seed)
    w1 = (rng.standard_normal((784, hidden)) * np.sqrt(2.0 / 784)).astype(np.float32)
    b1 = np.zeros(hidden, np.float32)
    w2 = (rng.standard_normal((hidden, 10)) * np.sqrt(2.0 / hidden)).astype(np.float32)
    b2 = np.zeros(10, np.float32)
    params = [w1, b1, w2, b2]
    vel = [np.zeros_like(p) for p in params]
    n = x.shape[0]
    for ep in range(epochs):
        order = rng.permutation(n)
        for s in range(0, n - batch + 1, batch):
            idx = order[s:s + batch]
            xb, yb = x[idx], y[idx]
            h = np.maximum(xb @ w1 + b1, 0)
            z = h @ w2 + b2
            z = z - z.max(axis=1, keepdims=True)
            p = np.exp(z)
            p /= p.sum(axis=1, keepdims=True)
            p[np.arange(batch), yb] -= 1
            gz = p / batch
            gw2 = h.T @ gz
            gb2 = gz.sum(0)
            gh = (gz @ w2.T) * (h > 0)
            gw1 = xb.T @ gh
            gb1 = gh.sum(0)
            step_lr = lr * (0.5 if ep >= epochs // 2 else 1.0)
            for i, g in enumerate([gw1, gb1, gw2, gb2]):
                vel[i] = 0.9 * vel[i] + g
                params[i] -= np.float32(step_lr) * vel[i].astype(np.float32)
    return params


def to_onnx(params, path):
    w1, b1, w2, b2 = params
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h1"], name="fc1"),
        helper.make_node("Add", ["h1", "b1"], ["h1b"], name="fc1_bias"),
        helper.make_node("Relu", ["h1b"], ["a1"], name="relu1"),
        helper.make_node("MatMul", ["a1", "w2"], ["h2"], name="fc2"),
        helper.make_node("Add", ["h2", "b2"], ["logits"], name="fc2_bias"),
    ]
    inits = [numpy_helper.from_array(a, n) for a, n in zip(params, ["w1", "b1", "w2", "b2"])]
    g = helper.make_graph(nodes, "mnist_mlp",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 784])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--rlx", default=os.path.join(HERE, "..", "build", "bin", "rlx"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    x, y = load_mnist()
    params = train(x[:8000], y[:8000], a.hidden, epochs=a.epochs)
    w1, b1, w2, b2 = params
    pred = (np.maximum(x[8000:] @ w1 + b1, 0) @ w2 + b2).argmax(1)
    print(f"float MLP 784-{a.hidden}-10: held-out accuracy {np.mean(pred == y[8000:]):.4f} (2000 images)")
    f32 = os.path.join(a.out, "mlp_f32.onnx")
    to_onnx(params, f32)
    calib = os.path.join(a.out, "calib.npz")
    np.savez(calib, x=x[:2048].reshape(32, 64, 784))  # 32 batches of 64 training images
    q = os.path.join(a.out, "mlp_int8.onnx")
    subprocess.run([a.rlx, "quantize", f32, "--calib", calib, "--per-channel", "--bind", "batch=64", "--out", q], check=True)


if __name__ == "__main__":
    sys.exit(main())
