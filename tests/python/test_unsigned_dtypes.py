# Unsigned dtypes: u16/u32/u64 cross the Python boundary as numpy uint16/uint32/uint64, and u64
# keeps unsigned semantics past 2**63.
import numpy as np

import rlx


def test_unsigned_dtypes_round_trip_through_run():
    for dt, npdt in [("u16", np.uint16), ("u32", np.uint32), ("u64", np.uint64)]:
        g = rlx.Graph()
        a = g.input("a", dt, [2, 3])
        g.output(g.op("reshape", [a], shape=[3, 2]))
        arr = (np.arange(6).reshape(2, 3) * 1000).astype(npdt)
        out = rlx.compile(g).run([arr])[0]
        assert out.dtype == npdt, dt
        np.testing.assert_array_equal(out, arr.reshape(3, 2))


def test_u64_max_and_div_are_unsigned():
    g = rlx.Graph()
    a = g.input("a", "u64", [3])
    b = g.input("b", "u64", [3])
    g.output(g.op("max", [a, b]))
    g.output(g.op("div", [a, b]))
    x = np.array([2**63 + 2, 7, 2**64 - 1], np.uint64)
    y = np.array([2, 2**63, 1], np.uint64)
    mx, q = rlx.compile(g).run([x, y])
    np.testing.assert_array_equal(mx, np.maximum(x, y))
    np.testing.assert_array_equal(q, x // y)
