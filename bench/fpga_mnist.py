#!/usr/bin/env python3
"""The fpga device on the whole MNIST test set (10,000 images): the int8 MLP of scripts/mnist_int8_mlp.py
simulated with Verilator (`rlx run --device fpga --parallel P`) against the host int8 run (`--device
cpu`): bit-exact rows, accuracy, cycles per inference (latency and steady-state interval), simulation
time; and Yosys resource reports (synth_xilinx, synth_ice40 -dsp) of the same RTL at each P.
Writes bench/results/fpga_mnist.json. Not a test: `make bench-fpga`.

Throughput is cycles-based: images/s = f / interval at an assumed clock f (--clock-mhz, 100 by
default); Yosys gives no timing closure here (no place and route), so no clock is measured.
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import mnist_int8_mlp  # noqa: E402
from machine import cpu_model  # noqa: E402

XILINX = {"LUT": r"LUT\d", "FF": r"FD[A-Z]{2}", "DSP": r"DSP48E1", "BRAM18": r"RAMB18E1", "BRAM36": r"RAMB36E1",
          "LUTRAM": r"RAM\d+[A-Z0-9]*", "CARRY4": r"CARRY4"}
ICE40 = {"LUT": r"SB_LUT4", "FF": r"SB_DFF\w*", "DSP": r"SB_MAC16", "BRAM": r"SB_RAM40_4K", "CARRY": r"SB_CARRY"}


def cells(stat_path, kinds):
    """Cell counts of a Yosys `stat` report (the top's totals: the last block of the file)."""
    text = open(stat_path).read()
    text = text[text.rfind("=== design hierarchy ==="):] if "=== design hierarchy ===" in text else text
    counts = {k: 0 for k in kinds}
    for name, n in re.findall(r"^\s+(\S+)\s+(\d+)\s*$", text, re.M):
        for k, pat in kinds.items():
            if re.fullmatch(pat, name):
                counts[k] += int(n)
    return counts



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rlx", default=os.path.join(ROOT, "build", "bin", "rlx"))
    ap.add_argument("--parallel", default="1,4,16")
    ap.add_argument("--images", type=int, default=10000)
    ap.add_argument("--clock-mhz", type=float, default=100.0)
    ap.add_argument("--no-synth", action="store_true")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "fpga_mnist.json"))
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="rlx_fpga_bench_")
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "mnist_int8_mlp.py"), "--out", work, "--rlx", a.rlx],
                   check=True)
    model = os.path.join(work, "mlp_int8.onnx")
    x, y = mnist_int8_mlp.load_mnist()
    x, y = x[:a.images], y[:a.images]
    np.save(os.path.join(work, "x.npy"), x)
    subprocess.run([a.rlx, "run", model, "--input", f"x={work}/x.npy", "--device", "cpu", "--output", f"{work}/cpu.npy"],
                   check=True, stdout=subprocess.DEVNULL)
    host = np.load(f"{work}/cpu.npy")
    held = slice(8000, None)  # images 8000.. were not trained on
    rows = []
    for P in [int(p) for p in a.parallel.split(",")]:
        t0 = time.time()
        r = subprocess.run([a.rlx, "run", model, "--input", f"x={work}/x.npy", "--device", "fpga", "--parallel", str(P),
                            "--output", f"{work}/fpga{P}.npy"], check=True, capture_output=True, text=True)
        wall = time.time() - t0
        m = re.search(r"\[fpga\] (\d+) images in (\d+) cycles .*latency (\d+) cycles \(first\), (\d+) \(max\); ([\d.]+) cycles", r.stderr)
        images, cycles, lat, lat_max, interval = int(m[1]), int(m[2]), int(m[3]), int(m[4]), float(m[5])
        out = np.load(f"{work}/fpga{P}.npy")
        exact = int((out.view(np.uint32) == host.view(np.uint32)).all(axis=1).sum())
        pred = out.argmax(1)
        row = {"system": "rlx", "variant": f"P={P}", "device": "fpga (Verilator 5.006 simulation)",
               "workload": "mnist-mlp-784-64-10-int8", "dtype": "int8", "batch": 1, "seq": None,
               "p50_ms": lat / (a.clock_mhz * 1e3), "p90_ms": lat_max / (a.clock_mhz * 1e3),
               "throughput": a.clock_mhz * 1e6 / interval, "unit": f"images/s at an assumed {a.clock_mhz:g} MHz clock",
               "peak_rss_mb": None,
               "parallel": P, "images": images, "bit_exact_rows": exact,
               "same_prediction_as_host": int((pred == host.argmax(1)).sum()),
               "accuracy_all": float((pred == y).mean()), "accuracy_heldout_2000": float((pred[held] == y[held]).mean()),
               "cycles_total": cycles, "cycles_latency_first": lat, "cycles_latency_max": lat_max,
               "cycles_per_image_steady": interval, "sim_wall_s_incl_build": round(wall, 1)}
        if not a.no_synth:
            proj = os.path.join(work, f"p{P}")
            subprocess.run([a.rlx, "compile", model, "--device", "fpga", "--out", proj, "--parallel", str(P)], check=True,
                           stdout=subprocess.DEVNULL)
            for target, kinds in (("xilinx", XILINX), ("ice40", ICE40)):
                t0 = time.time()
                s = subprocess.run(["make", "-C", proj, f"synth-{target}"], capture_output=True, text=True)
                row[f"synth_{target}_s"] = round(time.time() - t0, 1)
                if s.returncode == 0:
                    row[f"synth_{target}"] = cells(os.path.join(proj, f"synth_{target}.stat"), kinds)
                else:
                    row[f"synth_{target}"] = {"error": s.stderr[-500:]}
        print(json.dumps(row), flush=True)
        rows.append(row)
    res = {"benchmark": "fpga_mnist",
           "machine": f"{cpu_model()}, {os.cpu_count()} vCPU (shared, loaded by other builds)",
           "date": datetime.date.today().isoformat(), "rows": rows,
           "notes": ["cycles from the Verilator simulation of the generated RTL; ms and images/s assume the clock in 'unit' "
                     "(Yosys synthesis gives resources, not a timing-closed clock)",
                     "host int8 = rlx run --device cpu on the same QDQ model; bit_exact_rows compares all 10 f32 logits' bits",
                     "the model trained on MNIST test images 0..7999 (the only MNIST split here); accuracy_heldout_2000 is on 8000..9999"]}
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=2)
        f.write("\n")
    print("wrote", a.out)


if __name__ == "__main__":
    main()
