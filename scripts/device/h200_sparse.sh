#!/bin/bash
# Sparse on the lent H200 (the `device` tool): builds RLX from source (scripts/device/CMakeLists.txt)
# and runs bench/h200_sparse (cuSPARSE SpMV/SpMM + device-resident CG, RLX) and
# bench/h200_sparse_cupy.py (the same workloads with cupyx.scipy.sparse) on one 2-D Poisson matrix.
# $OUT gets log.txt, h200_sparse.json (both systems' rows, ratios vs CuPy) and rlx_rows.jsonl.
#   carry: build-cuda/devcarry.tar.xz (as scripts/device/h200_cuda.sh)
#   command: bash scripts/device/h200_sparse.sh        (M=1000 REPS=200 by default)
set -u
source "$(dirname "$0")/common.sh"
device_begin
M=${M:-1000}
REPS=${REPS:-200}
device_build h200_sparse || exit 1
stamp "rlx: cuSPARSE SpMV/SpMM + CG (m=$M)"
$B/bin/h200_sparse "$OUT/rlx_rows.jsonl" "$M" "$REPS" || stamp "h200_sparse failed (rc $?)"
stamp "cupy: same workloads"
python3 bench/h200_sparse_cupy.py "$OUT/rlx_rows.jsonl" "$OUT/h200_sparse.json" "$M" "$REPS" || stamp "cupy side failed (rc $?)"
stamp done
