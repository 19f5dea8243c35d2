"""Static int8: a QDQ model made by onnxruntime.quantization.quantize_static imports into RLX, its
contractions run as int8 qlinear (the fuse-qdq report lines say so), and the result agrees with
ONNX Runtime running the same quantized model."""
import numpy as np
import pytest

import rlx

import onnx  # noqa: E402  (pinned in scripts/constraints.txt: a missing one is an error, not a skip)
import onnxruntime as ort  # noqa: E402
from onnxruntime import quantization  # noqa: E402
from onnx import TensorProto as T, helper as h, numpy_helper as nh  # noqa: E402

from onnx_helpers import make_model  # noqa: E402


def mlp(path, rng):
    """y = relu(x W1 + b1) W2 + b2, x [8, 32] -> [8, 16]."""
    w1 = rng.standard_normal((32, 64)).astype(np.float32) * 0.2
    b1 = rng.standard_normal(64).astype(np.float32) * 0.1
    w2 = rng.standard_normal((64, 16)).astype(np.float32) * 0.2
    b2 = rng.standard_normal(16).astype(np.float32) * 0.1
    nodes = [h.make_node("MatMul", ["x", "W1"], ["h0"], name="fc1"), h.make_node("Add", ["h0", "b1"], ["h1"]),
             h.make_node("Relu", ["h1"], ["h2"]), h.make_node("MatMul", ["h2", "W2"], ["y0"], name="fc2"),
             h.make_node("Add", ["y0", "b2"], ["y"])]
    m = make_model(nodes, "mlp", [h.make_tensor_value_info("x", T.FLOAT, [8, 32])],
                   [h.make_tensor_value_info("y", T.FLOAT, [8, 16])],
                   [nh.from_array(w1, "W1"), nh.from_array(b1, "b1"), nh.from_array(w2, "W2"), nh.from_array(b2, "b2")],
                   opset=17)
    onnx.save(m, str(path))


def ort_emulated(path, x):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


class Reader(quantization.CalibrationDataReader):
    def __init__(self, batches):
        self.it = iter([{"x": b} for b in batches])

    def get_next(self):
        return next(self.it, None)


@pytest.mark.parametrize("per_channel", [False, True])
def test_ort_quantize_static_runs_int8_in_rlx(tmp_path, per_channel):
    rng = np.random.default_rng(0)
    fp, qp = tmp_path / "mlp.onnx", tmp_path / "mlp_int8.onnx"
    mlp(fp, rng)
    calib = [rng.standard_normal((8, 32)).astype(np.float32) for _ in range(8)]
    quantization.quantize_static(str(fp), str(qp), Reader(calib), quant_format=quantization.QuantFormat.QDQ,
                                 activation_type=quantization.QuantType.QUInt8,
                                 weight_type=quantization.QuantType.QInt8, per_channel=per_channel)
    x = rng.standard_normal((8, 32)).astype(np.float32)
    want, fwant = ort_emulated(qp, x), ort_emulated(fp, x)

    g = rlx.load(str(qp))
    m = rlx.CompiledModel(g)
    got = m.run({"x": x})["y"]
    notes = "\n".join(m.report_notes())
    assert notes.count("fuse-qdq: int8") == 2, notes
    assert "qlinear" in m.report()
    # The oracle is ONNX Runtime running the QDQ graph op by op (graph optimizations off: the model's
    # own semantics in float). RLX requantizes in exact fixed point: outputs may differ by one step of
    # an intermediate scale, far below the quantization error against float. (ORT's fused int8
    # kernels on an AVX2 host use saturating u8 x s8 pair sums and can stray further.)
    err_q = np.abs(got - want).max()
    err_f = np.abs(want - fwant).max()
    assert err_q <= max(0.25 * err_f, 0.02), (err_q, err_f)
    cos = float((got * fwant).sum() / np.linalg.norm(got) / np.linalg.norm(fwant))
    assert cos > 0.995, cos


def test_qlinear_kernel_equals_its_decomposition(tmp_path):
    rng = np.random.default_rng(1)
    fp, qp = tmp_path / "mlp.onnx", tmp_path / "mlp_int8.onnx"
    mlp(fp, rng)
    calib = [rng.standard_normal((8, 32)).astype(np.float32) for _ in range(4)]
    quantization.quantize_static(str(fp), str(qp), Reader(calib), quant_format=quantization.QuantFormat.QDQ)
    x = rng.standard_normal((8, 32)).astype(np.float32)
    g = rlx.load(str(qp))
    a = rlx.CompiledModel(g).run({"x": x})["y"]
    # The same graph with the contractions left in float (force the quant ops through their
    # decompositions): the emulated QDQ graph; int8 and emulation agree to rounding.
    b = rlx.CompiledModel(g, force_common=["qlinear"]).run({"x": x})["y"]
    np.testing.assert_allclose(a, b, atol=1e-5)


def test_rlx_quantize_cli_round_trips_through_onnxruntime(tmp_path):
    """`rlx quantize` writes a QDQ model: ONNX Runtime runs it, RLX runs it in int8, and they agree."""
    import subprocess

    from rlx_paths import rlx_bin

    rng = np.random.default_rng(2)
    fp, qp = tmp_path / "mlp.onnx", tmp_path / "q.onnx"
    mlp(fp, rng)
    for method in ["minmax", "percentile", "mse", "entropy"]:
        r = subprocess.run([rlx_bin(), "quantize", str(fp), "--calib", "6", "--method", method, "--per-channel",
                            "--out", str(qp)], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert "calibrating" in r.stderr and "6/6" in r.stderr
        rows = [l.split() for l in r.stdout.splitlines() if l.startswith(("fc1", "fc2"))]
        assert [row[:2] for row in rows] == [["fc1", "int8"], ["fc2", "int8"]], r.stdout
        # columns: layer, path, local SQNR dB, SQNR dB in the model, cosine
        assert all(float(row[2]) > 20 and float(row[3]) > 20 and float(row[4]) > 0.99 for row in rows), r.stdout
        assert "2 of 2 MatMul/Gemm layers in int8" in r.stdout
        x = rng.standard_normal((8, 32)).astype(np.float32)
        ort.InferenceSession(str(qp), providers=["CPUExecutionProvider"]).run(None, {"x": x})  # its int8 kernels load it
        q_ort, f_ort = ort_emulated(qp, x), ort_emulated(fp, x)
        m = rlx.CompiledModel(rlx.load(str(qp)))
        q_rlx = m.run({"x": x})["y"]
        assert "\n".join(m.report_notes()).count("fuse-qdq: int8") == 2
        err_q, err_f = np.abs(q_rlx - q_ort).max(), np.abs(q_ort - f_ort).max()
        assert err_q <= max(0.25 * err_f, 0.02), (method, err_q, err_f)
    bad = subprocess.run([rlx_bin(), "quantize", str(fp), "--method", "kl", "--out", str(qp)],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "method" in bad.stderr


def test_python_quantize(tmp_path):
    rng = np.random.default_rng(3)
    fp, qp = tmp_path / "mlp.onnx", tmp_path / "q.onnx"
    mlp(fp, rng)
    calib = tmp_path / "calib.npz"
    np.savez(calib, x=rng.standard_normal((5, 8, 32)).astype(np.float32))
    r = rlx.quantize(str(fp), str(qp), calib=str(calib), method="percentile", per_channel=False)
    assert r["batches"] == 5
    assert [(l["name"], l["int8"]) for l in r["layers"]] == [("fc1", True), ("fc2", True)]
    assert r["output_cosine"] > 0.99 and r["output_sqnr_db"] > 20
    with pytest.raises(rlx.Error, match="no array 'x'"):
        np.savez(calib, y=np.zeros((1, 8, 32), np.float32))
        rlx.quantize(str(fp), str(qp), calib=str(calib))


def gemm_mlp(path, rng):
    """The same MLP written with Gemm (transB=1, W [out, in], bias C) as exporters of Linear do."""
    w1 = rng.standard_normal((64, 32)).astype(np.float32) * 0.2
    w2 = rng.standard_normal((16, 64)).astype(np.float32) * 0.2
    b1, b2 = (rng.standard_normal(n).astype(np.float32) * 0.1 for n in (64, 16))
    nodes = [h.make_node("Gemm", ["x", "W1", "b1"], ["h1"], name="fc1", transB=1), h.make_node("Relu", ["h1"], ["h2"]),
             h.make_node("Gemm", ["h2", "W2", "b2"], ["y"], name="fc2", transB=1)]
    m = make_model(nodes, "gemm_mlp", [h.make_tensor_value_info("x", T.FLOAT, [8, 32])],
                   [h.make_tensor_value_info("y", T.FLOAT, [8, 16])],
                   [nh.from_array(w1, "W1"), nh.from_array(b1, "b1"), nh.from_array(w2, "W2"), nh.from_array(b2, "b2")],
                   opset=17)
    onnx.save(m, str(path))


def weights_of(path):
    m = onnx.load(str(path))
    return {i.name: nh.to_array(i) for i in m.graph.initializer if i.data_type == T.INT8 and len(i.dims) == 2}


def test_quantize_gemm_reduce_range_and_keep_float(tmp_path):
    """Gemm layers are quantized (per channel along W's axis 0) and run in int8; reduce_range gives
    7-bit weights; --keep-float NAMES leaves a layer in float; ONNX Runtime runs every written model."""
    rng = np.random.default_rng(4)
    fp, qp = tmp_path / "g.onnx", tmp_path / "gq.onnx"
    gemm_mlp(fp, rng)
    x = rng.standard_normal((8, 32)).astype(np.float32)
    f = ort_emulated(fp, x)
    for rr, qmax in (("on", 64), ("off", 127)):
        r = rlx.quantize(str(fp), str(qp), calib=6, per_channel=True, reduce_range=rr)
        assert r["reduce_range"] == (rr == "on")
        assert [(l["name"], l["int8"]) for l in r["layers"]] == [("fc1", True), ("fc2", True)], r["layers"]
        w = weights_of(qp)
        assert len(w) == 2 and all(np.abs(a).max() == qmax for a in w.values()), {k: np.abs(a).max() for k, a in w.items()}
        q_ort = ort_emulated(qp, x)
        m = rlx.CompiledModel(rlx.load(str(qp)))
        q_rlx = m.run({"x": x})["y"]
        assert "\n".join(m.report_notes()).count("fuse-qdq: int8") == 2
        assert np.abs(q_rlx - q_ort).max() <= max(0.25 * np.abs(q_ort - f).max(), 0.02)
        assert r["output_cosine"] > 0.99
    r = rlx.quantize(str(fp), str(qp), calib=4, keep_float="fc2")
    assert [(l["name"], l["int8"], l["why"]) for l in r["layers"]] == [("fc1", True, ""), ("fc2", False, "kept float (--keep-float)")]
    assert r["kept_float"] == ["fc2"] and len(weights_of(qp)) == 1
    with pytest.raises(rlx.Error, match="no quantizable MatMul/Gemm named 'fc9'"):
        rlx.quantize(str(fp), str(qp), calib=2, keep_float="fc9")


def test_keep_float_auto_meets_the_budget(tmp_path):
    """keep_float auto: a budget the all-int8 model already meets keeps nothing float (one model
    evaluated); a budget above it keeps the fewest layers float that reach it, worst local SQNR first."""
    rng = np.random.default_rng(5)
    fp, qp = tmp_path / "mlp.onnx", tmp_path / "q.onnx"
    mlp(fp, rng)
    r = rlx.quantize(str(fp), str(qp), calib=4, keep_float="auto", budget=0.5)
    assert r["kept_float"] == [] and r["evaluations"] == 1 and r["output_cosine"] == r["all_int8_cosine"]
    strict = min(1.0, 1 - (1 - r["all_int8_cosine"]) / 4)  # a quarter of the all-int8 error
    r = rlx.quantize(str(fp), str(qp), calib=4, keep_float="auto", budget=strict)
    assert r["all_int8_cosine"] < strict
    assert 1 <= len(r["kept_float"]) <= 2 and r["evaluations"] >= 2
    assert r["output_cosine"] >= strict, r
    worst = min(r["layers"], key=lambda l: l["local_sqnr_db"])["name"]
    assert worst in r["kept_float"]
    assert all(l["int8"] == (l["name"] not in r["kept_float"]) for l in r["layers"])
