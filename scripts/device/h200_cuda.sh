#!/bin/bash
# One call on the lent H200 (the `device` tool; see docs/devices/cuda.md): build from source, then
#   rlx devices | cuda unit tests | conformance on cuda | MiniLM benchmark vs PyTorch.
# Everything lands under $OUT (log.txt, ops_cuda.txt, tests.txt, h200_minilm.json, profiles).
# Carry build-cuda/devcarry (GoogleTest headers + static libs from the dev machine).
# STAGES (default "build devices tests ops bench") picks a subset.
set -u
OUT=${OUT:-/tmp/rlx-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
STAGES=${STAGES:-build devices tests ops bench}
ROOT=$PWD
B=/tmp/rlx-device-build
export RLX_CACHE_DIR=/tmp/rlx-cache
has() { [[ " $STAGES " == *" $1 "* ]]; }
t0=$(date +%s)
stamp() { echo "=== [$(( $(date +%s) - t0 )) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader || true

if has build; then
  stamp build
  set -o pipefail
  if ! { cmake -S scripts/device -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DGTEST_ROOT=$ROOT/build-cuda/devcarry >/dev/null &&
         ninja -C $B -j "$(nproc)" rlx h200_minilm $( [ -f build-cuda/devcarry/lib/libgtest.a ] && echo rlx_cuda_tests ) 2>&1 | tail -25; }; then
    stamp "build FAILED: stopping (nothing below would measure RLX)"
    exit 1
  fi
  set +o pipefail
fi
RLX=$B/bin/rlx
if has devices; then
  stamp devices
  $RLX devices | tee "$OUT/devices.txt"
fi
if has tests && [ -x $B/bin/rlx_cuda_tests ]; then
  stamp tests
  $B/bin/rlx_cuda_tests 2>&1 | tee "$OUT/tests.txt" | tail -30
fi
if has ops; then
  stamp "ops --device cuda"
  $RLX ops --device cuda > "$OUT/ops_cuda.txt" 2>&1
  echo "rc=$?" >> "$OUT/ops_cuda.txt"
  grep -v " pass " "$OUT/ops_cuda.txt" | grep -E "FAIL|conformance|rc=" | head -60
fi
if has bench; then
  stamp "bench: weights"
  W=/tmp/minilm-w
  python3 bench/h200_minilm.py weights $W
  stamp "bench: rlx"
  mkdir -p "$OUT/rlx"
  $B/bin/h200_minilm $W "$OUT/rlx" "${BATCHES:-1,32,128}" "${DTYPES:-f16,f32}" "${ITERS:-100}"
  cat "$OUT"/rlx/rlx_profile_*.txt 2>/dev/null | head -60
  stamp "bench: peers"
  PYTHONUNBUFFERED=1 python3 bench/h200_minilm.py peers $W "$OUT/rlx" "$OUT/h200_minilm.json"
  rm -f "$OUT"/rlx/*.npy
fi
stamp done
