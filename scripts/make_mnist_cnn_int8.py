#!/usr/bin/env python3
"""A small int8 MNIST CNN from the MNIST files alone, deterministic (numpy, seed 0).

Network (NCHW, input x [N, 1, 28, 28] in [0, 1]):
  Conv 3x3 1->8 (no pad) + ReLU -> MaxPool 2x2 -> Flatten -> Gemm 1352->10.
Trains it in float on the first 8,000 images of MNIST's 10k test set (the only split in
../shared/data/mnist; the last 2,000 stay held out), writes it as ONNX, then post-training
quantizes it to a QDQ ONNX model: activations int8 per tensor (min/max over 2,048 calibration
images, asymmetric), conv/FC weights int8 symmetric per output channel, biases int32 at
scale s_x * s_w. MaxPool keeps its input's scale and zero point. Accuracy of both models is
measured on the 2,000 held-out images with onnxruntime and printed.

  python3 scripts/make_mnist_cnn_int8.py --out DIR [--epochs 3]
writes DIR/mnist_cnn_f32.onnx, DIR/mnist_cnn_int8.onnx, DIR/images.npy, DIR/labels.npy and
DIR/int8_reference_pred.npy: the predictions of an integer-only numpy run of the QDQ model (i32
accumulators, per-channel fixed-point requantize rounded half to even as src/quant/fixed_point.h),
an oracle for integer convolution kernels.
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from numpy.lib.stride_tricks import sliding_window_view

from make_mnist_int8 import load_mnist, mnist_dir  # the t10k IDX files, one loader

HERE = os.path.dirname(os.path.abspath(__file__))
C = 8  # conv output channels


def forward(x, wc, bc, wf, bf):
    """x [B,28,28] -> (logits, cache). Conv as im2col: cols [B,676,9] @ wc [9,C]."""
    cols = sliding_window_view(x, (3, 3), axis=(1, 2)).reshape(len(x), 676, 9)
    pre = cols @ wc + bc                              # [B,676,C]
    a = np.maximum(pre, 0).reshape(len(x), 13, 2, 13, 2, C)
    p = a.max(axis=(2, 4))                            # [B,13,13,C]
    flat = p.transpose(0, 3, 1, 2).reshape(len(x), -1)  # NCHW flatten order
    return flat @ wf + bf, (cols, pre, a, p, flat)


def train(x, y, epochs, seed=0):
    rng = np.random.default_rng(seed)
    wc = (rng.standard_normal((9, C)) * np.sqrt(2 / 9)).astype(np.float32)
    bc = np.zeros(C, np.float32)
    wf = (rng.standard_normal((C * 169, 10)) * np.sqrt(2 / (C * 169))).astype(np.float32)
    bf = np.zeros(10, np.float32)
    lr, bs = 0.1, 32
    for _ in range(epochs):
        order = rng.permutation(len(x))
        for i in range(0, len(x), bs):
            idx = order[i:i + bs]
            xb, yb = x[idx], y[idx]
            z, (cols, pre, a, p, flat) = forward(xb, wc, bc, wf, bf)
            pr = np.exp(z - z.max(1, keepdims=True))
            pr /= pr.sum(1, keepdims=True)
            pr[np.arange(len(idx)), yb] -= 1
            g = pr / len(idx)
            gwf, gbf = flat.T @ g, g.sum(0)
            gp = (g @ wf.T).reshape(len(idx), C, 13, 13).transpose(0, 2, 3, 1)
            mask = a == p[:, :, None, :, None, :]
            ga = mask * gp[:, :, None, :, None, :]
            gpre = ga.reshape(len(idx), 676, C) * (pre > 0)
            gwc = np.einsum("bpk,bpc->kc", cols, gpre)
            gbc = gpre.sum((0, 1))
            wc -= lr * gwc; bc -= lr * gbc; wf -= lr * gwf; bf -= lr * gbf
    return wc, bc, wf, bf


def qparams(lo, hi):
    """Asymmetric int8 per-tensor scale/zero point covering [min(lo,0), max(hi,0)]."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    s = (hi - lo) / 255.0 or 1.0
    zp = int(np.clip(round(-128 - lo / s), -128, 127))
    return np.float32(s), np.int8(zp)


def build(wc, bc, wf, bf, qp=None):
    """The float model, or with qp (dict of activation qparams) the QDQ model."""
    inits, nodes = [], []

    def init(a, n):
        inits.append(numpy_helper.from_array(a, n)); return n

    wconv = wc.T.reshape(C, 1, 3, 3).astype(np.float32)
    wgemm = wf.T.astype(np.float32).copy()  # Gemm transB=1: [10, 1352]

    def act(t):  # Q/DQ pair on activation t
        if qp is None:
            return t
        s, z = qp[t]
        init(np.array(s, np.float32), t + "_s"); init(np.array(z, np.int8), t + "_z")
        nodes.append(helper.make_node("QuantizeLinear", [t, t + "_s", t + "_z"], [t + "_q"]))
        nodes.append(helper.make_node("DequantizeLinear", [t + "_q", t + "_s", t + "_z"], [t + "_dq"]))
        return t + "_dq"

    def weight(w, b, n, in_scale):
        if qp is None:
            return init(w, n), init(b.astype(np.float32), n + "_b")
        amax = np.abs(w.reshape(len(w), -1)).max(1)
        sw = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
        wq = np.clip(np.round(w / sw.reshape(-1, *[1] * (w.ndim - 1))), -127, 127).astype(np.int8)
        sb = (sw * in_scale).astype(np.float32)
        bq = np.round(b / sb).astype(np.int32)
        init(wq, n + "_q"); init(sw, n + "_s"); init(np.zeros(len(w), np.int8), n + "_z")
        init(bq, n + "_bq"); init(sb, n + "_bs"); init(np.zeros(len(w), np.int32), n + "_bz")
        nodes.append(helper.make_node("DequantizeLinear", [n + "_q", n + "_s", n + "_z"], [n + "_dq"], axis=0))
        nodes.append(helper.make_node("DequantizeLinear", [n + "_bq", n + "_bs", n + "_bz"], [n + "_bdq"], axis=0))
        return n + "_dq", n + "_bdq"

    xin = act("x")
    w, b = weight(wconv, bc, "conv_w", qp["x"][0] if qp else 1.0)
    nodes.append(helper.make_node("Conv", [xin, w, b], ["c"], kernel_shape=[3, 3], name="conv1"))
    nodes.append(helper.make_node("Relu", ["c"], ["r"], name="relu1"))
    r = act("r")
    nodes.append(helper.make_node("MaxPool", [r], ["p"], kernel_shape=[2, 2], strides=[2, 2], name="pool1"))
    if qp is not None:
        qp["p"] = qp["r"]
    p = act("p")
    nodes.append(helper.make_node("Flatten", [p], ["f"], axis=1, name="flatten"))
    w, b = weight(wgemm, bf, "fc_w", qp["r"][0] if qp else 1.0)
    nodes.append(helper.make_node("Gemm", ["f", w, b], ["logits"], transB=1, name="fc"))
    g = helper.make_graph(nodes, "mnist_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 28, 28])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def quantize_multiplier(scale):
    """scale ~= m / 2^(31 + shift), m in [2^30, 2^31) (as src/quant/fixed_point.h)."""
    f, e = np.frexp(scale)
    m = np.round(f * 2.0 ** 31).astype(np.int64)
    top = m == 2 ** 31
    m = np.where(top, m // 2, m); e = np.where(top, e + 1, e)
    return m, -e


def requantize(acc, m, shift, zp, lo, hi):
    """round_half_even(acc * m / 2^(31 + shift)) + zp, saturated: integer arithmetic only."""
    p = acc.astype(np.int64) * m
    s = (31 + shift).astype(np.int64)
    q = p >> s
    r = p - (q << s)
    half = np.int64(1) << (s - 1)
    q = q + ((r > half) | ((r == half) & (q & 1 == 1)))
    return np.clip(q + zp, lo, hi)


def int8_logits(x, wts, qp):
    """Integer-only inference of the QDQ model (i8 tensors, i32 accumulators, fixed-point
    requantize with the fused ReLU as the lower clamp); the FC accumulator is dequantized."""
    wc, bc, wf, bf = wts
    (sx, zx), (sr, zr) = qp["x"], qp["r"]
    zx, zr = int(zx), int(zr)
    xq = np.clip(np.round(x / sx) + zx, -128, 127).astype(np.int64)
    amax = np.abs(wc).max(0); swc = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
    wcq = np.clip(np.round(wc / swc), -127, 127).astype(np.int64)               # [9, C]
    bcq = np.round(bc / (swc * sx).astype(np.float32)).astype(np.int64)
    cols = sliding_window_view(xq - zx, (3, 3), axis=(1, 2)).reshape(len(x), 676, 9)
    acc = cols @ wcq + bcq
    m, sh = quantize_multiplier(np.float64(sx) * swc.astype(np.float64) / np.float64(sr))
    rq = requantize(acc, m, sh, zr, zr, 127)                                     # ReLU: clamp at zr
    pq = rq.reshape(len(x), 13, 2, 13, 2, C).max(axis=(2, 4))
    flat = pq.transpose(0, 3, 1, 2).reshape(len(x), -1) - zr
    wt = wf.T
    amax = np.abs(wt).max(1); swf = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
    wfq = np.clip(np.round(wt / swf[:, None]), -127, 127).astype(np.int64)      # [10, 1352]
    bfq = np.round(bf / (swf * sr).astype(np.float32)).astype(np.int64)
    return (flat @ wfq.T + bfq) * (swf.astype(np.float64) * np.float64(sr))


def ort_accuracy(path, x, y):
    import onnxruntime as ort
    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    z = s.run(None, {"x": x[:, None].astype(np.float32)})[0]
    return float((z.argmax(1) == y).mean())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--epochs", type=int, default=3)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    img, lab = load_mnist(mnist_dir())
    img = img.reshape(-1, 28, 28)
    x = img.astype(np.float32) / 255.0
    y = lab.astype(np.int64)
    wts = train(x[:8000], y[:8000], a.epochs)
    f32 = os.path.join(a.out, "mnist_cnn_f32.onnx")
    onnx.save(build(*wts), f32)
    # calibration: activation ranges over 2,048 training images
    _, (_, pre, _, _, _) = forward(x[:2048], *wts)
    relu = np.maximum(pre, 0)
    qp = {"x": qparams(0.0, 1.0), "r": qparams(0.0, relu.max())}
    q = os.path.join(a.out, "mnist_cnn_int8.onnx")
    onnx.save(build(*wts, qp=qp), q)
    np.save(os.path.join(a.out, "images.npy"), x.reshape(-1, 1, 28, 28))
    np.save(os.path.join(a.out, "labels.npy"), y)
    fa, qa = ort_accuracy(f32, x[8000:], y[8000:]), ort_accuracy(q, x[8000:], y[8000:])
    zi = int8_logits(x, wts, qp)
    np.save(os.path.join(a.out, "int8_reference_pred.npy"), zi.argmax(1))
    ia = float((zi[8000:].argmax(1) == y[8000:]).mean())
    print(f"held-out (2,000 images): integer-only numpy {100 * ia:.2f}%")
    print(f"held-out (2,000 images): float {100 * fa:.2f}%  int8 QDQ {100 * qa:.2f}%  delta {100 * (fa - qa):+.2f} pt")


if __name__ == "__main__":
    main()
