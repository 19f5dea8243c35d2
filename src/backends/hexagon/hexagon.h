// The hexagon device: rendered kernels (src/codegen/hexagon.cpp) built with clang for Hexagon
// v68 into one freestanding static program, run by qemu-hexagon as a persistent server process
// (stdin: a recording id + its buffers; stdout: the written buffers + per-launch wall times).
#pragma once
#include <string>

#include "backends/portable/api.h"

namespace rlx::hexagon {

// The toolchain this device needs, found on PATH: clang with the Hexagon target, ld.lld and
// qemu-hexagon. Returns "" when all are there, else what is missing.
std::string toolchain_missing();
// clang flags of every build (target, CPU, freestanding, optimisation).
const char* build_flags();
// The runtime linked into every program (runtime_source.cpp).
const char* runtime_source();
// Wall times of the last submit of each launch, in ns, measured inside the emulated program.
std::unique_ptr<gpu::Api> make_hexagon_api(std::string* why);
gpu::Api* hexagon_api(std::string* why);  // the shared instance

}  // namespace rlx::hexagon
