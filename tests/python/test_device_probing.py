"""Device probing is lazy: a process that compiles and runs on cpu loads no GPU driver. Mesa's
vulkan/opengl drivers and PoCL (OpenCL) bring a second LLVM into the process, which breaks a later
`import triton` (torch._dynamo); libcuda is heavy too. A driver is loaded only when its device is
asked for: compiled for, or listed by rlx.devices() / `rlx devices`.
Each check runs in a fresh interpreter and reads its own /proc/self/maps."""
import json
import os
import re
import subprocess
import sys

import importlib.util

import pytest

import rlx

# Shared objects of the drivers RLX probes (and the LLVM/clang they pull in).
# Not the OpenCL ICD loader itself (libOpenCL.so.1, ocl-icd): Debian's oneDNN (the oneapi device)
# links it for its GPU runtime. The loader opens no ICD until a platform is queried, and the ICDs
# (pocl, NVIDIA's) and the LLVM they bring stay in the pattern.
DRIVER_LIBS = r"libvulkan|libGL|libEGL|pocl|libnvidia-opencl|libLLVM|libclang|libcuda|_dri\.so|swiftshader"

SCRIPT = r"""
import json, re, sys
import numpy as np
import rlx
g = rlx.Graph("t")
x = g.input("x", "f32", ["batch", 4])
w = g.constant(np.ones((3, 4), np.float32))
g.output(g.op("linear", [x, w], activation="relu"), "y")
out = rlx.compile(g, device="cpu").run({"x": np.ones((2, 4), np.float32)})["y"]
listed = None
if sys.argv[2] == "list":
    listed = {d["name"]: d["status"] for d in rlx.devices()}
if sys.argv[2] == "fail":  # a failed legalization on cpu: its hint must not probe the other devices
    h = rlx.Graph("h")
    h.output(h.op("gelu", [h.input("x", "f32", [2, 4])]), "y")
    try:  # cpu has no native gelu kernel (it decomposes): forcing one fails to legalize
        rlx.compile(h, device="cpu", force_native=["gelu"]).run({"x": np.ones((2, 4), np.float32)})
        listed = "compiled"
    except Exception as e:
        listed = str(e)
maps = set()
for line in open("/proc/self/maps"):
    parts = line.split()
    if len(parts) >= 6 and re.search(sys.argv[1], parts[5]):
        maps.add(parts[5])
print(json.dumps({"y": out.tolist(), "maps": sorted(maps), "listed": listed}))
"""


def child_env():
    """This environment, with the rlx package the tests import first on the child's path."""
    env = dict(os.environ)
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(rlx.__file__)))
    env["PYTHONPATH"] = pkg_root + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run_child(mode):
    r = subprocess.run([sys.executable, "-c", SCRIPT, DRIVER_LIBS, mode], env=child_env(), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_cpu_compile_loads_no_gpu_driver():
    res = run_child("cpu")
    assert res["y"] == [[4.0, 4.0, 4.0], [4.0, 4.0, 4.0]]
    assert res["maps"] == [], f"compiling for cpu mapped driver libraries: {res['maps']}"


def test_failed_legalization_hint_loads_no_gpu_driver():
    # "devices that could run it" comes from the static capability tables (device_caps),
    # not from probing every device.
    res = run_child("fail")
    msg = res["listed"]
    assert "cannot legalize node" in msg and "devices that could run it:" in msg, msg
    hint = msg.split("devices that could run it:")[1]
    assert "vulkan" in hint and "cuda" in hint, msg  # devices with the kernel, named without a probe
    assert res["maps"] == [], f"the legalization hint mapped driver libraries: {res['maps']}"


def test_listing_devices_does_probe_them():
    # The other side (and a check that the pattern above sees a driver when one is loaded): listing
    # the devices probes each one, so every portable GPU device reported available has its loader mapped.
    res = run_child("list")
    listed = res["listed"]
    assert listed["cpu"] == "available" and len(listed) == 16
    loaders = {"vulkan": "libvulkan", "opengl": "libEGL", "gpu": "pocl|libnvidia-opencl"}  # gpu: its ICD
    available = [d for d in loaders if listed.get(d) == "available"]
    if not available:
        pytest.skip("no portable GPU device available here (no driver to see loaded)")
    for d in available:
        assert any(re.search(loaders[d], m) for m in res["maps"]), f"{d} is available but {loaders[d]} is not mapped"


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs pip torch")
def test_torch_optim_works_after_cpu_compile():
    # The user-visible failure: torch.optim's first use imports torch._dynamo and triton, whose
    # bundled LLVM segfaulted in a process where RLX had probed Mesa/PoCL (it still does after
    # rlx.devices(); compiling for cpu must not get there).
    script = ("import numpy as np, rlx\n"
              "g = rlx.Graph('t'); x = g.input('x', 'f32', [2, 4]); g.output(g.op('relu', [x]), 'y')\n"
              "rlx.compile(g, device='cpu').run({'x': np.ones((2, 4), np.float32)})\n"
              "import torch\n"
              "torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)\n"
              "print('ok')\n")
    r = subprocess.run([sys.executable, "-c", script], env=child_env(), capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), (r.returncode, r.stderr[-2000:])
