#!/bin/bash
# One call on the lent H200: GGUF quantized weights on cuda through the dequantize decomposition
# (src/passes/decompose/dequantize.cpp), against cpu, and `rlx bench` of the same models.
# Build: scripts/device/CMakeLists.txt (no protobuf there: .rlx/.gguf/HF models only); carry
# build-cuda/devcarry.tar.xz as for h200_cuda.sh (ICU and the Vulkan/GL/CL headers for the device build).
# $OUT gets log.txt.
set -u
source "$(dirname "$0")/common.sh"
device_begin
device_build rlx || exit 1
RLX=$B/bin/rlx
status=0
for m in tiny-Q4_0 tiny-Q8_0 tiny-F16; do
  f=tests/models/qwen3/$m.gguf
  cpu=$($RLX generate --model "$f" --prompt-ids 1,2,3,4 --max-new 16 --device cpu | tail -n 1)
  cuda=$($RLX generate --model "$f" --prompt-ids 1,2,3,4 --max-new 16 --device cuda | tail -n 1)
  if [ "$cpu" = "$cuda" ]; then echo "$m: cuda tokens == cpu tokens ($cuda)"; else echo "$m: MISMATCH cpu $cpu vs cuda $cuda"; status=1; fi
  $RLX bench "$f" --device cuda --seq 16 --runs 50 | tail -n 1
  $RLX bench "$f" --device cpu --seq 16 --runs 50 | tail -n 1
done
exit $status
