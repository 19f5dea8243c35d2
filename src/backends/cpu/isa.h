// The cpu backend's instruction-set level: what the host supports (CPUID and the OS-enabled
// register state), lowered by RLX_CPU_ISA=generic|avx2|avx512 to force a level for tests and
// comparisons. Every SIMD dispatch in this folder asks cpu_isa(), so forcing a level changes the
// kernels that run (and the runtime-compiled kernels' -march), never the results beyond rounding.
#pragma once
#include <string>
#include <vector>

namespace rlx::cpu {

enum class CpuIsa { Generic = 0, Avx2 = 1, Avx512 = 2 };

// The best level this host runs: Avx2 = AVX2+FMA+F16C; Avx512 = AVX-512 F/BW/DQ/VL (x86-64-v4).
CpuIsa cpu_isa_host();
// The level in use: cpu_isa_host(), or RLX_CPU_ISA when set. Asking for a level the host lacks, or
// an unknown name, throws "[cpu] RLX_CPU_ISA=...: ..." naming the levels this host supports.
CpuIsa cpu_isa();
const char* cpu_isa_name(CpuIsa isa);
// Every level the host supports, lowest first (the ISA test matrix runs each).
std::vector<CpuIsa> cpu_isa_levels();
// Host features for `rlx devices`, e.g. "avx2 fma f16c avx512f avx512bw avx512vl avx512_vnni".
std::string cpu_isa_features();
// "ISA avx512; ISA levels: generic avx2 avx512; features: avx2 fma ..." for `rlx devices` (with the
// host's level when RLX_CPU_ISA lowers it).
std::string isa_summary();

}  // namespace rlx::cpu
