#!/usr/bin/env python3
"""Scoped discovery, measured in one run: a discovery call through our Clinic tool (a
whole process) against `curl` of the same request, the tokens of "which TiKV metrics
exist" against the `prometheus-mcp-server` peer's `list_metrics` and the bare label
values answer, and the tool's memory on the values of a label with 5,000 and 20,000
values.

    python3 benches/discovery.py [--pairs 30] [--calls 3] [--debug]

It makes the venv of `benches/side_by_side.py` (the peer 1.6.2, the official MCP client
`mcp`, `bpe-openai` for `cl100k_base`), re-runs itself inside it, and builds
`clinic-tool` with the packaging profile (`--profile tool`) and the release fixtures.

1. **Latency.** `examples/side_by_side_fixture.rs` (real Prometheus 2.42 over the test
   fixtures, the Clinic test front, a deployable Clinic v3 folder, one signed policy per
   query, each granting discovery): `--pairs` alternating pairs of the packaged tool
   answering `{"discover": "metric_names"}` for `SaaS01` in the APID-29213 window, and
   `curl` POSTing the same request (the query a discovery runs, built here from the
   answer's selector and window as the tool builds it) with the same token to the same
   front. The median of the pair ratios (goal: at most 1.2x). Each answer is checked:
   the tool's `total` equals the number of names `curl`'s answer holds. The same for
   `{"discover": "metric_metadata"}`: the tool (the count query, then one metadata `GET`
   per listed name, at most 4 at once, and one of the family name of a name without
   metadata that extends a family, `x_total` or `x_info`) against one `curl` process
   making the same requests one after the other on one connection (`--next`).
2. **Tokens** of "which TiKV metrics does the cluster have" for ST-2865 (`SaaS02`, its
   60-minute window): ours (`metric_names`, pattern `tikv_.*`); the peer's
   `list_metrics` over its MCP session on the same Prometheus; and the bare
   `/api/v1/label/__name__/values` answer with the same scope matcher, which is what a
   `label_values` tool passes through (the official `prometheus/prometheus-mcp` server is
   a Go module this machine cannot fetch, so that answer stands in for it). Whether
   each answer names a TiKV metric that only another cluster has is printed too.
3. **Precision, both ways.** On the same Prometheus, for `SaaS01` in the APID-29213
   window, `--pairs` alternating pairs of `curl` of the index endpoint
   (`/api/v1/label/__name__/values?match[]={cluster_id="SaaS01"}&start&end`: series in
   blocks overlapping the window) and of the exact count query the tool runs
   (`query_range` at the window's end): the names each lists, whether they agree, and
   their median times.
4. **Memory.** `examples/large_answer_fixture.rs` with 5,000 and 20,000 TiKV threads (a
   `tid` label with as many values): the tool's peak RSS (GNU time `%M`) answering
   `label_values` of `tid`, `--calls` each; the answer is checked (`total` = threads,
   at most the policy's items listed). Goal: flat (the 20,000 figure within 10 % of the
   5,000 one) and at most 64 MiB.

Exit status 1 when a goal is not met.
"""

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import call_latency as cl  # noqa: E402  (the packaged tool and the side-by-side fixture)
import large_answer as la  # noqa: E402  (the large fixture, GNU time)
import side_by_side as sbs  # noqa: E402  (the venv, the peer and the tokenizer)

ROOT = sbs.ROOT
LATENCY_GOAL = 1.2
FLAT_GOAL = 1.10
RSS_GOAL_KIB = 64 * 1024
NAMES = {"queries": [{"queryId": "metric_names", "discover": "metric_names"}]}
METADATA = {"queries": [{"queryId": "metric_metadata", "discover": "metric_metadata"}]}
FAMILY_SUFFIXES = ("_bucket", "_count", "_sum", "_total", "_created", "_info")
TIKV = {"queries": [{"queryId": "tikv_metrics", "discover": "metric_names", "pattern": "tikv_.*"}]}
THREADS = {"queries": [{"queryId": "thread_ids", "discover": "label_values", "label": "tid"}]}


def tool(binary: str, env: dict, args: dict) -> tuple[float, dict]:
    """One tool process: wall time and its one item."""
    t0 = time.perf_counter()
    out = subprocess.run([binary], input=json.dumps(args),
                         env={"PATH": os.environ.get("PATH", ""), **env},
                         capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    text = json.loads(out.stdout)["text"]
    item = json.loads(text)["items"][0]
    if item.get("status") != "ok":
        raise RuntimeError(f"the tool did not answer ok: {text[:600]}")
    return wall, {"item": item, "text": text}


def count_query(discovery: dict, scope: str) -> tuple[str, int, int]:
    """The query a `metric_names` discovery runs (as `LockedDiscovery::query` builds it),
    its one evaluation time and step."""
    window = discovery["window"]["end"] - discovery["window"]["start"]
    expr = (f"count by (__name__, {scope}) "
            f"(last_over_time({discovery['selector']}[{window}s]))")
    return expr, discovery["window"]["end"], window


def curl(q: dict, expr: str, at: int, step: int) -> tuple[float, int]:
    """`curl` of the same request to the same front: wall time and the rows it holds."""
    t0 = time.perf_counter()
    out = subprocess.run(
        ["curl", "-sS", "--fail", "-H", f"Authorization: Bearer {q['token']}",
         "--data-urlencode", f"query={expr}", "--data-urlencode", f"start={at}",
         "--data-urlencode", f"end={at}", "--data-urlencode", f"step={step}",
         q["query_range_url"]],
        capture_output=True, text=True, check=True,
    )
    wall = time.perf_counter() - t0
    return wall, len(json.loads(out.stdout)["data"]["result"])


def curl_with_metadata(q: dict, expr: str, at: int, step: int, names: list) -> float:
    """One `curl` process: the count query, then the metadata `GET` of each name."""
    metadata_url = q["query_range_url"].replace("/query_range", "/metadata")
    auth = ["-H", f"Authorization: Bearer {q['token']}"]
    args = ["curl", "-sS", "--fail", *auth, "--data-urlencode", f"query={expr}",
            "--data-urlencode", f"start={at}", "--data-urlencode", f"end={at}",
            "--data-urlencode", f"step={step}", q["query_range_url"]]
    for name in names:
        args += ["--next", "-sS", "--fail", *auth, "-G", "--data-urlencode", f"metric={name}",
                 metadata_url]
    t0 = time.perf_counter()
    subprocess.run(args, capture_output=True, check=True)
    return time.perf_counter() - t0


def metadata_latency(binary: str, q: dict, pairs: int) -> dict:
    _, first = tool(binary, q["env"], METADATA)
    discovery = first["item"]["discovery"]
    listed = [row[0] for row in discovery["rows"]]
    meta = discovery["metadata"]
    if meta["source"] != "provider_global" or len(meta.get("names", [])) + meta["without"] != len(listed):
        raise RuntimeError(f"the metadata does not count the listed names: {first['text'][:600]}")
    # The tool's requests: each listed name, then the family name of one without metadata
    # that extends a family (x_total, x_bucket, ...), as `metadata.rs` asks.
    described = {n["name"] for n in meta.get("names", [])}
    names = list(listed)
    for name in listed:
        family = next((name[:-len(s)] for s in FAMILY_SUFFIXES if name.endswith(s) and len(name) > len(s)), None)
        if name not in described and family:
            names.append(family)
    expr, at, step = count_query(discovery, "cluster_id")
    ours, theirs = [], []
    for _ in range(pairs):
        ours.append(tool(binary, q["env"], METADATA)[0])
        theirs.append(curl_with_metadata(q, expr, at, step, names))
    return {"ours": ours, "curl": theirs, "names": len(listed), "gets": len(names),
            "ratio": statistics.median([o / c for o, c in zip(ours, theirs)])}


def latency(binary: str, q: dict, pairs: int) -> dict:
    _, first = tool(binary, q["env"], NAMES)
    discovery = first["item"]["discovery"]
    expr, at, step = count_query(discovery, "cluster_id")
    _, rows = curl(q, expr, at, step)
    if rows != discovery["total"]:
        raise RuntimeError(f"curl's answer holds {rows} names, the tool's {discovery['total']}")
    ours, theirs = [], []
    for _ in range(pairs):
        ours.append(tool(binary, q["env"], NAMES)[0])
        theirs.append(curl(q, expr, at, step)[0])
    return {"ours": ours, "curl": theirs, "names": discovery["total"],
            "ratio": statistics.median([o / c for o, c in zip(ours, theirs)])}


async def peer_list_metrics(prometheus_url: str) -> str:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    server = StdioServerParameters(
        command=str(Path(sys.prefix) / "bin" / "prometheus-mcp-server"),
        env={"PATH": os.environ.get("PATH", ""), "PROMETHEUS_URL": prometheus_url},
    )
    async with stdio_client(server) as (r, w), ClientSession(r, w) as session:
        await session.initialize()
        result = await session.call_tool("list_metrics", {})
        return "".join(c.text for c in result.content if c.type == "text")


def label_values(prometheus_url: str, match: str, start: int, end: int) -> str:
    query = urllib.parse.urlencode({"match[]": match, "start": start, "end": end})
    with urllib.request.urlopen(f"{prometheus_url.rstrip('/')}/api/v1/label/__name__/values?{query}") as r:
        return r.read().decode()


def tokens(binary: str, setup: dict) -> list:
    count = sbs.tokenizer()
    st = next(x for x in setup["queries"] if x["name"] == "memory_used_percent")
    _, ours = tool(binary, st["env"], TIKV)
    ours_all = tool(binary, st["env"], NAMES)[1]
    peer = asyncio.run(peer_list_metrics(setup["prometheus_url"]))
    bare = label_values(setup["prometheus_url"], '{cluster_id="SaaS02",__name__=~"tikv_.*"}',
                        st["start"], st["end"])
    foreign = "tikv_engine_size_bytes"  # only SaaS99 has it in the fixture
    rows = []
    for name, text in [("ours: metric_names, pattern tikv_.* (SaaS02)", ours["text"]),
                       ("ours: every metric name of SaaS02", ours_all["text"]),
                       ("prometheus-mcp-server 1.6.2 list_metrics", peer),
                       ("bare label values, __name__ with the scope matcher", bare)]:
        rows.append({"what": name, "bytes": len(text.encode()), "tokens": count(text),
                     "foreign": foreign in text})
    return rows


def timed_get(url: str) -> tuple[float, dict]:
    t0 = time.perf_counter()
    out = subprocess.run(["curl", "-sS", "--fail", url], capture_output=True, text=True, check=True)
    return time.perf_counter() - t0, json.loads(out.stdout)


def precision(prometheus_url: str, q: dict, pairs: int) -> dict:
    """The index endpoint against the exact count query, straight from Prometheus."""
    base = prometheus_url.rstrip("/")
    selector = '{cluster_id="SaaS01"}'
    index = f"{base}/api/v1/label/__name__/values?" + urllib.parse.urlencode(
        {"match[]": selector, "start": q["start"], "end": q["end"]})
    window = q["end"] - q["start"]
    exact = f"{base}/api/v1/query_range?" + urllib.parse.urlencode(
        {"query": f"count by (__name__, cluster_id) (last_over_time({selector}[{window}s]))",
         "start": q["end"], "end": q["end"], "step": window})
    _, a = timed_get(index)
    _, b = timed_get(exact)
    index_names = sorted(a["data"])
    exact_names = sorted(r["metric"]["__name__"] for r in b["data"]["result"])
    t_index, t_exact = [], []
    for _ in range(pairs):
        t_index.append(timed_get(index)[0])
        t_exact.append(timed_get(exact)[0])
    return {"index": index_names, "exact": exact_names, "t_index": t_index, "t_exact": t_exact,
            "counts": {r["metric"]["__name__"]: r["values"][0][1] for r in b["data"]["result"]}}


def memory(threads: int, calls: int, debug: bool) -> dict:
    binary, fixture = la.built(debug, "clinic")
    with la.started(fixture, binary, "clinic", threads) as setup:
        rss_file = str(ROOT / "target" / "discovery-rss.txt")
        setup = {**setup, "args": THREADS}
        peaks, walls = [], []
        for _ in range(calls):
            wall, measured, result = la.run_tool(setup, rss_file, False)
            d = result["items"][0]["discovery"]
            if d["total"] != threads or len(d["rows"]) > 50:
                raise RuntimeError(f"{threads} threads: total {d['total']}, {len(d['rows'])} rows")
            peaks.append(measured["rss"])
            walls.append(wall)
        return {"threads": threads, "rss_kib": max(peaks), "wall": statistics.median(walls),
                "listed": len(d["rows"]), "more": d["more"]}


def ensure_venv(venv: Path) -> None:
    """The venv of `side_by_side.py` (the peer, the MCP client, the tokenizer); re-runs
    this script in it."""
    if Path(sys.prefix).resolve() == venv.resolve():
        return
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", *sbs.PEER_PACKAGES], check=True)
    os.execv(str(python), [str(python), __file__, *sys.argv[1:]])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=30)
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--venv", type=Path, default=ROOT / "target/side-by-side-venv")
    parser.add_argument("--debug", action="store_true", help="dev profile (unoptimized)")
    opts = parser.parse_args()
    if shutil.which("curl") is None:
        print("curl is missing: apt-get install -y curl", file=sys.stderr)
        return 1
    ensure_venv(opts.venv)
    la.ensure_gnu_time()
    binary, fixture_command = cl.built(opts.debug)
    fixture = subprocess.Popen(fixture_command + ["--tool-binary", binary],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        setup = json.loads(fixture.stdout.readline())
        packaged = setup["tool"]
        apid = next(x for x in setup["queries"] if x["name"] == "tidb_cpu")
        lat = latency(packaged, apid, opts.pairs)
        meta = metadata_latency(packaged, apid, opts.pairs)
        token_rows = tokens(packaged, setup)
        prec = precision(setup["prometheus_url"], apid, opts.pairs)
    finally:
        fixture.stdin.close()
        fixture.wait(timeout=30)
    mem = [memory(n, opts.calls, opts.debug) for n in (5000, 20000)]

    ms = lambda xs: f"{1000 * statistics.median(xs):.2f} ms"
    verdict = lambda ok: "met" if ok else "NOT MET"
    load = os.getloadavg()
    print(f"\nload average {load[0]:.1f} {load[1]:.1f}; {opts.pairs} pairs; "
          f"{'dev' if opts.debug else 'profile tool'}")
    print("| comparison | ours (median) | baseline (median) | median of pair ratios | goal |")
    print("| --- | --- | --- | --- | --- |")
    print(f"| discovery `metric_names` ({lat['names']} names), one-shot process / `curl` | "
          f"{ms(lat['ours'])} | {ms(lat['curl'])} | {lat['ratio']:.2f}x | <= {LATENCY_GOAL}x: "
          f"{verdict(lat['ratio'] <= LATENCY_GOAL)} |")
    print(f"| discovery `metric_metadata` ({meta['names']} names: the query and {meta['gets']} "
          f"metadata GETs), one-shot process / one `curl` of the same requests | "
          f"{ms(meta['ours'])} | {ms(meta['curl'])} | {meta['ratio']:.2f}x | <= {LATENCY_GOAL}x: "
          f"{verdict(meta['ratio'] <= LATENCY_GOAL)} |")
    print("\n| which TiKV metrics exist (ST-2865, SaaS02) | bytes | cl100k_base tokens | names another cluster's TiKV metric |")
    print("| --- | --- | --- | --- |")
    for r in token_rows:
        print(f"| {r['what']} | {r['bytes']} | {r['tokens']} | {'yes' if r['foreign'] else 'no'} |")
    same = prec["index"] == prec["exact"]
    print(f"\nprecision, SaaS01 APID-29213: index endpoint {ms(prec['t_index'])} lists {prec['index']}; "
          f"exact count query {ms(prec['t_exact'])} lists {prec['exact']} with series counts "
          f"{prec['counts']}; the same names: {'yes' if same else 'NO'}")
    print("\n| label_values of `tid` | peak RSS | wall (median) | listed / more |")
    print("| --- | --- | --- | --- |")
    for m in mem:
        print(f"| {m['threads']} values | {m['rss_kib'] / 1024:.1f} MiB | {1000 * m['wall']:.0f} ms "
              f"| {m['listed']} / {m['more']} |")
    flat = mem[1]["rss_kib"] / mem[0]["rss_kib"]
    rss_ok = all(m["rss_kib"] <= RSS_GOAL_KIB for m in mem)
    print(f"\n20,000 / 5,000 values peak RSS: {flat:.2f}x (goal <= {FLAT_GOAL}x: {verdict(flat <= FLAT_GOAL)}); "
          f"<= 64 MiB: {verdict(rss_ok)}")
    failed = lat["ratio"] > LATENCY_GOAL or meta["ratio"] > LATENCY_GOAL or flat > FLAT_GOAL or not rss_ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
