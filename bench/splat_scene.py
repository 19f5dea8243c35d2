"""Seeded synthetic 3DGS scenes and ring cameras shared by the splat benchmarks and the gsplat parity
run (plain numpy, so the device side needs no RLX)."""
import numpy as np


def scene(n: int, k: int = 16, seed: int = 0, extent: float = 1.0, scale: float = 0.02):
    rng = np.random.default_rng(seed)
    means = rng.uniform(-extent, extent, (n, 3)).astype(np.float32)
    log_scales = (np.log(scale) + rng.uniform(-0.5, 0.5, (n, 3))).astype(np.float32)
    quats = rng.normal(size=(n, 4)).astype(np.float32)
    opacity_logits = rng.uniform(-1, 3, n).astype(np.float32)
    sh = (rng.uniform(-1, 1, (n, k, 3)) * np.where(np.arange(k) == 0, 1.5, 0.15)[None, :, None]).astype(np.float32)
    return [means, log_scales, quats, opacity_logits, sh]


def look_at(eye, target=(0.0, 0.0, 0.0)):
    eye, target = np.asarray(eye, float), np.asarray(target, float)
    f = target - eye
    f /= np.linalg.norm(f)
    r = np.cross(f, [0.0, 1.0, 0.0])
    r /= np.linalg.norm(r)
    d = np.cross(f, r)
    v = np.eye(4)
    v[:3, :3] = np.stack([r, d, f])
    v[:3, 3] = -v[:3, :3] @ eye
    return v


def camera(width: int, height: int, eye=(1.2, -0.8, -3.2), fov_x_deg: float = 60.0):
    f = 0.5 * width / np.tan(0.5 * np.radians(fov_x_deg))
    K = np.array([[f, 0, width / 2], [0, f, height / 2], [0, 0, 1]])
    return look_at(eye), K
