# Shared by the scripts/device/h200_*.sh scripts (sourced). The lent H200 image lacks some build
# inputs and the GPU API loaders; the dev machine packs them once (make_device_carry), the device
# call carries the archives (`carry: ["build-cuda/devcarry.tar.xz", "build-cuda/gpuloaders.tar.xz"]`,
# ~14 MB together, well inside the call's 64 MiB), and the scripts unpack them there.
#   devcarry.tar.xz:   GoogleTest, zlib, ICU static libs (strip --strip-debug) and the gtest, zlib,
#                      Vulkan, EGL, GL, OpenCL, ICU, CLI11 and cpp-httplib headers the device build
#                      compiles against, plus pjrt_c_api.h (tpu) and webgpu.h/wgpu.h (webgpu) from
#                      their pip wheels when installed here
#   gpuloaders.tar.xz: the Khronos/glvnd loaders (libvulkan, libEGL + libGLdispatch, libOpenCL) and
#                      glslc with its libshaderc, from Debian, so the portable GPU backends can reach
#                      NVIDIA's Vulkan, EGL and OpenCL drivers that the image does have; and
#                      wgpu-native (libwgpu_native-release.so) from pip wgpu

RLX_REPO=${RLX_REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}

make_device_carry() {  # on the dev machine, from the repo root
  local d=build-cuda/devcarry g=build-cuda/gpuloaders
  rm -rf "$d" "$g" && mkdir -p "$d/lib" "$d/include" "$g/lib" "$g/bin"
  cp -r /usr/include/{gtest,zlib.h,zconf.h,vulkan,vk_video,EGL,KHR,GL,CL,unicode,CLI,httplib.h} "$d/include/"
  local pj wg
  pj=$(python3 -c 'import importlib.util as u,os; s=u.find_spec("xla_plugins.xla_cpu_pjrt"); print(s.submodule_search_locations[0] if s else "")' 2>/dev/null)
  [ -n "$pj" ] && cp "$pj/include/pjrt_c_api.h" "$d/include/"
  wg=$(python3 -c 'import importlib.util as u,os; s=u.find_spec("wgpu"); print(os.path.join(s.submodule_search_locations[0], "resources") if s else "")' 2>/dev/null)
  if [ -n "$wg" ]; then
    mkdir -p "$d/include/wgpu" && cp "$wg/webgpu.h" "$wg/wgpu.h" "$d/include/wgpu/" && cp "$wg/libwgpu_native-release.so" "$g/lib/"
  fi
  rm -f "$d"/include/vulkan/*.hpp  # the C++ bindings are not used
  local l
  for l in libgtest.a libgtest_main.a libz.a libicuuc.a libicui18n.a libicudata.a; do
    cp "$(find /usr/lib -name "$l" | head -n 1)" "$d/lib/" && strip --strip-debug "$d/lib/$l"
  done
  for l in libvulkan.so.1 libEGL.so.1 libGLdispatch.so.0 libOpenCL.so.1 libshaderc.so.1; do
    cp -L "/usr/lib/x86_64-linux-gnu/$l" "$g/lib/"
  done
  cp /usr/bin/glslc "$g/bin/"
  (cd build-cuda && tar cJf devcarry.tar.xz devcarry && tar cJf gpuloaders.tar.xz gpuloaders)
  ls -la build-cuda/*.tar.xz
}

unpack_devcarry() {  # on the device: build-cuda/devcarry from its archive
  if [ ! -f "$RLX_REPO/build-cuda/devcarry/lib/libgtest.a" ] && [ -f "$RLX_REPO/build-cuda/devcarry.tar.xz" ]; then
    tar xJf "$RLX_REPO/build-cuda/devcarry.tar.xz" -C "$RLX_REPO/build-cuda"
  fi
}

use_nvidia_gpu_apis() {  # on the device: loaders + glslc on the paths, NVIDIA's ICDs selected
  local g=/tmp/rlx-gpuloaders f
  mkdir -p $g && tar xJf "$RLX_REPO/build-cuda/gpuloaders.tar.xz" -C $g --strip-components=1 || return 1
  # Only the loaders the image lacks: its own OpenCL loader already reaches NVIDIA's ICD.
  local l
  for l in libvulkan.so.1 libEGL.so.1 libGLdispatch.so.0 libOpenCL.so.1; do
    ldconfig -p | grep -q "$l " && rm -f "$g/lib/$l"
  done
  export LD_LIBRARY_PATH=$g/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} RLX_GLSLC=$g/bin/glslc
  f=$(find /usr/local/nvidia /usr/share /etc -name 'nvidia_icd*.json' -path '*vulkan*' 2>/dev/null | head -n 1)
  [ -n "$f" ] && export VK_ICD_FILENAMES=$f
  f=$(find /usr/local/nvidia /usr/share /etc -name '*nvidia*.json' -path '*egl_vendor*' 2>/dev/null | head -n 1)
  [ -n "$f" ] && export __EGL_VENDOR_LIBRARY_FILENAMES=$f
  echo "gpu APIs: VK_ICD_FILENAMES=${VK_ICD_FILENAMES:-none} EGL vendor=${__EGL_VENDOR_LIBRARY_FILENAMES:-none} OpenCL ICD=${OCL_ICD_FILENAMES:-none}"
}

device_begin() {  # on the device, first thing of a script: $OUT, log.txt (a copy of all output), B, stamp
  unpack_devcarry
  OUT=${OUT:-/tmp/rlx-out}
  mkdir -p "$OUT"
  exec > >(tee "$OUT/log.txt") 2>&1
  ROOT=$PWD
  B=/tmp/rlx-device-build
  export RLX_CACHE_DIR=/tmp/rlx-cache
  t0=$(date +%s)
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader || true
}

stamp() { echo "=== [$(( $(date +%s) - t0 )) s] $*"; }

device_build() {  # device_build TARGET...: scripts/device/CMakeLists.txt into $B (rlx_cuda_tests where GoogleTest came)
  local targets=("$@")
  [ -f "$ROOT/build-cuda/devcarry/lib/libgtest.a" ] || targets=("${targets[@]/rlx_cuda_tests}")
  stamp "build: ${targets[*]}"
  set -o pipefail
  if ! { cmake -S scripts/device -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGTEST_ROOT="$ROOT/build-cuda/devcarry" >/dev/null &&
         ninja -C "$B" -j "$(nproc)" ${targets[*]} 2>&1 | tail -25; }; then
    set +o pipefail
    stamp "build FAILED"
    return 1
  fi
  set +o pipefail
}
