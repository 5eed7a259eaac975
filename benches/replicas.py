#!/usr/bin/env python3
"""Many sessions at once over three Clinic replicas sharing a Redis turn ledger, against
one Clinic server with the file ledger, side by side in one run.

    python3 benches/replicas.py [--sessions 200] [--rounds 3] [--query tidb_memory_with_nan] [--debug]

It builds `clinic-tool` with the packaging profile (`--profile tool`) and the
side-by-side fixture (as `benches/remote_mcp.py` does, whose lean client it uses), starts
the fixture with `--sessions N` (a real Prometheus 2.42, the Clinic test front, a
deployable Clinic v3 folder, and N session tokens, each with an envelope under its own
`policy_id`) and a `redis-server` on loopback with `appendonly yes` and
`appendfsync always`. Two shapes, each serving over Streamable HTTP:

- **one server, file ledger**: one `clinic-tool --mcp-http` (with its `--operator`
  listener) and a turn-ledger directory; every session's envelope delivered to its
  operator listener; the N sessions at once against it.
- **three replicas, Redis ledger**: three `clinic-tool --mcp-http`, each with its own
  audit log and `EVIDENCE_TURN_LEDGER=redis://...`; every envelope delivered once, to
  one replica's operator listener (the session store is shared), session i calling
  replica i mod 3.

Binaries are found under `$CARGO_TARGET_DIR` when it is set, else `target`.

The sessions come 16 to a loopback source address (a server holds at most 32 sessions
per peer address). `--rounds` rounds, the two shapes alternating (the order swapped each round); each
round every session initialized first, then every call at once, each call in a turn of
its own (the turns emptied between rounds). Per shape: the p50 and p99 of a call as the
client sees it (the wait for a server's `limits.concurrency` slots included), all calls'
wall time and calls per second, medians over the rounds. Checked, every round: each call
answered `ok` with the expected series and one audit record, and its turn has exactly one
`admitted` and one `answered` entry (in the directory, or in Redis).

Exit status 1 when a check fails.
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import call_latency as cl  # noqa: E402  (the build, the fixture, the checks)
import remote_mcp as rm  # noqa: E402  (the lean client, the server, deliveries)
import side_by_side as sbs  # noqa: E402  (ground truth)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Redis:
    """A `redis-server` on loopback with the persistence the ledger requires."""

    def __init__(self, folder: Path):
        server = shutil.which("redis-server")
        if server is None:
            raise SystemExit("redis-server is missing: apt-get install -y redis-server "
                             "(bash scripts/test.sh installs it)")
        self.port = free_port()
        self.process = subprocess.Popen(
            [server, "--bind", "127.0.0.1", "--port", str(self.port), "--dir", str(folder),
             "--appendonly", "yes", "--appendfsync", "always", "--save", "",
             "--logfile", str(folder / "redis.log")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            if self.command("PING") == "+PONG":
                return
            time.sleep(0.05)
        raise RuntimeError("redis-server did not answer PING")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def command(self, *args: str):
        """One command in RESP; its reply (a simple string, an integer or a list of bulk strings)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
                s.sendall(("*%d\r\n" % len(args) + "".join(
                    "$%d\r\n%s\r\n" % (len(a.encode()), a) for a in args)).encode())
                reader = s.makefile("rb")
                return read_reply(reader)
        except OSError:
            return None

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def read_reply(reader):
    line = reader.readline().decode().rstrip("\r\n")
    kind, rest = line[0], line[1:]
    if kind == "+" or kind == "-":
        return line
    if kind == ":":
        return int(rest)
    if kind == "$":
        n = int(rest)
        if n < 0:
            return None
        data = reader.read(n + 2)[:-2]
        return data.decode()
    if kind == "*":
        return [read_reply(reader) for _ in range(int(rest))]
    raise RuntimeError(f"not a Redis reply: {line!r}")


def many(bases: list, q: dict, series: int) -> tuple[list, float]:
    """Every session (its own connection, thread and token; session i on bases[i mod
    len]) initialized, then every call at once; each call's time and the wall time."""
    sessions = q["sessions"]
    ready = threading.Barrier(len(sessions) + 1)
    walls = [None] * len(sessions)
    opened = [None] * len(sessions)
    errors = []

    def run(i: int, token: str) -> None:
        try:
            opened[i] = rm.RawSession(bases[i % len(bases)], token, rm.source_of(i))
            ready.wait(timeout=120)
            walls[i] = opened[i].call(q["args"], series)
        except Exception as e:  # reported below
            errors.append(repr(e))
            ready.abort()

    threads = [threading.Thread(target=run, args=(i, s["token"])) for i, s in enumerate(sessions)]
    for t in threads:
        t.start()
    ready.wait(timeout=120)
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    # Each round's protocol sessions ended (untimed): the next round's fit the bounds.
    for session in opened:
        if session is not None:
            session.close()
    if errors:
        raise RuntimeError(f"{len(errors)} sessions failed: {errors[:3]}")
    return walls, elapsed


def entries_in_dir(ledger: Path, policy_id: str) -> list:
    path = ledger / f"{policy_id}.jsonl"
    return [json.loads(l) for l in path.read_text().splitlines()] if path.exists() else []


def entries_in_redis(redis: Redis, policy_id: str) -> list:
    raw = redis.command("LRANGE", f"evidence:turn:{{{policy_id}}}:entries", "0", "-1") or []
    return [json.loads(e) for e in raw]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200, help="sessions at once")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the two shapes")
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--query", default="tidb_memory_with_nan", help="a SIDE_BY_SIDE_QUERIES name")
    parser.add_argument("--venv", type=Path, default=sbs.ROOT / ".tools/venv")
    parser.add_argument("--debug", action="store_true", help="dev profile (unoptimized)")
    opts = parser.parse_args()
    rm.ensure_venv(opts.venv, __file__)
    tool, fixture_command = cl.built(opts.debug)
    fixture = subprocess.Popen(fixture_command + ["--tool-binary", tool, "--sessions", str(opts.sessions)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    work = tempfile.TemporaryDirectory(prefix="replicas-bench-")
    root = Path(work.name)
    servers, redis = [], None
    results = {"file": [], "redis": []}
    checks = {"every call ok with one audit record": True, "each call admitted and answered in its turn": True}
    try:
        setup = json.loads(fixture.stdout.readline())
        packaged = setup["tool"]
        q = next(x for x in setup["queries"] if x["name"] == opts.query)
        _, _, series = sbs.ground_truth(setup["prometheus_url"], q)
        (root / "redis").mkdir()
        redis = Redis(root / "redis")

        def start(name: str, ledger: str) -> tuple:
            folder = root / name
            folder.mkdir()
            env = dict(q["env"], EVIDENCE_AUDIT_LOG=str(folder / "audit.jsonl"))
            server = rm.serve(packaged, env, ledger)
            servers.append(server)
            return server, folder / "audit.jsonl"

        (root / "ledger").mkdir()
        single, file_audit = start("single", str(root / "ledger"))
        file_base = single.base
        replicas = [start(f"replica-{r}", redis.url) for r in range(opts.replicas)]

        def deliver_all(server: rm.Server) -> None:
            for s in q["sessions"]:
                rm.deliver(server.operator, s["envelope"])

        deliver_all(single)
        deliver_all(replicas[0][0])

        def audit_count(paths: list) -> int:
            return sum(len(rm.audit_calls(p)) for p in paths)

        def round_of(shape: str) -> None:
            if shape == "file":
                for entry in rm.turn_files(root / "ledger"):
                    entry.unlink()
                bases, audits = [file_base], [file_audit]
                entries = lambda pid: entries_in_dir(root / "ledger", pid)
            else:
                for s in q["sessions"]:
                    redis.command("DEL", f"evidence:turn:{{{s['policy_id']}}}:entries",
                                  f"evidence:turn:{{{s['policy_id']}}}:running",
                                  f"evidence:turn:{{{s['policy_id']}}}:refusals")
                bases, audits = [r.base for r, _ in replicas], [a for _, a in replicas]
                entries = lambda pid: entries_in_redis(redis, pid)
            before = audit_count(audits)
            walls, elapsed = many(bases, q, series)
            records = audit_count(audits) - before
            checks["every call ok with one audit record"] &= (
                len(walls) == opts.sessions and records == opts.sessions)
            for s in q["sessions"]:
                kinds = [e["entry"] for e in entries(s["policy_id"])]
                checks["each call admitted and answered in its turn"] &= (
                    kinds.count("admitted") == 1 and kinds.count("answered") == 1)
            results[shape].append((walls, elapsed))

        for r in range(opts.rounds):
            for shape in (("file", "redis") if r % 2 == 0 else ("redis", "file")):
                round_of(shape)
    finally:
        for server in servers:
            server.stop()
        if redis is not None:
            redis.stop()
        fixture.stdin.close()
        fixture.wait(timeout=30)

    def summary(shape: str) -> tuple:
        rounds = results[shape]
        p50 = statistics.median(rm.percentile(w, 50) for w, _ in rounds)
        p99 = statistics.median(rm.percentile(w, 99) for w, _ in rounds)
        wall = statistics.median(e for _, e in rounds)
        return p50, p99, wall, opts.sessions / wall

    load = os.getloadavg()
    ms = lambda x: f"{1000 * x:.1f} ms"
    print(f"\nquery `{q['name']}` ({series} series); {opts.sessions} sessions at once; "
          f"{opts.rounds} rounds; {'dev' if opts.debug else 'profile tool'}; "
          f"load average {load[0]:.1f} {load[1]:.1f}")
    print("| shape | p50 of a call | p99 of a call | all calls | calls per second |")
    print("| --- | --- | --- | --- | --- |")
    rows = {"file": "one server, file ledger",
            "redis": f"{opts.replicas} replicas, Redis ledger (loopback)"}
    for shape, label in rows.items():
        p50, p99, wall, rate = summary(shape)
        print(f"| {label} | {ms(p50)} | {ms(p99)} | {ms(wall)} | {rate:.0f} |")
    f, r = summary("file"), summary("redis")
    print(f"ratios, replicas / one server: p50 {r[0] / f[0]:.2f}x, p99 {r[1] / f[1]:.2f}x, "
          f"calls per second {r[3] / f[3]:.2f}x")
    for name, ok in checks.items():
        print(f"check: {name}: {'met' if ok else 'NOT MET'}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
