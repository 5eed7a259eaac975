#!/usr/bin/env python3
"""Latency of one managed call against its floors, side by side in one run: our Clinic
tool as a whole process against `curl` of the same request, and our Clinic MCP server
on a warm session against the same HTTP request made from Python and against the
`prometheus-mcp-server` peer (PyPI, 1.6.2) on a warm session of the same SDK.

    python3 benches/call_latency.py [--pairs 30] [--query tidb_memory_with_nan] [--debug]

It makes the venv of `benches/side_by_side.py` (the peer, the official MCP client
`mcp`), re-runs itself inside it, builds `clinic-tool` with the packaging profile
(`--profile tool`: fat LTO, one codegen unit, stripped) and the side-by-side fixture,
and starts the fixture: a real Prometheus 2.42 over the test fixtures, the Clinic test
front, a deployable Clinic v3 folder around that binary, and an Ed25519-signed policy
per query. Then, for one query (default `tidb_memory_with_nan`, 12 series x 241 points):

1. **One-shot.** `--pairs` alternating pairs: the packaged tool as a whole process
   (start-up, the package digest over its own binary, policy verification, locking, the
   HTTP call through the Clinic front, compaction, guard, audit), then `curl` POSTing
   the same locked expression with the same token to the same front. The ratio of each
   pair, and the median of those ratios (goal: at most 1.2x).
2. **MCP, warm sessions.** Our server (`clinic-tool --mcp`, one session, the package
   hashed once at its start), the same HTTP request from this Python process
   (`urllib`), and the peer's `execute_range_query` of the same expression, window and
   step straight from Prometheus: `--pairs` rounds, the three in turn (the order
   rotating per round), the median of the per-round ratios ours / HTTP (goal: at most
   3x) and ours / peer (goal: below 1, faster).

Every answer of ours is checked (`ok`, the expected series count). Exit status 1 when a
goal is not met.
"""

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import side_by_side as sbs  # noqa: E402  (the venv, the fixture and their commands)

ROOT = sbs.ROOT
TOOL_BUILD = ["cargo", "build", "--profile", "{tool_profile}", "-p", "evidence-tool", "--bin", "clinic-tool"]
TOOL_BINARY = "target/{tool_dir}/clinic-tool"
ONE_SHOT_GOAL = 1.2
MCP_HTTP_GOAL = 3.0
MCP_PEER_GOAL = 1.0


def target_dir() -> Path:
    """Where cargo puts what it builds: `$CARGO_TARGET_DIR` when set (relative to the
    workspace, as cargo reads it), else the workspace's `target`."""
    return ROOT / os.environ.get("CARGO_TARGET_DIR", "target")


def in_target(command: list) -> list:
    """`command` with a first part under the workspace's `target` moved to `target_dir()`."""
    first = Path(command[0])
    if first.is_relative_to(ROOT / "target"):
        first = target_dir() / first.relative_to(ROOT / "target")
    return [str(first)] + command[1:]


def built(debug: bool) -> tuple[str, list]:
    """Builds the tool (packaging profile, or dev) and the fixture; their paths."""
    tool_profile, tool_dir = ("dev", "debug") if debug else ("tool", "tool")
    subprocess.run([p.format(tool_profile=tool_profile) for p in TOOL_BUILD], cwd=ROOT, check=True)
    subprocess.run(sbs.resolve(sbs.FIXTURE_BUILD, debug), cwd=ROOT, check=True)
    tool = in_target([str(ROOT / TOOL_BINARY.format(tool_dir=tool_dir))])[0]
    return tool, in_target(sbs.resolve(sbs.FIXTURE_COMMAND, debug))


def form(q: dict, expr: str) -> bytes:
    return urllib.parse.urlencode(
        {"query": expr, "start": q["start"], "end": q["end"], "step": q["step_seconds"]}
    ).encode()


def checked(text: str, series: int) -> dict:
    """Our result, checked: ok with the expected series count; its evidence."""
    item = json.loads(text)["items"][0]
    if item.get("status") != "ok":
        raise RuntimeError(f"our tool did not answer ok: {text[:600]}")
    evidence = item["evidence"]
    if evidence["series_count"] != series:
        raise RuntimeError(f"series_count {evidence['series_count']}, expected {series}")
    return evidence


def one_shot(tool: str, q: dict, series: int) -> float:
    env = {"PATH": os.environ.get("PATH", ""), **q["env"]}
    t0 = time.perf_counter()
    out = subprocess.run([tool], input=json.dumps(q["args"]), env=env,
                         capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    checked(json.loads(out.stdout)["text"], series)
    return wall


def curl(q: dict, expr: str) -> float:
    t0 = time.perf_counter()
    subprocess.run(
        ["curl", "-sS", "--fail", "-o", "/dev/null",
         "-H", f"Authorization: Bearer {q['token']}",
         "--data-urlencode", f"query={expr}",
         "--data-urlencode", f"start={q['start']}",
         "--data-urlencode", f"end={q['end']}",
         "--data-urlencode", f"step={q['step_seconds']}",
         q["query_range_url"]],
        capture_output=True, check=True,
    )
    return time.perf_counter() - t0


def http_request(q: dict, expr: str) -> float:
    request = urllib.request.Request(
        q["query_range_url"], data=form(q, expr),
        headers={"Authorization": f"Bearer {q['token']}"},
    )
    t0 = time.perf_counter()
    with urllib.request.urlopen(request) as r:
        r.read()
    return time.perf_counter() - t0


async def mcp_rounds(tool: str, prometheus_url: str, q: dict, expr: str, series: int, rounds: int):
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    # The server admits every call in the turn ledger; the same question asked again in
    # one turn is refused, so each measured call starts a new turn (an emptied ledger,
    # which is what the first call of every turn costs).
    ledger_dir = tempfile.TemporaryDirectory(prefix="call-latency-ledger-")  # removed with it
    ledger = Path(ledger_dir.name)
    ours_server = StdioServerParameters(
        command=tool, args=["--mcp"],
        env={"PATH": os.environ.get("PATH", ""), **q["env"], "EVIDENCE_TURN_LEDGER": str(ledger)},
    )
    peer_server = StdioServerParameters(
        command=str(Path(sys.prefix) / "bin" / "prometheus-mcp-server"),
        env={"PATH": os.environ.get("PATH", ""), "PROMETHEUS_URL": prometheus_url},
    )
    peer_args = {"query": expr, "start": sbs.iso(q["start"]), "end": sbs.iso(q["end"]),
                 "step": f'{q["step_seconds"]}s'}
    async with stdio_client(ours_server) as (r1, w1), stdio_client(peer_server) as (r2, w2):
        async with ClientSession(r1, w1) as ours, ClientSession(r2, w2) as peer:
            await ours.initialize()
            await peer.initialize()

            async def call_ours() -> float:
                for entry in ledger.iterdir():
                    entry.unlink()
                t0 = time.perf_counter()
                r = await ours.call_tool("managed_auto_oncall_clinic", q["args"])
                wall = time.perf_counter() - t0
                checked("".join(c.text for c in r.content if c.type == "text"), series)
                return wall

            async def call_peer() -> float:
                t0 = time.perf_counter()
                r = await peer.call_tool("execute_range_query", peer_args)
                wall = time.perf_counter() - t0
                if getattr(r, "isError", False):
                    raise RuntimeError("the peer failed")
                return wall

            async def call_http() -> float:
                return http_request(q, expr)

            sides = [("ours", call_ours), ("http", call_http), ("peer", call_peer)]
            for _, f in sides:  # warm-up: connections, caches
                await f()
            times = {name: [] for name, _ in sides}
            for i in range(rounds):
                for name, f in sides[i % 3:] + sides[:i % 3]:
                    times[name].append(await f())
            return times


def ensure_venv(venv: Path) -> None:
    """The venv of `side_by_side.py` (the peer and the MCP client); re-runs this script
    in it."""
    if Path(sys.prefix).resolve() == venv.resolve():
        return
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", *sbs.PEER_PACKAGES], check=True)
    os.execv(str(python), [str(python), __file__, *sys.argv[1:]])


def med(xs: list) -> float:
    return statistics.median(xs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=30, help="pairs (rounds) per comparison")
    parser.add_argument("--query", default="tidb_memory_with_nan", help="a SIDE_BY_SIDE_QUERIES name")
    parser.add_argument("--venv", type=Path, default=ROOT / "target/side-by-side-venv")
    parser.add_argument("--debug", action="store_true", help="dev profile (unoptimized)")
    opts = parser.parse_args()
    if shutil.which("curl") is None:
        print("curl is missing: apt-get install -y curl", file=sys.stderr)
        return 1
    ensure_venv(opts.venv)
    tool, fixture_command = built(opts.debug)
    fixture = subprocess.Popen(fixture_command + ["--tool-binary", tool],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        setup = json.loads(fixture.stdout.readline())
        packaged = setup["tool"]
        q = next(x for x in setup["queries"] if x["name"] == opts.query)
        _, _, series = sbs.ground_truth(setup["prometheus_url"], q)
        # Warm-up, and the locked expression our tool sends (curl and the peer send it too).
        one_shot(packaged, q, series)
        env = {"PATH": os.environ.get("PATH", ""), **q["env"]}
        out = subprocess.run([packaged], input=json.dumps(q["args"]), env=env,
                             capture_output=True, text=True, check=True)
        expr = checked(json.loads(out.stdout)["text"], series)["expr"]
        curl(q, expr)
        tool_times, curl_times = [], []
        for _ in range(opts.pairs):
            tool_times.append(one_shot(packaged, q, series))
            curl_times.append(curl(q, expr))
        mcp = asyncio.run(mcp_rounds(packaged, setup["prometheus_url"], q, expr, series, opts.pairs))
    finally:
        fixture.stdin.close()
        fixture.wait(timeout=30)

    one_shot_ratio = med([t / c for t, c in zip(tool_times, curl_times)])
    http_ratio = med([o / h for o, h in zip(mcp["ours"], mcp["http"])])
    peer_ratio = med([o / p for o, p in zip(mcp["ours"], mcp["peer"])])
    size = os.path.getsize(tool)
    load = os.getloadavg()
    ms = lambda xs: f"{1000 * med(xs):.2f} ms"
    verdict = lambda ok: "met" if ok else "NOT MET"
    print(f"\nquery `{q['name']}` ({series} series), {opts.pairs} pairs each; packaged clinic-tool "
          f"{size / 2**20:.2f} MiB ({'dev' if opts.debug else 'profile tool'}); load average "
          f"{load[0]:.1f} {load[1]:.1f}")
    print("| comparison | ours (median) | baseline (median) | median of pair ratios | goal |")
    print("| --- | --- | --- | --- | --- |")
    print(f"| one-shot process / `curl` | {ms(tool_times)} | {ms(curl_times)} | {one_shot_ratio:.2f}x "
          f"| <= {ONE_SHOT_GOAL}x: {verdict(one_shot_ratio <= ONE_SHOT_GOAL)} |")
    print(f"| MCP call (warm) / the same HTTP request from Python | {ms(mcp['ours'])} | {ms(mcp['http'])} "
          f"| {http_ratio:.2f}x | <= {MCP_HTTP_GOAL}x: {verdict(http_ratio <= MCP_HTTP_GOAL)} |")
    print(f"| MCP call (warm) / `prometheus-mcp-server` call (warm) | {ms(mcp['ours'])} | {ms(mcp['peer'])} "
          f"| {peer_ratio:.2f}x | < {MCP_PEER_GOAL}x: {verdict(peer_ratio < MCP_PEER_GOAL)} |")
    failed = one_shot_ratio > ONE_SHOT_GOAL or http_ratio > MCP_HTTP_GOAL or peer_ratio >= MCP_PEER_GOAL
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
