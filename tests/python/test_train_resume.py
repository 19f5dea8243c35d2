"""`rlx train-mnist` on a small synthetic dataset in the Fashion-MNIST file layout: a run stopped
mid-epoch and resumed ends bit-identical to an uninterrupted one; out-of-range labels, a diverging
loss, progress output into a log, the metrics log and its plot."""
import os
import re
import subprocess

import numpy as np
import pytest

from rlx_paths import rlx_bin
from test_train_cli import read_safetensors

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def write_idx(path, a):
    a = np.ascontiguousarray(a, dtype=np.uint8)
    with open(path, "wb") as f:
        f.write(bytes([0, 0, 0x08, a.ndim]))
        for d in a.shape:
            f.write(int(d).to_bytes(4, "big"))
        f.write(a.tobytes())


def make_dataset(d, n_train=640, n_test=100, bad_label=None):
    """Images whose mean brightness in one of 10 bands gives the class (learnable, not trivial)."""
    rng = np.random.default_rng(0)
    os.makedirs(d, exist_ok=True)
    for stem, n in (("train", n_train), ("t10k", n_test)):
        y = rng.integers(0, 10, n).astype(np.uint8)
        x = rng.integers(0, 60, (n, 28, 28)).astype(np.uint8)
        for i, c in enumerate(y):
            x[i, c * 2:c * 2 + 3, :] = 250
        if bad_label is not None and stem == "train":
            y[5] = bad_label
        write_idx(os.path.join(d, f"{stem}-images-idx3-ubyte"), x)
        write_idx(os.path.join(d, f"{stem}-labels-idx1-ubyte"), y)
    return str(d)


@pytest.fixture
def exe():
    e = rlx_bin()
    assert e, "rlx binary not found (build it, or set RLX_BIN)"
    return os.path.abspath(e)


def train(exe, data, *extra, check=True, cwd=None, env=None, optimizer=("--optimizer", "adam", "--schedule", "cosine")):
    args = [exe, "train-mnist", "--data", "fashion", "--data-dir", data, "--batch", "32", "--hidden", "32",
            "--seed", "3", *optimizer, *extra]
    r = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=cwd, env=env)
    if check:
        assert r.returncode == 0, r.stdout + r.stderr
    return r


def epoch_lines(out):
    # "epoch 2: train loss ..., test acc ..., N img/s (T s)": everything but the timing
    return [re.sub(r", [0-9.]+ img/s \([0-9.]+ s\)$", "", ln) for ln in out.splitlines() if ln.startswith("epoch ")]


@pytest.mark.parametrize("stop", [13, 20, 27])  # mid-epoch 1, at the epoch's end, mid-epoch 2
def test_resume_is_bit_identical(tmp_path, exe, stop):
    data = make_dataset(tmp_path / "data")
    full = train(exe, data, "--epochs", "3", "--checkpoint", str(tmp_path / "full.safetensors"),
                 "--metrics", str(tmp_path / "full.csv"))
    part = train(exe, data, "--epochs", "3", "--stop-after", str(stop), "--checkpoint", str(tmp_path / "part.safetensors"),
                 "--metrics", str(tmp_path / "part.csv"))
    assert f"stopped after step {stop}" in part.stdout
    _, meta = read_safetensors(str(tmp_path / "part.safetensors"))
    assert meta["step"] == str(stop) and meta["train_mnist.epoch_step"] == str((stop - 1) % 20 + 1)
    res = train(exe, data, "--epochs", "3", "--resume", str(tmp_path / "part.safetensors"),
                "--checkpoint", str(tmp_path / "resumed.safetensors"), "--metrics", str(tmp_path / "part.csv"))
    a, ma = read_safetensors(str(tmp_path / "full.safetensors"))
    b, mb = read_safetensors(str(tmp_path / "resumed.safetensors"))
    assert ma["step"] == mb["step"] == "60"
    assert a.keys() == b.keys()
    for k in a:  # parameters and Adam moments, bit for bit
        assert np.array_equal(a[k], b[k]), k
    # the epochs printed after resuming equal the uninterrupted run's (losses, accuracies)
    resumed = epoch_lines(res.stdout)
    assert resumed and resumed == epoch_lines(full.stdout)[-len(resumed):]
    # the appended metrics log holds every step once the reader keeps the last row per step
    import csv
    with open(tmp_path / "part.csv") as f:
        steps = {int(r["step"]) for r in csv.DictReader(f) if r["kind"] == "step"}
    assert steps == set(range(1, 61))


def test_out_of_range_labels_are_an_error(tmp_path, exe):
    data = make_dataset(tmp_path / "data", bad_label=12)
    r = train(exe, data, "--epochs", "1", "--checkpoint", "none", "--metrics", "none", check=False)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "label 12 at index 5" in r.stderr and "0..9" in r.stderr
    assert "epoch 1" not in r.stdout


def test_diverging_loss_warns_and_stops_under_flag(tmp_path, exe):
    data = make_dataset(tmp_path / "data")
    diverge = ["--lr", "1e30", "--epochs", "2", "--checkpoint", "none", "--metrics", "none"]
    r = train(exe, data, *diverge, check=False, optimizer=())
    assert r.returncode == 0 and "warning: the loss is" in r.stderr and "diverged" in r.stderr, r.stderr
    assert r.stderr.count("warning: the loss") == 1
    r = train(exe, data, *diverge, "--stop-on-nan", check=False, optimizer=())
    assert r.returncode == 1 and "stopping (--stop-on-nan)" in r.stderr, r.stderr
    assert "epoch 1:" not in r.stdout


def test_no_progress_frames_into_a_log(tmp_path, exe):
    data = make_dataset(tmp_path / "data")
    r = train(exe, data, "--epochs", "1", "--checkpoint", "none", "--metrics", "none")  # no --quiet
    assert "\r" not in r.stderr and "\r" not in r.stdout
    assert "epoch 1:" in r.stdout


def test_metrics_log_and_plot(tmp_path, exe):
    data = make_dataset(tmp_path / "data")
    csv_path, png = tmp_path / "m.csv", tmp_path / "curves.png"
    train(exe, data, "--epochs", "2", "--checkpoint", "none", "--metrics", str(csv_path), "--plot", str(png))
    rows = open(csv_path).read().splitlines()
    assert rows[0] == "kind,step,epoch,loss,lr,train_loss,train_acc,test_acc"
    assert sum(r.startswith("step,") for r in rows) == 40 and sum(r.startswith("epoch,") for r in rows) == 2
    ep = [r.split(",") for r in rows if r.startswith("epoch,")]
    assert [e[1] for e in ep] == ["20", "40"] and [e[2] for e in ep] == ["1", "2"]  # accuracy at each epoch's end
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    from matplotlib import image
    img = image.imread(str(png))
    assert img.shape[0] > 400 and img.shape[1] > 600
    r = train(exe, data, "--epochs", "1", "--metrics", "none", "--plot", str(png), check=False)
    assert r.returncode == 2 and "needs --metrics" in r.stderr


def test_default_mnist_folder_does_not_depend_on_the_working_directory(tmp_path, exe):
    env = {k: v for k, v in os.environ.items() if k != "RLX_MNIST_DIR"}
    shared = os.path.join(ROOT, "..", "shared", "data", "mnist")
    r = subprocess.run([exe, "train-mnist", "--data", "mnist", "--epochs", "1", "--max-steps", "2", "--checkpoint",
                        "none", "--metrics", "none"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    if os.path.isdir(shared):
        assert r.returncode == 0, r.stderr
        assert "epoch 1:" in r.stdout
    else:
        assert r.returncode == 1 and "MNIST not found" in r.stderr and "--data-dir" in r.stderr, r.stderr
