#!/usr/bin/env python3
"""The int8 MNIST MLP and the int8 MNIST CNN (scripts/make_mnist_cnn_int8.py: conv 3x3x8 + ReLU,
max pool, FC; qconv and i8 pooling kernels) as Cortex-M firmware on all 10,000 MNIST test images,
against RLX's host int8 run (`rlx run --device cpu`): images whose logits are bit-identical, equal predictions, accuracy
(all 10k, and the 2k the model never trained on), code size (.text/.rodata), RAM (.data/.bss,
of which the planned arena), and instructions per inference. The count is emulated: QEMU with
-icount shift=0 advances its clock one nanosecond per instruction; SysTick (processor clock)
brackets each inference and a calibration loop of 2,000,000 instructions converts ticks to
instructions. QEMU models no pipeline, so this is an instruction count, not a cycle count.
Writes bench/results/cortexm_mnist.json (DESIGN.md section 7 shape plus cortexm fields).

  python3 bench/cortexm_mnist.py [--rlx build/bin/rlx] [--work /tmp/rlx-cortexm-bench] [--only mlp|cnn]
"""
import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def sizes(proj):
    out = sh(["arm-none-eabi-size", "-A", os.path.join(proj, "model.elf")]).stdout
    s = {}
    for line in out.splitlines():
        p = line.split()
        if len(p) >= 2 and p[0].startswith(".") and p[1].isdigit():
            s[p[0]] = int(p[1])
    return s


def machine():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return "%s, %d vCPU (host side); firmware: QEMU emulation" % (line.split(":", 1)[1].strip(), os.cpu_count())
    except OSError:
        pass
    return platform.machine() + "; firmware: QEMU emulation"


WORKLOADS = {
    "mlp": ("mnist mlp 784-128-10", "make_mnist_int8.py", "mnist_mlp_int8.onnx", True),
    "cnn": ("mnist cnn conv3x3x8-relu-maxpool2-fc10", "make_mnist_cnn_int8.py", "mnist_cnn_int8.onnx", False),
}


def bench(a, key, rows):
    workload, script, model_name, takes_rlx = WORKLOADS[key]
    w = os.path.join(a.work, key)
    os.makedirs(w, exist_ok=True)
    cmd = [sys.executable, os.path.join(ROOT, "scripts", script), "--out", w] + (["--rlx", a.rlx] if takes_rlx else [])
    print(sh(cmd).stdout, end="")
    model = os.path.join(w, model_name)
    x = np.load(os.path.join(w, "images.npy")).astype(np.float32)
    labels = np.load(os.path.join(w, "labels.npy"))
    np.save(os.path.join(w, "x1.npy"), x[:1])
    np.save(os.path.join(w, "xall.npy"), x)
    t0 = time.time()
    sh([a.rlx, "run", model, "--device", "cpu", "--input", "x=" + os.path.join(w, "xall.npy"), "--output",
        os.path.join(w, "host.npy")])
    host_s = time.time() - t0
    host = np.load(os.path.join(w, "host.npy"))
    for board in ("m4", "m55"):
        proj = os.path.join(w, "fw_" + board)
        sh([a.rlx, "compile", model, "--device", "cortexm", "--input", "x=" + os.path.join(w, "x1.npy"), "--out",
            proj, "--board", board])
        pj = json.load(open(os.path.join(proj, "project.json")))
        sh(["make", "-s", "-C", proj, "clean"])
        sh(["make", "-s", "-C", proj])
        x.tofile(os.path.join(proj, "input.bin"))
        t0 = time.time()
        run = sh(["make", "-s", "-C", proj, "run", "ICOUNT=1"], timeout=3600).stdout
        wall = time.time() - t0
        m = re.search(r"records=(\d+) ticks_hi=(\d+) ticks_lo=(\d+) calib_ticks=(\d+) calib_instructions=(\d+)", run)
        rec, hi, lo, cal, cal_i = (int(v) for v in m.groups())
        ticks = (hi << 32) + lo
        instr = ticks / rec * cal_i / cal if cal else None
        fw = np.fromfile(os.path.join(proj, "output.bin"), np.float32).reshape(-1, 10)
        bit_equal = int((fw.view(np.uint32) == host.view(np.uint32)).all(1).sum())
        pred_equal = int((fw.argmax(1) == host.argmax(1)).sum())
        sz = sizes(proj)
        row = {"system": "rlx", "variant": "int8 firmware, " + pj["machine"] + " (QEMU, emulated)", "device": "cortexm-" + board,
               "workload": workload, "dtype": "int8", "batch": 1, "seq": None,
               "p50_ms": wall * 1000 / rec, "p90_ms": wall * 1000 / rec, "throughput": rec / wall, "unit": "images/s (QEMU wall time)",
               "peak_rss_mb": None, "images": rec, "bit_exact_images": bit_equal, "equal_predictions": pred_equal,
               "accuracy": float((fw.argmax(1) == labels).mean()), "accuracy_heldout_2k": float((fw.argmax(1)[8000:] == labels[8000:]).mean()),
               "instructions_per_inference": instr, "instructions_source": "QEMU -icount shift=0 + SysTick (emulated, not cycles)",
               "text_bytes": sz.get(".text", 0) + sz.get(".isr_vector", 0), "rodata_bytes": sz.get(".rodata", 0),
               "data_bytes": sz.get(".data", 0), "bss_bytes": sz.get(".bss", 0), "arena_bytes": pj["arena_bytes"],
               "scratch_bytes": pj.get("scratch_bytes", 0), "io_bytes": pj["io_bytes"], "weights_and_tables_bytes": pj["const_bytes"]}
        rows.append(row)
        print(json.dumps(row))
    rows.append({"system": "rlx", "variant": "host int8 (rlx run --device cpu, batch 10000)", "device": "cpu",
                 "workload": workload, "dtype": "int8", "batch": len(x), "seq": None, "p50_ms": host_s * 1000,
                 "p90_ms": host_s * 1000, "throughput": len(x) / host_s, "unit": "images/s (whole CLI run incl. load)",
                 "peak_rss_mb": None, "accuracy": float((host.argmax(1) == labels).mean()),
                 "accuracy_heldout_2k": float((host.argmax(1)[8000:] == labels[8000:]).mean())})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rlx", default=os.path.join(ROOT, "build", "bin", "rlx"))
    ap.add_argument("--work", default="/tmp/rlx-cortexm-bench")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "cortexm_mnist.json"))
    ap.add_argument("--only", choices=sorted(WORKLOADS), help="one workload (default: both)")
    a = ap.parse_args()
    rows = []
    for key in ([a.only] if a.only else ["mlp", "cnn"]):
        bench(a, key, rows)
    res = {"benchmark": "cortexm_mnist", "machine": machine(),
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "rows": rows}
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    print("wrote", a.out)


if __name__ == "__main__":
    main()
