#!/usr/bin/env python3
"""A call over remote MCP (our Clinic server over Streamable HTTP, a session token as the
only credential) against the same HTTP request to the provider, and many sessions at
once against one server, side by side in one run.

    python3 benches/remote_mcp.py [--pairs 30] [--sessions 200] [--query tidb_memory_with_nan] [--debug]
                                  [--tool PATH [--legacy]]

It re-runs itself in the venv `bash scripts/test.sh` makes, `.tools/venv` (the official
Python MCP SDK, `mcp==2.3.0`, as the tests use), builds `clinic-tool` with the packaging profile (`--profile tool`) and
the side-by-side fixture, and starts the fixture with `--sessions N`: a real Prometheus
2.42 over the test fixtures, the Clinic test front, a deployable Clinic v3 folder around
that binary and, per query, one session token with its envelope for the measured session
and N more, each envelope signed for its own session under its own `policy_id`. Then it
starts the packaged binary with `--mcp-http 127.0.0.1:0 --operator 127.0.0.1:0` (its
runtime context without an envelope file, a fresh turn ledger) and delivers every
envelope to the operator listener (`POST /envelopes`). `--tool PATH` packages another
`clinic-tool`; `--legacy` serves one built before the operator listener (`--mcp-http`
only, envelopes delivered on the MCP port). Binaries are found under `$CARGO_TARGET_DIR`
when it is set, else `target`.

1. **A call against the bare request.** `--pairs` rounds of our call and the same HTTP
   request to the Clinic front from this process (`urllib`), the order alternating per
   round, the median of the per-round ratios (goal: at most 3x, as for stdio): with a
   lean MCP client (`http.client` on one keep-alive connection: `initialize`, then each
   `tools/call` one POST with the session header), and with the official Python SDK on a
   warm session (its own client cost shown, not judged). Each measured call starts a new
   turn (the turn files emptied, the session store kept).
2. **N sessions at once.** N lean clients (a thread, a connection and a token each,
   16 to a loopback source address: the server holds at most 32 sessions per peer)
   against the one server, every session initialized first, then every call at once:
   the p50 and p99 of a call as the client sees it (the wait for one of the server's
   `limits.concurrency` slots included) and as the server's audit records say. Checked:
   every call answered `ok` with the expected series, one audit record each, and every
   call that ran admitted in its turn's ledger first (one `admitted` and one `answered`
   entry per session).

Exit status 1 when a goal or a check is not met.
"""

import argparse
import asyncio
import contextlib
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import call_latency as cl  # noqa: E402  (the build, the fixture, the bare request)
import side_by_side as sbs  # noqa: E402  (the venv and its packages)

REMOTE_HTTP_GOAL = 3.0
SESSION_HEADER = "X-Evidence-Session"
# The server holds at most 32 protocol sessions (and 64 connections) per peer address
# (`--max-sessions-per-peer`, `--max-connections-per-peer`): many sessions come from as
# many agents, so the bench gives every 16 of them a loopback address of their own.
SESSIONS_PER_ADDRESS = 16


def source_of(i: int) -> str:
    """The loopback source address of the i-th of many sessions (16 to an address)."""
    return f"127.0.1.{1 + i // SESSIONS_PER_ADDRESS}"


def ensure_venv(venv: Path, script: str = __file__) -> None:
    """The tests' venv with the official MCP SDK; re-runs `script` (this one) in it."""
    if Path(sys.prefix).resolve() == venv.resolve():
        return
    python = venv / "bin" / "python"
    if not python.exists():
        raise SystemExit(f"{python} is missing: bash scripts/test.sh makes it "
                         "(python3 -m venv .tools/venv && .tools/venv/bin/pip install mcp==2.3.0)")
    os.execv(str(python), [str(python), script, *sys.argv[1:]])


@contextlib.asynccontextmanager
async def client(url: str, token: str):
    """An SDK session over Streamable HTTP sending the session header."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with create_mcp_http_client(headers={SESSION_HEADER: token}) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


class Server:
    """A running `clinic-tool --mcp-http`: its process, the base URL of its MCP listener
    (`base`, the endpoint is `base/mcp`) and of the listener the runtime delivers
    envelopes to (`operator`: the operator listener, or the MCP port itself for a
    `legacy` binary built before it)."""

    def __init__(self, process: subprocess.Popen, base: str, operator: str):
        self.process, self.base, self.operator = process, base, operator

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def serve(tool: str, env: dict, ledger: Path, more: list = (), legacy: bool = False) -> Server:
    """The packaged tool serving over Streamable HTTP on a free loopback port, with its
    operator listener on another (`--operator`; with `legacy`, only `--mcp-http`, as a
    binary built before the operator listener serves, taking envelopes on the MCP port).
    It names the operator listener first, then the MCP endpoint, on stderr (JSON log
    lines, or plain)."""
    env = {k: str(v) for k, v in env.items() if k != "EVIDENCE_TRUSTED_CONTEXT"}
    env.update({"PATH": os.environ.get("PATH", ""), "EVIDENCE_TURN_LEDGER": str(ledger)})
    listeners = ["--mcp-http", "127.0.0.1:0"] + ([] if legacy else ["--operator", "127.0.0.1:0"])
    server = subprocess.Popen([tool, *listeners, *more], env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    operator = None
    seen = []
    for line in server.stderr:
        line = message_of(line)
        if "--operator: serving " in line:
            operator = line.split("serving ", 1)[1].strip()
        elif "--mcp-http: serving " in line:
            base = line.split("serving ", 1)[1].strip().removesuffix("/mcp")
            # Keep reading its stderr so that it never blocks on a full pipe.
            threading.Thread(target=lambda: [None for _ in server.stderr], daemon=True).start()
            if operator is None and not legacy:
                server.terminate()
                raise RuntimeError(f"the server named no operator listener: {seen}")
            return Server(server, base, operator or base)
        else:
            seen.append(line.rstrip())
    raise RuntimeError(f"the server stopped before it listened: {seen[-5:]}")


def message_of(line: str) -> str:
    """A stderr line's message: the `message` of a JSON log line (the server's default
    `--log-format json`), or the line itself (plain, and binaries before JSON logs)."""
    try:
        entry = json.loads(line)
    except ValueError:
        return line
    return entry.get("message", line) if isinstance(entry, dict) else line


def deliver(operator: str, envelope_path: str) -> None:
    """The runtime's delivery of an envelope: `POST /envelopes` on the operator listener."""
    body = Path(envelope_path).read_bytes()
    request = urllib.request.Request(f"{operator}/envelopes", data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request) as r:
        answer = json.loads(r.read())
    if answer.get("delivered") != "stored":
        raise RuntimeError(f"delivery not stored: {answer}")


class RawSession:
    """A lean MCP client over one keep-alive connection (`http.client`): `initialize`
    (protocol 2025-11-25, a session), `notifications/initialized`, then each `tools/call`
    one POST whose answer (JSON or one SSE event) is read whole. It measures the
    transport without the SDK's own cost."""

    def __init__(self, base: str, token: str, source: str | None = None):
        host, port = base.removeprefix("http://").split(":")
        self.conn = http.client.HTTPConnection(host, int(port), timeout=120,
                                               source_address=(source, 0) if source else None)
        self.conn.connect()
        # http.client writes a request's head and body apart: without this, Nagle's
        # algorithm against the server's delayed ACK holds each body ~40 ms.
        self.conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.headers = {SESSION_HEADER: token, "Content-Type": "application/json",
                        "Accept": "application/json, text/event-stream"}
        self.next_id = 0
        init = self.post({"method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "remote-mcp-bench", "version": "1"}}})
        if "result" not in init:
            raise RuntimeError(f"initialize failed: {init}")
        self.post({"method": "notifications/initialized"}, notification=True)

    def post(self, message: dict, notification: bool = False) -> dict:
        message = {"jsonrpc": "2.0", **message}
        if not notification:
            self.next_id += 1
            message["id"] = self.next_id
        self.conn.request("POST", "/mcp", body=json.dumps(message), headers=self.headers)
        response = self.conn.getresponse()
        if sid := response.getheader("mcp-session-id"):
            self.headers["Mcp-Session-Id"] = sid
            self.headers["MCP-Protocol-Version"] = "2025-11-25"
        body = response.read().decode()
        if notification:
            return {}
        if response.getheader("content-type", "").startswith("text/event-stream"):
            data = [line[5:].strip() for line in body.splitlines() if line.startswith("data:")]
            return next(json.loads(d) for d in data if d and json.loads(d).get("id") == message["id"])
        return json.loads(body)

    def close(self) -> None:
        """Ends the protocol session (`DELETE`, freeing its place under the server's
        session bounds) and the connection."""
        if "Mcp-Session-Id" in self.headers:
            self.conn.request("DELETE", "/mcp", headers=self.headers)
            self.conn.getresponse().read()
        self.conn.close()

    def call(self, args: dict, series: int) -> float:
        t0 = time.perf_counter()
        answer = self.post({"method": "tools/call",
                            "params": {"name": "managed_auto_oncall_clinic", "arguments": args}})
        wall = time.perf_counter() - t0
        cl.checked(answer["result"]["content"][0]["text"], series)
        return wall


def raw_pairs(base: str, q: dict, expr: str, series: int, ledger: Path, rounds: int):
    """Rounds of a raw MCP call against the same HTTP request, alternating."""
    session = RawSession(base, q["session"]["token"])
    ours, bare = [], []

    def call_ours() -> float:
        for entry in turn_files(ledger):
            entry.unlink()
        return session.call(q["args"], series)

    call_ours()
    cl.http_request(q, expr)
    for i in range(rounds):
        if i % 2 == 0:
            ours.append(call_ours())
            bare.append(cl.http_request(q, expr))
        else:
            bare.append(cl.http_request(q, expr))
            ours.append(call_ours())
    return ours, bare


def raw_many(base: str, q: dict, series: int) -> list:
    """Every session (its own connection, thread and token) initialized, then every call
    at once; each call's time."""
    sessions = q["sessions"]
    ready = threading.Barrier(len(sessions))
    walls = [None] * len(sessions)
    opened = [None] * len(sessions)
    errors = []

    def run(i: int, token: str) -> None:
        try:
            opened[i] = RawSession(base, token, source_of(i))
            ready.wait(timeout=120)
            walls[i] = opened[i].call(q["args"], series)
        except Exception as e:  # reported below: a call that did not answer ok
            errors.append(repr(e))
            ready.abort()

    threads = [threading.Thread(target=run, args=(i, s["token"])) for i, s in enumerate(sessions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for session in opened:
        if session is not None:
            session.close()
    if errors:
        raise RuntimeError(f"{len(errors)} sessions failed: {errors[:3]}")
    return walls


def turn_files(ledger: Path) -> list:
    return [p for p in ledger.iterdir() if p.is_file()]


async def pairs_round(url: str, q: dict, expr: str, series: int, ledger: Path, rounds: int):
    ours, http = [], []
    async with client(url, q["session"]["token"]) as session:

        async def call_ours() -> float:
            for entry in turn_files(ledger):
                entry.unlink()
            t0 = time.perf_counter()
            result = await session.call_tool("managed_auto_oncall_clinic", q["args"])
            wall = time.perf_counter() - t0
            cl.checked("".join(c.text for c in result.content if c.type == "text"), series)
            return wall

        await call_ours()  # warm-up: the connection, the provider's caches
        cl.http_request(q, expr)
        for i in range(rounds):
            if i % 2 == 0:
                ours.append(await call_ours())
                http.append(cl.http_request(q, expr))
            else:
                http.append(cl.http_request(q, expr))
                ours.append(await call_ours())
    return ours, http


def percentile(xs: list, p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(p / 100 * len(xs) + 0.5) - 1))]


def audit_calls(path: Path) -> list:
    if not path.exists():
        return []
    records = [json.loads(line) for line in path.read_text().splitlines() if line]
    return [r for r in records if "record" not in r]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=30, help="rounds of the call against the request")
    parser.add_argument("--sessions", type=int, default=200, help="sessions at once")
    parser.add_argument("--query", default="tidb_memory_with_nan", help="a SIDE_BY_SIDE_QUERIES name")
    parser.add_argument("--venv", type=Path, default=sbs.ROOT / ".tools/venv")
    parser.add_argument("--debug", action="store_true", help="dev profile (unoptimized)")
    parser.add_argument("--tool", help="a clinic-tool binary to package instead of the one built")
    parser.add_argument("--legacy", action="store_true",
                        help="a binary built before the operator listener: --mcp-http only, "
                             "envelopes delivered on the MCP port")
    opts = parser.parse_args()
    ensure_venv(opts.venv)
    tool, fixture_command = cl.built(opts.debug)
    tool = opts.tool or tool
    fixture = subprocess.Popen(fixture_command + ["--tool-binary", tool, "--sessions", str(opts.sessions)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    ledger_dir = tempfile.TemporaryDirectory(prefix="remote-mcp-ledger-")
    ledger = Path(ledger_dir.name)
    server = None
    try:
        setup = json.loads(fixture.stdout.readline())
        packaged = setup["tool"]
        q = next(x for x in setup["queries"] if x["name"] == opts.query)
        _, _, series = sbs.ground_truth(setup["prometheus_url"], q)
        server = serve(packaged, q["env"], ledger, legacy=opts.legacy)
        base = server.base
        deliver(server.operator, q["session"]["envelope"])
        for s in q["sessions"]:
            deliver(server.operator, s["envelope"])
        # The locked expression our tool sends (the bare request sends it too).
        env = {"PATH": os.environ.get("PATH", ""), **q["env"]}
        out = subprocess.run([packaged], input=json.dumps(q["args"]), env=env,
                             capture_output=True, text=True, check=True)
        expr = cl.checked(json.loads(out.stdout)["text"], series)["expr"]
        url = f"{base}/mcp"
        ours, http = asyncio.run(pairs_round(url, q, expr, series, ledger, opts.pairs))
        raw, bare = raw_pairs(base, q, expr, series, ledger, opts.pairs)
        for entry in turn_files(ledger):
            entry.unlink()
        audit = Path(q["env"]["EVIDENCE_AUDIT_LOG"])
        before = len(audit_calls(audit))
        t0 = time.perf_counter()
        walls = raw_many(base, q, series)
        elapsed = time.perf_counter() - t0
        calls = audit_calls(audit)[before:]
        pair_calls = audit_calls(audit)[:before]
    finally:
        if server is not None:
            server.stop()
        fixture.stdin.close()
        fixture.wait(timeout=30)

    sdk_ratio = statistics.median([o / h for o, h in zip(ours, http)])
    ratio = statistics.median([o / b for o, b in zip(raw, bare)])
    ok_records = [r for r in calls if r.get("status") == "ok"]
    admitted = answered = 0
    for s in q["sessions"]:
        path = ledger / f"{s['policy_id']}.jsonl"
        entries = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
        admitted += sum(1 for e in entries if e["entry"] == "admitted")
        answered += sum(1 for e in entries if e["entry"] == "answered")
    n = opts.sessions
    checks = {
        "every call answered ok": len(walls) == n,
        "one audit record each": len(calls) == n and len(ok_records) == n,
        "none run unadmitted": admitted == n and answered == n,
    }
    load = os.getloadavg()
    ms = lambda x: f"{1000 * x:.2f} ms"
    verdict = lambda ok: "met" if ok else "NOT MET"
    print(f"\nquery `{q['name']}` ({series} series); {opts.pairs} rounds; {n} sessions; "
          f"{'dev' if opts.debug else 'profile tool'}; load average {load[0]:.1f} {load[1]:.1f}")
    print("| comparison | ours | baseline | ratio | goal |")
    print("| --- | --- | --- | --- | --- |")
    print(f"| remote MCP call (a lean client, warm session) / the same HTTP request | "
          f"{ms(statistics.median(raw))} | {ms(statistics.median(bare))} | {ratio:.2f}x | "
          f"<= {REMOTE_HTTP_GOAL}x: {verdict(ratio <= REMOTE_HTTP_GOAL)} |")
    print(f"| remote MCP call (the official Python SDK, warm session) / the same HTTP request | "
          f"{ms(statistics.median(ours))} | {ms(statistics.median(http))} | {sdk_ratio:.2f}x | "
          f"(the SDK's own cost; see the server-side figures) |")
    print(f"| {n} sessions at once, one call each | p50 {ms(percentile(walls, 50))}, "
          f"p99 {ms(percentile(walls, 99))}, all {ms(elapsed)} | - | - | "
          + "; ".join(f"{name}: {verdict(ok)}" for name, ok in checks.items()) + " |")
    # The server's own time per call (its audit records: arrival to answer, the wait for
    # a call slot included), against what the client measured.
    server = [r["duration_ms"] for r in calls]
    warm = [r["duration_ms"] for r in pair_calls[-2 * opts.pairs:]]
    if server and warm:
        print(f"server-side duration_ms: warm calls p50 {statistics.median(warm)}; "
              f"{n} sessions p50 {percentile(server, 50)}, p99 {percentile(server, 99)}")
    return 0 if ratio <= REMOTE_HTTP_GOAL and all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
