#!/bin/bash
# Gaussian splatting on the lent H200 (the `device` tool): gsplat (carried as a wheel; it compiles
# its CUDA with nvcc/ninja at first use) renders a seeded scene and its gradients for the parity
# check, then is timed at 100k and 1M Gaussians, 1080p. Writes $OUT/gsplat_case.npz,
# $OUT/h200_splat.json and $OUT/log.txt. Compare here with:
#   PYTHONPATH=build/python python3 bench/splat_compare.py <files_at>/gsplat_case.npz
# Needs .whl/gsplat-1.5.3-py3-none-any.whl (carry .whl); see docs/splatting.md.
set -u
source "$(dirname "$0")/common.sh"
device_begin
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/gsplat-*.whl || exit 1
export PYTHONPATH=/tmp/site
export TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=${MAX_JOBS:-16} TORCH_EXTENSIONS_DIR=/tmp/torch_ext
t0=$(date +%s)
PYTHONUNBUFFERED=1 timeout -k 5 "${BUDGET_S:-560}" python3 bench/splat_gsplat.py
rc=$?
echo "=== bench/splat_gsplat.py rc=$rc after $(( $(date +%s) - t0 )) s"
exit $rc
