"""Collective latency and bus bandwidth: RLX (a compiled one-node graph through the Communicator over
Open MPI) next to the same MPI call in an OSU-style loop, in the same run, on 2 and 4 ranks, 8 B to
256 MiB per rank. Writes bench/results/collectives_cpu.json.

    cmake --build build --target rlx_bench_collectives && python3 bench/collectives.py [--max-bytes N]
"""
import argparse
import datetime
import json
import os
import sys
import subprocess

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import cpu_model  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build/bin/rlx_bench_collectives"))
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--max-bytes", type=int, default=256 << 20)
    ap.add_argument("--budget", type=float, default=0.25, help="seconds per (op, size, system)")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench/results/collectives_cpu.json"))
    ap.add_argument("--machine-note", default="loaded by other builds")
    a = ap.parse_args()
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    rows = []
    version = subprocess.run(["mpirun", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    for n in [int(x) for x in a.ranks.split(",")]:
        cmd = ["mpirun", "-n", str(n), "--oversubscribe", "--bind-to", "none", a.bin, str(a.max_bytes), str(a.budget)]
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
        if p.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{p.stdout}\n{p.stderr}")
        for line in p.stdout.splitlines():
            if line.startswith("{"):
                rows.append(json.loads(line))
    out = {
        "benchmark": "collectives_cpu",
        "machine": f"{cpu_model()}, {os.cpu_count()} vCPU, {a.machine_note}; {version}, ranks on one host "
                   "(shared-memory BTL), oversubscribed past the core count",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "rows": rows,
    }
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"{'op':<11} {'ranks':>5} {'bytes':>10} {'mpi p50 ms':>11} {'rlx p50 ms':>11} {'rlx/mpi':>8} {'busbw GB/s':>10}")
    by = {}
    for r in rows:
        by.setdefault((r["op"], r["ranks"], r["bytes"]), {})[r["system"]] = r
    for (op, n, b), d in sorted(by.items()):
        m, x = d.get("openmpi"), d.get("rlx")
        if m and x:
            print(f"{op:<11} {n:>5} {b:>10} {m['p50_ms']:>11.4g} {x['p50_ms']:>11.4g} {x['p50_ms'] / m['p50_ms']:>8.3f} {x['throughput']:>10.3g}")


if __name__ == "__main__":
    main()
