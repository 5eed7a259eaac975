#!/usr/bin/env python3
"""A Wetech call over MCP with the warm browser against a cold one-shot call and against
`curl` of the same query through the Grafana front, 1,000 warm calls in a row, and a
large answer over MCP, side by side in one run.

    python3 benches/wetech_warm.py [--pairs 30] [--calls 1000] [--large-series 5000]
                                   [--large-pairs 5] [--large-only] [--debug]

It builds `wetech-tool` as it is packaged (profile `tool`) and the release
`examples/large_answer_fixture.rs` (as `benches/large_answer.py` does: a real Prometheus
2.42 over the TiKV thread-CPU data set, the Grafana test front with its session cookie
check and datasource proxy, a deployable Wetech v2 folder around that binary, a signed
policy, the storage state with the front's session cookie), then:

1. **Warm, cold and `curl`.** With 50 threads (a 0.4 MB answer), `wetech-tool --mcp` is
   started once (its runtime context plus a fresh turn ledger; a lean JSON-RPC client on
   its stdin and stdout) and its first call (which starts the browser) is left out.
   Then `--pairs` rounds, the order rotating per round, of: a `tools/call` on that
   server (the time from writing the request to reading its answer), the one-shot tool
   as a whole process (ChromeDriver and Chromium started for the call), and `curl`
   POSTing the same locked expression to the same proxy path with the same session
   cookie. Every tool answer is checked (`ok`, the series count, the hot thread on top).
   Each MCP call starts a new turn (the ledger's turn files are emptied before it).
   Goals: a warm call at most 0.3 s and at most 20x the `curl` (medians; the ratios are
   medians of the per-round ratios).
2. **`--calls` warm calls in a row** on the same server (started with
   `--browser-max-calls` above `--calls`, so that one browser serves them all): the
   proportional set size (`Pss`, `/proc/<pid>/smaps_rollup`) summed over the Chromium
   processes under the server, and the server's own `VmRSS`, after calls 100 and
   `--calls` (the first call and the rounds above count). Goal: growth at most 10 %.
3. **A large answer** (`--large-series` threads, 41.6 MB for 5,000): `--large-pairs`
   alternating pairs of a warm MCP call and `curl`, on a server of its own (first call
   left out), with the server's peak RSS (`VmHWM`). Goals: at most 3x `curl`, the
   server at most 64 MiB. `--large-only` runs this part alone.

Exit status 1 when a check fails (goals missed are printed, not failed on).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import large_answer as la  # noqa: E402  (the build, the fixture, the one-shot call, curl, checks)

WARM_GOAL_S = 0.3
WARM_RATIO_GOAL = 20.0
GROWTH_GOAL = 0.10
LARGE_RATIO_GOAL = 3.0
RSS_GOAL_KIB = 64 * 1024


class Server:
    """`wetech-tool --mcp` with the fixture's runtime context and a fresh turn ledger,
    driven by a lean JSON-RPC client over its stdin and stdout."""

    def __init__(self, setup: dict, ledger: Path, flags: tuple = ()):
        env = {k: str(v) for k, v in setup["env"].items()}
        env.update({"PATH": os.environ.get("PATH", ""), "EVIDENCE_TURN_LEDGER": str(ledger)})
        self.ledger = ledger
        self.args = setup["args"]
        self.process = subprocess.Popen([setup["tool"], "--mcp", *flags], env=env,
                                        stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        text=True, bufsize=1)
        self.next_id = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "wetech-warm-bench", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict) -> None:
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()

    def request(self, method: str, params: dict) -> dict:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError("the server closed its stdout")
            message = json.loads(line)
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def call(self) -> tuple[float, dict]:
        """One `tools/call` in a new turn: wall time and the result's details."""
        for turn in self.ledger.iterdir():
            if turn.is_file():
                turn.unlink()
        t0 = time.perf_counter()
        result = self.request("tools/call", {"name": "managed_auto_oncall_wetech",
                                             "arguments": self.args})
        return time.perf_counter() - t0, result["structuredContent"]

    def stop(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)


def tree(pid: int) -> list[int]:
    """`pid`'s descendants."""
    out, frontier = [], [pid]
    while frontier:
        kids = la.children(frontier.pop())
        out.extend(kids)
        frontier.extend(kids)
    return out


def chromium_pss_kib(server_pid: int) -> int:
    return sum(la.proc_fields(f"/proc/{p}/smaps_rollup", ("Pss",)).get("Pss", 0)
               for p in tree(server_pid)
               if la.comm(p) == "chrome" or la.comm(p).startswith(("chromium", "chrome_")))


def rotate(i: int, sides: list) -> list:
    return sides[i % len(sides):] + sides[:i % len(sides)]


def warm_cold_curl(fixture: str, tool: str, pairs: int, calls: int) -> dict:
    with la.started(fixture, tool, "wetech", 50) as setup, tempfile.TemporaryDirectory() as tmp:
        rss_file = os.path.join(tmp, "rss")
        ledger = Path(tmp) / "ledger"
        ledger.mkdir()
        _, _, result = la.run_tool(setup, rss_file, False)
        facts = la.check(result, setup)
        # One browser for the whole run: its bound on calls above the run's calls.
        server = Server(setup, ledger, ("--browser-max-calls", str(calls + 10)))
        try:
            first, details = server.call()
            la.check(details, setup)
            walls = {"warm": [], "cold": [], "curl": []}

            def warm():
                wall, details = server.call()
                la.check(details, setup)
                walls["warm"].append(wall)

            def cold():
                wall, _, result = la.run_tool(setup, rss_file, False)
                la.check(result, setup)
                walls["cold"].append(wall)

            def curl():
                walls["curl"].append(la.run_curl(setup, facts["expr"])[0])

            for i in range(pairs):
                for side in rotate(i, [warm, cold, curl]):
                    side()
            memory = {}
            for n in range(pairs + 2, calls + 1):
                server.call()
                if n in (100, calls):
                    memory[n] = {"chromium_pss": chromium_pss_kib(server.process.pid),
                                 "server_rss": la.proc_fields(f"/proc/{server.process.pid}/status",
                                                              ("VmRSS",))["VmRSS"]}
        finally:
            server.stop()
    return {"first": first, "walls": walls, "memory": memory}


def large(fixture: str, tool: str, series: int, pairs: int) -> dict:
    with la.started(fixture, tool, "wetech", series) as setup, tempfile.TemporaryDirectory() as tmp:
        ledger = Path(tmp) / "ledger"
        ledger.mkdir()
        server = Server(setup, ledger)
        try:
            _, details = server.call()
            facts = la.check(details, setup)
            la.run_curl(setup, facts["expr"])
            warm, curl, sizes = [], [], set()
            for i in range(pairs):
                for side in rotate(i, ["warm", "curl"]):
                    if side == "warm":
                        wall, details = server.call()
                        la.check(details, setup)
                        warm.append(wall)
                    else:
                        wall, size = la.run_curl(setup, facts["expr"])
                        curl.append(wall)
                        sizes.add(size)
            hwm = la.proc_fields(f"/proc/{server.process.pid}/status", ("VmHWM",))["VmHWM"]
        finally:
            server.stop()
    return {"warm": warm, "curl": curl, "hwm": hwm, "sizes": sorted(sizes)}


def ms(seconds: float) -> str:
    return f"{1000 * seconds:,.0f} ms" if seconds >= 0.1 else f"{1000 * seconds:.1f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=30, help="rounds of warm, cold and curl")
    parser.add_argument("--calls", type=int, default=1000, help="warm calls in a row")
    parser.add_argument("--large-series", type=int, default=5000, help="threads of the large answer")
    parser.add_argument("--large-pairs", type=int, default=5, help="pairs of the large answer")
    parser.add_argument("--large-only", action="store_true", help="run the large answer alone")
    parser.add_argument("--debug", action="store_true", help="use the dev profile (unoptimized)")
    opts = parser.parse_args()
    la.ensure_gnu_time()
    tool, fixture = la.built(opts.debug, "wetech")
    small = None if opts.large_only else warm_cold_curl(fixture, tool, opts.pairs, opts.calls)
    big = large(fixture, tool, opts.large_series, opts.large_pairs)
    load = os.getloadavg()
    print(f"\nwetech-tool ({'dev' if opts.debug else 'profile tool'}), load average "
          f"{load[0]:.1f} {load[1]:.1f}")
    if small is not None:
        print_small(small, opts.pairs)
    print_large(big, opts.large_series, opts.large_pairs)
    return 0


def print_small(small: dict, pairs: int) -> None:
    w = small["walls"]
    warm, cold, curl = (statistics.median(w[k]) for k in ("warm", "cold", "curl"))
    warm_ratio = statistics.median(a / c for a, c in zip(w["warm"], w["curl"]))
    cold_ratio = statistics.median(a / c for a, c in zip(w["cold"], w["curl"]))
    print(f"first MCP call (starts the browser): {ms(small['first'])}")
    print(f"| 50 x 241 (0.4 MB), {pairs} rounds | median | runs |")
    print("| --- | --- | --- |")
    for name, key in (("warm MCP call", "warm"), ("cold one-shot call", "cold"), ("curl", "curl")):
        runs = sorted(w[key])
        print(f"| {name} | {ms(statistics.median(runs))} | {ms(runs[0])}-{ms(runs[-1])} |")
    print(f"warm / curl {warm_ratio:.1f}x (goal <= {WARM_RATIO_GOAL:.0f}x: "
          f"{'met' if warm_ratio <= WARM_RATIO_GOAL else 'NOT MET'}); warm {ms(warm)} (goal <= "
          f"{WARM_GOAL_S} s: {'met' if warm <= WARM_GOAL_S else 'NOT MET'}); cold / curl "
          f"{cold_ratio:.1f}x; cold / warm {cold / warm:.1f}x")
    m = small["memory"]
    first, last = min(m), max(m)
    pss = (m[last]["chromium_pss"] - m[first]["chromium_pss"]) / m[first]["chromium_pss"]
    rss = (m[last]["server_rss"] - m[first]["server_rss"]) / m[first]["server_rss"]
    print(f"after call {first}: Chromium Pss {la.mib(m[first]['chromium_pss'])}, server RSS "
          f"{la.mib(m[first]['server_rss'])}; after call {last}: {la.mib(m[last]['chromium_pss'])}, "
          f"{la.mib(m[last]['server_rss'])}; growth {100 * pss:+.1f} % / {100 * rss:+.1f} % "
          f"(goal <= {100 * GROWTH_GOAL:.0f} %: "
          f"{'met' if max(abs(pss), abs(rss)) <= GROWTH_GOAL else 'NOT MET'})")


def print_large(big: dict, series: int, pairs: int) -> None:
    large_warm, large_curl = statistics.median(big["warm"]), statistics.median(big["curl"])
    large_ratio = statistics.median(a / c for a, c in zip(big["warm"], big["curl"]))
    print(f"{series:,} x 241 ({', '.join(f'{b / 1e6:.1f} MB' for b in big['sizes'])}), "
          f"{pairs} pairs: warm MCP {ms(large_warm)} (runs "
          f"{', '.join(ms(x) for x in big['warm'])}), curl {ms(large_curl)} (runs "
          f"{', '.join(ms(x) for x in big['curl'])}), {large_ratio:.1f}x (goal <= "
          f"{LARGE_RATIO_GOAL:.0f}x: {'met' if large_ratio <= LARGE_RATIO_GOAL else 'NOT MET'}); "
          f"server peak RSS {la.mib(big['hwm'])} (goal <= 64 MiB: "
          f"{'met' if big['hwm'] <= RSS_GOAL_KIB else 'NOT MET'})")


if __name__ == "__main__":
    sys.exit(main())
