#!/bin/bash
# One call on the lent H200: the `tpu` device through the CUDA PJRT plugin of that machine's jax
# (jax_plugins/xla_cuda13/xla_cuda_plugin.so) against RLX's own `cuda`, on the same seeded inputs:
#   rlx devices (tpu must name the CUDA plugin) | rlx ops --device tpu | MiniLM-L6-shaped encoder
#   b1/b32 s128 and the MNIST MLP step (bench/graphapi_bench.cpp) on tpu and cuda.
# Writes $OUT/log.txt, $OUT/h200_pjrt.json (bench/results rows) and the text outputs.
# Carry build-cuda/devcarry.tar.xz as for scripts/device/h200_cuda.sh (whose build this one repeats);
# make_device_carry (scripts/device/common.sh) puts the PJRT header of the xla-cpu-pjrt wheel in it.
# PJRT_PLUGIN overrides the plugin path; ITERS / MNIST_STEPS the run counts.
set -u
source "$(dirname "$0")/common.sh"
device_begin
[ -f build-cuda/devcarry/include/pjrt_c_api.h ] ||
  { echo "h200_pjrt: build-cuda/devcarry/include/pjrt_c_api.h missing (see the header of this script)"; exit 1; }
PJRT_PLUGIN=${PJRT_PLUGIN:-$(python3 -c 'import importlib.util as u; s=u.find_spec("jax_plugins.xla_cuda13"); print(s.submodule_search_locations[0] + "/xla_cuda_plugin.so" if s else "")' 2>/dev/null)}
[ -f "$PJRT_PLUGIN" ] || { echo "h200_pjrt: no CUDA PJRT plugin found (set PJRT_PLUGIN)"; exit 1; }
export RLX_PJRT_PLUGIN=$PJRT_PLUGIN
# XLA's CUDA client preallocates 75% of the GPU by default; RLX's cuda runs in the same process.
export RLX_PJRT_CLIENT_OPTIONS=${RLX_PJRT_CLIENT_OPTIONS:-preallocate=false}
stamp "plugin $RLX_PJRT_PLUGIN"
device_build rlx graphapi_bench || exit 1
stamp devices
$B/bin/rlx devices | tee "$OUT/devices.txt" | grep -E "^ *(tpu|cuda)" -A1
stamp "ops --device tpu"
timeout 300 $B/bin/rlx ops --device tpu > "$OUT/ops_tpu.txt" 2>&1
echo "rc=$?" >> "$OUT/ops_tpu.txt"
grep -v " pass " "$OUT/ops_tpu.txt" | grep -E "FAIL|conformance|rc=" | head -40
stamp "bench: tpu (PJRT CUDA) vs cuda"
$B/bin/graphapi_bench "$OUT/rows.jsonl" tpu,cuda "${BATCHES:-1,32}" "${ITERS:-50}" "${MNIST_STEPS:-200}" "H200" | tee "$OUT/bench.txt"
python3 bench/graphapi_results.py "$OUT/rows.jsonl" "$OUT/h200_pjrt.json" graphapi_h200 "lent $(nvidia-smi --query-gpu=name --format=csv,noheader), $(nproc) CPU cores"
stamp done
