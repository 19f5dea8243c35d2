"""The host facts every benchmark JSON records: the CPU model (from /proc/cpuinfo) and the ISA level."""
import platform


def cpu_model() -> str:
    """The CPU's model name ("AMD EPYC", "Intel(R) Xeon(R) ..."), or platform.processor() elsewhere."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def isa_flags(wanted=("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile")) -> list:
    """Which of the vector ISA flags that decide RLX's kernels the host reports."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((l.split(":", 1)[1].split() for l in f if l.startswith("flags")), [])
    except OSError:
        flags = []
    return [w for w in wanted if w in flags]
