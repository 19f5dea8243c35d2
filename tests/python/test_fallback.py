"""`fallback="cpu"`: a node the device cannot run (cholesky on oneapi) fails without it and runs on cpu with it."""
import os

import numpy as np
import pytest

import rlx

TEXT = """graph @g(%a: f32[4,4]) {
  %l, %info = cholesky(%a) : f32[4,4], i32[]
  %y = add(%l, %l) : f32[4,4]
  return %y
}
"""


def oneapi_runs() -> bool:
    return any(d["name"] == "oneapi" and d["can_execute"] for d in rlx.devices())


def test_fallback_places_cholesky_on_cpu():
    if not oneapi_runs():
        (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)("oneapi is compiled out (no oneDNN)")
    g = rlx.parse(TEXT)
    with pytest.raises(Exception, match="cannot legalize node"):
        rlx.compile(g, device="oneapi").report()
    m = rlx.compile(g, device="oneapi", fallback="cpu")
    rng = np.random.default_rng(0)
    b = rng.standard_normal((4, 4)).astype(np.float32)
    a = b @ b.T + 4 * np.eye(4, dtype=np.float32)
    got = m.run([a])[0]
    np.testing.assert_allclose(got, 2 * np.linalg.cholesky(a.astype(np.float64)), rtol=1e-4, atol=1e-4)
    assert ("cholesky", "fallback") in {(r["op"], r["path"]) for r in m.report_rows()}
    assert any("placed in 2 segments" in n for n in m.report_notes())
