#!/usr/bin/env python3
"""How late an open loop sends: the client's send lag (scheduled send time to actual send, the
`sendLag` figure of `grpclab load --rps`) at a share of the client's own maximum rate.

Server `grpclab serve --impl lab --threads 1` on CPU 0, client `grpclab load --cpus 1` on CPU 1,
complex_proto, 50 connections. First a closed loop (-c 1000, 20 streams per connection) finds
the client's maximum rate against this server (its measuredRps); then, per round, an open loop
(-c --concurrency: a due call waits when every stream is busy, and that wait is send lag too) at
each --shares of it reports the send lag's p50, p99, p99.9 and max (successful calls), with the
calls due but never sent. Rounds repeat the open loops; the table shows medians of rounds.

Usage: benches/send_lag.py [--rounds 3] [--duration 8] [--warmup 2] [--shares 0.5,0.8]
       [--concurrency 1000]
"""
import argparse
import json
import subprocess
import sys

from common import BIN, build, median, start_server, stop_server


def load(target, extra, duration, warmup, concurrency):
    argv = ["taskset", "-c", "1", BIN, "load", target, "--insecure", "--scenario", "complex_proto",
            "-c", str(concurrency), "--connections", "50", "--cpus", "1", "-z", f"{duration}s",
            "--warmup", f"{warmup}s", "-O", "json", "--no-history"] + extra
    run = subprocess.run(argv, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"client failed ({run.returncode}): {' '.join(argv)}\n{run.stderr}")
    return json.loads(run.stdout)


def lag_at(report, percentage):
    lag = report.get("sendLag")
    if not lag:
        sys.exit("the report has no sendLag: this grpclab predates it")
    if percentage == "max":
        return lag["slowest"]
    for point in lag["latencyDistribution"]:
        if point["percentage"] == percentage:
            return point["latency"]
    sys.exit(f"sendLag has no {percentage} % point")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=1000,
                        help="the open loops' -c: streams a call may wait for when all are busy")
    parser.add_argument("--shares", default="0.5,0.8",
                        help="open-loop rates as shares of the closed loop's, comma-separated")
    args = parser.parse_args()
    shares = [float(s) for s in args.shares.split(",")]
    if any(not 0 < s <= 1 for s in shares):
        sys.exit(f"--shares {args.shares}: give shares in (0, 1], e.g. 0.5,0.8")
    build()
    server, target = start_server(["--impl", "lab"])
    try:
        maximum = load(target, [], args.duration, args.warmup, 1000)["measuredRps"]
        print(f"closed loop, the client's maximum here: {maximum:.0f} req/s", flush=True)
        rows = {share: [] for share in shares}
        for round_number in range(1, args.rounds + 1):
            for share in shares:
                rate = round(maximum * share)
                report = load(target, ["--rps", str(rate)], args.duration, args.warmup,
                              args.concurrency)
                row = {"rps": report["measuredRps"], "unsent": report.get("unsent", 0),
                       **{p: lag_at(report, p) / 1e3 for p in (50, 99, 99.9, "max")}}
                rows[share].append(row)
                print(f"round {round_number} {share:.0%} ({rate} req/s): {row['rps']:.0f} req/s, "
                      f"send lag p50 {row[50]:.1f} µs, p99 {row[99]:.1f} µs, p99.9 {row[99.9]:.1f} µs, "
                      f"max {row['max']:.1f} µs, {row['unsent']} unsent", flush=True)
    finally:
        stop_server(server)
    print()
    print(f"lab (1 thread, CPU 0) <- grpclab load (CPU 1), complex_proto, 50 connections, "
          f"open loops -c {args.concurrency}, "
          f"{args.duration}s after {args.warmup}s; medians of {args.rounds} rounds")
    print("| share of the client's maximum | req/s offered | req/s done | send lag p50 µs | p99 µs | p99.9 µs | max µs | unsent |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for share in shares:
        runs = rows[share]
        print(f"| {share:.0%} | {maximum * share:.0f} | {median([r['rps'] for r in runs]):.0f} | "
              + " | ".join(f"{median([r[p] for r in runs]):.1f}" for p in (50, 99, 99.9, "max"))
              + f" | {median([r['unsent'] for r in runs]):.0f} |")


if __name__ == "__main__":
    main()
