"""The cortexm device end to end on real MNIST: scripts/make_mnist_int8.py trains a small MLP and
quantizes it (rlx quantize, per-channel, real calibration batches); `rlx compile --device cortexm
--out` writes the firmware project for the M4 and the M55; its outputs in qemu-system-arm, on 300
test images, equal RLX's host int8 run (`rlx run --device cpu`) bit for bit, so the predictions do too.
Under CI=true a missing toolchain or MNIST directory fails instead of skipping."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from rlx_paths import rlx_bin

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.environ.get("RLX_MNIST_DIR") or os.path.join(ROOT, "..", "shared", "data", "mnist")
CI = os.environ.get("CI") == "true"
TOOLS = ["arm-none-eabi-gcc", "qemu-system-arm", "make"]
N = 300


def require(ok, what):
    if ok:
        return
    if CI:
        pytest.fail("CI=true but missing: " + what)
    pytest.skip("missing: " + what)


@pytest.fixture(scope="module")
def mnist(tmp_path_factory):
    exe = rlx_bin()
    require(exe, "the rlx binary (set RLX_BIN)")
    require(os.path.isdir(DATA), "MNIST in " + DATA)
    d = tmp_path_factory.mktemp("cortexm")
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "make_mnist_int8.py"), "--out", str(d), "--rlx", exe,
                    "--epochs", "1"], check=True, capture_output=True, text=True)
    x = np.load(d / "images.npy")[:N]
    np.save(d / "x1.npy", x[:1])
    np.save(d / "xs.npy", x)
    host = d / "host.npy"
    subprocess.run([exe, "run", str(d / "mnist_mlp_int8.onnx"), "--device", "cpu", "--input", "x=" + str(d / "xs.npy"),
                    "--output", str(host)], check=True, capture_output=True)
    return {"exe": exe, "dir": d, "x": x, "host": np.load(host), "labels": np.load(d / "labels.npy")[:N]}


def test_devices_reports_cortexm_truthfully():
    exe = rlx_bin()
    require(exe, "the rlx binary (set RLX_BIN)")
    out = subprocess.run([exe, "devices", "--json"], check=True, capture_output=True, text=True).stdout
    entry = [d for d in json.loads(out) if d["name"] == "cortexm"][0]
    have = all(shutil.which(t) for t in TOOLS)
    assert entry["runs"] == have, entry
    if not have:
        assert "not found" in entry["reason"]


@pytest.mark.parametrize("board", ["m4", "m55"])
def test_firmware_bit_exact_on_mnist(mnist, board):
    require(all(shutil.which(t) for t in TOOLS), ", ".join(TOOLS))
    d, exe = mnist["dir"], mnist["exe"]
    proj = d / ("fw_" + board)
    r = subprocess.run([exe, "compile", str(d / "mnist_mlp_int8.onnx"), "--device", "cortexm", "--input",
                        "x=" + str(d / "x1.npy"), "--out", str(proj), "--board", board], check=True,
                       capture_output=True, text=True)
    assert "flash" in r.stdout and "arena" in r.stdout
    subprocess.run(["make", "-s", "-C", str(proj)], check=True, capture_output=True)
    mnist["x"].astype(np.float32).tofile(proj / "input.bin")
    run = subprocess.run(["make", "-s", "-C", str(proj), "run"], check=True, capture_output=True, text=True, timeout=120)
    assert "records=%d" % N in run.stdout, run.stdout
    fw = np.fromfile(proj / "output.bin", np.float32).reshape(N, 10)
    host = mnist["host"]
    assert np.array_equal(fw.view(np.uint32), host.view(np.uint32)), "firmware logits differ from the host int8 run"
    assert np.array_equal(fw.argmax(1), host.argmax(1))
    assert (fw.argmax(1) == mnist["labels"]).mean() > 0.8  # a trained model, not noise


def test_rlx_run_device_cortexm_equals_cpu(mnist, tmp_path):
    require(all(shutil.which(t) for t in TOOLS), ", ".join(TOOLS))
    d, exe = mnist["dir"], mnist["exe"]
    x4 = tmp_path / "x4.npy"
    np.save(x4, mnist["x"][:4])
    outs = {}
    for dev in ("cortexm", "cpu"):
        o = tmp_path / (dev + ".npy")
        subprocess.run([exe, "run", str(d / "mnist_mlp_int8.onnx"), "--device", dev, "--input", "x=" + str(x4), "--output",
                        str(o)], check=True, capture_output=True, env=dict(os.environ, RLX_CORTEXM_BOARD="m55"))
        outs[dev] = np.load(o)
    assert np.array_equal(outs["cortexm"].view(np.uint32), outs["cpu"].view(np.uint32))
