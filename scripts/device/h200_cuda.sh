#!/bin/bash
# One call on the lent H200 (the `device` tool; see docs/devices/cuda.md): build from source, then
#   rlx devices | cpu conformance + cpu kernel unit tests per ISA level of the host CPU | cuda unit tests | conformance on cuda |
#   vulkan/opengl/gpu conformance on the NVIDIA drivers | attention vs PyTorch SDPA |
#   MiniLM benchmark vs PyTorch (and on the portable GPUs) | MNIST MLP training vs PyTorch CUDA and JAX.
# $OUT gets log.txt, the results JSONs and all.tgz (everything else: tests, ops, profiles), since
# the device tool brings back at most 8 files.
# Carry build-cuda/devcarry.tar.xz and build-cuda/gpuloaders.tar.xz (made on the dev machine;
# scripts/device/common.sh says how it is made and unpacks it).
# STAGES (default "build devices cpuisa tests ops portable cputhreads attn mnist bench") picks a subset; the MiniLM bench runs
# last since torch.compile (max-autotune) takes minutes per shape (PEER_BUDGET_S caps it).
set -u
source "$(dirname "$0")/common.sh"
OUT=${OUT:-/tmp/rlx-out}
mkdir -p "$OUT"
if [ -z "${RLX_INNER:-}" ]; then  # run the stages under a time budget, then pack what exists
  RLX_INNER=1 timeout -k 5 "${BUDGET_S:-570}" bash "$0"
  rc=$?
  [ $rc = 124 ] && echo "=== time budget (${BUDGET_S:-570} s) spent: packing partial results" | tee -a "$OUT/log.txt"
  cd "$OUT" && tar czf /tmp/all.tgz --exclude=log.txt --exclude='h200_*.json' . 2>/dev/null &&
    find . -mindepth 1 ! -name log.txt ! -name 'h200_*.json' -delete && mv /tmp/all.tgz "$OUT/all.tgz"
  exit $rc
fi
exec > >(tee "$OUT/log.txt") 2>&1
STAGES=${STAGES:-build devices cpuisa tests ops portable cputhreads attn mnist bench}
ROOT=$PWD
B=/tmp/rlx-device-build
export RLX_CACHE_DIR=/tmp/rlx-cache
has() { [[ " $STAGES " == *" $1 "* ]]; }
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader || true

if has build; then
  stamp build
  unpack_devcarry
  device_build rlx h200_minilm h200_mnist h200_attention cpu_trainer_threads rlx_cuda_tests rlx_cpu_isa_tests ||
    { stamp "stopping: nothing below would measure RLX"; exit 1; }
fi
RLX=$B/bin/rlx
if has devices; then
  stamp devices
  $RLX devices | tee "$OUT/devices.txt"
fi
if has cpuisa; then  # another CPU kind: the cpu conformance cases at every ISA level this host has
  stamp "cpu ISA levels on the device host"
  lscpu | grep -E "Model name|^CPU\(s\)|Flags" | sed 's/\(Flags:.\{0,60\}\).*\( avx512f\| avx2\).*/\1 ...\2 .../' | tee "$OUT/cpu_isa.txt"
  grep -o -w -E "avx2|fma|avx512f|avx512bw|avx512vl|avx512_vnni|avx512_bf16|avx512_fp16|amx_tile|amx_bf16" /proc/cpuinfo | sort -u | tr '\n' ' ' | tee -a "$OUT/cpu_isa.txt"; echo
  levels=$($RLX devices | sed -n 's/.*ISA levels: \([a-z0-9 ]*\);.*/\1/p' | head -n 1)
  for l in $levels; do
    RLX_CPU_ISA=$l RLX_NUM_THREADS=4 $RLX ops --device cpu > "$OUT/ops_cpu_$l.txt" 2>&1
    echo "RLX_CPU_ISA=$l: rc=$? $(grep -E 'conformance' "$OUT/ops_cpu_$l.txt" | tail -n 1)" | tee -a "$OUT/cpu_isa.txt"
    if [ -x $B/bin/rlx_cpu_isa_tests ]; then  # the cpu kernel unit tests at this level
      RLX_CPU_ISA=$l RLX_NUM_THREADS=4 $B/bin/rlx_cpu_isa_tests > "$OUT/cpu_units_$l.txt" 2>&1
      echo "RLX_CPU_ISA=$l cpu kernel tests: rc=$? $(grep -E '^\[  PASSED|^\[  FAILED|^\[  SKIPPED' "$OUT/cpu_units_$l.txt" | tr '\n' ' ')" | tee -a "$OUT/cpu_isa.txt"
      grep -E '^\[  FAILED|^\[  SKIPPED \]' "$OUT/cpu_units_$l.txt" | head -12
    fi
  done
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
if has portable; then  # vulkan / opengl / gpu (OpenCL) on NVIDIA's drivers, through the carried loaders
  stamp "portable GPUs on the NVIDIA drivers"
  use_nvidia_gpu_apis
  $RLX devices | grep -E "vulkan|opengl|gpu " | tee "$OUT/devices_portable.txt"
  for d in ${PORTABLE_DEVICES:-vulkan opengl gpu}; do
    timeout 150 $RLX ops --device $d > "$OUT/ops_$d.txt" 2>&1
    echo "ops --device $d: rc=$? $(grep -E 'conformance' "$OUT/ops_$d.txt" | tail -n 1)"
    grep -E "FAIL" "$OUT/ops_$d.txt" | head -8
  done
fi
if has attn; then
  stamp "attention vs SDPA"
  mkdir -p "$OUT/attn"
  $B/bin/h200_attention "$OUT/attn" 200
  PYTHONUNBUFFERED=1 python3 bench/h200_attention.py "$OUT/attn" "$OUT/h200_attention.json" 200
fi
if has cputhreads; then  # the cpu Trainer on 1 thread against all cores of the device host (outputs must agree)
  stamp "cpu trainer: 1 thread vs $(nproc)"
  RLX_NUM_THREADS=1 $B/bin/cpu_trainer_threads > "$OUT/cpu_t1.txt" 2>&1
  $B/bin/cpu_trainer_threads > "$OUT/cpu_tn.txt" 2>&1
  if diff "$OUT/cpu_t1.txt" "$OUT/cpu_tn.txt"; then echo "cpu trainer: same outputs on 1 and $(nproc) threads"; else echo "cpu trainer: DIFFERENT outputs"; fi
fi
if has mnist; then
  stamp "mnist: rlx"
  mkdir -p "$OUT/mnist"
  $B/bin/h200_mnist "$OUT/mnist" "128;512,512" "128,1024" "${MNIST_STEPS:-2000}"
  for f in "$OUT"/mnist/rlx_profile_*.txt; do echo "--- $f"; head -24 "$f"; done 2>/dev/null
  stamp "mnist: rlx with RLX_ALLOW_TF32=1 (JAX's default precision on this GPU is TF32)"
  mkdir -p "$OUT/mnist_tf32"
  RLX_ALLOW_TF32=1 $B/bin/h200_mnist "$OUT/mnist_tf32" "128;512,512" "128,1024" "${MNIST_STEPS:-2000}" | grep -E "^rlx|^parity"
  stamp "mnist: peers"
  PYTHONUNBUFFERED=1 python3 bench/h200_mnist.py "$OUT/mnist" "$OUT/h200_mnist.json" "${MNIST_STEPS:-2000}"
fi
if has bench; then
  stamp "bench: weights"
  W=/tmp/minilm-w
  python3 bench/h200_minilm.py weights $W
  stamp "bench: rlx"
  mkdir -p "$OUT/rlx"
  $B/bin/h200_minilm $W "$OUT/rlx" "${BATCHES:-1,32,128}" "${DTYPES:-f16,f32}" "${ITERS:-100}"
  cat "$OUT"/rlx/rlx_profile_*.txt 2>/dev/null | head -60
  if has portable; then  # the same MiniLM on the portable GPU devices (end-to-end timing; parity in the peers step)
    for d in ${PORTABLE_DEVICES:-vulkan opengl gpu}; do
      stamp "bench: rlx $d"
      RLX_BENCH_DEVICE=$d timeout 120 $B/bin/h200_minilm $W "$OUT/rlx" "${PORTABLE_BATCHES:-32}" "${PORTABLE_DTYPES:-f16,f32}" 20
    done
  fi
  stamp "bench: peers"
  PYTHONUNBUFFERED=1 python3 bench/h200_minilm.py peers $W "$OUT/rlx" "$OUT/h200_minilm.json"
  rm -f "$OUT"/rlx/*.npy
fi
stamp done
