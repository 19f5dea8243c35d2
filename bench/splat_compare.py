"""RLX (cpu, f32) against gsplat's output from the H200 (bench/splat_gsplat.py's gsplat_case.npz):
image/alpha max |delta| and per-parameter gradient cosine, printed and written as JSON.

    PYTHONPATH=build/python python3 bench/splat_compare.py gsplat_case.npz [--json OUT.json]
"""
import argparse
import json
import sys

import numpy as np

import rlx
import rlx.splat as gs
import rlx.train


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    d = np.load(a.case)
    w, h = int(d["width"]), int(d["height"])
    names = ["means", "log_scales", "quats", "opacity_logits", "sh"]
    params = [d[n] for n in names]
    n, k = params[0].shape[0], params[4].shape[1]
    g = rlx.Graph("splat_parity")
    ins = [g.input(nm, "f32", list(p.shape)) for nm, p in zip(names, params)]
    view, K = g.input("viewmat", "f32", [4, 4]), g.input("K", "f32", [3, 3])
    campos, bg = g.input("campos", "f32", [3]), g.input("background", "f32", [3])
    img, alpha = gs.emit_render(g, *ins, view, K, campos, bg, w, h, 3)
    wt = g.constant(d["weights"])
    loss = g.op("reduce_sum", [g.op("mul", [img, wt])], axes=[0, 1, 2])
    g.output(loss, "loss")
    g.output(img, "image")
    g.output(alpha, "alpha")
    m = rlx.compile(rlx.train.value_and_grad(g, [0, 1, 2, 3, 4]))
    out = m.run(params + [d["viewmat"], d["K"], gs.camera_center(d["viewmat"]).astype(np.float32), d["background"]])
    res = {"image_max_abs": float(np.abs(out[1] - d["image"]).max()),
           "alpha_max_abs": float(np.abs(out[2] - d["alpha"]).max()), "gradient_cosine": {}}
    for i, nm in enumerate(names):
        a_, b_ = out[3 + i].ravel().astype(np.float64), d["grad_" + nm].ravel().astype(np.float64)
        res["gradient_cosine"][nm] = float(a_ @ b_ / (np.linalg.norm(a_) * np.linalg.norm(b_) + 1e-30))
    ok = res["image_max_abs"] <= 1e-3 and res["alpha_max_abs"] <= 1e-3 and min(res["gradient_cosine"].values()) >= 0.999
    res["pass"] = bool(ok)
    print(json.dumps(res, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
