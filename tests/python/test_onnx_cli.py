"""`rlx run MODEL.onnx --input ...`: each input file is read exactly once (the arrays both fix the
shapes at import and are fed), checked by serving the inputs from named pipes, which can be read
only once; and the result matches NumPy."""
import os
import subprocess
import threading

import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx import TensorProto as T, helper as h, numpy_helper as nh  # noqa: E402

from onnx_helpers import make_model  # noqa: E402
from rlx_paths import rlx_bin  # noqa: E402


def add_model(path):
    """y = a + b * w, with a symbolic batch dim (the fed arrays fix it at import)."""
    w = np.array([0.5, -2.0, 3.0], np.float32)
    m = make_model([h.make_node("Mul", ["b", "w"], ["bw"]), h.make_node("Add", ["a", "bw"], ["y"])], "add",
                   [h.make_tensor_value_info("a", T.FLOAT, ["n", 3]), h.make_tensor_value_info("b", T.FLOAT, ["n", 3])],
                   [h.make_tensor_value_info("y", T.FLOAT, ["n", 3])], [nh.from_array(w, "w")])
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    return w


def serve_once(fifo, data):
    """Writes `data` to the named pipe for its first reader only; a second open would wait forever."""
    os.mkfifo(fifo)

    def write():
        try:
            with open(fifo, "wb") as f:
                f.write(data)
        except BrokenPipeError:  # released by run_with_pipes after rlx failed without reading
            pass

    t = threading.Thread(target=write, daemon=True)
    t.start()
    return t


def run_with_pipes(tmp_path, inputs):
    """Runs `rlx run` with --input NAME=PIPE for each (name, pipe, bytes); returns (result, outputs)."""
    model, out = str(tmp_path / "add.onnx"), str(tmp_path / "out.npz")
    w = add_model(model)
    args, threads, pipes = [rlx_bin(), "run", model, "--output", out], [], set()
    for name, pipe, data in inputs:
        p = str(tmp_path / pipe)
        if p not in pipes:
            threads.append(serve_once(p, data))
            pipes.add(p)
        args += ["--input", f"{name}={p}"]
    try:
        r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("rlx run blocked opening an input pipe a second time (an --input file was read twice)")
    finally:
        for p in pipes:  # release a writer still waiting for a reader (rlx failed before reading)
            fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
            os.close(fd)
        for t in threads:
            t.join(timeout=10)
    assert r.returncode == 0, r.stderr
    with np.load(out) as z:
        return w, {k: z[k] for k in z.files}


def npy_bytes(tmp_path, name, a):
    p = tmp_path / f"{name}.tmp.npy"
    np.save(p, a)
    return p.read_bytes()


def test_run_reads_each_npy_input_once(tmp_path):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    w, got = run_with_pipes(tmp_path, [("a", "a.npy", npy_bytes(tmp_path, "a", a)),
                                       ("b", "b.npy", npy_bytes(tmp_path, "b", b))])
    np.testing.assert_allclose(got["y"], a + b * w, rtol=1e-6)


def test_run_reads_an_npz_shared_by_two_inputs_once(tmp_path):
    a = np.full((4, 3), 2.0, np.float32)
    b = np.arange(12, dtype=np.float32).reshape(4, 3)
    src = tmp_path / "ab.tmp.npz"
    np.savez(src, a=a, b=b)
    data = src.read_bytes()
    w, got = run_with_pipes(tmp_path, [("a", "ab.npz", data), ("b", "ab.npz", data)])
    np.testing.assert_allclose(got["y"], a + b * w, rtol=1e-6)


def test_run_names_an_unreadable_input(tmp_path):
    model = str(tmp_path / "add.onnx")
    add_model(model)
    r = subprocess.run([rlx_bin(), "run", model, "--input", f"a={tmp_path / 'missing.npy'}"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "missing.npy" in r.stderr and "cannot open" in r.stderr, r.stderr
    np.savez(tmp_path / "only_a.npz", a=np.zeros((1, 3), np.float32))
    r = subprocess.run([rlx_bin(), "run", model, "--input", f"b={tmp_path / 'only_a.npz'}"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "has no array 'b'" in r.stderr, r.stderr


def test_compile_bind_must_name_a_dim_of_the_model(tmp_path):
    """--bind sizes the model's symbolic dims; a name the model lacks is a usage error listing the dims."""
    model = str(tmp_path / "add.onnx")
    add_model(model)
    r = subprocess.run([rlx_bin(), "compile", model, "--bind", "n=2", "--dump=mir"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and "f32[2,3]" in r.stdout, r.stdout + r.stderr
    r = subprocess.run([rlx_bin(), "compile", model, "--bind", "m=2"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("rlx: [cli] ") and "'m'" in r.stderr and "symbolic dims: n" in r.stderr, r.stderr


def test_input_shape_errors_name_the_graph_input(tmp_path):
    """A fed array that does not fit the declared input is reported against that input (as ONNX
    Runtime does), not against the first node that trips on it."""
    rng = np.random.default_rng(0)
    m = make_model([h.make_node("Gemm", ["x", "W"], ["h"]), h.make_node("Relu", ["h"], ["y"])], "gemm",
                   [h.make_tensor_value_info("x", T.FLOAT, ["batch", 4])],
                   [h.make_tensor_value_info("y", T.FLOAT, ["batch", 3])],
                   [nh.from_array(rng.standard_normal((4, 3)).astype(np.float32), "W")])
    model = str(tmp_path / "gemm.onnx")
    with open(model, "wb") as f:
        f.write(m.SerializeToString())
    for shape, why in (((2, 5), "dim 1 is 4"), ((2, 4, 1), "rank 3 vs 2")):
        x = str(tmp_path / "x.npy")
        np.save(x, np.zeros(shape, np.float32))
        r = subprocess.run([rlx_bin(), "run", model, "--input", f"x={x}"], capture_output=True, text=True, timeout=120)
        assert r.returncode != 0
        want = f"input 'x': shape [{','.join(map(str, shape))}] does not match the model's [batch,4] ({why})"
        assert want in r.stderr, r.stderr
        assert "Gemm" not in r.stderr and "node" not in r.stderr, r.stderr
