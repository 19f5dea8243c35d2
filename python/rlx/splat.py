"""3D Gaussian splatting from Python: render numpy scenes, build differentiable graphs.

    import numpy as np, rlx.splat as gs

    img, alpha = gs.rasterize(means, log_scales, quats, opacity_logits, sh,
                              viewmat, K, width=640, height=480)      # numpy [H,W,3], [H,W]

Parameters follow 3DGS's .ply: means [N,3], log-scales [N,3], quaternions (w,x,y,z) [N,4],
opacity logits [N], SH coefficients [N,K,3] (K = 1, 4, 9 or 16); the camera is a world->camera
row-major ``viewmat`` [4,4] and intrinsics ``K`` [3,3] (OpenCV axes, gsplat's conventions).

``loss_graph`` returns an ``rlx.Graph`` whose first five inputs are those parameters, so
``rlx.train.Trainer(gs.loss_graph(...), params, optimizer="adam")`` fits a scene, and
``rlx.train.value_and_grad`` differentiates it (the splat ops have analytic VJPs).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from . import Graph, _rlx
from . import compile as _compile

__all__ = ["rasterize", "render_graph", "loss_graph", "emit_render", "camera_center", "read_ply", "write_ply", "psnr"]

_cache: dict = {}


def render_graph(n: int, k: int, width: int, height: int, sh_degree: int = 3, dtype: str = "f32",
                 offset2d: bool = False) -> Graph:
    """The render graph. Inputs: means, log_scales, quats, opacity_logits, sh, viewmat, K, campos [3],
    background [3] (and offset2d [N,2] when asked); outputs image [H,W,3], alpha [H,W]."""
    return Graph(_g=_rlx.splat_render_graph(int(n), int(k), int(width), int(height), int(sh_degree), dtype,
                                            bool(offset2d)))


def loss_graph(n: int, k: int, width: int, height: int, sh_degree: int = 3, dtype: str = "f32") -> Graph:
    """Mean-absolute-error training graph: the render inputs (offset2d included, pass zeros), then
    target [H,W,3]; outputs loss (scalar) and image."""
    return Graph(_g=_rlx.splat_loss_graph(int(n), int(k), int(width), int(height), int(sh_degree), dtype))


def emit_render(g: Graph, means, log_scales, quats, opacity_logits, sh, viewmat, K, campos, background,
                width: int, height: int, sh_degree: int = 3, dtype: str = "f32") -> tuple:
    """Appends the pipeline to ``g`` from Values (the ops splat_project, splat_sh,
    splat_rasterize); returns (image, alpha) Values. ``render_graph`` builds the same in C++."""
    n = g._g.value_shape(int(means))[0]
    opac = g.op("logistic", [opacity_logits])
    m2, con, depth, radii = g.op("splat_project", [means, log_scales, quats, opac, viewmat, K], width=width,
                                 height=height)
    cam = g.op("broadcast_in_dim", [campos], shape=[n, 3], dims=[1])
    dirs = g.op("sub", [means, cam])
    col = g.op("splat_sh", [dirs, sh], degree=sh_degree)
    half = g.constant(np.array(0.5, np.float32 if dtype == "f32" else np.float64))
    zero = g.constant(np.array(0.0, np.float32 if dtype == "f32" else np.float64))
    col = g.op("max", [g.op("add", [col, half]), zero])
    return g.op("splat_rasterize", [m2, con, col, opac, depth, radii, background], width=width, height=height)


def camera_center(viewmat: np.ndarray) -> np.ndarray:
    """World-space camera position of a world->camera matrix: -R^T t."""
    v = np.asarray(viewmat, np.float64)
    return -(v[:3, :3].T @ v[:3, 3])


def rasterize(means, log_scales, quats, opacity_logits, sh, viewmat, K, width: int, height: int,
              background: Sequence[float] = (0.0, 0.0, 0.0), sh_degree: int | None = None,
              device: str = "cpu") -> tuple:
    """Renders one view; returns (image [H,W,3], alpha [H,W]) as numpy arrays of the inputs' dtype
    (float32 or float64). Compiled graphs are cached per (N, K, size, degree, dtype, device)."""
    means = np.ascontiguousarray(means)
    dt = means.dtype
    if dt not in (np.float32, np.float64):
        raise TypeError(f"rlx.splat.rasterize: means must be float32 or float64, got {dt}")
    arrs = [np.ascontiguousarray(a, dt) for a in (means, log_scales, quats, opacity_logits, sh)]
    n, k = arrs[0].shape[0], arrs[4].shape[1]
    deg = sh_degree if sh_degree is not None else {1: 0, 4: 1, 9: 2, 16: 3}.get(k, 3)
    key = (n, k, int(width), int(height), deg, str(dt), device)
    m = _cache.get(key)
    if m is None:
        m = _compile(render_graph(n, k, width, height, deg, "f32" if dt == np.float32 else "f64"), device=device)
        _cache.clear()
        _cache[key] = m
    vm = np.ascontiguousarray(viewmat, dt)
    ins = arrs + [vm, np.ascontiguousarray(K, dt), camera_center(vm).astype(dt), np.asarray(background, dt)]
    out = m.run(ins)
    vals = list(out.values()) if isinstance(out, dict) else list(out)
    return vals[0], vals[1]


def read_ply(path: str) -> list:
    """A 3DGS .ply as float32 arrays [means, log_scales, quats, opacity_logits, sh]."""
    return list(_rlx.splat_read_ply(path))


def write_ply(path: str, means, log_scales, quats, opacity_logits, sh) -> None:
    """Writes the standard 3DGS .ply layout (binary little-endian)."""
    f = [np.ascontiguousarray(a, np.float32) for a in (means, log_scales, quats, opacity_logits, sh)]
    _rlx.splat_write_ply(path, *f)


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((np.clip(a, 0, 1) - np.clip(b, 0, 1)) ** 2))
    return 99.0 if mse <= 0 else -10.0 * np.log10(mse)
