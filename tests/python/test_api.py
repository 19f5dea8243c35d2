"""The documented `rlx` Python API: builder, text form, reference, compile/run, report, errors, npy."""
import numpy as np
import pytest

import rlx


def linear_graph(act="relu"):
    g = rlx.Graph("lin")
    x = g.input("x", "f32", ["batch", 4])
    w = g.input("w", "f32", [3, 4])
    b = g.input("b", "f32", [3])
    y = g.op("linear", [x, w, b], activation=act)
    g.output(y, "y")
    return g


def linear_numpy(x, w, b):
    return np.maximum(x @ w.T + b, 0)


def data(batch=2, seed=0):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((batch, 4)).astype(np.float32),
            "w": rng.standard_normal((3, 4)).astype(np.float32),
            "b": rng.standard_normal(3).astype(np.float32)}


# ---- building and printing --------------------------------------------------------------------

def test_values_are_handles_and_ids():
    g = linear_graph()
    x, w, b = g.inputs
    assert (x.name, x.dtype, x.shape) == ("x", "f32", ["batch", 4])
    assert int(x) == 0 and [0, 1, 2][x] == 0  # __index__
    (y,) = g.outputs
    assert y.shape == ["batch", 3] and y.name == "y"
    assert g.type(y) == ("f32", "[batch,3]")
    assert g.node_ops() == ["linear"] and g.symbols() == ["batch"]
    # Plain int ids work too.
    z = g.op("add", [int(y), y])
    assert isinstance(z, rlx.Value) and z.shape == ["batch", 3]


def test_print_and_parse_round_trip(tmp_path):
    g = linear_graph()
    text = str(g)
    assert text == g.text()
    assert "graph @lin(" in text and "linear(" in text and "relu" in text and "f32[batch,4]" in text
    g.verify()
    back = rlx.parse(text)
    assert str(back) == text
    p = tmp_path / "lin.rlx"
    p.write_text(text)
    assert str(rlx.load(p)) == text


def test_attribute_kinds_follow_the_schema():
    texts = []
    for to in (rlx.dtype("f16"), "f16", np.float16):
        g = rlx.Graph()
        x = g.input("x", "f32", [2, 3])
        g.output(g.op("convert", [x], to=to))
        texts.append(str(g))
    assert texts[0] == texts[1] == texts[2] and "f16[2,3]" in texts[0]
    g = rlx.Graph()
    x = g.input("x", "f32", ["n", 6])
    r = g.op("reshape", [x], shape=["n", 2, np.int64(3)])  # dims: ints, numpy ints, symbols
    assert r.shape == ["n", 2, 3]
    t = g.op("transpose", [r], perm=(2, 0, 1))  # tuples are lists
    assert t.shape == [3, "n", 2]
    vals, idx = g.op("sort", [x], axis=-1, descending=1)  # multi-output -> tuple
    assert (vals.dtype, idx.dtype) == ("f32", "i64")
    assert rlx.op_schema("linear")["attrs"] == {"activation": "str"}
    assert "linear" in rlx.ops() and "bf16" in rlx.dtypes()


def test_constants():
    g = rlx.Graph()
    x = g.input("x", "f32", [3])
    c = g.constant([1, 2, 3], dtype="f32")
    h = g.constant(np.array([0.5, 0.25, 2.0]), dtype="bf16")  # rounded from float32
    assert (c.dtype, h.dtype) == ("f32", "bf16")
    g.output(g.op("add", [x, c]))
    g.output(g.op("convert", [h], to="f32"))
    out = rlx.compile(g).run([np.zeros(3, np.float32)])
    np.testing.assert_array_equal(out[0], [1, 2, 3])
    np.testing.assert_array_equal(out[1], [0.5, 0.25, 2.0])
    assert g.constant(np.array(7, np.int32)).shape == []  # 0-d


# ---- reference and compiled runs ----------------------------------------------------------------

def test_reference_run_matches_numpy():
    g = linear_graph()
    d = data()
    (ref,) = rlx.reference_run(g, [d["x"], d["w"], d["b"]])
    np.testing.assert_allclose(ref, linear_numpy(**d), rtol=1e-6, atol=1e-6)
    (ref2,) = rlx.reference_run(g, d)  # dict form
    np.testing.assert_array_equal(ref, ref2)


def test_compile_run_matches_numpy():
    g = linear_graph()
    m = rlx.compile(g, device="cpu")
    assert m.device == "cpu" and m.output_names() == ["y"]
    d = data(batch=5)
    out = m.run(d)
    assert list(out) == ["y"] and out["y"].shape == (5, 3) and out["y"].dtype == np.float32
    np.testing.assert_allclose(out["y"], linear_numpy(**d), rtol=1e-5, atol=1e-5)
    (lst,) = m.run([d["x"], d["w"], d["b"]])
    np.testing.assert_array_equal(lst, out["y"])
    m.run(data(batch=2))
    assert m.cache_size == 2  # one specialization per batch size


def test_arrays_are_copied_and_strides_respected():
    g = rlx.Graph()
    x = g.input("x", "f64", [3, 2])
    g.output(g.op("mul", [x, x]))
    m = rlx.compile(g)
    base = np.arange(6, dtype=np.float64).reshape(2, 3)
    out = m.run([base.T])[0]  # a non-contiguous view
    np.testing.assert_array_equal(out, base.T ** 2)
    out[:] = -1  # results are owned, writable copies
    np.testing.assert_array_equal(m.run([base.T])[0], base.T ** 2)
    be = (base.T).astype(">f8")  # big-endian input is accepted and byte-swapped
    np.testing.assert_array_equal(m.run([be])[0], base.T ** 2)


def test_unnamed_outputs_and_bf16():
    g = rlx.Graph()
    x = g.input("x", "bf16", [4])
    g.output(g.op("add", [x, x]))
    g.output(g.op("convert", [x], to="f32"), "as_f32")
    m = rlx.compile(g)
    out = m.run({"x": np.array([1.0, 2.5, -3.0, 1 + 2 ** -12], np.float32)})
    assert list(out) == ["output_0", "as_f32"]
    assert out["output_0"].dtype == np.float32  # bf16 comes back as float32
    np.testing.assert_array_equal(out["output_0"], [2.0, 5.0, -6.0, 2.0])  # 1+2^-12 rounds to 1 in bf16
    with pytest.raises(rlx.Error, match="bf16 takes float32"):
        m.run([np.zeros(4, np.float64)])


def test_every_dtype_round_trips_through_run():
    for dt, npdt in [("f32", np.float32), ("f16", np.float16), ("f64", np.float64), ("c64", np.complex64),
                     ("i8", np.int8), ("u8", np.uint8), ("i16", np.int16), ("i32", np.int32),
                     ("i64", np.int64), ("bool", np.bool_)]:
        g = rlx.Graph()
        a = g.input("a", dt, [2, 3])
        g.output(g.op("reshape", [a], shape=[3, 2]))
        arr = (np.arange(6).reshape(2, 3) % 3).astype(npdt)
        out = rlx.compile(g).run([arr])[0]
        assert out.dtype == npdt, dt
        np.testing.assert_array_equal(out, arr.reshape(3, 2))


# ---- report and dumps -------------------------------------------------------------------------

def test_dispatch_report_content():
    g = linear_graph()
    m = rlx.compile(g)
    table = m.report({"batch": 2})
    assert "dispatch report: device cpu" in table and "linear" in table
    rows = m.report_rows({"batch": 2})
    assert rows and set(rows[0]) == {"op", "dtype", "path", "count", "reason"}
    assert all(isinstance(r["count"], int) and r["count"] > 0 for r in rows)
    assert any(r["op"] == "linear" and r["path"] == "native" for r in rows)
    forced = rlx.compile(g, force_common=["linear"]).report_rows({"batch": 2})
    assert any(r["op"] == "linear" and r["path"] == "common-IR" for r in forced)
    assert isinstance(m.report_notes({"batch": 2}), list)
    for level in ("hir", "mir", "lir"):
        assert m.dump(level, {"batch": 2}).strip()


# ---- errors ------------------------------------------------------------------------------------

def test_bad_inputs_raise_with_useful_messages():
    assert issubclass(rlx.Error, RuntimeError)
    m = rlx.compile(linear_graph())
    d = data()
    with pytest.raises(rlx.Error, match=r"input 'x': expected dtype f32, got numpy float64"):
        m.run({**d, "x": d["x"].astype(np.float64)})
    with pytest.raises(rlx.Error, match=r"missing inputs \['b'\]"):
        m.run({"x": d["x"], "w": d["w"]})
    with pytest.raises(rlx.Error, match=r"unknown inputs \['q'\]"):
        m.run({**d, "q": d["x"]})
    with pytest.raises(rlx.Error, match="takes 3 inputs"):
        m.run([d["x"]])
    with pytest.raises(rlx.Error, match="'x'"):
        m.run({**d, "x": np.zeros((2, 5), np.float32)})  # wrong static dim
    with pytest.raises(rlx.Error, match="no RLX dtype"):
        rlx.Graph().constant(np.zeros(2, np.complex128))


def test_bad_graphs_raise_with_useful_messages():
    g = linear_graph()
    x = g.inputs[0]
    with pytest.raises(rlx.Error, match="unknown op 'nosuch'"):
        g.op("nosuch", [x])
    with pytest.raises(rlx.Error, match=r"unknown attribute 'act'.*known: activation"):
        g.op("linear", g.inputs, act="relu")
    with pytest.raises(rlx.Error, match="attribute 'activation': expected str"):
        g.op("linear", g.inputs, activation=3)
    with pytest.raises(rlx.Error, match="attribute 'perm': expected ints"):
        g.op("transpose", [x], perm="01")
    with pytest.raises(rlx.Error, match="unknown dtype 'f33'"):
        g.input("z", "f33", [1])
    with pytest.raises(rlx.Error, match="value id 99"):
        g.op("relu", [99])
    with pytest.raises(rlx.Error, match="belongs to graph"):
        g.op("relu", [rlx.Graph("other").input("o", "f32", [1])])
    with pytest.raises(rlx.Error):  # the shape rule names the node
        g.op("add", [x, g.inputs[2]])
    with pytest.raises(rlx.Error, match=r"\[parse\]"):
        rlx.parse("graph @g(%x: f32[2]) {\n  %y = nosuch(%x) : f32[2]\n}\n")
    with pytest.raises(rlx.Error):
        rlx.load("/nonexistent/graph.rlx")
    with pytest.raises(rlx.Error):
        rlx.compile(linear_graph(), device="nosuchdevice").run(data())


# ---- devices ------------------------------------------------------------------------------------

def test_devices_lists_sixteen_targets():
    devs = rlx.devices()
    names = [d["name"] for d in devs]
    assert len(names) == 16 and len(set(names)) == 16
    assert {"cpu", "cuda", "vulkan", "webgpu", "tpu", "cortexm", "fpga"} <= set(names)
    for d in devs:
        assert set(d) >= {"name", "status", "reason", "description"}
        assert d["description"]
    cpu = next(d for d in devs if d["name"] == "cpu")
    assert cpu["status"] == "available" and cpu["can_execute"]


# ---- .npy / .npz --------------------------------------------------------------------------------

def test_npy_interoperates_with_numpy(tmp_path):
    arrays = {
        "f32": np.arange(6, dtype=np.float32).reshape(2, 3), "f16": np.array([1.5, -2], np.float16),
        "f64": np.array(3.25), "c64": np.array([1 + 2j], np.complex64), "i8": np.array([-1, 2], np.int8),
        "u8": np.array([255], np.uint8), "i16": np.zeros((0, 2), np.int16), "i32": np.array([7], np.int32),
        "i64": np.array([1 << 40]), "bool": np.array([True, False]),
        "u16": np.array([65535], np.uint16), "u32": np.array([1 << 31], np.uint32),
        "u64": np.array([(1 << 63) + 5], np.uint64),
    }
    for k, a in arrays.items():
        rlx.write_npy(tmp_path / f"{k}.npy", a)
        back = np.load(tmp_path / f"{k}.npy")
        assert back.dtype == a.dtype and back.shape == a.shape
        np.testing.assert_array_equal(back, a)
    # numpy-written files, including fortran order and big-endian data.
    f = np.asfortranarray(np.arange(24, dtype=">i4").reshape(2, 3, 4))
    np.save(tmp_path / "f.npy", f)
    np.testing.assert_array_equal(rlx.read_npy(tmp_path / "f.npy"), f)
    np.savez_compressed(tmp_path / "c.npz", b=np.ones(1000, np.float32), a=np.arange(3))
    z = rlx.read_npz(tmp_path / "c.npz")
    assert list(z) == ["b", "a"]
    np.testing.assert_array_equal(z["b"], np.ones(1000, np.float32))
    rlx.write_npz(tmp_path / "w.npz", {"zeta": np.arange(4), "alpha": np.eye(2, dtype=np.float32)})
    with np.load(tmp_path / "w.npz") as zz:
        assert list(zz.keys()) == ["zeta", "alpha"]
        np.testing.assert_array_equal(zz["alpha"], np.eye(2))
    (tmp_path / "bad.npy").write_bytes(b"\x93NUMPY\x01\x00\xff\x00{")
    with pytest.raises(rlx.Error, match=r"\[npy\] .*bad.npy: truncated header"):
        rlx.read_npy(tmp_path / "bad.npy")
    with pytest.raises(rlx.Error, match="unsupported dtype descr '<c16'"):
        np.save(tmp_path / "c16.npy", np.zeros(2, np.complex128))
        rlx.read_npy(tmp_path / "c16.npy")
