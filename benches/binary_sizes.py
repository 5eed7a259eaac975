#!/usr/bin/env python3
"""Sizes of the packaged tool binaries against the 8 MiB bound.

    python3 benches/binary_sizes.py

Builds the three tool binaries with the packaging profile (`cargo build --profile tool
-p evidence-tool`: fat LTO, one codegen unit, symbols stripped, panics abort; `-p` so
that no test-only feature joins the build) and prints each one's size and what its
symbol-free sections hold, next to the goal: at most 8 MiB each, since every process
hashes its own binary once. Exit status 1 when one is larger.
"""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ["cargo", "build", "--profile", "tool", "-p", "evidence-tool", "--bins"]
TOOLS = ["clinic-tool", "manus-tool", "wetech-tool"]
GOAL = 8 << 20


def sections(binary: Path) -> dict:
    """Section sizes from binutils' `size -A`."""
    out = subprocess.run(["size", "-A", str(binary)], capture_output=True, text=True, check=True)
    sizes = {}
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].startswith(".") and parts[1].isdigit():
            sizes[parts[0]] = int(parts[1])
    return sizes


def main() -> int:
    subprocess.run(BUILD, cwd=ROOT, check=True)
    print("| binary | size | `.text` | `.rodata` | `.eh_frame` | goal <= 8 MiB |")
    print("| --- | --- | --- | --- | --- | --- |")
    failed = False
    for tool in TOOLS:
        path = ROOT / "target/tool" / tool
        size = path.stat().st_size
        s = sections(path)
        ok = size <= GOAL
        failed |= not ok
        mib = lambda n: f"{n / 2**20:.2f} MiB"
        print(f"| `{tool}` | {mib(size)} ({size:,} bytes) | {mib(s.get('.text', 0))} "
              f"| {mib(s.get('.rodata', 0))} | {mib(s.get('.eh_frame', 0))} "
              f"| {'met' if ok else 'NOT MET'} |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
