"""The MNIST MLP as the peers write it, shared by bench/mnist_train.py (cpu) and bench/h200_mnist.py (H200).

Parameters are [W0, b0, W1, b1, ...] with W as [in, out]; hidden layers use ReLU and the loss is the mean
softmax cross-entropy, the same function RLX's models::mlp_loss_graph builds.
"""
import numpy as np


def init(sizes, seed=0):
    """Uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) weights and biases, f32, from one seeded generator."""
    rng = np.random.default_rng(seed)
    ps = []
    for i in range(len(sizes) - 1):
        b = 1.0 / np.sqrt(sizes[i])
        ps.append(rng.uniform(-b, b, (sizes[i], sizes[i + 1])).astype(np.float32))
        ps.append(rng.uniform(-b, b, (sizes[i + 1],)).astype(np.float32))
    return ps


def torch_loss(ps, x, y):
    import torch
    return torch.nn.functional.cross_entropy(_logits(ps, x, torch.relu), y)


def jax_loss(ps, x, y):
    import jax
    import jax.numpy as jnp
    logp = jax.nn.log_softmax(_logits(ps, x, jax.nn.relu))
    return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))


def _logits(ps, x, relu):
    h = x
    n = len(ps) // 2
    for i in range(n):
        h = h @ ps[2 * i] + ps[2 * i + 1]
        if i + 1 < n:
            h = relu(h)
    return h
