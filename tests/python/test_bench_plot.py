"""bench/plot.py: ratios vs peers from a results JSON, and a PNG per committed results file."""
import importlib.util
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location("bench_plot", os.path.join(ROOT, "bench", "plot.py"))
plot = importlib.util.module_from_spec(spec)
spec.loader.exec_module(plot)


def row(system, variant, p50, batch=1, workload="w"):
    return {"system": system, "variant": variant, "device": "cpu", "workload": workload, "dtype": "f32",
            "batch": batch, "seq": None, "p50_ms": p50}


def test_ratio_is_peer_over_best_rlx_per_case():
    doc = {"rows": [row("rlx", "a", 2.0), row("rlx", "b", 1.0), row("ort", "x", 3.0), row("torch", "y", 0.5),
                    row("rlx", "a", 4.0, batch=8), row("ort", "x", 2.0, batch=8), row("rlx", "a", 1.0, workload="solo")]}
    r = plot.ratios(doc)
    assert r[("w", "cpu", "f32", 1, None)] == {"ort": 3.0, "torch": 0.5}
    assert r[("w", "cpu", "f32", 8, None)] == {"ort": 0.5}
    assert ("solo", "cpu", "f32", 1, None) not in r  # no peer: no ratio


def test_every_results_file_renders(tmp_path):
    from matplotlib import image
    files = sorted(f for f in os.listdir(os.path.join(ROOT, "bench", "results")) if f.endswith(".json"))
    made = 0
    for f in files:
        path = os.path.join(ROOT, "bench", "results", f)
        png = plot.plot_file(path, str(tmp_path))
        with open(path) as fh:
            has_rows = bool(json.load(fh).get("rows"))
        assert (png is not None) == has_rows, f
        if png:
            made += 1
            img = image.imread(png)
            assert img.shape[0] >= 400 and img.shape[1] >= 600, f
    assert made >= 5
