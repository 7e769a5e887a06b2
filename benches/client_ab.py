#!/usr/bin/env python3
"""Client A/B: two `grpclab` binaries as load clients against the same server, side by side.

For a change to the client's hot path (`grpclab compare` compares servers, not clients). The
server is `grpclab serve --impl lab --threads 1` from the newer binary (B), pinned to CPU 0; the
clients take turns on CPU 1, closed loop, complex_proto, 50 connections x 1000 streams, rounds
interleaved (A B A B ...) so drift hits both. Client CPU per request is utime+stime over the
measured window (after the warmup) divided by the requests of that window, as in
client_cost.py; the table shows each round and the medians, and the ratio B/A of the medians.

Usage: benches/client_ab.py OLD_BINARY [NEW_BINARY] [--rounds 5] [--duration 10] [--warmup 3]
       [--rps R]   (open loop at R req/s instead of closed loop)
       [--b-args=--details]   (extra flags for B only: one binary, a feature off and on)
       [--args=--transport=h2]   (extra flags for both sides)
NEW_BINARY defaults to target/release/grpclab (built first).
"""
import argparse
import json
import statistics
import sys

from common import BIN, build, run_client, start_server, stop_server


def round_of(binary, target, args, extra=()):
    argv = ["taskset", "-c", "1", binary, "load", target, "--insecure", "--scenario", "complex_proto", "-c", "1000", "--connections", "50",
            "-z", f"{args.duration}s", "--warmup", f"{args.warmup}s", "--cpus", "1", "-O", "json",
            *extra]
    if args.rps:
        argv += ["--rps", str(args.rps)]
    stdout, cpu, rss = run_client(argv, args.warmup)
    report = json.loads(stdout)
    ok = report["statusCodeDistribution"].get("OK", 0)
    return {"requests": report["count"], "errors": report["count"] - ok, "rps": report.get("measuredRps", report.get("rps")),
            "us_per_req": 1e6 * cpu / max(report["count"], 1), "rss_kib": rss}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old")
    parser.add_argument("new", nargs="?", default=BIN)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rps", type=int, default=0)
    parser.add_argument("--b-args", default="", help="extra load flags for B only")
    parser.add_argument("--args", default="", help="extra load flags for both sides")
    args = parser.parse_args()
    if args.new == BIN:
        build()
    server, target = start_server(["--impl", "lab"])
    rows = {"A": [], "B": []}
    try:
        for r in range(args.rounds):
            for side, binary in (("A", args.old), ("B", args.new)):
                extra = args.args.split() + (args.b_args.split() if side == "B" else [])
                row = round_of(binary, target, args, extra)
                rows[side].append(row)
                print(f"round {r + 1} {side}: {row['rps']:>10.0f} req/s  {row['us_per_req']:6.3f} µs/req"
                      f"  errors {row['errors']}  peak RSS {row['rss_kib'] / 1024:.1f} MiB", flush=True)
    finally:
        stop_server(server)
    print()
    print(f"| client | req/s (median) | client CPU µs/req (median) | peak RSS MiB (median) |")
    print(f"|---|---|---|---|")
    medians = {}
    for side, label in (("A", f"{args.old} {args.args}".strip()), ("B", f"{args.new} {args.args} {args.b_args}".strip())):
        m = {key: statistics.median(row[key] for row in rows[side]) for key in ("rps", "us_per_req", "rss_kib")}
        medians[side] = m
        print(f"| {side}: {label} | {m['rps']:.0f} | {m['us_per_req']:.3f} | {m['rss_kib'] / 1024:.1f} |")
    ratio = medians["B"]["us_per_req"] / medians["A"]["us_per_req"]
    print(f"\nB/A client CPU per request (medians): {ratio:.3f}; "
          f"B/A req/s: {medians['B']['rps'] / medians['A']['rps']:.3f}")
    if any(row["errors"] for side in rows.values() for row in side):
        sys.exit("some rounds had errors")


if __name__ == "__main__":
    main()
