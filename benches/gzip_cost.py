#!/usr/bin/env python3
"""gzip cost (`grpclab load -e`): server CPU per call with and without compression, lab and
tonic-mt, side by side in one run.

Each window: a fresh `grpclab serve --impl IMPL --threads 1` on CPU 0, `grpclab load` (CPU 1,
closed loop, complex_proto, 10 connections x 200 streams, --validate so every reply is
inflated and checked) with and without `-e`. Server CPU = utime+stime over the measured
window / calls completed in it. Rounds alternate the sides; medians of --rounds.

Usage: benches/gzip_cost.py [--rounds 3] [--duration 8] [--warmup 2]
"""
import argparse
import statistics

from common import build, fresh_server_window


def window(impl, gzip, args):
    load_args = ["--insecure", "--scenario", "complex_proto", "-c", "200", "--connections", "10",
                 "-z", f"{args.duration}s", "--warmup", f"{args.warmup}s", "--cpus", "1",
                 "--validate"] + (["-e"] if gzip else [])
    report, cpu, client_cpu = fresh_server_window(["--impl", impl], load_args, args.warmup)
    ok = report["statusCodeDistribution"].get("OK", 0)
    return {"rps": report["measuredRps"], "server_us": cpu * 1e6 / max(ok, 1),
            "client_us": client_cpu * 1e6 / max(report["count"], 1),
            "errors": report["count"] - ok}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args()
    build()
    sides = [(impl, gzip) for impl in ("lab", "tonic-mt") for gzip in (False, True)]
    rows = {side: [] for side in sides}
    for round_no in range(1, args.rounds + 1):
        for side in sides:
            row = window(side[0], side[1], args)
            rows[side].append(row)
            print(f"round {round_no} {side[0]:8} {'gzip' if side[1] else 'identity':8} "
                  f"{row['rps']:>9.0f} req/s server {row['server_us']:6.2f} µs/call "
                  f"client {row['client_us']:5.2f} µs/call errors {row['errors']}", flush=True)

    def med(side, key):
        return statistics.median(r[key] for r in rows[side])

    print()
    print(f"gzip cost, complex_proto, closed loop 10 x 200 streams, --validate, {args.duration}s "
          f"after {args.warmup}s, server 1 thread on CPU 0, client on CPU 1, medians of {args.rounds}")
    print()
    print("| server | encoding | req/s | server CPU µs/call | client CPU µs/call | errors |")
    print("|---|---|---:|---:|---:|---:|")
    for side in sides:
        print(f"| {side[0]} | {'gzip' if side[1] else 'identity'} | {med(side, 'rps'):.0f} | "
              f"{med(side, 'server_us'):.2f} | {med(side, 'client_us'):.2f} | "
              f"{med(side, 'errors'):.0f} |")
    print()
    for impl in ("lab", "tonic-mt"):
        print(f"{impl}: gzip adds {med((impl, True), 'server_us') - med((impl, False), 'server_us'):+.2f} "
              f"µs of server CPU per call")
    print(f"lab / tonic-mt under gzip, server CPU per call: "
          f"{med(('lab', True), 'server_us') / med(('tonic-mt', True), 'server_us'):.2f}")


if __name__ == "__main__":
    main()
