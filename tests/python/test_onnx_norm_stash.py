"""LayerNormalization and RMSNormalization on half inputs: stash_type defaults to 1
(float32) in both ONNX specs, so the statistics are computed in f32 (and LayerNormalization's Mean /
InvStdDev outputs are f32) whether or not the attribute is written. Oracle: onnxruntime. The data sit
on a large offset, where statistics kept in f16 lose most of the normalized value."""
import numpy as np
import pytest

from onnx_helpers import make_model, run_rlx

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper as h  # noqa: E402

SHAPE = [4, 64]


def x_data():
    rng = np.random.default_rng(7)
    return (1000.0 + rng.standard_normal(SHAPE)).astype(np.float16)


def scale_data():
    return np.linspace(0.5, 1.5, SHAPE[-1]).astype(np.float16)


def model(op, stash, opset):
    attrs = {} if stash is None else {"stash_type": stash}
    outs = ["y", "mean", "inv"] if op == "LayerNormalization" else ["y"]
    node = h.make_node(op, ["x", "s"], outs, **attrs)
    f16 = TensorProto.FLOAT16
    vi = [h.make_tensor_value_info("y", f16, SHAPE)]
    if op == "LayerNormalization":
        vi += [h.make_tensor_value_info(n, TensorProto.FLOAT, [SHAPE[0], 1]) for n in ("mean", "inv")]
    return make_model([node], "norm", [h.make_tensor_value_info("x", f16, SHAPE),
                                       h.make_tensor_value_info("s", f16, [SHAPE[-1]])], vi, opset=opset,
                      ir_version=11 if opset >= 23 else 8)


@pytest.mark.parametrize("op,opset", [("LayerNormalization", 17), ("RMSNormalization", 23)])
@pytest.mark.parametrize("stash", [None, 1])
def test_half_norm_stashes_in_f32_by_default(tmp_path, op, opset, stash):
    m = model(op, stash, opset)
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    feeds = {"x": x_data(), "s": scale_data()}
    try:
        want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    except Exception as e:  # an onnxruntime without this op/opset: no oracle here
        pytest.skip(f"onnxruntime cannot run {op} opset {opset}: {e}")
    got, err = run_rlx(path, feeds, str(tmp_path), "rlx")
    assert err is None, err
    names = ["y", "mean", "inv"][:len(want)]
    for n, w in zip(names, want):
        g = got[n]
        assert g.dtype == w.dtype, (n, g.dtype, w.dtype)
        # y is f16 (one ulp of the O(1) result ~ 1e-3); the f32 statistics match closely
        tol = 4e-3 if n == "y" else 1e-4 * max(1.0, float(np.abs(w).max()))
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), atol=tol, rtol=0, err_msg=n)


# stash_type 11 (double) on f32 inputs computes the statistics in f64 (the more precise of
# stash_type and X's dtype). Only Y is asked for: the schema's type constraint for LayerNormalization's
# Mean / InvStdDev does not allow double, so onnx's checker refuses them. The data sit on an offset of
# 3000 with a spread of 0.01, where f32 statistics lose about a percent of the normalized value.
# Oracle: onnx's reference evaluator run as the spec's function body does it (X cast to the stash
# type, here the same model in double), the result cast back to f32. Neither oracle takes the f32
# model itself: the reference evaluator refuses stash_type != 1 and onnxruntime's LayerNormalization
# computes in f32 regardless (measured 1.1e-2 off the f64 result on these data).
F32_SHAPE = [4, 64]


def f32_stash_model(op, stash, opset, t=TensorProto.FLOAT):
    node = h.make_node(op, ["x", "s"], ["y"], stash_type=stash)
    return make_model([node], "norm64", [h.make_tensor_value_info("x", t, F32_SHAPE),
                                         h.make_tensor_value_info("s", t, [F32_SHAPE[-1]])],
                      [h.make_tensor_value_info("y", t, F32_SHAPE)], opset=opset,
                      ir_version=11 if opset >= 23 else 8)


def f32_feeds():
    rng = np.random.default_rng(11)
    x = (3000.0 + 0.01 * rng.standard_normal(F32_SHAPE)).astype(np.float32)
    return {"x": x, "s": np.linspace(0.5, 1.5, F32_SHAPE[-1]).astype(np.float32)}


def f64_oracle(op, opset, feeds):
    from onnx.reference import ReferenceEvaluator
    m = f32_stash_model(op, 1, opset, TensorProto.DOUBLE)
    (y,) = ReferenceEvaluator(m).run(None, {k: v.astype(np.float64) for k, v in feeds.items()})
    return y.astype(np.float32).astype(np.float64)


@pytest.mark.parametrize("op,opset", [("LayerNormalization", 17), ("RMSNormalization", 23)])
def test_f32_norm_with_double_stash_computes_in_f64(tmp_path, op, opset):
    feeds = f32_feeds()
    path = str(tmp_path / "m.onnx")
    onnx.save(f32_stash_model(op, 11, opset), path)
    want = f64_oracle(op, opset, feeds)
    got, err = run_rlx(path, feeds, str(tmp_path), "rlx")
    assert err is None, err
    assert got["y"].dtype == np.float32, got["y"].dtype
    np.testing.assert_allclose(got["y"].astype(np.float64), want, atol=1e-5, rtol=0)
    if op == "LayerNormalization":  # the data do tell f64 from f32 statistics: stash_type 1 is far off
        p1 = str(tmp_path / "m1.onnx")
        onnx.save(f32_stash_model(op, 1, opset), p1)
        got1, err = run_rlx(p1, feeds, str(tmp_path), "rlx1")
        assert err is None, err
        assert np.abs(got1["y"].astype(np.float64) - want).max() > 1e-3


def test_non_float_stash_type_is_refused(tmp_path):
    node = h.make_node("LayerNormalization", ["x", "s"], ["y"], stash_type=7)
    f32 = TensorProto.FLOAT
    m = make_model([node], "bad", [h.make_tensor_value_info("x", f32, F32_SHAPE),
                                   h.make_tensor_value_info("s", f32, [F32_SHAPE[-1]])],
                   [h.make_tensor_value_info("y", f32, F32_SHAPE)])
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    got, err = run_rlx(path, f32_feeds(), str(tmp_path), "rlx")
    assert got is None and "stash_type 7 unsupported" in err, err
