"""Training from Python: autodiff on graphs and a compiled training step.

The MNIST loop in a few lines::

    import numpy as np, rlx

    g = rlx.Graph("mlp")                                  # or: g, params = rlx.train.mlp([784, 128, 10], 128)
    w0, b0 = g.input("w0", "f32", [784, 128]), g.input("b0", "f32", [128])
    w1, b1 = g.input("w1", "f32", [128, 10]), g.input("b1", "f32", [10])
    x, y = g.input("x", "f32", [128, 784]), g.input("labels", "i64", [128])
    h = g.op("relu", [rlx.train.dense(g, x, w0, b0)])
    loss, correct = rlx.train.cross_entropy(g, rlx.train.dense(g, h, w1, b1), y)
    g.output(loss, "loss"); g.output(correct, "correct")

    tr = rlx.train.Trainer(g, rlx.train.init_params(g, 4), optimizer="sgd", lr=0.1)
    for xb, yb in batches:
        loss, correct = tr.step(xb, yb)                   # one compiled graph: fwd + bwd + update

The first ``len(params)`` graph inputs are the parameters; the rest are data. Parameters and
optimizer state stay inside the trainer between steps; ``tr.params`` copies them out.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from . import Graph, Value, _rlx

__all__ = ["value_and_grad", "grad", "dense", "cross_entropy", "mlp", "init_params", "Trainer"]


def value_and_grad(graph: Graph, wrt: Sequence[int] = ()) -> Graph:
    """A graph computing ``graph``'s outputs then d(output 0)/d(input i) for each i in ``wrt``
    (default: every float input). Output 0 must be a float scalar."""
    return Graph(_g=_rlx.value_and_grad(graph._g, [int(i) for i in wrt]))


def grad(graph: Graph, wrt: Sequence[int] = ()) -> Graph:
    """Like value_and_grad, returning only the gradients."""
    return Graph(_g=_rlx.grad(graph._g, [int(i) for i in wrt]))


def dense(g: Graph, x: Value, w: Value, b: Value | None = None) -> Value:
    """x [B, in] · w [in, out] (+ b [out])."""
    y = g.op("dot_general", [x, w], lhs_batch=[], rhs_batch=[], lhs_contract=[1], rhs_contract=[0])
    return g.op("add", [y, b]) if b is not None else y


def cross_entropy(g: Graph, logits: Value, labels: Value) -> tuple:
    """Mean softmax cross-entropy of logits [B, C] against i64 labels [B], and the number of
    correct argmax predictions (f32 scalar). Its backward pass is the closed form."""
    ids = _rlx.classification_head(g._g, int(logits), int(labels))
    return Value(g, ids[0]), Value(g, ids[1])


def mlp(sizes: Sequence[int], batch: int, seed: int = 0) -> tuple:
    """The MLP loss graph `rlx train-mnist` uses (ReLU between layers; inputs w0, b0, ..., x,
    labels; outputs loss, correct) and its PyTorch-style initial parameters."""
    g = Graph(_g=_rlx.mlp_loss_graph([int(s) for s in sizes], int(batch)))
    return g, list(_rlx.mlp_init([int(s) for s in sizes], int(seed)))


def init_params(g: Graph, count: int, seed: int = 0) -> list:
    """Uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) arrays for the first ``count`` inputs of ``g``;
    fan_in is dim 0 of 2-D weights and of the weight before a 1-D bias."""
    rng = np.random.default_rng(seed)
    out, fan = [], 1
    for v in g.inputs[:count]:
        shape = [int(d) for d in v.shape]
        if len(shape) >= 2:
            fan = int(np.prod(shape[:-1])) if len(shape) == 2 else int(np.prod(shape[1:]))
        bound = 1.0 / np.sqrt(max(fan, 1))
        out.append(rng.uniform(-bound, bound, shape).astype(np.float32))
    return out


class Trainer:
    """A compiled training step: forward, backward and the optimizer update as one graph.

    optimizer: "sgd" (momentum, nesterov, weight_decay), "adam" or "adamw"; schedule: "constant",
    "step", "cosine" or "linear" (warmup/total in steps); device: any runnable rlx device;
    amp: "bf16" or "f16" runs contractions in that dtype with f32 master weights (f16 adds dynamic
    loss scaling); ``amp_report()`` lists the per-op choices.
    """

    def __init__(self, loss: Graph, params: Sequence[Any], optimizer: str = "sgd", lr: float = 0.1,
                 momentum: float = 0.0, nesterov: bool = False, weight_decay: float = 0.0,
                 schedule: str = "constant", warmup: int = 0, total: int = 0, device: str = "cpu",
                 amp: str = "f32"):
        ps = [np.ascontiguousarray(p) for p in params]
        self._t = _rlx.Trainer(loss._g, ps, optimizer, float(lr), float(momentum), bool(nesterov),
                               float(weight_decay), schedule, int(warmup), int(total), device, amp)
        self.num_params = len(ps)

    def step(self, *data: Any) -> list:
        """One step on a batch (the loss graph's data inputs, in order). Returns the loss graph's
        outputs as numpy arrays (loss first)."""
        return list(self._t.step([np.ascontiguousarray(d) for d in data]))

    def advance(self, *data: Any) -> None:
        """One step that reads nothing back (parameters and state stay in the trainer's executable,
        on a GPU in device memory); read the loss every k steps with ``outputs()``."""
        self._t.advance([np.ascontiguousarray(d) for d in data])

    def outputs(self) -> list:
        """The loss graph's outputs of the last step, as numpy arrays (loss first)."""
        return list(self._t.outputs())

    @property
    def params(self) -> list:
        return list(self._t.params())

    @property
    def state(self) -> list:
        return list(self._t.state())

    @property
    def step_count(self) -> int:
        return self._t.step_count

    @property
    def lr(self) -> float:
        return self._t.lr

    def step_graph(self) -> Graph:
        return Graph(_g=self._t.step_graph())

    def save(self, path: str) -> None:
        """safetensors checkpoint of parameters, optimizer state, the step count and (f16 amp) the
        dynamic loss scale; ``load`` restores all of it (bit-identical continuation)."""
        self._t.save(str(path))

    def load(self, path: str) -> None:
        self._t.load(str(path))

    def amp_report(self) -> str:
        return self._t.amp_report()

    @property
    def loss_scale(self) -> float:
        return self._t.loss_scale

    @property
    def skipped_steps(self) -> int:
        return self._t.skipped_steps

    def profile(self) -> str:
        """Per-kernel times (set RLX_PROFILE=1 before the trainer is built)."""
        return self._t.profile()
