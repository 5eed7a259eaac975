#!/usr/bin/env python3
"""Side by side, in one run: our Clinic tool and the `prometheus-mcp-server` peer
(PyPI, 1.6.2) answering the same queries from the same real Prometheus.

    python3 benches/side_by_side.py [--calls N] [--venv DIR] [--debug]

It creates a venv (default `target/side-by-side-venv`), pip-installs the peer
(`prometheus-mcp-server==1.6.2`), the official MCP client (`mcp`) and `bpe-openai` (its
`cl100k_base` ranks ship in the wheel), re-runs itself inside the venv, builds our
binaries, and starts `examples/side_by_side_fixture.rs`: a real Prometheus over the test
fixtures, the Clinic test front, a local Clinic v3 package and one signed policy per
query. Then, per query:

- ours: the tool as a whole process per call (start-up, policy verification, locking,
  the HTTP call through the Clinic front, compaction, guard, audit), the median of N calls;
- the peer: `execute_range_query` over the official Python MCP client on one warm
  session (its process start plus `initialize` is reported separately), median of N;

and prints bytes and `cl100k_base` tokens of the text each returns (what the model
reads), the latency, and whether the answer (top instance and its peak, computed here
from the raw Prometheus answer) is stated in the text.
"""

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# ---- OUR TOOL: the one place that names how our tool is built and run -------------
# The Clinic entrypoint is the `clinic-tool` binary of crates/tool. The fixture packages
# it into a deployable Clinic v3 folder (the binary inside the package digest) and
# prints that folder's entrypoint, which is what runs per call.
OUR_TOOL_BUILD = ["cargo", "build", "--profile", "{profile}", "-p", "evidence-tool", "--bin", "clinic-tool"]
OUR_TOOL_BINARY = ["target/{dir}/clinic-tool"]
# ---------------------------------------------------------------------------------

FIXTURE_BUILD = ["cargo", "build", "--profile", "{profile}", "--example", "side_by_side_fixture"]
FIXTURE_COMMAND = ["target/{dir}/examples/side_by_side_fixture"]


def resolve(command: list, debug: bool) -> list:
    """Fills in the cargo profile (`release`, or `dev` with --debug) and its folder."""
    profile, folder = ("dev", "debug") if debug else ("release", "release")
    out = [part.format(profile=profile, dir=folder) for part in command]
    return [str(ROOT / out[0])] + out[1:] if out[0].startswith("target/") else out


PEER_PACKAGES = ["prometheus-mcp-server==1.6.2", "mcp", "bpe-openai"]


def ensure_venv(venv: Path) -> None:
    """Creates the venv and installs the packages, then re-runs this script in it."""
    if Path(sys.prefix).resolve() == venv.resolve():
        return
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", *PEER_PACKAGES], check=True
    )
    os.execv(str(python), [str(python), __file__, *sys.argv[1:]])


def tokenizer():
    import bpe_openai

    enc = bpe_openai.get_encoding("cl100k_base")

    def count(text: str) -> int:
        # The wheel refuses inputs of 1,000,000 characters or more; long texts are cut
        # where cl100k_base's pre-tokenizer always splits (before a digit that follows
        # punctuation), so the count is exact.
        total, start = 0, 0
        while len(text) - start >= 500_000:
            cut = start + 400_000
            while not (text[cut].isdigit() and not text[cut - 1].isalnum() and not text[cut - 1].isspace()):
                cut += 1
            total += len(enc.encode_ordinary(text[start:cut]))
            start = cut
        return total + len(enc.encode_ordinary(text[start:]))

    return count


def iso(ts: int) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def ground_truth(prometheus_url: str, q: dict) -> tuple[str, float, int]:
    """The top series (its labels) and its peak, from the raw Prometheus answer."""
    body = urllib.parse.urlencode(
        {"query": q["expr"], "start": q["start"], "end": q["end"], "step": q["step_seconds"]}
    ).encode()
    with urllib.request.urlopen(f"{prometheus_url}/api/v1/query_range", body) as r:
        data = json.load(r)["data"]["result"]
    best = None
    for s in data:
        for _, v in s["values"]:
            x = float(v)
            if x == x and abs(x) != float("inf") and (best is None or x > best[1]):
                best = (s["metric"].get("instance", json.dumps(s["metric"])), x)
    return best[0], best[1], len(data)


def four_digits(x: float) -> str:
    """How compact evidence prints a figure: 4 significant digits, integers bare."""
    r = float(f"{x:.3e}")
    return str(int(r)) if r == int(r) and abs(r) < 2**53 else repr(r)


def go_float(x: float) -> str:
    """How Prometheus (Go's strconv 'f', -1) writes a sample value."""
    return str(int(x)) if x == int(x) and abs(x) < 1e21 else repr(x)


def raw_points(text: str) -> int:
    """Sample values in the peer's text (its JSON matrix)."""
    try:
        result = json.loads(text)["result"]
    except (ValueError, KeyError, TypeError):
        return 0
    return sum(len(s.get("values", [])) for s in result)


def our_answer(text: str) -> tuple[str, str] | None:
    """The top instance and peak stated by our result: the first row of the series
    table (highest peak first) and its `peak` column."""
    item = json.loads(text)["items"][0]
    table = item["evidence"]["series"]
    labels, stats, row = table["labels"], table["stats"], table["rows"][0]
    named = dict(zip(labels + stats, row))
    common = item["evidence"].get("common_labels", {})
    instance = named.get("instance", common.get("instance"))
    return instance, json.dumps(named["peak"])


def run_ours(our_tool: list, q: dict, calls: int) -> tuple[str, list[float]]:
    env = {"PATH": os.environ.get("PATH", ""), **q["env"]}
    args = json.dumps(q["args"])
    times, text = [], None
    for _ in range(calls):
        t0 = time.perf_counter()
        out = subprocess.run(
            our_tool, input=args, env=env, capture_output=True, text=True, check=True
        )
        times.append(time.perf_counter() - t0)
        text = json.loads(out.stdout)["text"]
    return text, times


async def run_peer(prometheus_url: str, queries: list, calls: int):
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    server = StdioServerParameters(
        command=str(Path(sys.prefix) / "bin" / "prometheus-mcp-server"),
        env={"PATH": os.environ.get("PATH", ""), "PROMETHEUS_URL": prometheus_url},
    )
    t0 = time.perf_counter()
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            startup = time.perf_counter() - t0
            results = []
            for q in queries:
                arguments = {
                    "query": q["expr"],
                    "start": iso(q["start"]),
                    "end": iso(q["end"]),
                    "step": f'{q["step_seconds"]}s',
                }
                times, text = [], None
                for _ in range(calls):
                    t1 = time.perf_counter()
                    r = await session.call_tool("execute_range_query", arguments)
                    times.append(time.perf_counter() - t1)
                    text = "".join(c.text for c in r.content if getattr(c, "type", "") == "text")
                    if getattr(r, "is_error", None) or getattr(r, "isError", False):
                        raise RuntimeError(f"peer failed on {q['name']}: {text[:300]}")
                results.append((text, times))
            return startup, results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5, help="calls per query and side")
    parser.add_argument("--venv", type=Path, default=ROOT / "target/side-by-side-venv")
    parser.add_argument("--debug", action="store_true", help="use the dev profile (unoptimized)")
    opts = parser.parse_args()
    ensure_venv(opts.venv)
    count = tokenizer()
    for build in (OUR_TOOL_BUILD, FIXTURE_BUILD):
        subprocess.run(resolve(build, opts.debug), cwd=ROOT, check=True)
    binary = resolve(OUR_TOOL_BINARY, opts.debug)[0]

    fixture = subprocess.Popen(resolve(FIXTURE_COMMAND, opts.debug) + ["--tool-binary", binary], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        setup = json.loads(fixture.stdout.readline())
        url, queries = setup["prometheus_url"], setup["queries"]
        our_tool = [setup["tool"]]
        truths = [ground_truth(url, q) for q in queries]
        ours = [run_ours(our_tool, q, opts.calls) for q in queries]
        startup, peer = asyncio.run(run_peer(url, queries, opts.calls))
    finally:
        fixture.stdin.close()
        fixture.wait(timeout=30)

    ms = lambda xs: f"{1000 * statistics.median(xs):.1f} ms"
    print(f"Prometheus 2.42 fixture at {url}; {opts.calls} calls per query and side; "
          f"our tool: {' '.join(our_tool)}; tokens: cl100k_base (bpe-openai)")
    print(f"peer start-up (process start + initialize): {1000 * startup:.0f} ms\n")
    print("| query | series | answer (top instance, peak) | ours: bytes / tokens | ours: latency (process per call) | ours: answer in text | peer: bytes / tokens | peer: latency (warm session) | peer: answer in text |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for q, (instance, peak, series), (o_text, o_times), (p_text, p_times) in zip(
        queries, truths, ours, peer
    ):
        stated = our_answer(o_text)
        ours_ok = stated == (instance, four_digits(peak))
        raw_peak_present = f'"{go_float(peak)}"' in p_text and instance in p_text
        peer_note = (
            f"no: raw points only; the peak is one of {raw_points(p_text):,} values "
            f"(instance and value present: {'yes' if raw_peak_present else 'no'})"
        )
        print(
            f"| `{q['name']}` | {series} | {instance}, {four_digits(peak)} {q['unit']} "
            f"| {len(o_text.encode()):,} / {count(o_text):,} | {ms(o_times)} "
            f"| {'yes: series.rows[0] ' + stated[0] + ', peak ' + stated[1] if ours_ok else 'NO: ' + repr(stated)} "
            f"| {len(p_text.encode()):,} / {count(p_text):,} | {ms(p_times)} | {peer_note} |"
        )


if __name__ == "__main__":
    main()
