#!/usr/bin/env python3
"""Whole-process measurement of answers whose label values are long: the Clinic tool
against the Clinic test front answering N series with one long label value each.

    python3 benches/long_labels.py [--cases 3x10240,3x102400,20x15728640] [--calls 3]
                                   [--debug] [--tool-binary PATH]

Builds the tool binary as it is packaged and the release fixture (as
`large_answer.py` does), starts `examples/large_answer_fixture.rs` with
`--long-labels N,BYTES` (the front answers N series of one BYTES-byte `sql` label value
each, generated as it is sent, instead of forwarding to Prometheus), and runs the tool as
a whole process `--calls` times under GNU `/usr/bin/time` (`%M`, peak RSS from wait4's
rusage). For each case it prints the result's status and class, the size of the
model-visible text, and the largest peak RSS; it checks every result is `ok` with N
series, its text at most 4 KiB and the peak RSS at most 64 MiB.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import large_answer as la  # noqa: E402

TEXT_GOAL = 4096


def call(setup: dict, rss_file: str) -> tuple[int, dict, int]:
    """One tool process: peak RSS (KiB), the result's details, its text size."""
    env = {"PATH": os.environ.get("PATH", ""), **setup["env"]}
    proc = subprocess.run(
        [la.GNU_TIME, "-f", "%M", "-o", rss_file, setup["tool"]],
        input=json.dumps(setup["args"]), capture_output=True, env=env, text=True,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"the tool exited with {proc.returncode}: {proc.stderr[-2000:]}")
    text = json.loads(proc.stdout)["text"]
    rss = int(Path(rss_file).read_text().strip().splitlines()[-1])
    return rss, json.loads(text), len(text.encode())


def measure(fixture: str, tool: str, series: int, label_bytes: int, calls: int) -> dict:
    extra = ("--long-labels", f"{series},{label_bytes}")
    with la.started(fixture, tool, "clinic", 1, extra) as setup:
        with tempfile.TemporaryDirectory() as tmp:
            rss_file = os.path.join(tmp, "rss")
            runs = [call(setup, rss_file) for _ in range(calls)]
    details = runs[-1][1]
    item = (details.get("items") or [details])[0]
    error = item.get("error") or details.get("error") or {}
    return {
        "series": series, "label_bytes": label_bytes,
        "status": item.get("status", details.get("status")),
        "class": error.get("class"),
        "series_count": (item.get("evidence") or {}).get("series_count"),
        "text_bytes": max(r[2] for r in runs),
        "rss_kib": max(r[0] for r in runs),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="3x10240,3x102400,20x15728640")
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--debug", action="store_true")
    parser.add_argument("--tool-binary", help="measure this clinic-tool (for example one "
                        "built from an earlier commit) instead of the one built here")
    args = parser.parse_args()
    la.ensure_gnu_time()
    tool, fixture = la.built(args.debug, "clinic")
    tool = args.tool_binary or tool
    failed = False
    print("| series x label value | status | text | tool: peak RSS (max of calls) |")
    print("| --- | --- | --- | --- |")
    for case in args.cases.split(","):
        n, size = (int(x) for x in case.split("x"))
        m = measure(fixture, tool, n, size, args.calls)
        ok = (m["status"] == "ok" and m["series_count"] == n
              and m["text_bytes"] <= TEXT_GOAL and m["rss_kib"] <= la.RSS_GOAL_KIB)
        failed |= not ok
        status = m["status"] if m["class"] is None else f"{m['status']} ({m['class']})"
        print(f"| {n} x {size} B | {status} | {m['text_bytes']} B | {la.mib(m['rss_kib'])} |"
              + ("" if ok else " FAILS"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
