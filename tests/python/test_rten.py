""".rten models: ONNX models converted with the pip `rten-convert` (the rten project's own
converter) must run under `rlx run` with parity against `rlx run` of the ONNX original, and against the
independent oracles (the node suite's expected outputs; onnx.reference for the real models).

rten narrows int64/bool to int32 and float16 to float32, so the .rten side is fed and compared in
those types. Run the sweep over every Debian libonnx-testdata node case with
`python tests/python/test_rten.py --sweep [--filter S]` (prints convert/run/parity counts).
"""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("rten_convert")  # scripts/bootstrap.sh installs it; CI runs these tests
from onnx import TensorProto as T, helper as h, numpy_helper as nh  # noqa: E402

NODE = "/usr/share/libonnx-testdata/data/node"  # Debian libonnx-testdata (scripts/bootstrap.sh)


from rlx_paths import rlx_bin  # noqa: E402
from onnx_helpers import make_model, run_rlx  # noqa: E402


def rten_convert(onnx_path, out, v1=False):
    """Runs rten-convert; returns None on success, else its last stderr line (a converter limitation)."""
    args = [sys.executable, "-c", "import sys; from rten_convert.converter import main; sys.exit(main())",
            *(["--v1"] if v1 else []), onnx_path, out]
    r = subprocess.run(args, capture_output=True, text=True)
    return None if r.returncode == 0 else (r.stderr.strip().splitlines() or ["failed"])[-1]


def as_rten(a):
    """The array rten sees: int64/bool -> int32, float16 -> float32."""
    if a.dtype in (np.int64, np.bool_, np.int16):
        return a.astype(np.int32)
    if a.dtype == np.float16:
        return a.astype(np.float32)
    return a


def close(got, want, rtol, atol):
    got, want = as_rten(np.asarray(got)), as_rten(np.asarray(want))
    if got.shape != want.shape:
        return False
    if want.dtype.kind in "iub":
        return got.dtype.kind in "iub" and np.array_equal(got.astype(np.int64), want.astype(np.int64))
    return np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)


def node_case(name):
    d = os.path.join(NODE, name)
    m = onnx.load(os.path.join(d, "model.onnx"))
    inits = {t.name for t in m.graph.initializer}
    names = [i.name for i in m.graph.input if i.name not in inits]
    ds = os.path.join(d, "test_data_set_0")

    def read(prefix):
        out, i = [], 0
        while os.path.exists(os.path.join(ds, f"{prefix}_{i}.pb")):
            t = onnx.TensorProto()
            with open(os.path.join(ds, f"{prefix}_{i}.pb"), "rb") as f:
                t.ParseFromString(f.read())
            out.append(nh.to_array(t))
            i += 1
        return out

    outs = [o.name for o in m.graph.output]
    return d, dict(zip(names, read("input"))), dict(zip(outs, read("output")))


def check_node_case(name, tmp):
    """-> status string: 'parity' or why not ('convert: ...', 'onnx: ...', 'rten: ...', 'mismatch ...')."""
    d, ins, want = node_case(name)
    src = os.path.join(tmp, "model.onnx")
    shutil.copy(os.path.join(d, "model.onnx"), src)
    rt = os.path.join(tmp, "model.rten")
    err = rten_convert(src, rt)
    if err:
        return "convert: " + err
    ref, err = run_rlx(src, ins, tmp, "onnx")
    if err:
        return "onnx: " + err
    got, err = run_rlx(rt, {k: as_rten(v) for k, v in ins.items()}, tmp, "rten")
    if err:
        return "rten: " + err
    for k in want:
        if k not in got:
            return f"rten: no output {k}"
        if not close(got[k], ref[k], 1e-5, 1e-6):
            return f"mismatch vs onnx run: {k}"
        if not close(got[k], want[k], 1e-3, 1e-7):
            return f"mismatch vs suite output: {k}"
    return "parity"


# Node cases across the op families rten carries (conv/pool/gemm/norms, shape ops with int64 inputs,
# bool inputs and outputs, int64 index outputs, reductions with axes as attribute and as input).
NODE_CASES = [
    "test_conv_with_strides_padding", "test_conv_with_autopad_same", "test_averagepool_1d_default", "test_convtranspose", "test_maxpool_2d_pads",
    "test_averagepool_2d_pads_count_include_pad", "test_gemm_all_attributes", "test_matmul_3d", "test_softmax_axis_1",
    "test_logsoftmax_axis_0", "test_reshape_reordered_all_dims", "test_transpose_all_permutations_2",
    "test_concat_3d_axis_negative_2", "test_slice_neg_steps", "test_unsqueeze_two_axes", "test_squeeze",
    "test_gather_2d_indices", "test_where_example", "test_equal_bcast", "test_less_equal", "test_not_2d",
    "test_argmax_keepdims_example", "test_shape", "test_top_k_smallest", "test_nonzero_example",
    "test_reduce_mean_keepdims_example", "test_reduce_sum_keepdims_example", "test_layer_normalization_3d_axis1_epsilon",
    "test_batchnorm_epsilon", "test_instancenorm_example", "test_clip_splitbounds", "test_expand_dim_changed",
    "test_split_variable_parts_2d", "test_cast_FLOAT16_to_FLOAT", "test_depthtospace_crd_mode",
    "test_resize_upsample_scales_nearest", "test_mod_mixed_sign_int32", "test_edge_pad", "test_onehot_with_axis",
]


@pytest.fixture(scope="module")
def have_cases():
    if not os.path.isdir(NODE):
        pytest.fail(f"{NODE} missing: run scripts/bootstrap.sh (Debian libonnx-testdata)")
    assert rlx_bin(), "rlx binary not found (set RLX_BIN or PYTHONPATH=BUILD/python)"


@pytest.mark.parametrize("case", NODE_CASES)
def test_node_case_parity(case, have_cases, tmp_path):
    assert check_node_case(case, str(tmp_path)) == "parity"


def real_models():
    """A small MLP and a conv net with a symbolic batch, weights big enough for the tensor-data segment."""
    rng = np.random.default_rng(42)
    f32 = lambda *s: (rng.standard_normal(s) * 0.5).astype(np.float32)
    vi = h.make_tensor_value_info
    mlp = (
        [h.make_node("Gemm", ["x", "w1", "b1"], ["h1"], transB=1), h.make_node("Relu", ["h1"], ["r1"]),
         h.make_node("Gemm", ["r1", "w2", "b2"], ["h2"], transB=1), h.make_node("Tanh", ["h2"], ["r2"]),
         h.make_node("MatMul", ["r2", "w3"], ["logits"]), h.make_node("Softmax", ["logits"], ["probs"], axis=-1)],
        "mlp", [vi("x", T.FLOAT, ["batch", 20])], [vi("probs", T.FLOAT, ["batch", 5])],
        [nh.from_array(f32(32, 20), "w1"), nh.from_array(f32(32), "b1"), nh.from_array(f32(16, 32), "w2"),
         nh.from_array(f32(16), "b2"), nh.from_array(f32(16, 5), "w3")])
    conv = (
        [h.make_node("Conv", ["x", "k1", "c1"], ["a1"], pads=[1, 1, 1, 1]),
         h.make_node("BatchNormalization", ["a1", "g", "be", "mu", "var"], ["n1"], epsilon=1e-3),
         h.make_node("Relu", ["n1"], ["r1"]),
         h.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
         h.make_node("Conv", ["p1", "k2", "c2"], ["a2"], strides=[2, 2], pads=[1, 1, 1, 1], group=2),
         h.make_node("Relu", ["a2"], ["r2"]),
         h.make_node("GlobalAveragePool", ["r2"], ["gp"]), h.make_node("Flatten", ["gp"], ["fl"], axis=1),
         h.make_node("Gemm", ["fl", "wf", "bf"], ["logits"], transB=1)],
        "convnet", [vi("x", T.FLOAT, ["batch", 3, 16, 16])], [vi("logits", T.FLOAT, ["batch", 10])],
        [nh.from_array(f32(8, 3, 3, 3), "k1"), nh.from_array(f32(8), "c1"),
         nh.from_array((1 + 0.1 * f32(8)).astype(np.float32), "g"), nh.from_array(f32(8), "be"),
         nh.from_array(f32(8), "mu"), nh.from_array((1 + np.abs(f32(8))).astype(np.float32), "var"),
         nh.from_array(f32(16, 4, 3, 3), "k2"), nh.from_array(f32(16), "c2"),
         nh.from_array(f32(10, 16), "wf"), nh.from_array(f32(10), "bf")])
    out = {}
    for g, shape in ((mlp, (3, 20)), (conv, (2, 3, 16, 16))):
        m = make_model(*g)
        out[m.graph.name] = (m, {"x": rng.standard_normal(shape).astype(np.float32)})
    return out


@pytest.mark.parametrize("name", ["mlp", "convnet"])
@pytest.mark.parametrize("v1", [False, True], ids=["v2", "v1"])
def test_real_model_parity(name, v1, tmp_path, have_cases):
    from onnx.reference import ReferenceEvaluator

    m, ins = real_models()[name]
    src, rt = str(tmp_path / f"{name}.onnx"), str(tmp_path / f"{name}.rten")
    onnx.save(m, src)
    assert rten_convert(src, rt, v1=v1) is None
    with open(rt, "rb") as f:
        assert (f.read(4) == b"RTEN") == (not v1)  # v2 carries the header, v1 is a bare flatbuffer
    oracle = ReferenceEvaluator(m).run(None, ins)[0]
    ref, err = run_rlx(src, ins, str(tmp_path), "onnx")
    assert err is None, err
    got, err = run_rlx(rt, ins, str(tmp_path), "rten")
    assert err is None, err
    out = m.graph.output[0].name
    np.testing.assert_allclose(got[out], ref[out], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[out], oracle, rtol=1e-4, atol=1e-5)


def test_cli_inspect_compile_and_errors(tmp_path, have_cases):
    m, _ = real_models()["convnet"]
    src, rt = str(tmp_path / "c.onnx"), str(tmp_path / "c.rten")
    onnx.save(m, src)
    assert rten_convert(src, rt) is None
    r = subprocess.run([rlx_bin(), "inspect", rt], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "format: rten v2" in r.stdout and "x: f32[batch,3,16,16]" in r.stdout
    assert "Conv 2" in r.stdout and "in the tensor-data segment" in r.stdout and "onnx_hash" in r.stdout
    r = subprocess.run([rlx_bin(), "compile", rt, "--report", "--bind", "batch=2"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "native" in r.stdout or "common" in r.stdout
    data = open(rt, "rb").read()
    bad, x = str(tmp_path / "bad.rten"), str(tmp_path / "x.npy")
    np.save(x, np.zeros((1, 3, 16, 16), np.float32))  # a readable input: the error is the model's
    for cut in (10, 100, len(data) // 2, len(data) - 8):
        with open(bad, "wb") as f:
            f.write(data[:cut])
        r = subprocess.run([rlx_bin(), "inspect", bad], capture_output=True, text=True)
        assert r.returncode == 1 and r.stderr.startswith("rlx: [rten] " + bad), (cut, r.stderr)
        r = subprocess.run([rlx_bin(), "run", bad, "--input", f"x={x}"], capture_output=True, text=True)
        assert r.returncode == 1 and "[rten]" in r.stderr, (cut, r.stderr)


def sweep(filt=""):
    """Every libonnx-testdata case: how many convert, run and match (not a test; prints a table)."""
    from collections import Counter

    counts, reasons = Counter(), Counter()
    for name in sorted(os.listdir(NODE)):
        if filt not in name:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            try:
                s = check_node_case(name, tmp)
            except Exception as e:  # noqa: BLE001 - a case the harness cannot load
                s = "harness: " + str(e).splitlines()[0]
        kind = s.split(":")[0].split(" vs")[0]
        counts[kind] += 1
        if kind != "parity":
            reasons[s[:100]] += 1
            print(f"{name}: {s}", flush=True)
    print("rten sweep:", dict(counts))
    for r, n in reasons.most_common(15):
        print(f"  {n:4d}  {r}")


if __name__ == "__main__":
    if "--sweep" in sys.argv:
        i = sys.argv.index("--filter") + 1 if "--filter" in sys.argv else None
        sweep(sys.argv[i] if i else "")
