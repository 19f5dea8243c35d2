// CPU instruction-set level detection and the RLX_CPU_ISA override (isa.h).
#include "backends/cpu/isa.h"

#include <cstdlib>
#include <cstring>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "rlx/error.h"

namespace rlx::cpu {

namespace {
// CPUID feature bits, each set only where XGETBV says the OS saves the registers it needs.
struct Features {
  bool avx2 = false, fma = false, f16c = false, avx512f = false, avx512bw = false, avx512dq = false, avx512vl = false,
       avx512vnni = false, avx512bf16 = false, avx512fp16 = false, amx_tile = false;
};
Features read_features() {
  Features f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27), avx = c & (1u << 28);
  if (!osxsave || !avx) return f;
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  const bool ymm = (lo & 0x6) == 0x6, zmm = ymm && (lo & 0xe0) == 0xe0, tiles = (lo & 0x60000) == 0x60000;
  f.fma = ymm && (c & (1u << 12)), f.f16c = ymm && (c & (1u << 29));
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  f.avx2 = ymm && (b & (1u << 5));
  f.avx512f = zmm && (b & (1u << 16)), f.avx512dq = zmm && (b & (1u << 17));
  f.avx512bw = zmm && (b & (1u << 30)), f.avx512vl = zmm && (b & (1u << 31));
  f.avx512vnni = zmm && (c & (1u << 11)), f.avx512fp16 = zmm && (d & (1u << 23));
  f.amx_tile = tiles && (d & (1u << 24));  // usable only after arch_prctl(ARCH_REQ_XCOMP_PERM)
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avx512bf16 = zmm && (a & (1u << 5));
#endif
  return f;
}

const Features& features() {
  static const Features f = read_features();
  return f;
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
    const Features& f = features();
    if (!(f.avx2 && f.fma && f.f16c)) return CpuIsa::Generic;
    if (f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl) return CpuIsa::Avx512;
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
  const Features& f = features();
  std::string r;
  auto add = [&](bool on, const char* n) {
    if (on) r += (r.empty() ? "" : " ") + std::string(n);
  };
  add(f.avx2, "avx2"), add(f.fma, "fma"), add(f.f16c, "f16c"), add(f.avx512f, "avx512f"), add(f.avx512bw, "avx512bw");
  add(f.avx512dq, "avx512dq"), add(f.avx512vl, "avx512vl"), add(f.avx512vnni, "avx512vnni");
  add(f.avx512bf16, "avx512bf16"), add(f.avx512fp16, "avx512fp16"), add(f.amx_tile, "amx-tile");
  return r.empty() ? "no AVX2" : r;
}

std::string isa_summary() {
  std::string host = cpu_isa_name(cpu_isa_host());
  try {
    std::string in_use = cpu_isa_name(cpu_isa());
    std::string levels;
    for (CpuIsa l : cpu_isa_levels()) levels += (levels.empty() ? "" : " ") + std::string(cpu_isa_name(l));
    return "ISA " + in_use + (in_use == host ? "" : " (forced by RLX_CPU_ISA; host " + host + ")") +
           "; ISA levels: " + levels + "; features: " + cpu_isa_features();
  } catch (const std::exception& e) {
    return std::string("ISA: ") + e.what();
  }
}

}  // namespace rlx::cpu
