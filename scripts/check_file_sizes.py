#!/usr/bin/env python3
"""Fails when a source file of the project is over the line limit (files small by concern).

Checks the C, C++, CUDA, Python, CMake and shell sources that git tracks (generated files and
vendored data are not tracked). Usage: scripts/check_file_sizes.py [--limit N] [paths...]
"""
import argparse
import subprocess
import sys

SUFFIXES = (".cpp", ".h", ".hpp", ".cc", ".c", ".cu", ".cuh", ".def", ".inc", ".py", ".cmake", ".sh", ".glsl", ".txt")


def tracked_files():
    out = subprocess.run(["git", "ls-files"], check=True, capture_output=True, text=True).stdout
    return [f for f in out.splitlines() if f.endswith(SUFFIXES) and not f.startswith(("tests/fuzz/corpus/", "tests/fuzz/regressions/"))
            and (not f.endswith(".txt") or f.endswith("CMakeLists.txt"))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=800)
    ap.add_argument("paths", nargs="*")
    args = ap.parse_args()
    over = []
    for f in args.paths or tracked_files():
        try:
            with open(f, "rb") as fh:
                n = sum(1 for _ in fh)
        except OSError as e:
            print(f"[check_file_sizes] {f}: {e.strerror}", file=sys.stderr)
            return 2
        if n > args.limit:
            over.append((n, f))
    for n, f in sorted(over, reverse=True):
        print(f"[check_file_sizes] {f}: {n} lines (limit {args.limit}): split it by concern")
    if over:
        return 1
    print(f"[check_file_sizes] every source file is at most {args.limit} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
