#!/usr/bin/env python3
"""lab on one and on two I/O threads, as far as a 2-core machine allows: what a second thread
buys, and what it costs when it has no core of its own.

lab runs one current-thread runtime per I/O thread; its accept thread deals connections to
them in turn, and nothing on a call's path is shared between them (per-thread call counters,
per-connection state; only the connection cap is one atomic, touched at accept). Shapes, each a
fresh `grpclab serve --impl lab --threads N` under `grpclab load` (complex_proto, closed loop,
50 connections x 20 streams):

  1 thread, CPU 0           <- client on CPU 1              the standard shape
  2 threads, CPU 0          <- client on CPU 1              two runtimes sharing one core
  2 threads, CPUs 0-1       <- client on CPU 1              the second thread shares the client's core
  2 threads, CPUs 0-1       <- client on CPUs 0-1 (2 threads)  everything shared

Per window (after the warmup): req/s, server CPU per call (utime+stime over the calls the
server counted), client CPU per call, p99. Rounds alternate the shapes; medians.

Usage: benches/threads.py [--rounds 3] [--duration 8] [--warmup 2]
"""
import argparse

from common import build, measure_server, median

SHAPES = [
    ("1 thread, CPU 0; client CPU 1", dict(threads=1, server_cpus="0", client_cpus="1")),
    ("2 threads, CPU 0; client CPU 1", dict(threads=2, server_cpus="0", client_cpus="1")),
    ("2 threads, CPUs 0-1; client CPU 1", dict(threads=2, server_cpus="0,1", client_cpus="1")),
    ("2 threads, CPUs 0-1; client CPUs 0-1", dict(threads=2, server_cpus="0,1", client_cpus="0,1")),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args()
    build()
    rows = {name: [] for name, _ in SHAPES}
    for round_number in range(1, args.rounds + 1):
        for name, shape in SHAPES:
            result = measure_server(["--impl", "lab"], ["--scenario", "complex_proto"],
                                    args.duration, args.warmup, **shape)
            rows[name].append(result)
            print(f"round {round_number} {name:<38} {result['rps']:>9.0f} req/s  server "
                  f"{result['server_us']:.2f} µs/call ({result['server_cpu_pct']:.0f} % of a core)  "
                  f"client {result['client_us']:.2f} µs/call  p99 {result['p99_us']:.0f} µs", flush=True)
    print()
    print(f"lab, complex_proto, closed loop 50 x 20, {args.duration}s after {args.warmup}s; "
          f"medians of {args.rounds} rounds")
    print("| shape | req/s | server µs/call | server CPU (% of one core) | client µs/call | p99 µs |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, _ in SHAPES:
        runs = rows[name]
        print(f"| {name} | {median([r['rps'] for r in runs]):.0f} | "
              f"{median([r['server_us'] for r in runs]):.2f} | "
              f"{median([r['server_cpu_pct'] for r in runs]):.0f} | "
              f"{median([r['client_us'] for r in runs]):.2f} | {median([r['p99_us'] for r in runs]):.0f} |")


if __name__ == "__main__":
    main()
