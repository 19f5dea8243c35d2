"""`import rlx`: build, print, parse, compile, run, report, errors."""
import os

import numpy as np
import pytest

import rlx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def mlp():
    g = rlx.Graph("mlp")
    x = g.input("x", "f32", ["batch", 8])
    w = g.input("w", "f32", [4, 8])
    b = g.input("b", "f32", [4])
    h = g.op("linear", [x, w, b], activation="gelu")
    g.output(g.op("softmax", [h]), "probs")
    return g


def numpy_mlp(x, w, b):
    from math import erf

    h = x @ w.T + b
    h = 0.5 * h * (1 + np.vectorize(erf)(h / np.sqrt(2)))
    e = np.exp(h - h.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def inputs(batch=3):
    rng = np.random.default_rng(0)
    return {"x": rng.standard_normal((batch, 8)).astype(np.float32),
            "w": rng.standard_normal((4, 8)).astype(np.float32),
            "b": rng.standard_normal(4).astype(np.float32)}


def test_build_print_parse_round_trip():
    g = mlp()
    text = str(g)
    assert "linear(" in text and "f32[batch,8]" in text
    assert str(rlx.parse(text)) == text
    g.verify()


def test_compile_run_matches_numpy_and_reference():
    g = mlp()
    m = rlx.compile(g, device="cpu")
    ins = inputs()
    out = m.run(ins)["probs"]
    np.testing.assert_allclose(out, numpy_mlp(ins["x"], ins["w"], ins["b"]), rtol=1e-5, atol=1e-6)
    ref = rlx.reference_run(g, [ins["x"], ins["w"], ins["b"]])[0]
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
    m.run(inputs(5))
    assert m.cache_size == 2


def test_report_rows_and_force_common():
    m = rlx.compile(mlp(), device="cpu")
    rows = m.report_rows({"batch": 2})
    paths = {(r["op"], r["path"]) for r in rows}
    assert ("linear", "native") in paths and ("softmax", "native") in paths
    forced = rlx.compile(mlp(), force_common=["linear"]).report_rows({"batch": 2})
    fpaths = {(r["op"], r["path"]) for r in forced}
    assert ("linear", "common-IR") in fpaths and ("gelu", "common-IR") in fpaths
    assert "dispatch report: device cpu" in m.report({"batch": 2})
    assert "lir @mlp" in m.dump("lir", {"batch": 2})


def test_dtypes_and_bf16_as_float32():
    g = rlx.Graph()
    x = g.input("x", "bf16", [4])
    g.output(g.op("mul", [x, x]))
    out = rlx.compile(g).run([np.array([1.5, -2, 3, 0.25], np.float32)])[0]
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [2.25, 4, 9, 0.0625])
    g2 = rlx.Graph()
    a = g2.input("a", "i64", [3])
    g2.output(g2.op("topk", [a], k=2)[1])
    idx = rlx.compile(g2).run([np.array([5, 9, 1], np.int64)])[0]
    assert idx.tolist() == [1, 0]


def test_constant_and_examples_load():
    g = rlx.Graph()
    x = g.input("x", "f64", [2])
    g.output(g.op("add", [x, g.constant(np.array([1.0, 2.0]))]))
    assert rlx.compile(g).run([np.array([0.5, 0.5])])[0].tolist() == [1.5, 2.5]
    loaded = rlx.load(os.path.join(ROOT, "examples", "attention.rlx"))
    assert "attention(" in str(loaded)


def test_errors_are_clear():
    m = rlx.compile(mlp())
    bad = inputs()
    bad["x"] = bad["x"].astype(np.float64)
    with pytest.raises(rlx.Error, match="input 'x': expected dtype f32"):
        m.run(bad)
    with pytest.raises(rlx.Error, match="missing inputs"):
        m.run({"x": inputs()["x"]})
    with pytest.raises(rlx.Error, match="unknown op"):
        mlp().op("nosuch", [0])
    with pytest.raises(rlx.Error, match=r"\[parse\]"):
        rlx.parse("graph @g( {")
    with pytest.raises(rlx.Error, match="cannot execute on this machine"):
        rlx.compile(mlp(), device="cuda").run(inputs())
    assert issubclass(rlx.Error, RuntimeError)


def test_devices_lists_sixteen():
    d = rlx.devices()
    assert [x["name"] for x in d][:2] == ["cpu", "metal"]
    assert len(d) == 16
    assert d[0]["status"] == "available"
