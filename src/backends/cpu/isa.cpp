// CPU instruction-set level detection and the RLX_CPU_ISA override (isa.h).
#include "backends/cpu/isa.h"

#include <cstdlib>
#include <cstring>

#include "rlx/error.h"

namespace rlx::cpu {

namespace {
bool has(const char* f) {
#if defined(__x86_64__) || defined(__i386__)
  // libgcc's CPUID check also requires the OS to save the register state (XGETBV) for AVX/AVX-512.
  __builtin_cpu_init();
  if (!std::strcmp(f, "avx2")) return __builtin_cpu_supports("avx2");
  if (!std::strcmp(f, "fma")) return __builtin_cpu_supports("fma");
  if (!std::strcmp(f, "f16c")) return __builtin_cpu_supports("f16c");
  if (!std::strcmp(f, "avx512f")) return __builtin_cpu_supports("avx512f");
  if (!std::strcmp(f, "avx512bw")) return __builtin_cpu_supports("avx512bw");
  if (!std::strcmp(f, "avx512dq")) return __builtin_cpu_supports("avx512dq");
  if (!std::strcmp(f, "avx512vl")) return __builtin_cpu_supports("avx512vl");
  if (!std::strcmp(f, "avx512vnni")) return __builtin_cpu_supports("avx512vnni");
  if (!std::strcmp(f, "avx512bf16")) return __builtin_cpu_supports("avx512bf16");
  if (!std::strcmp(f, "avx512fp16")) return __builtin_cpu_supports("avx512fp16");
  if (!std::strcmp(f, "amx-tile")) return __builtin_cpu_supports("amx-tile");
#else
  (void)f;
#endif
  return false;
}

CpuIsa parse_level(const std::string& s, CpuIsa host) {
  CpuIsa want;
  if (s == "generic" || s == "scalar") want = CpuIsa::Generic;
  else if (s == "avx2") want = CpuIsa::Avx2;
  else if (s == "avx512") want = CpuIsa::Avx512;
  else fail("[cpu] RLX_CPU_ISA=", s, ": unknown level (generic, avx2, avx512; this host: up to ", cpu_isa_name(host), ")");
  RLX_CHECK(static_cast<int>(want) <= static_cast<int>(host), "[cpu] RLX_CPU_ISA=", s,
            ": this CPU supports only up to ", cpu_isa_name(host), " (", cpu_isa_features(), ")");
  return want;
}
}  // namespace

CpuIsa cpu_isa_host() {
  static const CpuIsa h = [] {
    if (!(has("avx2") && has("fma") && has("f16c"))) return CpuIsa::Generic;
    if (has("avx512f") && has("avx512bw") && has("avx512dq") && has("avx512vl")) return CpuIsa::Avx512;
    return CpuIsa::Avx2;
  }();
  return h;
}

CpuIsa cpu_isa() {
  static const CpuIsa isa = [] {
    const char* e = std::getenv("RLX_CPU_ISA");
    return e && *e ? parse_level(e, cpu_isa_host()) : cpu_isa_host();
  }();
  return isa;
}

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Generic: return "generic";
    case CpuIsa::Avx2: return "avx2";
    case CpuIsa::Avx512: return "avx512";
  }
  return "?";
}

std::vector<CpuIsa> cpu_isa_levels() {
  std::vector<CpuIsa> r;
  for (int i = 0; i <= static_cast<int>(cpu_isa_host()); ++i) r.push_back(static_cast<CpuIsa>(i));
  return r;
}

std::string cpu_isa_features() {
  std::string r;
  for (const char* f : {"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512vnni", "avx512bf16",
                        "avx512fp16", "amx-tile"})
    if (has(f)) r += (r.empty() ? "" : " ") + std::string(f);
  return r.empty() ? "no AVX2" : r;
}

std::string isa_summary() {
  std::string host = cpu_isa_name(cpu_isa_host());
  try {
    std::string in_use = cpu_isa_name(cpu_isa());
    return "ISA " + in_use + (in_use == host ? "" : " (forced by RLX_CPU_ISA; host " + host + ")") + " [" +
           cpu_isa_features() + "]";
  } catch (const std::exception& e) {
    return std::string("ISA: ") + e.what();
  }
}

}  // namespace rlx::cpu
