#!/usr/bin/env python3
"""Server cost: `lab` versus tonic-mt, side by side (issue 3).

Each server runs alone with one thread, pinned to CPU 0 (`grpclab serve --threads 1`); the
client (`grpclab load`, one thread) is pinned to CPU 1. Two loads per server, complex_proto,
50 connections x 1000 streams:
  - saturation: closed loop, as fast as the pair goes;
  - fixed: open loop at each of --rates req/s (default 30000 and 60000, which all can serve).
Per window (after the warmup): server CPU µs per call = Δ(utime+stime) of the server process /
Δ calls the server reports through its admin RPC (grpclab stats); allocations and bytes per
call from the same RPC's counters; client req/s and p50/p99 from its JSON; the server's RSS at
the end of the window and its peak (VmHWM). Rounds alternate the servers so drift hits both;
tables show medians, and the ratio lab / tonic-mt.

The client is `grpclab load` on its default transport (grpclab's own engine).

Usage: benches/server_cost.py [--rounds 3] [--duration 10] [--warmup 3] [--rates 30000,60000]
       [--lab-args "--decode inline"]
"""
import argparse
import shlex

from common import build, measure_server, median


COLUMNS = [("rps", "req/s", "{:.0f}"), ("p50_us", "p50 µs", "{:.0f}"), ("p99_us", "p99 µs", "{:.0f}"),
           ("server_us", "server CPU µs/call", "{:.2f}"), ("server_cpu_pct", "server CPU %", "{:.0f}"),
           ("allocs", "allocs/call", "{:.1f}"), ("bytes", "bytes/call", "{:.0f}"),
           ("rss_mib", "RSS MiB", "{:.1f}"), ("peak_rss_mib", "peak RSS MiB", "{:.1f}"),
           ("errors", "errors", "{:.0f}")]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rates", default="30000,60000",
                        help="open-loop rates to measure at, comma-separated")
    parser.add_argument("--lab-args", default="--decode inline")
    parser.add_argument("--with-lab-h2", action="store_true",
                        help="also measure lab on the h2 crate (--transport h2)")
    args = parser.parse_args()
    build()
    servers = {"tonic-mt": ["--impl", "tonic-mt"], "lab": ["--impl", "lab"] + shlex.split(args.lab_args)}
    if args.with_lab_h2:
        servers["lab-h2"] = ["--impl", "lab", "--transport", "h2"] + shlex.split(args.lab_args)
    loads = {"saturation": []}
    for rate in [int(r) for r in args.rates.split(",") if r]:
        loads[f"{rate} req/s"] = ["--rps", str(rate)]
    results = {(s, l): [] for s in servers for l in loads}
    for round_no in range(1, args.rounds + 1):
        for load, load_args in loads.items():
            for name, impl_args in servers.items():
                row = measure_server(impl_args, load_args, args.duration, args.warmup)
                results[(name, load)].append(row)
                print(f"round {round_no} {load:>12} {name:8} {row['rps']:>8.0f} req/s  "
                      f"server {row['server_us']:5.2f} µs/call ({row['server_cpu_pct']:.0f}% CPU)  "
                      f"p99 {row['p99_us']:6.0f} µs  allocs/call {row['allocs']:5.1f}  "
                      f"RSS {row['rss_mib']:.1f} MiB  errors {row['errors']}", flush=True)
    print()
    print(f"complex_proto, 50 connections x 1000 streams, {args.duration}s after {args.warmup}s warmup, "
          f"server (1 thread) on CPU 0, grpclab load (1 thread) on CPU 1, lab args: {args.lab_args}; "
          f"medians of {args.rounds} rounds")
    for load in loads:
        print()
        print(f"### {load}")
        print()
        print("| server | " + " | ".join(title for _, title, _ in COLUMNS) + " |")
        print("|---|" + "---:|" * len(COLUMNS))
        for name in servers:
            rows = results[(name, load)]
            cells = [fmt.format(median([r[key] for r in rows])) for key, _, fmt in COLUMNS]
            print(f"| {name} | " + " | ".join(cells) + " |")
        print()
        tonic = median([r["server_us"] for r in results[("tonic-mt", load)]])
        for name in servers:
            if name != "tonic-mt":
                ratio = median([r["server_us"] for r in results[(name, load)]]) / tonic
                print(f"ratio {name} / tonic-mt, server CPU µs per call: {ratio:.2f}")


if __name__ == "__main__":
    main()
