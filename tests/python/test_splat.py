"""rlx.splat: rasterize against the float64 reference, gradients by finite differences, a few Adam
steps through rlx.train.Trainer, and the .ply round trip."""
import numpy as np
import pytest

import rlx
import rlx.splat as gs
import rlx.train


def look_at(eye, target=(0.0, 0.0, 0.0)):
    eye, target = np.asarray(eye, float), np.asarray(target, float)
    f = target - eye
    f /= np.linalg.norm(f)
    r = np.cross(f, [0.0, 1.0, 0.0])
    r /= np.linalg.norm(r)
    d = np.cross(f, r)
    R = np.stack([r, d, f])
    v = np.eye(4)
    v[:3, :3] = R
    v[:3, 3] = -R @ eye
    return v


def scene(n, k, seed, dt=np.float32):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-0.6, 0.6, (n, 3)).astype(dt), (np.log(0.12) + rng.uniform(-0.5, 0.5, (n, 3))).astype(dt),
            rng.normal(size=(n, 4)).astype(dt), rng.uniform(-1, 2, n).astype(dt),
            (rng.uniform(-1, 1, (n, k, 3)) * np.where(np.arange(k) == 0, 1.5, 0.15)[None, :, None]).astype(dt)]


W, H = 32, 24
K = np.array([[30.0, 0, 16], [0, 30.0, 12], [0, 0, 1]])
VIEW = look_at([0.4, -0.3, -3.0])


def test_rasterize_matches_reference():
    p = scene(40, 16, 1)
    img, alpha = gs.rasterize(*p, VIEW, K, W, H, background=(0.1, 0.2, 0.3))
    assert img.shape == (H, W, 3) and alpha.shape == (H, W) and img.dtype == np.float32
    g = gs.render_graph(40, 16, W, H, 3)
    ins = p + [VIEW.astype(np.float32), K.astype(np.float32), gs.camera_center(VIEW).astype(np.float32),
               np.array([0.1, 0.2, 0.3], np.float32)]
    ref = rlx.reference_run(g, ins)
    assert np.abs(ref[0]).max() > 0.2 and (ref[1] > 0.05).mean() > 0.2
    np.testing.assert_allclose(img, ref[0], atol=1e-5 * np.abs(ref[0]).max())
    np.testing.assert_allclose(alpha, ref[1], atol=1e-5)


def test_gradients_finite_differences():
    n, k = 6, 4
    p = scene(n, k, 2, np.float64)
    p[3][:] = -0.3
    g = gs.loss_graph(n, k, W, H, 1, "f64")
    target = np.random.default_rng(3).uniform(0, 1, (H, W, 3))
    data = [VIEW, K, gs.camera_center(VIEW), np.zeros(3), np.zeros((n, 2)), target]
    vg = rlx.compile(rlx.train.value_and_grad(g, [0, 1, 2, 3, 4]))
    f = rlx.compile(g)
    out = vg.run(p + data)
    for pi in range(5):
        an = out[2 + pi].ravel()
        assert np.abs(an).max() > 0
        for j in range(0, an.size, max(1, an.size // 6)):
            xp = [a.copy() for a in p]
            xm = [a.copy() for a in p]
            xp[pi].flat[j] += 1e-6
            xm[pi].flat[j] -= 1e-6
            fd = (f.run(xp + data)[0] - f.run(xm + data)[0]) / 2e-6
            assert abs(fd - an[j]) <= 1e-4 * np.abs(an).max() + 1e-8, (pi, j, fd, an[j])


def test_trainer_adam_lowers_the_loss():
    n, k = 30, 1
    truth = scene(n, k, 4)
    target, _ = gs.rasterize(*truth, VIEW, K, W, H)
    init = [a.copy() for a in truth]
    init[0] = init[0] + np.random.default_rng(5).normal(0, 0.05, init[0].shape).astype(np.float32)
    init[4] = np.zeros_like(init[4])
    tr = rlx.train.Trainer(gs.loss_graph(n, k, W, H, 0), init, optimizer="adam", lr=0.01)
    data = [VIEW.astype(np.float32), K.astype(np.float32), gs.camera_center(VIEW).astype(np.float32),
            np.zeros(3, np.float32), np.zeros((n, 2), np.float32), target]
    first = float(tr.step(*data)[0])
    for _ in range(40):
        last = float(tr.step(*data)[0])
    assert last < 0.6 * first, (first, last)


def test_ply_round_trip(tmp_path):
    p = scene(7, 9, 6)
    path = str(tmp_path / "s.ply")
    gs.write_ply(path, *p)
    q = gs.read_ply(path)
    for a, b in zip(p, q):
        np.testing.assert_array_equal(a, b)
    with open(path, "rb") as fh:
        head = fh.read(2000).decode("latin1")
    assert "property float f_rest_23" in head and "property float rot_3" in head


def test_bad_dtype_is_a_clear_error():
    with pytest.raises(rlx.Error, match="dtype"):
        gs.loss_graph(4, 1, W, H, 0, "f16")
