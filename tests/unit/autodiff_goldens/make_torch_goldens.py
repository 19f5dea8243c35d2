#!/usr/bin/env python3
"""Writes torch_goldens.npz: PyTorch autograd gradients (float64) of composite ops, the golden
values tests/unit/test_autodiff_torch.cpp checks RLX's grad against. Torch is not needed to run
the tests, only to regenerate this file:  python3 tests/unit/autodiff_goldens/make_torch_goldens.py

Each case <name> stores inputs <name>.in<i>, a fixed output weight <name>.w (loss = sum(f(x)*w),
or the loss itself for cross-entropy), the loss <name>.loss and gradients <name>.grad<i>."""
import os
import numpy as np
import torch
import torch.nn.functional as F

rng = np.random.default_rng(0)
out = {}


def case(name, fn, shapes, weighted=True, extra=None):
    xs = [rng.standard_normal(s) for s in shapes]
    ts = [torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in xs]
    y = fn(*ts)
    if weighted:
        w = rng.standard_normal(tuple(y.shape))
        out[f"{name}.w"] = w
        loss = (y * torch.tensor(w)).sum()
    else:
        loss = y
    loss.backward()
    for i, (x, t) in enumerate(zip(xs, ts)):
        out[f"{name}.in{i}"] = x
        out[f"{name}.grad{i}"] = t.grad.numpy()
    out[f"{name}.loss"] = np.array(loss.item())
    for k, v in (extra or {}).items():
        out[f"{name}.{k}"] = v


case("layer_norm", lambda x, g, b: F.layer_norm(x, (6,), g, b, 1e-5), [(3, 6), (6,), (6,)])
case("attention_causal", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
     [(1, 2, 4, 3), (1, 2, 4, 3), (1, 2, 4, 3)])
case("conv_stride2_pad1", lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1), [(2, 3, 7, 7), (4, 3, 3, 3), (4,)])
case("gelu_erf", lambda x: F.gelu(x), [(3, 5)])
case("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), [(3, 5)])
labels = np.array([1, 0, 4, 2], dtype=np.int64)
case("softmax_xent", lambda z: F.cross_entropy(z, torch.tensor(labels)), [(4, 5)], weighted=False,
     extra={"labels": labels})
case("mlp_relu", lambda x, w0, b0, w1, b1: (torch.relu(x @ w0 + b0) @ w1 + b1),
     [(4, 6), (6, 5), (5,), (5, 3), (3,)])

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_goldens.npz")
np.savez(path, **out)
print(f"wrote {path} ({len(out)} arrays, torch {torch.__version__})")
