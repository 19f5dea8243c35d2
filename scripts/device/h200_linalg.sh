#!/bin/bash
# Dense linear algebra on the lent H200 (the `device` tool; docs/linalg.md): build from source with
# scripts/device/CMakeLists.txt, run the cuda unit tests of the linear-algebra ops
# (tests/unit/test_cuda_linalg.cpp: cuSOLVER cholesky vs the reference, NaN + info policy) and the
# conformance row on cuda, then the cholesky benchmark vs CuPy and torch.linalg.
# Carry build-cuda/devcarry.tar.xz (GoogleTest headers + static libs, as scripts/device/h200_cuda.sh).
# $OUT gets log.txt, tests.txt, ops_cuda.txt and h200_linalg.json.
set -u
source "$(dirname "$0")/common.sh"
device_begin
device_build rlx h200_linalg rlx_cuda_tests || exit 1
if [ -x $B/bin/rlx_cuda_tests ]; then
  stamp "cuda linalg tests"
  $B/bin/rlx_cuda_tests --gtest_filter='LinalgCuda.*' 2>&1 | tee "$OUT/tests.txt" | tail -30
fi
stamp "ops --device cuda (cholesky rows)"
$B/bin/rlx ops --device cuda > "$OUT/ops_cuda.txt" 2>&1
grep -E "cholesky|conformance" "$OUT/ops_cuda.txt" | head -20
stamp "bench: rlx"
$B/bin/h200_linalg "$OUT" "${ITERS:-50}"
stamp "bench: cupy + torch"
PYTHONUNBUFFERED=1 python3 bench/h200_linalg.py "$OUT" "$OUT/h200_linalg.json" "${ITERS:-50}"
stamp done
