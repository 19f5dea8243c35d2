#!/usr/bin/env bash
# Installs every system (apt) and Python (pip) dependency RLX builds and tests with.
# Idempotent: packages already present are skipped, so a second run does nothing.
set -euo pipefail

APT_PKGS=(build-essential cmake ninja-build ccache pkg-config libgtest-dev libgmock-dev nlohmann-json3-dev
          zlib1g-dev libopenblas-dev python3 python3-pip)
PY_MODS=(numpy pytest nanobind scikit_build_core)
PIP_PKGS=(numpy pytest nanobind scikit-build-core)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
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
fi
