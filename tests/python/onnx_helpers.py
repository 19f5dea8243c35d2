"""Helpers shared by the Python ONNX tests (test_onnx_cli.py, test_rten.py): build a small checked
ONNX model, and run a model file through `rlx run`."""
import os
import subprocess

import numpy as np

from rlx_paths import rlx_bin


def make_model(nodes, name, inputs, outputs, initializers=(), opset=17, ir_version=8):
    """A ModelProto of one graph in the default domain at `opset`, validated by onnx.checker."""
    import onnx
    from onnx import helper as h

    g = h.make_graph(list(nodes), name, list(inputs), list(outputs), list(initializers))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = ir_version
    onnx.checker.check_model(m, full_check=True)
    return m


def run_rlx(model, inputs, tmp, tag, timeout=300):
    """`rlx run MODEL --input name=file.npy ... --output out.npz` -> (dict of arrays, None) or (None, error)."""
    args = [rlx_bin(), "run", model, "--output", os.path.join(tmp, tag + "_out.npz")]
    for i, (k, v) in enumerate(inputs.items()):
        p = os.path.join(tmp, f"{tag}_in{i}.npy")
        np.save(p, v)
        args += ["--input", f"{k}={p}"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        return None, (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]
    with np.load(os.path.join(tmp, tag + "_out.npz")) as z:
        return {k: z[k] for k in z.files}, None
