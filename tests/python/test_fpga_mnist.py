"""The fpga device on MNIST: a numpy-trained MLP quantized by `rlx quantize --calib` (scripts/
mnist_int8_mlp.py), simulated with Verilator through `rlx run --device fpga`, bit-exact against the
host int8 run (`--device cpu`) on 300 held-out test images. Under CI=true a missing verilator or
MNIST folder fails the test instead of skipping it."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from rlx_paths import rlx_bin

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import mnist_int8_mlp  # noqa: E402


def require(cond, what):
    if not cond:
        (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)("missing: " + what)


def rlx():
    b = rlx_bin() or os.path.join(ROOT, "build", "bin", "rlx")
    require(b and os.path.exists(b), "the rlx binary (RLX_BIN or build/bin/rlx)")
    return b


def test_fpga_mnist_bit_exact_vs_host_int8(tmp_path):
    require(shutil.which("verilator"), "verilator (Debian package verilator)")
    require(os.path.exists(os.path.join(mnist_int8_mlp.mnist_dir(), "t10k-images-idx3-ubyte.gz")),
            "MNIST at " + mnist_int8_mlp.mnist_dir())
    exe = rlx()
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "mnist_int8_mlp.py"), "--out", str(tmp_path),
                    "--epochs", "2", "--rlx", exe], check=True, capture_output=True)
    x, y = mnist_int8_mlp.load_mnist()
    xs, ys = x[8000:8300], y[8000:8300]
    np.save(tmp_path / "x.npy", xs)
    model = str(tmp_path / "mlp_int8.onnx")
    outs = {}
    for dev in ("cpu", "fpga"):
        cmd = [exe, "run", model, "--input", f"x={tmp_path / 'x.npy'}", "--device", dev, "--output", str(tmp_path / f"{dev}.npy")]
        r = subprocess.run(cmd + (["--parallel", "16"] if dev == "fpga" else []), capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        outs[dev] = np.load(tmp_path / f"{dev}.npy")
        if dev == "fpga":
            assert "[fpga] 300 images in" in r.stderr, r.stderr
    a, b = outs["fpga"], outs["cpu"]
    assert a.shape == b.shape == (300, 10)
    same = (a.view(np.uint32) == b.view(np.uint32)).all(axis=1)
    assert same.sum() == 300, f"{300 - same.sum()} of 300 rows differ"
    acc = float((a.argmax(1) == ys).mean())
    assert acc > 0.9, acc


def test_fpga_errors_name_the_problem(tmp_path):
    exe = rlx()
    # A float model is not an int8 MLP: the message says to quantize it.
    f32 = tmp_path / "f.onnx"
    params = [np.ones((784, 8), np.float32), np.zeros(8, np.float32), np.ones((8, 10), np.float32), np.zeros(10, np.float32)]
    mnist_int8_mlp.to_onnx(params, str(f32))
    r = subprocess.run([exe, "compile", str(f32), "--device", "fpga", "--out", str(tmp_path / "p")],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "[fpga]" in r.stderr and "rlx quantize" in r.stderr, r.stderr
    r = subprocess.run([exe, "compile", str(f32), "--device", "fpga"], capture_output=True, text=True)
    assert r.returncode == 2 and "--out" in r.stderr, r.stderr
