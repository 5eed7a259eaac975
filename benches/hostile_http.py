#!/usr/bin/env python3
"""The packaged Clinic server over Streamable HTTP under hostile load, each figure against
its baseline in the same run: its memory under a flood of unauthenticated `initialize`, a
legitimate call during that flood, and a session's wait while another session holds every
call slot.

    python3 benches/hostile_http.py [--flood 20000] [--workers 4] [--calls 30]
                                    [--front-delay-ms 1000] [--rounds 3] [--debug]
                                    [--tool PATH [--legacy]]

It builds `clinic-tool` with the packaging profile (`--profile tool`) and the side-by-side
fixture (`examples/side_by_side_fixture.rs`: a real Prometheus 2.42 over the test
fixtures, the Clinic test front, a deployable Clinic v3 folder around the binary, one
session token and envelope per session, each under its own `policy_id`) and starts the
packaged binary with `--mcp-http 127.0.0.1:0 --operator 127.0.0.1:0`, a fresh turn
ledger, and every envelope delivered to the operator listener (`POST /envelopes`).
`--tool PATH` packages another `clinic-tool` instead; `--legacy` serves one built before
the operator listener (`--mcp-http` only, envelopes delivered on the MCP port). Binaries
are found under `$CARGO_TARGET_DIR` when it is set, else `target`. It needs no venv: every
client is raw HTTP (`socket`, `http.client`).

1. **Memory under a flood.** The server's resident memory (`VmRSS` of
   `/proc/PID/status`) idle, after one warm call, against the same after `--flood`
   unauthenticated `initialize` (protocol 2025-11-25) from 127.0.0.1: one request per
   connection (`Connection: close`), `--workers` processes; one in ten with ~15 KiB of
   `capabilities.experimental` (under the 16 KiB bound), one in a hundred with 200 KB
   (over it). Goal: at most 64 MiB above idle. The answers are counted by status (200,
   503, 413; 0 for a connection closed without an answer).
2. **A legitimate call during the flood.** A lean client (`http.client`, one keep-alive
   connection bound to source address 127.0.0.2 before it connects, its own session
   token, a warm protocol session) calls `managed_auto_oncall_clinic` `--calls` times
   quiet before the flood, then again and again while the flood lasts (at least
   `--calls` times; the flood is one phase, so the two are not interleaved); each call in
   a turn of its own (its turn file emptied, untimed). Every answer is checked (`ok`, the
   expected series). The ratio of the medians, flooded / quiet. Goal: at most 2x.
3. **Fair call slots.** A second fixture with `--front-delay-ms` (the Clinic front waits
   that long before each answer), a server serving the package's `limits.concurrency`
   slots (4 in the manifest). One call's service time: the median of `--calls`/6 (at
   least 5) lone calls of session B. Then per round: session A (one token, a protocol
   session per call, separate `queryId`s) sends 2 x `concurrency` calls at once, within
   its policy's `max_calls_per_turn` (8 in the fixture): every slot busy and as many
   calls again queued; `delay / 5` after A's calls left, session B (its own token and
   policy) sends one. B's wait = B's elapsed - the service time. Served in arrival order,
   B would wait for two rounds of A's calls; shared fairly (a freed slot goes to the
   waiting session holding fewest), for the first of A's calls to end. Goal: the median
   wait over `--rounds` at most one call's service time (front delay + the quiet call).
   Checked: every call `ok`.

Prints a Markdown table. Exit status 1 when a goal or a check is not met.
"""

import argparse
import base64
import collections
import http.client
import json
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import call_latency as cl  # noqa: E402  (the build, the fixture, the answer check)
import remote_mcp as rm  # noqa: E402  (the server, deliveries, audit records)
import side_by_side as sbs  # noqa: E402  (ground truth)

MEMORY_GOAL_MIB = 64
FLOOD_CALL_GOAL = 2.0
SESSION_HEADER = "X-Evidence-Session"
PROTOCOL = "2025-11-25"
TOOL_NAME = "managed_auto_oncall_clinic"
ATTACKER = "127.0.0.1"
AGENT = "127.0.0.2"
MEDIUM_PADDING = 15 * 1024 - 300
LARGE_PADDING = 200_000


# ---- the flood: raw HTTP, one request per connection ---------------------------------

def initialize_body(padding: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": PROTOCOL,
        "capabilities": {"experimental": {"pad": {"x": "p" * padding}}},
        "clientInfo": {"name": "hostile-http-bench", "version": "1"}}}).encode()


def padding_of(n: int) -> int:
    """The n-th request's padding: 200 KB one in a hundred, ~15 KiB one in ten."""
    if n % 100 == 0:
        return LARGE_PADDING
    return MEDIUM_PADDING if n % 10 == 5 else 0


def raw_status(host: str, port: int, body: bytes) -> int:
    """One `initialize` on a new connection from the attacker's address; the answer's
    status (0: closed or reset without one)."""
    head = (f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Length: {len(body)}\r\n"
            f"Connection: close\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {PROTOCOL}\r\n\r\n")
    raw = b""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(30)
            s.bind((ATTACKER, 0))
            s.connect((host, port))
            try:
                s.sendall(head.encode() + body)
            except OSError:
                pass  # answered (and closed) before the body was read: read the answer
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                raw += chunk
    except OSError:
        if not raw:
            return 0
    line = raw.split(b"\r\n", 1)[0].split(b" ")
    return int(line[1]) if len(line) > 1 and line[1].isdigit() else 0


def flood_worker(args: tuple) -> list:
    """Requests worker, worker + workers, ... below total; (padding, status) pairs."""
    host, port, worker, workers, total = args
    bodies = {p: initialize_body(p) for p in (0, MEDIUM_PADDING, LARGE_PADDING)}
    return [(padding_of(n), raw_status(host, port, bodies[padding_of(n)]))
            for n in range(worker, total, workers)]


# ---- the legitimate agent: a lean client on a chosen source address ------------------

class Connection(http.client.HTTPConnection):
    """A keep-alive connection with Nagle off (http.client writes head and body apart:
    with Nagle against the server's delayed ACK each body waits ~40 ms)."""

    def connect(self):
        super().connect()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class Agent:
    """A protocol session over one keep-alive connection from `source` presenting `token`:
    `initialize`, `notifications/initialized`, then a `tools/call` per call (its answer,
    JSON or one SSE event, read whole). Reconnects (untimed) after 2 s idle, before the
    server's head timeout closes the connection."""

    def __init__(self, base: str, token: str, source: str):
        host, port = base.removeprefix("http://").split(":")
        self.conn = Connection(host, int(port), timeout=300, source_address=(source, 0))
        self.conn.connect()
        self.used = time.monotonic()
        self.headers = {SESSION_HEADER: token, "Content-Type": "application/json",
                        "Accept": "application/json, text/event-stream"}
        self.next_id = 0
        init = self.post({"method": "initialize", "params": {
            "protocolVersion": PROTOCOL, "capabilities": {},
            "clientInfo": {"name": "hostile-http-agent", "version": "1"}}})
        if "result" not in init:
            raise RuntimeError(f"initialize failed: {init}")
        self.post({"method": "notifications/initialized"}, notification=True)

    def ready(self) -> None:
        if time.monotonic() - self.used > 2:
            self.conn.close()
            self.conn.connect()

    def post(self, message: dict, notification: bool = False) -> dict:
        self.ready()
        message = {"jsonrpc": "2.0", **message}
        if not notification:
            self.next_id += 1
            message["id"] = self.next_id
        self.conn.request("POST", "/mcp", body=json.dumps(message), headers=self.headers)
        response = self.conn.getresponse()
        body = response.read().decode()
        self.used = time.monotonic()
        if response.status >= 300:
            raise RuntimeError(f"HTTP {response.status}: {body[:300]}")
        if sid := response.getheader("mcp-session-id"):
            self.headers["Mcp-Session-Id"] = sid
            self.headers["MCP-Protocol-Version"] = PROTOCOL
        if notification:
            return {}
        if response.getheader("content-type", "").startswith("text/event-stream"):
            data = [json.loads(line[5:]) for line in body.splitlines()
                    if line.startswith("data:") and line[5:].strip()]
            return next(d for d in data if d.get("id") == message["id"])
        return json.loads(body)

    def call(self, args: dict, series: int) -> float:
        self.ready()
        t0 = time.perf_counter()
        answer = self.post({"method": "tools/call",
                            "params": {"name": TOOL_NAME, "arguments": args}})
        wall = time.perf_counter() - t0
        if "result" not in answer:
            raise RuntimeError(f"the call failed: {json.dumps(answer)[:300]}")
        cl.checked(answer["result"]["content"][0]["text"], series)
        return wall


def args_for(q: dict, query_id: str) -> dict:
    return {"queries": [dict(q["args"]["queries"][0], queryId=query_id)]}


def new_turn(ledger: Path, policy_id: str) -> None:
    (ledger / f"{policy_id}.jsonl").unlink(missing_ok=True)


def status_of(pid: int) -> dict:
    """`VmRSS` and `VmHWM` of a process, in KiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0])
    return fields


def policy_limits(envelope: str) -> dict:
    """The `limits` of the policy an envelope carries (its payload, base64url JSON)."""
    payload = json.loads(Path(envelope).read_text())["payload"]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["limits"]


class Fixture:
    """The side-by-side fixture: its process and the query's setup."""

    def __init__(self, command: list, tool: str, query: str, sessions: int, delay_ms: int = 0):
        more = ["--sessions", str(sessions)] + (["--front-delay-ms", str(delay_ms)] if delay_ms else [])
        self.process = subprocess.Popen(command + ["--tool-binary", tool, *more],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        if not line:
            self.process.wait(timeout=30)
            raise RuntimeError("the fixture stopped before its setup line")
        self.setup = json.loads(line)
        self.q = next(x for x in self.setup["queries"] if x["name"] == query)

    def stop(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=30)


# ---- the three measurements ---------------------------------------------------------

def flood_phase(opts, fixture_command: list, tool: str) -> dict:
    """Memory idle and after the flood; the agent's calls quiet and during it."""
    fixture = Fixture(fixture_command, tool, opts.query, 0)
    ledger_dir = tempfile.TemporaryDirectory(prefix="hostile-http-ledger-")
    ledger = Path(ledger_dir.name)
    server = None
    try:
        q = fixture.q
        _, _, series = sbs.ground_truth(fixture.setup["prometheus_url"], q)
        server = rm.serve(fixture.setup["tool"], q["env"], ledger, legacy=opts.legacy)
        rm.deliver(server.operator, q["session"]["envelope"])
        policy_id = q["session"]["policy_id"]
        agent = Agent(server.base, q["session"]["token"], AGENT)

        def call(query_id: str) -> float:
            new_turn(ledger, policy_id)
            return agent.call(args_for(q, query_id), series)

        call("warm")
        time.sleep(0.5)
        idle = status_of(server.process.pid)
        quiet = [call(f"quiet_{n}") for n in range(opts.calls)]

        host, port = server.base.removeprefix("http://").split(":")
        jobs = [(host, int(port), w, opts.workers, opts.flood) for w in range(opts.workers)]
        results = []
        with multiprocessing.get_context("spawn").Pool(opts.workers) as pool:
            pool.map(abs, range(opts.workers))  # the workers started before the clock
            t0 = time.perf_counter()
            pending = pool.map_async(flood_worker, jobs)
            flooded = []
            while not pending.ready():  # fewer than --calls if the flood ends first: reported
                flooded.append(call(f"flooded_{len(flooded)}"))
            results = [r for worker in pending.get() for r in worker]
            flood_seconds = time.perf_counter() - t0
        after = status_of(server.process.pid)
        time.sleep(0.5)
        settled = status_of(server.process.pid)
        statuses = collections.Counter(status for _, status in results)
        large = collections.Counter(status for padding, status in results if padding == LARGE_PADDING)
        return {"idle": idle, "after": after, "settled": settled, "statuses": statuses,
                "large": large, "quiet": quiet, "flooded": flooded,
                "flood_seconds": flood_seconds, "series": series, "q": q}
    finally:
        if server is not None:
            server.stop()
        fixture.stop()


def fairness_phase(opts, fixture_command: list, tool: str) -> dict:
    """One call's service time alone, then rounds of A's queue and B's one call."""
    fixture = Fixture(fixture_command, tool, opts.query, 2, opts.front_delay_ms)
    ledger_dir = tempfile.TemporaryDirectory(prefix="hostile-http-fair-")
    ledger = Path(ledger_dir.name)
    server = None
    try:
        q = fixture.q
        _, _, series = sbs.ground_truth(fixture.setup["prometheus_url"], q)
        manifest = json.loads((Path(fixture.setup["tool"]).parent.parent / "manifest.json").read_text())
        slots = int(manifest["limits"]["concurrency"])
        a, b = q["sessions"][0], q["sessions"][1]
        per_turn = policy_limits(a["envelope"])["max_calls_per_turn"]
        a_calls = 2 * slots
        if a_calls > per_turn:
            raise RuntimeError(f"{a_calls} calls of session A exceed max_calls_per_turn {per_turn}")
        server = rm.serve(fixture.setup["tool"], q["env"], ledger, legacy=opts.legacy)
        for s in (a, b):
            rm.deliver(server.operator, s["envelope"])

        # Protocol sessions made once (a peer holds at most 32 at a time).
        a_agents = [Agent(server.base, a["token"], AGENT) for _ in range(a_calls)]
        b_agent = Agent(server.base, b["token"], AGENT)

        def b_call(query_id: str) -> float:
            new_turn(ledger, b["policy_id"])
            return b_agent.call(args_for(q, query_id), series)

        b_call("warm")
        alone = [b_call(f"alone_{n}") for n in range(max(5, opts.calls // 6))]
        service = statistics.median(alone)
        rounds = []
        for r in range(opts.rounds):
            new_turn(ledger, a["policy_id"])
            new_turn(ledger, b["policy_id"])
            go = threading.Barrier(a_calls + 1)
            a_walls, errors = [None] * a_calls, []

            def run(i: int) -> None:
                try:
                    go.wait(timeout=60)
                    a_walls[i] = a_agents[i].call(args_for(q, f"a_{r}_{i}"), series)
                except Exception as e:  # reported below
                    errors.append(repr(e))

            threads = [threading.Thread(target=run, args=(i,)) for i in range(a_calls)]
            for t in threads:
                t.start()
            go.wait(timeout=60)
            time.sleep(opts.front_delay_ms / 5000)
            b_wall = b_agent.call(args_for(q, f"b_{r}"), series)
            for t in threads:
                t.join()
            if errors:
                raise RuntimeError(f"session A's calls failed: {errors[:3]}")
            rounds.append({"b": b_wall, "a_last": max(a_walls)})
        return {"slots": slots, "a_calls": a_calls, "per_turn": per_turn, "alone": alone,
                "service": service, "rounds": rounds}
    finally:
        if server is not None:
            server.stop()
        fixture.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flood", type=int, default=20_000, help="unauthenticated initialize requests")
    parser.add_argument("--workers", type=int, default=4, help="flooding processes")
    parser.add_argument("--calls", type=int, default=30, help="the agent's calls quiet, and at least during the flood")
    parser.add_argument("--front-delay-ms", type=int, default=1000, help="the slow front of the fairness part")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the fairness part")
    parser.add_argument("--query", default="tidb_memory_with_nan", help="a SIDE_BY_SIDE_QUERIES name")
    parser.add_argument("--debug", action="store_true", help="dev profile (unoptimized)")
    parser.add_argument("--tool", help="a clinic-tool binary to package instead of the one built")
    parser.add_argument("--legacy", action="store_true",
                        help="a binary built before the operator listener: --mcp-http only, "
                             "envelopes delivered on the MCP port")
    opts = parser.parse_args()
    tool, fixture_command = cl.built(opts.debug)
    tool = str(Path(opts.tool).resolve()) if opts.tool else tool
    flood = flood_phase(opts, fixture_command, tool)
    fair = fairness_phase(opts, fixture_command, tool)

    mib = lambda kib: kib / 1024
    grown = mib(flood["after"]["VmRSS"] - flood["idle"]["VmRSS"])
    memory_ok = grown <= MEMORY_GOAL_MIB
    quiet, flooded = statistics.median(flood["quiet"]), statistics.median(flood["flooded"])
    call_ratio = flooded / quiet
    enough = len(flood["flooded"]) >= opts.calls
    call_ok = call_ratio <= FLOOD_CALL_GOAL and enough
    service = fair["service"]
    waits = [r["b"] - service for r in fair["rounds"]]
    wait = statistics.median(waits)
    wait_ok = wait <= service
    ms = lambda x: f"{1000 * x:.1f} ms"
    verdict = lambda ok: "met" if ok else "NOT MET"
    load = os.getloadavg()
    counts = ", ".join(f"{k}: {v}" for k, v in sorted(flood["statuses"].items()))
    large = ", ".join(f"{k}: {v}" for k, v in sorted(flood["large"].items()))
    print(f"\n`{Path(tool).name}` ({'legacy: --mcp-http only' if opts.legacy else '--mcp-http with --operator'}; "
          f"{'dev' if opts.debug else 'profile tool' if not opts.tool else opts.tool}); query `{flood['q']['name']}` "
          f"({flood['series']} series); load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print("| figure | measured | baseline (same run) | ratio / difference | goal |")
    print("| --- | --- | --- | --- | --- |")
    print(f"| server RSS after {opts.flood:,} unauthenticated `initialize` from {ATTACKER} "
          f"({opts.workers} processes, one per connection, {flood['flood_seconds']:.1f} s) | "
          f"{mib(flood['after']['VmRSS']):.1f} MiB (0.5 s later {mib(flood['settled']['VmRSS']):.1f}; "
          f"peak {mib(flood['after']['VmHWM']):.1f}) | idle after one warm call: "
          f"{mib(flood['idle']['VmRSS']):.1f} MiB | +{grown:.1f} MiB | "
          f"<= {MEMORY_GOAL_MIB} MiB above idle: {verdict(memory_ok)} |")
    print(f"| their answers by status | {counts} (the 200 KB ones: {large}) | - | - | - |")
    print(f"| a call from {AGENT} (own token, warm session) during the flood | median "
          f"{ms(flooded)} ({len(flood['flooded'])} calls, max {ms(max(flood['flooded']))}) | quiet, "
          f"before it: {ms(quiet)} ({len(flood['quiet'])} calls) | {call_ratio:.2f}x | "
          f"<= {FLOOD_CALL_GOAL}x: {verdict(call_ok)}"
          f"{'' if enough else f' (fewer than {opts.calls} calls during the flood)'} |")
    print(f"| session B's one call while session A's {fair['a_calls']} calls hold the "
          f"{fair['slots']} slots (front delay {opts.front_delay_ms} ms, {opts.rounds} rounds) | "
          f"B's wait median {ms(wait)} ({', '.join(ms(w) for w in waits)}); B elapsed "
          f"{', '.join(ms(r['b']) for r in fair['rounds'])}; A's last "
          f"{', '.join(ms(r['a_last']) for r in fair['rounds'])} | one call's service time alone: "
          f"{ms(service)} (median of {len(fair['alone'])}) | {wait / service:.2f}x | "
          f"wait <= one service time: {verdict(wait_ok)} |")
    return 0 if memory_ok and call_ok and wait_ok else 1


if __name__ == "__main__":
    sys.exit(main())
