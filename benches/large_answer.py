#!/usr/bin/env python3
"""Whole-process measurement of a large answer: our Clinic or Wetech tool against `curl`
of the same body from the same front and Prometheus, in the same run.

    python3 benches/large_answer.py [--provider clinic|wetech] [--series 5000,20000]
                                    [--calls 5] [--debug]

For each size it builds the tool binary as it is packaged (profile `tool`) and the
release fixture, starts `examples/large_answer_fixture.rs` (a real Prometheus 2.42 over the TiKV thread-CPU data set of `evidence-test-support`,
N threads x 241 points over one hour, the provider's test front before it: the Clinic
front, or for Wetech the Grafana front with its datasource proxy; a deployable Clinic v3
or Wetech v2 folder around that `clinic-tool` or `wetech-tool` and a signed
policy for `rate(tikv_thread_cpu_seconds_total[1m])` over that hour at 15 s), then
alternates, N times each:

- the tool as a whole process per call (start-up, policy verification, locking, the
  call through the front: HTTP for Clinic; for Wetech ChromeDriver and a real Chromium
  started for the call, the page's `fetch` through the Grafana datasource proxy and its
  body handed over in chunks through WebDriver; streaming compaction, guard, audit),
  under GNU `/usr/bin/time` for its peak resident set size (`%M`, from wait4's rusage);
  the script installs Debian's `time` with apt-get when it is missing;
- `curl` POSTing the same form (the locked expression the tool sent, read from its
  result) to the same front with the same authorization, writing the body to /dev/null.

For Wetech, wait4's `%M` also covers the descendants the tool waited for (ChromeDriver,
which waits for the Chromium browser process it started), so the tool process's own
peak is also read from `/proc/<pid>/status` (`VmHWM`, sampled every 50 ms while it runs,
the last value kept), and Chromium's own memory is sampled beside it: the largest sum,
over one sample, of the resident (`Rss`) and proportional (`Pss`, shared pages split
between the processes) sizes of every Chrome process under the tool. The CPU time of the
tool, ChromeDriver and the Chrome processes (user plus system, from `/proc/<pid>/stat`,
as last sampled) is printed beside it.

It checks every tool result: status ok, `series_count` N, the hot thread on top with
its peak, and the peak spread over all N series; then prints the medians, the ratio
tool / curl (goal for 5,000 Clinic series: at most 1.3x) and the largest peak RSS of the
tool process (goal: at most 64 MiB for every size).
"""

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

TOOL_BUILD = ["cargo", "build", "--profile", "{profile}", "-p", "evidence-tool", "--bin", "{provider}-tool"]
TOOL_BINARY = "target/{dir}/{provider}-tool"
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


def built(debug: bool, provider: str) -> tuple[str, str]:
    """The tool binary as it is packaged (profile `tool`; `dev` with --debug) and the
    fixture (`release`; `dev` with --debug)."""
    tool_profile, tool_dir = ("dev", "debug") if debug else ("tool", "tool")
    profile, folder = ("dev", "debug") if debug else ("release", "release")
    subprocess.run([part.format(profile=tool_profile, provider=provider) for part in TOOL_BUILD],
                   cwd=ROOT, check=True)
    subprocess.run([part.format(profile=profile) for part in FIXTURE_BUILD], cwd=ROOT, check=True)
    # Under $CARGO_TARGET_DIR when it is set, as cargo builds them.
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return (str(target / TOOL_BINARY.format(dir=tool_dir, provider=provider).removeprefix("target/")),
            str(target / FIXTURE_BINARY.format(dir=folder).removeprefix("target/")))


def children(pid: int) -> list[int]:
    """The children of `pid`, from /proc/PID/task/*/children."""
    out = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out.extend(int(c) for c in f.read().split())
    except OSError:
        pass
    return out


def proc_fields(path: str, names: tuple[str, ...]) -> dict:
    """`Name: N kB` lines of a /proc status-like file, in KiB."""
    found = {}
    try:
        with open(path) as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name in names:
                    found[name] = int(rest.split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return found


def comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def cpu_seconds(pid: int):
    """User plus system CPU seconds of `pid` so far, from /proc/PID/stat."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        fields = stat[stat.rindex(")") + 2:].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


class Sampler(threading.Thread):
    """Samples, every 50 ms while the tool runs: the tool process's own peak RSS
    (VmHWM), the sum of Rss and of Pss over every Chrome process under it, and the CPU
    time of the tool, ChromeDriver and the Chrome processes."""

    def __init__(self, time_pid: int):
        super().__init__(daemon=True)
        self.time_pid = time_pid
        self.stop = threading.Event()
        self.tool_hwm = 0
        self.chrome_rss = 0
        self.chrome_pss = 0
        self.chrome_processes = 0
        # pid -> (kind, CPU seconds at the last sample).
        self.cpu = {}

    def cpu_by_kind(self) -> dict:
        """CPU seconds of the tool, ChromeDriver and Chromium, each as last sampled."""
        totals = {}
        for kind, seconds in self.cpu.values():
            totals[kind] = totals.get(kind, 0.0) + seconds
        return totals

    def run(self) -> None:
        while not self.stop.wait(0.05):
            tools = children(self.time_pid)
            if not tools:
                continue
            hwm = proc_fields(f"/proc/{tools[0]}/status", ("VmHWM",)).get("VmHWM")
            if hwm:
                self.tool_hwm = max(self.tool_hwm, hwm)
            rss = pss = n = 0
            frontier = list(tools)
            while frontier:
                pid = frontier.pop()
                kids = children(pid)
                frontier.extend(kids)
                name = comm(pid)
                chrome = name == "chrome" or name.startswith("chromium") or name.startswith("chrome_")
                kind = "tool" if pid == tools[0] else "chromium" if chrome else name
                seconds = cpu_seconds(pid)
                if seconds is not None:
                    self.cpu[pid] = (kind, seconds)
                if chrome:
                    sizes = proc_fields(f"/proc/{pid}/smaps_rollup", ("Rss", "Pss"))
                    rss += sizes.get("Rss", 0)
                    pss += sizes.get("Pss", 0)
                    n += 1
            if rss > self.chrome_rss:
                self.chrome_rss, self.chrome_processes = rss, n
            self.chrome_pss = max(self.chrome_pss, pss)


def run_tool(setup: dict, rss_file: str, sample: bool) -> tuple[float, dict, dict]:
    """One tool process: wall time, memory figures (KiB) and the parsed result."""
    env = {"PATH": os.environ.get("PATH", ""), **setup["env"]}
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [GNU_TIME, "-f", "%M", "-o", rss_file, setup["tool"]],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
    )
    sampler = Sampler(proc.pid) if sample else None
    if sampler:
        sampler.start()
    out, err = proc.communicate(json.dumps(setup["args"]))
    wall = time.perf_counter() - t0
    if sampler:
        sampler.stop.set()
        sampler.join()
    if proc.returncode != 0:
        raise RuntimeError(f"the tool exited with {proc.returncode}: {err[-2000:]}")
    memory = {"rss": int(Path(rss_file).read_text().strip().splitlines()[-1])}
    if sampler:
        memory.update(tool_hwm=sampler.tool_hwm, chrome_rss=sampler.chrome_rss,
                      chrome_pss=sampler.chrome_pss, chrome_processes=sampler.chrome_processes,
                      cpu=sampler.cpu_by_kind())
    return wall, memory, json.loads(json.loads(out)["text"])


def run_curl(setup: dict, expr: str) -> tuple[float, int]:
    """`curl` of the same body: wall time and bytes downloaded."""
    t0 = time.perf_counter()
    out = subprocess.run(
        ["curl", "-sS", "--fail", "-o", "/dev/null", "-w", "%{size_download}",
         "-H", setup["curl_header"],
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
    item = result["items"][0] if "items" in result else result
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


@contextlib.contextmanager
def started(fixture: str, tool: str, provider: str, series: int, extra: tuple = ()):
    """The fixture serving until the block ends; yields the setup line it printed."""
    proc = subprocess.Popen(
        [fixture, "--tool-binary", tool, "--series", str(series), "--provider", provider,
         *extra],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("the fixture exited before it was ready")
        yield json.loads(line)
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)


def measure(fixture: str, tool: str, provider: str, series: int, calls: int) -> dict:
    sample = provider == "wetech"
    with started(fixture, tool, provider, series) as setup:
        with tempfile.TemporaryDirectory() as tmp:
            rss_file = os.path.join(tmp, "rss")
            # Warm-up: Prometheus' caches, the page cache of the binary; and the locked
            # expression the tool sends, which curl sends too.
            _, _, result = run_tool(setup, rss_file, sample)
            facts = check(result, setup)
            run_curl(setup, facts["expr"])
            tool_walls, memories, curl_walls, sizes = [], [], [], set()
            for _ in range(calls):
                wall, memory, result = run_tool(setup, rss_file, sample)
                check(result, setup)
                tool_walls.append(wall)
                memories.append(memory)
                wall, size = run_curl(setup, facts["expr"])
                curl_walls.append(wall)
                sizes.add(size)
    return {"series": series, "body_bytes": sorted(sizes), "tool": tool_walls, "curl": curl_walls,
            "memory": memories, **facts}


def mib(kib: int) -> str:
    return f"{kib / 1024:.1f} MiB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--provider", choices=("clinic", "wetech"), default="clinic",
                        help="the tool measured (default clinic)")
    parser.add_argument("--series", default="5000,20000", help="comma-separated thread counts")
    parser.add_argument("--calls", type=int, default=5, help="calls per size and side")
    parser.add_argument("--debug", action="store_true", help="use the dev profile (unoptimized)")
    opts = parser.parse_args()
    ensure_gnu_time()
    if shutil.which("curl") is None:
        print("curl is missing: apt-get install -y curl", file=sys.stderr)
        return 1
    wetech = opts.provider == "wetech"
    tool, fixture = built(opts.debug, opts.provider)
    rows = [measure(fixture, tool, opts.provider, int(n), opts.calls)
            for n in opts.series.split(",")]
    load = os.getloadavg()
    front = "the Grafana test front's datasource proxy" if wetech else "the Clinic test front"
    print(f"\n{opts.provider}-tool ({'dev' if opts.debug else 'profile tool'}) vs curl, same body from "
          f"the same Prometheus 2.42 through {front}; {opts.calls} alternating calls each; "
          f"load average {load[0]:.1f} {load[1]:.1f}")
    if wetech:
        print("| series x points | body | tool: median wall | curl: median wall | tool / curl | "
              "tool process: peak RSS (VmHWM, max of runs) | GNU time %M (max) | "
              "Chromium: peak sum of Rss / Pss (max of runs) | answer |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    else:
        print("| series x points | body | tool: median wall | curl: median wall | tool / curl | "
              "tool: peak RSS (max of runs) | answer |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
    failed = False
    for r in rows:
        tool_ms = 1000 * statistics.median(r["tool"])
        curl_ms = 1000 * statistics.median(r["curl"])
        ratio = tool_ms / curl_ms
        time_rss = max(m["rss"] for m in r["memory"])
        # The tool process's own peak: for Wetech %M also covers ChromeDriver (and the
        # browser process it waited for), so the process's own VmHWM is the figure.
        rss = max(m["tool_hwm"] for m in r["memory"]) if wetech else time_rss
        ratio_note = ""
        if r["series"] == 5000 and not wetech:
            ok = ratio <= RATIO_GOAL
            failed |= not ok
            ratio_note = f" (goal <= {RATIO_GOAL}x: {'met' if ok else 'NOT MET'})"
        rss_ok = rss <= RSS_GOAL_KIB
        failed |= not rss_ok
        spread = r["spread"]
        memory = f"| {mib(rss)} (goal <= 64 MiB: {'met' if rss_ok else 'NOT MET'}) "
        if wetech:
            chrome_rss = max(m["chrome_rss"] for m in r["memory"])
            chrome_pss = max(m["chrome_pss"] for m in r["memory"])
            processes = max(m["chrome_processes"] for m in r["memory"])
            memory += (f"| {mib(time_rss)} | {mib(chrome_rss)} / {mib(chrome_pss)} "
                       f"({processes} processes) ")
        print(f"| {r['series']:,} x 241 | {', '.join(f'{b / 1e6:.1f} MB' for b in r['body_bytes'])} "
              f"| {tool_ms:.0f} ms | {curl_ms:.0f} ms | {ratio:.2f}x{ratio_note} "
              f"{memory}"
              f"| ok, series_count {r['series']:,}, top {r['top']} peak {r['peak']} cores, "
              f"spread min {spread['min']} p50 {spread['p50']} p90 {spread['p90']} "
              f"max {spread['max']}; result {r['bytes']:,} bytes |")
        runs = ", ".join(f"{mib(m['tool_hwm' if wetech else 'rss'])}" for m in r["memory"])
        print(f"    tool runs (ms): {', '.join(f'{1000 * t:.0f}' for t in r['tool'])}; "
              f"curl runs (ms): {', '.join(f'{1000 * t:.0f}' for t in r['curl'])}; "
              f"tool peak RSS: {runs}")
        if wetech:
            print("    %M: " + ", ".join(mib(m["rss"]) for m in r["memory"])
                  + "; Chromium Rss / Pss: "
                  + ", ".join(f"{mib(m['chrome_rss'])} / {mib(m['chrome_pss'])}" for m in r["memory"]))
            kinds = ("tool", "chromedriver", "chromium")
            print("    CPU seconds (median of runs): " + ", ".join(
                f"{kind} {statistics.median(m['cpu'].get(kind, 0.0) for m in r['memory']):.2f}"
                for kind in kinds))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
