#!/bin/bash
# Gaussian splatting on cuda, on the lent H200 (the `device` tool; docs/splatting.md, "Devices"):
# build from source with scripts/device/CMakeLists.txt, run the cuda splat tests
# (tests/unit/test_cuda_splat.cpp: kernels compile for sm_90, image/alpha/every gradient vs the cpu
# backend), then RLX cuda forward and forward+backward at 100k and 1M Gaussians, 1920x1080, SH 3,
# beside gsplat in one run (bench/splat_gsplat.py --splatcuda; gsplat's first-use compile is
# time-boxed: the RLX rows are written before it starts).
# Carry build-cuda/devcarry.tar.xz (GoogleTest, as scripts/device/h200_cuda.sh) and .whl (the gsplat
# wheel, as scripts/device/h200_splat.sh). $OUT gets log.txt, tests.txt, h200_splatcuda.json.
# Whole script: at most ~8 minutes (TOTAL_S, default 470 s, caps the gsplat part).
set -u
source "$(dirname "$0")/common.sh"
device_begin
device_build h200_splatcuda rlx_cuda_tests || exit 1
if [ -x $B/bin/rlx_cuda_tests ]; then
  stamp "cuda splat tests"
  timeout -k 5 180 $B/bin/rlx_cuda_tests --gtest_filter='SplatCuda.*' 2>&1 | tee "$OUT/tests.txt" | tail -40
fi
stamp "bench: rlx cuda, then gsplat (same run)"
if ls .whl/gsplat-*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/gsplat-*.whl
  export PYTHONPATH=/tmp/site
else
  echo "no .whl/gsplat-*.whl carried: gsplat rows will be missing"
fi
export TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=${MAX_JOBS:-16} TORCH_EXTENSIONS_DIR=/tmp/torch_ext
left=$(( ${TOTAL_S:-470} - ($(date +%s) - t0) ))
[ $left -lt 60 ] && left=60
PYTHONUNBUFFERED=1 timeout -k 5 $left python3 bench/splat_gsplat.py --splatcuda $B/bin/h200_splatcuda
stamp "bench rc=$? (124: gsplat ran out of its time box; the RLX rows are in h200_splatcuda.json)"
cat "$OUT/h200_splatcuda.json" 2>/dev/null | head -80
stamp done
