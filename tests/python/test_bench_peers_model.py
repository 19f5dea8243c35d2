"""bench/peers_model.py: the seeded encoder's ONNX graph, its NumPy evaluation and its safetensors file
agree (ONNX Runtime as the oracle), so every peer of bench/peers.py runs the same computation."""
import importlib.util
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
spec = importlib.util.spec_from_file_location("peers_model", os.path.join(ROOT, "bench", "peers_model.py"))
pm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pm)

VOCAB = 500  # a small word-embedding table keeps the test fast; the layers are MiniLM-L6's


@pytest.fixture(scope="module")
def weights():
    return pm.make_weights(seed=3, vocab=VOCAB)


def inputs(batch, seq):
    rng = np.random.default_rng(7)
    ids = rng.integers(1, VOCAB, size=(batch, seq), dtype=np.int64)
    mask = np.ones((batch, seq), np.int64)
    mask[1, seq // 2:] = 0  # a padded sentence: the mask must reach attention and pooling
    ids[1, seq // 2:] = 0
    return ids, mask


def test_weights_are_seeded(weights):
    again = pm.make_weights(seed=3, vocab=VOCAB)
    assert set(again) == set(weights)
    assert all(np.array_equal(again[k], weights[k]) for k in weights)
    assert not np.array_equal(pm.make_weights(seed=4, vocab=VOCAB)["encoder.layer.0.attention.self.query.weight"],
                              weights["encoder.layer.0.attention.self.query.weight"])


def test_safetensors_round_trip(tmp_path, weights):
    path = str(tmp_path / "model.safetensors")
    pm.write_safetensors(path, weights)
    back = pm.read_safetensors(path)
    assert list(back) == list(weights)
    for k in weights:
        assert back[k].shape == weights[k].shape and np.array_equal(back[k], weights[k]), k


@pytest.mark.parametrize("static", [False, True])
def test_onnx_graph_matches_numpy_encoder(weights, static):
    ort = pytest.importorskip("onnxruntime")
    ids, mask = inputs(3, 12)
    model = pm.onnx_graph(weights, 3, 12) if static else pm.onnx_graph(weights)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {"input_ids": ids, "attention_mask": mask})[0]
    want = pm.encoder(pm.NumpyOps, pm.prepare(weights, lambda a: a), ids, mask)
    assert got.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(got, want, atol=2e-5)
    # the padded tail is masked: changing its token ids leaves the embedding unchanged
    ids2 = ids.copy()
    ids2[1, 6:] = 42
    got2 = sess.run(None, {"input_ids": ids2, "attention_mask": mask})[0]
    np.testing.assert_allclose(got2, got, atol=1e-6)
    assert not np.allclose(got[0], got[1], atol=1e-3)
