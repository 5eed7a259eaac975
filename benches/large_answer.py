#!/usr/bin/env python3
"""Whole-process measurement of a large answer: our Clinic tool against `curl` of the
same body from the same Prometheus, in the same run.

    python3 benches/large_answer.py [--series 5000,20000] [--calls 5] [--debug]

For each size it builds the release binaries, starts `examples/large_answer_fixture.rs`
(a real Prometheus 2.42 over the TiKV thread-CPU data set of `evidence-test-support`,
N threads x 241 points over one hour, the Clinic test front before it, a deployable
Clinic v3 folder around the release `clinic-tool` and a signed policy for
`rate(tikv_thread_cpu_seconds_total[1m])` over that hour at 15 s), then alternates, N
times each:

- the tool as a whole process per call (start-up, policy verification, locking, the
  HTTP call through the Clinic front, streaming compaction, guard, audit), under GNU
  `/usr/bin/time` for its peak resident set size (`%M`, from wait4's rusage); the
  script installs Debian's `time` with apt-get when it is missing;
- `curl` POSTing the same form (the locked expression the tool sent, read from its
  result) to the same front, writing the body to /dev/null.

It checks every tool result: status ok, `series_count` N, the hot thread on top with
its peak, and the peak spread over all N series; then prints the medians, the ratio
tool / curl (goal for 5,000 series: at most 1.3x) and the largest peak RSS (goal: at
most 64 MiB for every size).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

TOOL_BUILD = ["cargo", "build", "--profile", "{profile}", "-p", "evidence-tool", "--bin", "clinic-tool"]
TOOL_BINARY = "target/{dir}/clinic-tool"
FIXTURE_BUILD = ["cargo", "build", "--profile", "{profile}", "--example", "large_answer_fixture"]
FIXTURE_BINARY = "target/{dir}/examples/large_answer_fixture"
GNU_TIME = "/usr/bin/time"
RATIO_GOAL = 1.3
RSS_GOAL_KIB = 64 * 1024


def ensure_gnu_time() -> None:
    """Installs Debian's `time` package when /usr/bin/time is missing."""
    if Path(GNU_TIME).exists():
        return
    prefix = [] if os.geteuid() == 0 else ["sudo"]
    subprocess.run(prefix + ["apt-get", "install", "-y", "time"], check=True)


def built(debug: bool) -> tuple[str, str]:
    profile, folder = ("dev", "debug") if debug else ("release", "release")
    for command in (TOOL_BUILD, FIXTURE_BUILD):
        subprocess.run([part.format(profile=profile) for part in command], cwd=ROOT, check=True)
    return str(ROOT / TOOL_BINARY.format(dir=folder)), str(ROOT / FIXTURE_BINARY.format(dir=folder))


def run_tool(setup: dict, rss_file: str) -> tuple[float, int, dict]:
    """One tool process: wall time, peak RSS (KiB) and the parsed result."""
    env = {"PATH": os.environ.get("PATH", ""), **setup["env"]}
    t0 = time.perf_counter()
    out = subprocess.run(
        [GNU_TIME, "-f", "%M", "-o", rss_file, setup["tool"]],
        input=json.dumps(setup["args"]), env=env, capture_output=True, text=True, check=True,
    )
    wall = time.perf_counter() - t0
    rss = int(Path(rss_file).read_text().strip().splitlines()[-1])
    return wall, rss, json.loads(json.loads(out.stdout)["text"])


def run_curl(setup: dict, expr: str) -> tuple[float, int]:
    """`curl` of the same body: wall time and bytes downloaded."""
    t0 = time.perf_counter()
    out = subprocess.run(
        ["curl", "-sS", "--fail", "-o", "/dev/null", "-w", "%{size_download}",
         "-H", f"Authorization: Bearer {setup['token']}",
         "--data-urlencode", f"query={expr}",
         "--data-urlencode", f"start={setup['start']}",
         "--data-urlencode", f"end={setup['end']}",
         "--data-urlencode", f"step={setup['step_seconds']}",
         setup["query_range_url"]],
        capture_output=True, text=True, check=True,
    )
    return time.perf_counter() - t0, int(out.stdout)


def check(result: dict, setup: dict) -> dict:
    """The tool's answer is ok, complete and names the hot thread with its peak."""
    item = result["items"][0]
    if item.get("status") != "ok":
        raise RuntimeError(f"the tool did not answer ok: {json.dumps(item)[:600]}")
    ev = item["evidence"]
    if ev["series_count"] != setup["series"]:
        raise RuntimeError(f"series_count {ev['series_count']}, expected {setup['series']}")
    table = ev["series"]
    named = dict(zip(table["labels"] + table["stats"], table["rows"][0]))
    labels = {**ev.get("common_labels", {}), **named}
    want = setup["expected"]
    if (labels.get("instance"), labels.get("name")) != (want["instance"], want["name"]):
        raise RuntimeError(f"top series {labels}, expected {want}")
    if abs(named["peak"] - want["peak"]) > 0.005:
        raise RuntimeError(f"top peak {named['peak']}, expected {want['peak']}")
    spread = ev["peak_spread"]
    if spread["series"] != setup["series"]:
        raise RuntimeError(f"peak spread over {spread['series']} series")
    return {"top": f"{labels['instance']} {labels['name']}", "peak": named["peak"],
            "spread": spread, "expr": ev["expr"], "bytes": len(json.dumps(result))}


def measure(fixture: str, tool: str, series: int, calls: int) -> dict:
    proc = subprocess.Popen(
        [fixture, "--tool-binary", tool, "--series", str(series)],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("the fixture exited before it was ready")
        setup = json.loads(line)
        with tempfile.TemporaryDirectory() as tmp:
            rss_file = os.path.join(tmp, "rss")
            # Warm-up: Prometheus' caches, the page cache of the binary; and the locked
            # expression the tool sends, which curl sends too.
            _, _, result = run_tool(setup, rss_file)
            facts = check(result, setup)
            run_curl(setup, facts["expr"])
            tool_walls, rsss, curl_walls, sizes = [], [], [], set()
            for _ in range(calls):
                wall, rss, result = run_tool(setup, rss_file)
                check(result, setup)
                tool_walls.append(wall)
                rsss.append(rss)
                wall, size = run_curl(setup, facts["expr"])
                curl_walls.append(wall)
                sizes.add(size)
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    return {"series": series, "body_bytes": sorted(sizes), "tool": tool_walls, "curl": curl_walls,
            "rss_kib": rsss, **facts}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", default="5000,20000", help="comma-separated thread counts")
    parser.add_argument("--calls", type=int, default=5, help="calls per size and side")
    parser.add_argument("--debug", action="store_true", help="use the dev profile (unoptimized)")
    opts = parser.parse_args()
    ensure_gnu_time()
    if shutil.which("curl") is None:
        print("curl is missing: apt-get install -y curl", file=sys.stderr)
        return 1
    tool, fixture = built(opts.debug)
    rows = [measure(fixture, tool, int(n), opts.calls) for n in opts.series.split(",")]
    load = os.getloadavg()
    print(f"\nclinic-tool ({'dev' if opts.debug else 'release'}) vs curl, same body from the same "
          f"Prometheus 2.42 through the Clinic test front; {opts.calls} alternating calls each; "
          f"load average {load[0]:.1f} {load[1]:.1f}")
    print("| series x points | body | tool: median wall | curl: median wall | tool / curl | "
          "tool: peak RSS (max of runs) | answer |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    failed = False
    for r in rows:
        tool_ms = 1000 * statistics.median(r["tool"])
        curl_ms = 1000 * statistics.median(r["curl"])
        ratio = tool_ms / curl_ms
        rss = max(r["rss_kib"])
        ratio_note = ""
        if r["series"] == 5000:
            ok = ratio <= RATIO_GOAL
            failed |= not ok
            ratio_note = f" (goal <= {RATIO_GOAL}x: {'met' if ok else 'NOT MET'})"
        rss_ok = rss <= RSS_GOAL_KIB
        failed |= not rss_ok
        spread = r["spread"]
        print(f"| {r['series']:,} x 241 | {', '.join(f'{b / 1e6:.1f} MB' for b in r['body_bytes'])} "
              f"| {tool_ms:.0f} ms | {curl_ms:.0f} ms | {ratio:.2f}x{ratio_note} "
              f"| {rss / 1024:.1f} MiB (goal <= 64 MiB: {'met' if rss_ok else 'NOT MET'}) "
              f"| ok, series_count {r['series']:,}, top {r['top']} peak {r['peak']} cores, "
              f"spread min {spread['min']} p50 {spread['p50']} p90 {spread['p90']} "
              f"max {spread['max']}; result {r['bytes']:,} bytes |")
        print(f"    tool runs (ms): {', '.join(f'{1000 * t:.0f}' for t in r['tool'])}; "
              f"curl runs (ms): {', '.join(f'{1000 * t:.0f}' for t in r['curl'])}; "
              f"RSS (MiB): {', '.join(f'{k / 1024:.1f}' for k in r['rss_kib'])}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
