"""The MNIST MLP 784-128-10 training step (SGD lr 0.1, batch 128, mean softmax cross-entropy, the
uniform init of bench/mlp_peers.py) for each system of bench/peers.py.

NumPy, PyTorch (eager, torch.compile) and JAX reuse bench/mnist_train.py's step functions and its
timing loop (5 warm-up steps, then N steps over the unshuffled 8k split); RLX is `rlx train-mnist
--bench-steps N`, which times the same step in C++. TensorFlow, MLX, tinygrad and IREE (the JAX step
lowered to StableHLO, compiled by iree-compile) are written here with the same loss and update.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import mnist_train  # noqa: E402  (RLX_BENCH_THREADS is set by bench/peers.py, so it does not re-exec)
from mlp_peers import init, jax_loss  # noqa: E402
from peers_runners import Unavailable  # noqa: E402

SIZES, BATCH, LR = [784, 128, 10], 128, 0.1


def batches():
    x, y = mnist_train.load_train()
    return [(x[i * BATCH:(i + 1) * BATCH], y[i * BATCH:(i + 1) * BATCH]) for i in range(len(x) // BATCH)]


def _tf_step(xla):
    import tensorflow as tf
    ps = [tf.Variable(p) for p in init(SIZES)]

    @tf.function(jit_compile=xla)
    def step(x, y):
        with tf.GradientTape() as tape:
            h = tf.nn.relu(x @ ps[0] + ps[1])
            logits = h @ ps[2] + ps[3]
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        for p, g in zip(ps, tape.gradient(loss, ps)):
            p.assign_sub(LR * g)
        return loss

    return (lambda x, y: float(step(x, y))), tf.constant


def _mlx_step():
    import mlx.core as mx
    import mlx.nn as nn
    mx.set_default_device(mx.cpu)
    state = [mx.array(p) for p in init(SIZES)]

    def loss_fn(ps, x, y):
        logits = mx.maximum(x @ ps[0] + ps[1], 0) @ ps[2] + ps[3]
        return nn.losses.cross_entropy(logits, y, reduction="mean")

    grad = mx.value_and_grad(loss_fn)

    @mx.compile
    def upd(ps, x, y):
        loss, gs = grad(ps, x, y)
        return [p - LR * g for p, g in zip(ps, gs)], loss

    def step(x, y):
        state[:], loss = upd(state, x, y)
        return loss.item()

    return step, mx.array


def _tinygrad_step():
    from tinygrad import Context, Tensor, TinyJit
    from tinygrad.nn.optim import SGD
    ps = [Tensor(p).realize() for p in init(SIZES)]  # tensors are parameters by default (is_param)
    opt = SGD(ps, lr=LR)

    @TinyJit
    @Context(TRAINING=1)
    def step_t(x, y):
        opt.zero_grad()
        loss = ((x @ ps[0] + ps[1]).relu() @ ps[2] + ps[3]).sparse_categorical_crossentropy(y).backward()
        return loss.realize(*opt.schedule_step())  # the update is realized with the loss, inside the jit

    return (lambda x, y: step_t(x, y).item()), (lambda a: Tensor(a.astype(np.int32) if a.dtype == np.int64 else a))


def _iree_step(cache):
    """JAX's jitted SGD step lowered to StableHLO, compiled by IREE for llvm-cpu, run by its runtime
    with the parameters kept as IREE device arrays between steps."""
    import iree.compiler as ic
    import iree.runtime as ir
    import jax
    import jax.numpy as jnp

    def upd(w0, b0, w1, b1, x, y):
        ps = [w0, b0, w1, b1]
        loss, g = jax.value_and_grad(jax_loss)(ps, x, y)
        return tuple(p - LR * gp for p, gp in zip(ps, g)) + (loss,)

    vmfb = os.path.join(cache, "iree_mnist_step.vmfb")
    ps = init(SIZES)
    if not os.path.exists(vmfb):
        x0, y0 = np.zeros((BATCH, 784), np.float32), np.zeros((BATCH,), np.int32)
        text = jax.jit(upd).lower(*[jnp.asarray(p) for p in ps], x0, y0).as_text()
        ic.compile_str(text, output_file=vmfb + ".tmp", input_type="stablehlo", target_backends=["llvm-cpu"],
                       extra_args=["--iree-llvmcpu-target-cpu=host"])
        os.replace(vmfb + ".tmp", vmfb)
    ir.flags.parse_flags(f"--task_topology_max_group_count={os.environ.get('RLX_BENCH_THREADS', '2')}")
    mod = ir.load_vm_flatbuffer_file(vmfb, driver="local-task")
    fn = mod.main
    state = list(ps)

    def step(x, y):
        out = fn(*state, x, y)
        state[:] = out[:4]
        return float(out[4].to_host())

    return step, (lambda a: a.astype(np.int32) if a.dtype == np.int64 else a)


def run(system, variant, cfg):
    """Returns one row {workload, batch, p50_ms, p90_ms, n} for this system's training step."""
    steps = cfg["steps"]
    if system == "rlx":
        cmd = [cfg["rlx_bin"], "train-mnist", "--data", "mnist", "--data-dir", mnist_train.DATA, "--batch", str(BATCH),
               "--hidden", "128", "--lr", str(LR), "--bench-steps", str(steps), "--quiet"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            raise Unavailable(f"rlx train-mnist exited {r.returncode}: {r.stderr[-300:]}")
        doc = json.loads(r.stdout.strip().splitlines()[-1])
        return dict(p50_ms=doc["p50_ms"], p90_ms=doc["p90_ms"], n=steps)
    if system == "numpy":
        step, conv = mnist_train.numpy_step_fn(SIZES), (lambda a: a)
    elif system == "pytorch":
        step, conv = mnist_train.torch_step_fn(SIZES, variant == "compile")
    elif system == "jax":
        step, conv = mnist_train.jax_step_fn(SIZES)
    elif system == "tensorflow":
        step, conv = _tf_step(variant == "xla")
    elif system == "mlx":
        step, conv = _mlx_step()
    elif system == "tinygrad":
        step, conv = _tinygrad_step()
    elif system == "iree":
        step, conv = _iree_step(cfg["cache"])
    else:
        raise Unavailable(f"no MNIST training runner for {system}")
    bs = [(conv(x), conv(y)) for x, y in batches()]
    p50, p90 = mnist_train.timed(step, bs, steps)
    return dict(p50_ms=p50, p90_ms=p90, n=steps)
