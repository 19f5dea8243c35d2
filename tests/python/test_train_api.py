"""rlx.train from Python: value_and_grad against numpy, and the MNIST loop in a few lines
(a compiled SGD step on the MNIST 8k/2k split) reaching a stated accuracy."""
import gzip
import os

import numpy as np
import pytest

import rlx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.environ.get("RLX_MNIST_DIR") or os.path.join(ROOT, "..", "shared", "data", "mnist")
# ../shared beside the checkout (absent in a clone elsewhere: skipped), or RLX_MNIST_DIR, which must exist.
NO_DATA = not os.path.isdir(DATA) and not os.environ.get("RLX_MNIST_DIR")


def load_mnist_split():
    with gzip.open(os.path.join(DATA, "t10k-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784).astype(np.float32) / 255.0
    with gzip.open(os.path.join(DATA, "t10k-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8).astype(np.int64)
    return (x[:8000], y[:8000]), (x[8000:], y[8000:])


def mlp_graph(batch):
    g = rlx.Graph("mlp")
    w0, b0 = g.input("w0", "f32", [784, 128]), g.input("b0", "f32", [128])
    w1, b1 = g.input("w1", "f32", [128, 10]), g.input("b1", "f32", [10])
    x, y = g.input("x", "f32", [batch, 784]), g.input("labels", "i64", [batch])
    h = g.op("relu", [rlx.train.dense(g, x, w0, b0)])
    loss, correct = rlx.train.cross_entropy(g, rlx.train.dense(g, h, w1, b1), y)
    g.output(loss, "loss")
    g.output(correct, "correct")
    return g


def test_value_and_grad_matches_numpy():
    rng = np.random.default_rng(0)
    g = rlx.Graph("lsq")
    w = g.input("w", "f32", [3, 2])
    x = g.input("x", "f32", [4, 3])
    t = g.input("t", "f32", [4, 2])
    d = g.op("sub", [rlx.train.dense(g, x, w), t])
    g.output(g.op("reduce_sum", [g.op("mul", [d, d])], axes=[0, 1]))
    vg = rlx.train.value_and_grad(g, [0])
    W, X, T = (rng.standard_normal(s).astype(np.float32) for s in ([3, 2], [4, 3], [4, 2]))
    loss, gw = rlx.compile(vg).run([W, X, T])
    assert np.isclose(loss, ((X @ W - T) ** 2).sum(), rtol=1e-5)
    np.testing.assert_allclose(gw, 2 * X.T @ (X @ W - T), rtol=1e-4, atol=1e-5)


@pytest.mark.skipif(NO_DATA, reason="no MNIST data in ../shared/data/mnist")
def test_mnist_training_loop_reaches_accuracy():
    (xtr, ytr), (xte, yte) = load_mnist_split()
    B = 64
    g = mlp_graph(B)
    tr = rlx.train.Trainer(g, rlx.train.init_params(g, 4, seed=0), optimizer="sgd", lr=0.1, momentum=0.9)
    rng = np.random.default_rng(1)
    losses = []
    for epoch in range(3):  # 3 x 125 = 375 steps
        order = rng.permutation(len(xtr))
        for s in range(len(xtr) // B):
            idx = order[s * B:(s + 1) * B]
            loss, _ = tr.step(xtr[idx], ytr[idx])
            losses.append(float(loss))
    assert tr.step_count == 375
    assert np.mean(losses[-20:]) < 0.5 * np.mean(losses[:20])
    # Evaluate with numpy on the trained parameters (independent of RLX's forward pass).
    w0, b0, w1, b1 = tr.params
    pred = (np.maximum(xte @ w0 + b0, 0) @ w1 + b1).argmax(1)
    acc = (pred == yte).mean()
    print(f"MNIST 2k split accuracy after 375 steps (python rlx.train): {acc:.4f}")
    assert acc >= 0.92


def test_trainer_errors_and_builtin_mlp():
    g, params = rlx.train.mlp([784, 16, 10], 8)
    assert [p.shape for p in params] == [(784, 16), (16,), (16, 10), (10,)]
    tr = rlx.train.Trainer(g, params, optimizer="adam", lr=1e-3)
    loss, correct = tr.step(np.zeros((8, 784), np.float32), np.zeros(8, np.int64))
    assert np.isfinite(loss) and 0 <= correct <= 8
    with pytest.raises(rlx.Error, match="expects 2 data inputs"):
        tr.step(np.zeros((8, 784), np.float32))
    with pytest.raises(rlx.Error, match="unknown optimizer"):
        rlx.train.Trainer(g, params, optimizer="lion")


def test_amp_bf16_trainer_reports_its_choices():
    g, params = rlx.train.mlp([784, 16, 10], 8)
    tr = rlx.train.Trainer(g, params, lr=0.1, amp="bf16")
    rep = tr.amp_report()
    assert "dot_general bf16" in rep and "reduce_sum f32" in rep
    rng = np.random.default_rng(0)
    x, y = rng.random((8, 784), dtype=np.float32), rng.integers(0, 10, 8)
    first = float(tr.step(x, y)[0])
    for _ in range(30):
        last = float(tr.step(x, y)[0])
    assert last < 0.5 * first
    assert all(p.dtype == np.float32 for p in tr.params)  # f32 master weights
    with pytest.raises(rlx.Error, match="amp must be"):
        rlx.train.Trainer(g, params, amp="fp8")
