#!/usr/bin/env python3
"""Times Python's json module doing the same summary as the Rust compaction bench.

Reads the bodies that `cargo bench --bench compaction` writes to
`<target dir>/bench-data/` (default: $CARGO_TARGET_DIR/bench-data, else target/bench-data
beside this repository), parses each with json.loads and computes the same compact
summary as the Rust code: series count, point count, per-series min/max/mean/last/peak
and peak time over finite values, non-finite point counts, top-k by peak (ties in
provider order) and `truncated`. When rust-timings.json is there, prints how many times
faster the Rust compaction is (goal: at least 5x).

Usage: python3 benches/compaction_python.py [DATA_DIR]
"""

import json
import math
import os
import sys
import time

TOP_K = 10


def summarize(body: bytes) -> dict:
    doc = json.loads(body)
    if doc.get("status") != "success" or doc["data"]["resultType"] != "matrix":
        raise ValueError("not a matrix success")
    ranked = []
    point_count = 0
    for index, series in enumerate(doc["data"]["result"]):
        values = series["values"]
        point_count += len(values)
        stats = None
        non_finite = 0
        total = 0.0
        n = 0
        for t, raw in values:
            v = float(raw)  # "NaN", "+Inf", "-Inf" parse too
            if not math.isfinite(v):
                non_finite += 1
                continue
            if stats is None:
                stats = {"min": v, "max": v, "last": v, "peak": v, "peak_time": t}
            else:
                if v < stats["min"]:
                    stats["min"] = v
                if v > stats["max"]:
                    stats["max"] = v
                    stats["peak"] = v
                    stats["peak_time"] = t
                stats["last"] = v
            total += v
            n += 1
        if stats is not None:
            stats["mean"] = total / n
        ranked.append((index, stats, non_finite, len(values)))
    ranked.sort(key=lambda r: (r[1] is None, -(r[1]["peak"] if r[1] else 0.0), r[0]))
    kept = [
        {
            "labels": dict(sorted(doc["data"]["result"][i]["metric"].items())),
            "points": points,
            "non_finite_points": nf,
            "stats": st,
        }
        for i, st, nf, points in ranked[:TOP_K]
    ]
    return {
        "series_count": len(ranked),
        "point_count": point_count,
        "truncated": len(ranked) > len(kept),
        "series": kept,
        "warnings": doc.get("warnings", []),
    }


def main() -> int:
    if len(sys.argv) > 1:
        data_dir = sys.argv[1]
    else:
        repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        target = os.environ.get("CARGO_TARGET_DIR", os.path.join(repo, "target"))
        data_dir = os.path.join(target, "bench-data")
    files = sorted(f for f in os.listdir(data_dir) if f.startswith("body_") and f.endswith(".json"))
    if not files:
        print(f"no bodies in {data_dir}: run `cargo bench --bench compaction` first", file=sys.stderr)
        return 1
    rust = {}
    timings_path = os.path.join(data_dir, "rust-timings.json")
    if os.path.exists(timings_path):
        with open(timings_path) as f:
            rust = {entry["file"]: entry for entry in json.load(f)}
    # Smaller bodies first, as the Rust bench does.
    files.sort(key=lambda f: os.path.getsize(os.path.join(data_dir, f)))
    print("python3 json summary (mean run of the fastest of 5 batches, same files):")
    failed = False
    for name in files:
        with open(os.path.join(data_dir, name), "rb") as f:
            body = f.read()
        runs = 1 if len(body) > 10_000_000 else 5
        summary = summarize(body)
        # The mean run of the fastest of five batches, as the Rust bench measures.
        batches = []
        for _ in range(5):
            started = time.perf_counter()
            for _ in range(runs):
                summarize(body)
            batches.append((time.perf_counter() - started) / runs * 1e3)
        ms = min(batches)
        top = max((s["stats"]["peak"] for s in summary["series"] if s["stats"]), default=None)
        line = (f"  {name} ({len(body) / 1e6:.1f} MB): python {ms:.1f} ms; series "
                f"{summary['series_count']}, points {summary['point_count']}, top peak {top}")
        if name in rust:
            r = rust[name]
            if (r["series"], r["points"]) != (summary["series_count"], summary["point_count"]) or \
                    not math.isclose(r["top_peak"], float(f"{top:.3e}")):
                # Compact evidence states figures to 4 significant digits.
                line += " (DIFFERENT from the Rust summary)"
                failed = True
            rust_ms = r.get("streaming_ms", r["typed_ms"])
            speedup = ms / rust_ms
            goal = "met" if speedup >= 5 else "NOT MET"
            line += f"; rust streaming compaction {rust_ms:.2f} ms: {speedup:.1f}x faster (goal >= 5x) {goal}"
        print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
