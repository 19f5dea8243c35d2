"""scripts/make_mnist_cnn_int8.py: a small MNIST CNN (Conv 3x3 + ReLU + MaxPool + Gemm) trained
with numpy and post-training quantized to QDQ ONNX. Checks, with onnxruntime on the 2,000 held-out
images, that the float model is trained (> 85 % after one epoch) and that the int8 QDQ model is
within 0.5 pt of it; that the script's integer-only numpy run (i32 accumulators, fixed-point
requantize) predicts exactly what onnxruntime's unfused QDQ graph predicts; and that the QDQ model has per-channel int8 conv weights and int32 biases.
Under CI=true a missing MNIST directory fails instead of skipping."""
import os
import re
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.environ.get("RLX_MNIST_DIR") or os.path.join(ROOT, "..", "shared", "data", "mnist")


def test_cnn_int8_within_half_point_of_float(tmp_path):
    if not os.path.exists(os.path.join(DATA, "t10k-images-idx3-ubyte.gz")):
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but missing MNIST in " + DATA)
        pytest.skip("missing MNIST in " + DATA)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "make_mnist_cnn_int8.py"), "--out", str(tmp_path),
                        "--epochs", "1"], capture_output=True, text=True, check=True,
                       env=dict(os.environ, RLX_MNIST_DIR=DATA))
    m = re.search(r"float ([\d.]+)%\s+int8 QDQ ([\d.]+)%", r.stdout)
    assert m, r.stdout
    fa, qa = float(m.group(1)), float(m.group(2))
    assert fa > 85.0
    assert abs(fa - qa) <= 0.5
    q = onnx.load(str(tmp_path / "mnist_cnn_int8.onnx"))
    inits = {i.name: numpy_helper.to_array(i) for i in q.graph.initializer}
    assert inits["conv_w_q"].dtype == np.int8 and inits["conv_w_q"].shape == (8, 1, 3, 3)
    assert inits["conv_w_s"].shape == (8,)
    assert inits["conv_w_bq"].dtype == np.int32
    import onnxruntime as ort
    o = ort.SessionOptions()
    o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # QDQ as written, no int8 fusion
    x = np.load(tmp_path / "images.npy")[8000:]
    z = ort.InferenceSession(str(tmp_path / "mnist_cnn_int8.onnx"), o, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    ref = np.load(tmp_path / "int8_reference_pred.npy")[8000:]
    assert (z.argmax(1) == ref).all()
    ops = [n.op_type for n in q.graph.node]
    assert ops.count("QuantizeLinear") == 3 and "Conv" in ops and "MaxPool" in ops
