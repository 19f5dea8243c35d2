"""rlx autodiff and optimizers against PyTorch, live: composite ops (LayerNorm, causal
Attention, Conv, GELU erf/tanh, softmax cross-entropy through rlx.train.cross_entropy with its
stop_gradient) in float64 on the reference interpreter vs torch.autograd, and the compiled
Trainer's SGD(momentum, nesterov)/Adam/AdamW steps vs torch.optim. Needs pip torch (the committed
goldens of tests/unit/test_autodiff_torch.cpp cover the composite ops where torch is absent)."""
import numpy as np
import pytest

import rlx

torch = pytest.importorskip("torch")
F = torch.nn.functional
# torch.optim's first use imports torch._dynamo and with it triton, whose bundled LLVM segfaults
# when loaded after RLX has probed its devices (Mesa/PoCL bring their own LLVM into the process).
# Pay that import here, at collection time, before any RLX device probe.
torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)


def rlx_value_and_grads(build, xs, weighted=True, seed=0):
    """loss = sum(f(x) * w) (or f itself) in f64: rlx value_and_grad on the reference interpreter,
    and the same through torch.autograd. Returns (rlx loss, rlx grads, torch loss, torch grads)."""
    rng = np.random.default_rng(seed)
    g = rlx.Graph("f")
    ins = [g.input(f"x{i}", "f64", list(x.shape)) for i, x in enumerate(xs)]
    y_rlx = build("rlx", g, ins)
    ts = [torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in xs]
    y_t = build("torch", None, ts)
    if weighted:
        w = rng.standard_normal(tuple(y_t.shape))
        axes = list(range(len(w.shape)))
        p = g.op("mul", [y_rlx, g.constant(w)])
        y_rlx = g.op("reduce_sum", [p], axes=axes) if axes else p
        y_t = (y_t * torch.tensor(w)).sum()
    g.output(y_rlx)
    out = rlx.reference_run(rlx.train.value_and_grad(g), xs)
    y_t.backward()
    return float(out[0]), out[1:], float(y_t.item()), [t.grad.numpy() for t in ts]


def check(build, shapes, weighted=True, seed=0):
    rng = np.random.default_rng(seed + 100)
    xs = [rng.standard_normal(s) for s in shapes]
    l, gs, lt, gts = rlx_value_and_grads(build, xs, weighted, seed)
    assert l == pytest.approx(lt, rel=1e-10, abs=1e-12)
    for a, b in zip(gs, gts):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11)


def test_layer_norm_grad_matches_torch():
    def f(kind, g, x):
        if kind == "torch":
            return F.layer_norm(x[0], (6,), x[1], x[2], 1e-5)
        return g.op("layer_norm", [x[0], x[1], x[2]], eps=1e-5)
    check(f, [(4, 6), (6,), (6,)])


def test_causal_attention_grad_matches_torch():
    def f(kind, g, x):
        if kind == "torch":
            return F.scaled_dot_product_attention(x[0], x[1], x[2], is_causal=True)
        return g.op("attention", [x[0], x[1], x[2]], mask="causal")
    check(f, [(2, 2, 5, 4), (2, 2, 5, 4), (2, 2, 5, 4)])


def test_conv_grad_matches_torch():
    def f(kind, g, x):
        if kind == "torch":
            return F.conv2d(x[0], x[1], x[2], stride=2, padding=1)
        return g.op("convolution", [x[0], x[1], x[2]], strides=[2, 2], pads=[1, 1, 1, 1])
    check(f, [(2, 3, 7, 6), (4, 3, 3, 3), (4,)])


@pytest.mark.parametrize("approx", ["none", "tanh"])
def test_gelu_grad_matches_torch(approx):
    def f(kind, g, x):
        if kind == "torch":
            return F.gelu(x[0], approximate=approx)
        return g.op("gelu", [x[0]], approximate=approx)
    check(f, [(3, 7)])


def test_softmax_cross_entropy_head_matches_torch():
    # rlx.train.cross_entropy: the Trainer's loss head (max under stop_gradient, closed-form backward)
    labels = np.array([1, 0, 4, 2, 4, 3])

    def f(kind, g, x):
        if kind == "torch":
            return F.cross_entropy(x[0] * 3, torch.tensor(labels))
        lab = g.constant(labels.astype(np.int64))
        loss, _ = rlx.train.cross_entropy(g, g.op("mul", [x[0], g.constant(np.array(3.0))]), lab)
        return loss
    check(f, [(6, 5)], weighted=False)


def test_stop_gradient_python_api():
    g = rlx.Graph("sg")
    x = g.input("x", "f64", [3])
    s = rlx.stop_gradient(x)
    g.output(g.op("reduce_sum", [g.op("mul", [x, s])], axes=[0]))
    xv = np.array([0.5, -2.0, 3.0])
    loss, gx = rlx.reference_run(rlx.train.value_and_grad(g), [xv])
    assert loss == pytest.approx((xv * xv).sum())
    np.testing.assert_array_equal(gx, xv)  # d/dx (x * sg(x)) = sg(x), not 2x
    with pytest.raises(rlx.Error):
        rlx.stop_gradient(3)


@pytest.mark.parametrize("opt", ["sgd_momentum", "sgd_nesterov_wd", "adam", "adamw"])
def test_trainer_optimizer_steps_match_torch(opt):
    B, sizes = 8, [12, 7, 4]
    g, params = rlx.train.mlp(sizes, B, seed=3)
    kw = {"sgd_momentum": dict(optimizer="sgd", lr=0.1, momentum=0.9),
          "sgd_nesterov_wd": dict(optimizer="sgd", lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.01),
          "adam": dict(optimizer="adam", lr=0.01, weight_decay=0.01),
          "adamw": dict(optimizer="adamw", lr=0.01, weight_decay=0.1)}[opt]
    tr = rlx.train.Trainer(g, params, **kw)
    tp = [torch.tensor(p.copy(), requires_grad=True) for p in params]
    topt = {"sgd": lambda: torch.optim.SGD(tp, lr=kw["lr"], momentum=kw["momentum"],
                                           nesterov=kw.get("nesterov", False), weight_decay=kw.get("weight_decay", 0)),
            "adam": lambda: torch.optim.Adam(tp, lr=kw["lr"], weight_decay=kw["weight_decay"]),
            "adamw": lambda: torch.optim.AdamW(tp, lr=kw["lr"], weight_decay=kw["weight_decay"])}[kw["optimizer"]]()
    rng = np.random.default_rng(5)
    for step in range(6):
        x = rng.standard_normal((B, sizes[0])).astype(np.float32)
        y = rng.integers(0, sizes[-1], B)
        loss, _ = tr.step(x, y)
        topt.zero_grad()
        h = torch.tensor(x)
        for i in range(len(sizes) - 1):
            h = h @ tp[2 * i] + tp[2 * i + 1]
            if i + 2 < len(sizes):
                h = torch.relu(h)
        tl = F.cross_entropy(h, torch.tensor(y))
        tl.backward()
        topt.step()
        assert float(loss) == pytest.approx(tl.item(), rel=1e-5), f"step {step}"
    for a, b in zip(tr.params, tp):
        np.testing.assert_allclose(a, b.detach().numpy(), rtol=2e-5, atol=2e-6)
