#!/usr/bin/env python3
"""Decode placement on `lab`: inline versus pool across message sizes, to pick `adaptive`'s
default threshold (--offload-above).

Server: `grpclab serve --impl lab --threads 1 --pool-threads 1` pinned to CPU 0 (I/O thread and
pool thread share that core, so offloading buys no extra CPU: it shows the hop's cost, and
what it buys in latency); client `grpclab load` on CPU 1, closed loop, 10 connections x 100
streams. Per cell: req/s, server CPU µs per call, p99; medians of --rounds rounds, placements
alternating within each round.

Usage: benches/placement.py [--rounds 2] [--duration 5] [--warmup 2]
"""
import argparse

from common import build, measure_server, median

SCENARIOS = ["complex_proto", "string_1kB", "string_10kB", "large_complex"]
PLACEMENTS = ["inline", "pool"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--duration", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args()
    build()
    cells = {}
    for round_no in range(1, args.rounds + 1):
        for scenario in SCENARIOS:
            for placement in PLACEMENTS:
                row = measure_server(["--impl", "lab", "--decode", placement, "--pool-threads", "1"],
                                     ["--scenario", scenario], args.duration, args.warmup,
                                     concurrency=100, connections=10)
                cells.setdefault((scenario, placement), []).append(row)
                print(f"round {round_no} {scenario:14} {placement:7} {row['rps']:>8.0f} req/s "
                      f"server {row['server_us']:7.2f} µs/call  p99 {row['p99_us']:8.0f} µs", flush=True)
    print()
    print(f"lab, 1 I/O thread + 1 pool thread on CPU 0, client on CPU 1, 10 connections x 100 streams, "
          f"{args.duration}s after {args.warmup}s warmup, medians of {args.rounds} rounds")
    print()
    print("| scenario | placement | req/s | server CPU µs/call | p99 µs |")
    print("|---|---|---:|---:|---:|")
    for scenario in SCENARIOS:
        for placement in PLACEMENTS:
            rows = cells[(scenario, placement)]
            print(f"| {scenario} | {placement} | {median([r['rps'] for r in rows]):.0f} | "
                  f"{median([r['server_us'] for r in rows]):.2f} | {median([r['p99_us'] for r in rows]):.0f} |")


if __name__ == "__main__":
    main()
