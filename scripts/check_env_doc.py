#!/usr/bin/env python3
"""Checks that docs/env.md lists every RLX_* environment switch the tree reads, and no other.

A switch is an RLX_* name quoted in C++/Python code (getenv, env_on, env_is_1, os.environ, ...) or
read as $RLX_* by a script or the Makefile. Prints the missing and stale names; exit 1 if any.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CODE = (".cpp", ".h", ".cu", ".py")
QUOTED = re.compile(r"""['"](RLX_[A-Z0-9_]+)['"]""")
SHELL = re.compile(r"\$\{?(RLX_[A-Z0-9_]+)")
# RLX_* names that are not environment switches: compile definitions passed by CMake or make.
NOT_ENV = {"RLX_VERSION", "RLX_SOURCE_DIR", "RLX_HAVE_RTEN", "RLX_RTEN_MISSING", "RLX_HAVE_OPENBLAS",
           "RLX_ONNX_DATA_PROTO"}


def tree_names():
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           check=True, capture_output=True, text=True).stdout.splitlines()
    names = {}
    for f in files:
        if f.startswith(("docs/", "tests/fuzz/corpus/", "tests/fuzz/regressions/")) or f.endswith(".md"):
            continue
        shell = f.endswith(".sh") or os.path.basename(f) == "Makefile"
        if not (shell or f.endswith(CODE)):
            continue
        path = os.path.join(ROOT, f)
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        for n in (SHELL if shell else QUOTED).findall(text):
            if n not in NOT_ENV:
                names.setdefault(n, f)
    return names


def doc_names():
    with open(os.path.join(ROOT, "docs", "env.md"), encoding="utf-8") as fh:
        return set(re.findall(r"^\| `(RLX_[A-Z0-9_]+)`", fh.read(), re.M))


def main():
    tree, doc = tree_names(), doc_names()
    missing = sorted(set(tree) - doc)
    stale = sorted(doc - set(tree))
    for n in missing:
        print(f"[check_env_doc] {n} (read in {tree[n]}) is not in docs/env.md")
    for n in stale:
        print(f"[check_env_doc] {n} is in docs/env.md but nothing reads it")
    if missing or stale:
        return 1
    print(f"[check_env_doc] docs/env.md lists all {len(doc)} RLX_* switches")
    return 0


if __name__ == "__main__":
    sys.exit(main())
