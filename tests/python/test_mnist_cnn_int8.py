"""scripts/make_mnist_cnn_int8.py: a small MNIST CNN (Conv 3x3 + ReLU + MaxPool + Gemm) trained
with numpy and post-training quantized to QDQ ONNX. Checks, with onnxruntime on the 2,000 held-out
images, that the float model is trained (> 85 % after one epoch) and that the int8 QDQ model is
within 0.5 pt of it; that the script's integer-only numpy run (i32 accumulators, fixed-point
requantize) predicts exactly what onnxruntime's unfused QDQ graph predicts; and that the QDQ model has per-channel int8 conv weights and int32 biases.
`rlx run --device cpu` of the QDQ model (fuse-qdq: quantize -> qconv -> i8 max pool -> qlinear) predicts
what the integer-only numpy run predicts, image for image, and its dispatch table (--report) runs
the qconv. Under CI=true a missing MNIST directory fails instead of skipping."""
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


def need_mnist():
    if not os.path.exists(os.path.join(DATA, "t10k-images-idx3-ubyte.gz")):
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but missing MNIST in " + DATA)
        pytest.skip("missing MNIST in " + DATA)


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    need_mnist()
    d = tmp_path_factory.mktemp("cnn")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "make_mnist_cnn_int8.py"), "--out", str(d), "--epochs", "1"],
                       capture_output=True, text=True, check=True, env=dict(os.environ, RLX_MNIST_DIR=DATA))
    return {"dir": d, "stdout": r.stdout}


def test_rlx_run_int8_cnn_matches_integer_numpy(cnn):
    cnn = cnn["dir"]
    from rlx_paths import rlx_bin
    exe = rlx_bin()
    if not exe:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but no rlx binary")
        pytest.skip("the rlx binary (set RLX_BIN)")
    x = np.load(cnn / "images.npy")[8000:]
    np.save(cnn / "held.npy", x)
    r = subprocess.run([exe, "run", str(cnn / "mnist_cnn_int8.onnx"), "--device", "cpu", "--input", "x=" + str(cnn / "held.npy"),
                        "--output", str(cnn / "rlx.npy"), "--report"], capture_output=True, text=True, check=True)
    assert "qconv" in r.stdout + r.stderr, r.stdout + r.stderr
    z = np.load(cnn / "rlx.npy")
    ref = np.load(cnn / "int8_reference_pred.npy")[8000:]
    assert z.shape == (2000, 10)
    assert (z.argmax(1) == ref).all(), int((z.argmax(1) != ref).sum())


def test_cnn_int8_within_half_point_of_float(cnn):
    tmp_path, out = cnn["dir"], cnn["stdout"]
    m = re.search(r"float ([\d.]+)%\s+int8 QDQ ([\d.]+)%", out)
    assert m, out
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


@pytest.mark.parametrize("board", ["m4", "m55"])
def test_cortexm_firmware_cnn_bit_exact(cnn, board, tmp_path):
    """The int8 CNN as Cortex-M firmware (qconv, i8 max pool, qlinear kernels) in qemu-system-arm on 16
    test images: logits bit-identical to `rlx run --device cpu`."""
    import shutil
    from rlx_paths import rlx_bin
    exe = rlx_bin()
    tools = ["arm-none-eabi-gcc", "qemu-system-arm", "make"]
    if not exe or not all(shutil.which(t) for t in tools):
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but missing the rlx binary or " + ", ".join(tools))
        pytest.skip("missing the rlx binary or " + ", ".join(tools))
    d = cnn["dir"]
    x = np.load(d / "images.npy")[8000:8016]
    np.save(tmp_path / "x1.npy", x[:1])
    np.save(tmp_path / "xs.npy", x)
    subprocess.run([exe, "run", str(d / "mnist_cnn_int8.onnx"), "--device", "cpu", "--input", "x=" + str(tmp_path / "xs.npy"),
                    "--output", str(tmp_path / "host.npy")], check=True, capture_output=True)
    proj = tmp_path / "fw"
    r = subprocess.run([exe, "compile", str(d / "mnist_cnn_int8.onnx"), "--device", "cortexm", "--input",
                        "x=" + str(tmp_path / "x1.npy"), "--out", str(proj), "--board", board], check=True,
                       capture_output=True, text=True)
    assert "scratch" in r.stdout and "arena" in r.stdout, r.stdout
    assert "rlx_qconv(" in (proj / "model.c").read_text() and "rlx_pool8(" in (proj / "model.c").read_text()
    subprocess.run(["make", "-s", "-C", str(proj)], check=True, capture_output=True)
    x.astype(np.float32).tofile(proj / "input.bin")
    run = subprocess.run(["make", "-s", "-C", str(proj), "run"], check=True, capture_output=True, text=True, timeout=120)
    assert "records=16" in run.stdout, run.stdout
    fw = np.fromfile(proj / "output.bin", np.float32).reshape(16, 10)
    host = np.load(tmp_path / "host.npy")
    assert np.array_equal(fw.view(np.uint32), host.view(np.uint32)), "firmware logits differ from the host int8 run"
