#!/usr/bin/env python3
"""A small int8 MNIST MLP (784-128-10) from the MNIST files alone, deterministic (numpy, seed 0).

Trains a float MLP on the first 8,000 images of MNIST's 10k test set (the only split in
../shared/data/mnist; the last 2,000 stay held out), writes it as ONNX (MatMul + Add + Relu,
input x [N, 784] in [0, 1]), then runs `rlx quantize --calib` on real MNIST batches with
per-channel weights, giving a QDQ model. Also writes images/labels as .npy for the checks.

  python3 scripts/make_mnist_int8.py --out DIR [--rlx build/bin/rlx] [--epochs 4]
writes DIR/mnist_mlp_f32.onnx, DIR/mnist_mlp_int8.onnx, DIR/calib.npz, DIR/images.npy, DIR/labels.npy.
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


def load_mnist(d):
    with gzip.open(os.path.join(d, "t10k-images-idx3-ubyte.gz")) as f:
        img = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)
    with gzip.open(os.path.join(d, "t10k-labels-idx1-ubyte.gz")) as f:
        lab = np.frombuffer(f.read(), np.uint8, offset=8)
    return img, lab


def train(x, y, hidden, epochs, seed=0):
    rng = np.random.default_rng(seed)
    w1 = (rng.standard_normal((784, hidden)) * np.sqrt(2 / 784)).astype(np.float32)
    b1 = np.zeros(hidden, np.float32)
    w2 = (rng.standard_normal((hidden, 10)) * np.sqrt(2 / hidden)).astype(np.float32)
    b2 = np.zeros(10, np.float32)
    lr, bs = 0.1, 64
    for _ in range(epochs):
        order = rng.permutation(len(x))
        for i in range(0, len(x), bs):
            idx = order[i:i + bs]
            xb, yb = x[idx], y[idx]
            h = np.maximum(xb @ w1 + b1, 0)
            z = h @ w2 + b2
            p = np.exp(z - z.max(1, keepdims=True))
            p /= p.sum(1, keepdims=True)
            p[np.arange(len(idx)), yb] -= 1
            g = p / len(idx)
            gw2, gb2 = h.T @ g, g.sum(0)
            gh = (g @ w2.T) * (h > 0)
            gw1, gb1 = xb.T @ gh, gh.sum(0)
            w1 -= lr * gw1; b1 -= lr * gb1; w2 -= lr * gw2; b2 -= lr * gb2
    return w1, b1, w2, b2


def to_onnx(w1, b1, w2, b2, path):
    inits = [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"))]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h0"], name="fc1"),
             helper.make_node("Add", ["h0", "b1"], ["h1"], name="fc1_bias"),
             helper.make_node("Relu", ["h1"], ["h"], name="relu1"),
             helper.make_node("MatMul", ["h", "w2"], ["z0"], name="fc2"),
             helper.make_node("Add", ["z0", "b2"], ["logits"], name="fc2_bias")]
    g = helper.make_graph(nodes, "mnist_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 784])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--rlx", default=os.path.join(HERE, "..", "build", "bin", "rlx"))
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=128)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    img, lab = load_mnist(mnist_dir())
    x = img.astype(np.float32) / 255.0
    w = train(x[:8000], lab[:8000].astype(np.int64), a.hidden, a.epochs)
    f32 = os.path.join(a.out, "mnist_mlp_f32.onnx")
    to_onnx(*w, f32)
    calib = os.path.join(a.out, "calib.npz")
    np.savez(calib, x=x[:2048].reshape(16, 128, 784))  # 16 batches of 128 training images
    np.save(os.path.join(a.out, "images.npy"), x)
    np.save(os.path.join(a.out, "labels.npy"), lab.astype(np.int64))
    q = os.path.join(a.out, "mnist_mlp_int8.onnx")
    r = subprocess.run([a.rlx, "quantize", f32, "--calib", calib, "--per-channel", "--bind", "N=128", "--out", q, "--quiet"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("rlx quantize failed:\n" + r.stdout + r.stderr)
    print(r.stdout, end="")


if __name__ == "__main__":
    main()
