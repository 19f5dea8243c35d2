#!/usr/bin/env bash
# Installs the build at BUILD into a scratch prefix, then builds and runs examples/cpp against it
# twice: through find_package(rlx) (CMake) and through pkg-config (a plain compiler line).
# Usage: examples/cpp/check_package.sh BUILD [WORK]   (ctest runs it as cpp_package_example)
set -euo pipefail
BUILD=$(cd "$1" && pwd)
WORK=${2:-$BUILD/package-check}
HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf "$WORK"
mkdir -p "$WORK"
cmake --install "$BUILD" --prefix "$WORK/prefix" >"$WORK/install.log"
cmake -S "$HERE" -B "$WORK/cmake" -G Ninja -DCMAKE_PREFIX_PATH="$WORK/prefix" >"$WORK/configure.log"
cmake --build "$WORK/cmake" >"$WORK/build.log"
"$WORK/cmake/rlx_example"
export PKG_CONFIG_PATH="$WORK/prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
# shellcheck disable=SC2046
c++ "$HERE/main.cpp" -o "$WORK/example_pc" $(pkg-config --cflags --libs rlx)
"$WORK/example_pc" | tail -1
