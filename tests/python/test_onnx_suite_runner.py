"""`rlx onnx-suite`: exit status on failures, empty folders and unwritable outputs; elements the ONNX
spec leaves undefined (a float cast out of a fixed-point type's range) are not compared, every other
element is."""
import json
import os
import re
import subprocess

import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx import TensorProto as T, helper as h, numpy_helper as nh  # noqa: E402

from onnx_helpers import make_model  # noqa: E402
from rlx_paths import rlx_bin  # noqa: E402


def write_case(root, name, nodes, inputs, outputs, xs, ys, opset=23, ir_version=11):
    d = os.path.join(root, name)
    os.makedirs(os.path.join(d, "test_data_set_0"))
    m = make_model(nodes, name, inputs, outputs, opset=opset, ir_version=ir_version)
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(m.SerializeToString())
    for prefix, vals in (("input", xs), ("output", ys)):
        for i, t in enumerate(vals):
            with open(os.path.join(d, "test_data_set_0", f"{prefix}_{i}.pb"), "wb") as f:
                f.write(t.SerializeToString())


def int4_case(root, name, want):
    """Cast(float -> INT4) over -9..8; `want` is the expected int4 output as written in output_0.pb."""
    xs = np.arange(-9, 9, dtype=np.float32)
    y = h.make_tensor("output", T.INT4, [len(want)], [int(v) for v in want])
    write_case(root, name, [h.make_node("Cast", ["input"], ["output"], to=T.INT4)],
               [h.make_tensor_value_info("input", T.FLOAT, [len(xs)])],
               [h.make_tensor_value_info("output", T.INT4, [len(xs)])], [nh.from_array(xs, "input")], [y])


def add_case(root, name, want):
    a = np.array([1.0, 2.0], np.float32)
    write_case(root, name, [h.make_node("Add", ["a", "a"], ["y"])], [h.make_tensor_value_info("a", T.FLOAT, [2])],
               [h.make_tensor_value_info("y", T.FLOAT, [2])], [nh.from_array(a, "a")],
               [nh.from_array(np.array(want, np.float32), "y")], opset=17, ir_version=8)


def suite(*args):
    return subprocess.run([rlx_bin(), "onnx-suite", *args], capture_output=True, text=True, timeout=120)


def test_out_of_range_float_casts_are_not_compared(tmp_path):
    root = str(tmp_path)
    in_range = list(range(-8, 8))
    # Out-of-range inputs (-9 and 8) expect arbitrary values: any generator's choice must pass ...
    int4_case(root, "cast_arbitrary_undefined", [3] + in_range + [-5])
    # ... but a wrong in-range value must still fail.
    int4_case(root, "cast_wrong_defined", [0] + in_range[:5] + [6] + in_range[6:] + [0])
    r = suite(root, "--jobs", "1")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "UNEXPECTED FAIL cast_wrong_defined" in r.stdout
    assert "cast_arbitrary_undefined" not in r.stdout
    assert "onnx node tests: 1 passed, 1 failed, 0 skipped" in r.stdout


def test_runner_exits_nonzero_without_xfail_and_on_bad_outputs(tmp_path):
    root = str(tmp_path / "cases")
    add_case(root, "add_ok", [2.0, 4.0])
    r = suite(root)
    assert r.returncode == 0, r.stdout + r.stderr
    add_case(root, "add_bad", [2.0, 5.0])
    r = suite(root)
    assert r.returncode == 1 and "UNEXPECTED FAIL add_bad" in r.stdout, r.stdout
    # A listed failure is expected; a json path that cannot be written fails the run.
    xfail = tmp_path / "xfail.txt"
    xfail.write_text("add_bad numerics\n")
    assert suite(root, "--xfail", str(xfail)).returncode == 0
    r = suite(root, "--xfail", str(xfail), "--json", str(tmp_path / "nodir" / "x.json"))
    assert r.returncode != 0 and "x.json" in r.stderr, r.stderr
    # An empty folder ran nothing: that is a failure, not "0 passed".
    empty = tmp_path / "empty"
    empty.mkdir()
    r = suite(str(empty))
    assert r.returncode == 1 and "no cases ran" in r.stderr, r.stderr


def test_runner_runs_on_the_device_asked_for(tmp_path):
    root = str(tmp_path / "cases")
    add_case(root, "add_ok", [2.0, 4.0])
    r = suite(root, "--device", "nope")
    assert r.returncode == 2 and "unknown device 'nope'" in r.stderr, r.stderr
    devices = json.loads(subprocess.run([rlx_bin(), "devices", "--json"], capture_output=True, text=True,
                                        timeout=120).stdout)
    runnable = [d["name"] for d in devices if d["runs"] and d["name"] != "cpu"]
    for dev in ["cpu"] + runnable[:1]:
        out = tmp_path / f"{dev}.json"
        r = suite(root, "--device", dev, "--json", str(out))
        assert r.returncode == 0, r.stdout + r.stderr
        res = json.loads(out.read_text())
        assert res["device"] == dev and res["passed"] == 1, res


def test_long_runs_report_progress_on_stderr(tmp_path):
    """onnx-suite and ops tell how far they are; into a log (not a terminal) as plain lines."""
    for i in range(3):
        add_case(str(tmp_path), f"test_add_{i}", [2.0, 4.0])
    r = suite(str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "rlx onnx-suite: cases: 3/3 (100%)" in r.stderr and "0 failed" in r.stderr, r.stderr
    assert "\r" not in r.stderr
    o = subprocess.run([rlx_bin(), "ops", "--device", "cpu", "--quiet"], capture_output=True, text=True, timeout=600)
    assert "rlx ops" not in o.stderr  # --quiet: no progress either
    o = subprocess.run([rlx_bin(), "ops", "--device", "cpu"], capture_output=True, text=True, timeout=600)
    assert o.returncode == 0, o.stdout + o.stderr
    assert re.search(r"rlx ops cpu: op x dtype cases: (\d+)/\1 \(100%\)", o.stderr), o.stderr
    assert "\r" not in o.stderr
