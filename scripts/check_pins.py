#!/usr/bin/env python3
"""Prints the packages of REQUIREMENTS that are missing or not at the version CONSTRAINTS pins.

Usage: check_pins.py CONSTRAINTS REQUIREMENTS...   (a requirement may also be given as NAME)
Exit 0 when every one is installed at its pinned version, 1 otherwise (one `name==version` per line
on stdout: what pip must install), 2 when a requirement has no pin.
"""
import importlib.metadata as md
import os
import re
import sys


def canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_names(path: str):
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                yield line


def main() -> int:
    pins = {}
    for line in read_names(sys.argv[1]):
        name, _, version = line.partition("==")
        pins[canon(name)] = (name, version)
    wanted = []
    for arg in sys.argv[2:]:
        wanted += list(read_names(arg)) if os.path.isfile(arg) else [arg]
    bad, unpinned = [], []
    for req in wanted:
        key = canon(re.split(r"[\[=<>]", req, 1)[0])
        if key not in pins:
            unpinned.append(req)
            continue
        name, version = pins[key]
        try:
            have = md.version(name)
        except md.PackageNotFoundError:
            have = None
        if have != version:
            bad.append(f"{name}=={version}")
    if unpinned:
        print("no pin in " + sys.argv[1] + " for: " + " ".join(unpinned), file=sys.stderr)
        return 2
    print("\n".join(bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
