#!/usr/bin/env python3
"""What grpclab's emulated link (--network) adds and costs: how exact its delay is, and how
much CPU it takes per packet.

1. Delay: `BIN load --network delay=D --serve lab -c 1 -n N` (one call at a time, so every
   call is its own round trip) for each D; the p50 against 2 x D (each call meets the delay
   both ways), and `--network lo` for the loopback floor.
2. Cost: `BIN bench lab --network lo --network delay=0ms` (grpc_bench's defaults: 1000 streams
   closed loop, server on CPU 0): req/s of each row, and the link's CPU per packet from the
   rows' progress lines. The link's two threads are not pinned: on two cores they share the
   server's and the client's, which is what a delay=0ms row shows against loopback.

Usage: benches/network_link.py [BIN] [--calls 200] [--duration 5s]
Needs root (network namespaces) and a kernel with TUN devices.
"""
import argparse
import json
import re
import subprocess
import sys
import tempfile

from common import BIN

DELAYS = ["0ms", "1ms", "10ms", "50ms"]


def p50_ms(binary, spec, calls):
    argv = [binary, "load", "--network", spec, "--serve", "lab", "--insecure", "--no-history",
            "--scenario", "string_10B", "-c", "1", "-n", str(calls), "-O", "json"]
    done = subprocess.run(argv, check=True, capture_output=True, text=True)
    report = json.loads(done.stdout)
    row = next(r for r in report["latencyDistribution"] if r["percentage"] == 50)
    return row["latency"] / 1e6


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary", nargs="?", default=BIN)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--duration", default="5s")
    args = parser.parse_args()
    floor = p50_ms(args.binary, "lo", args.calls)
    print("| network | p50 (one call at a time) | 2 x delay | p50 - 2 x delay |")
    print("|---|---:|---:|---:|")
    print(f"| lo | {floor:.3f} ms | - | - |")
    for delay in DELAYS:
        p50 = p50_ms(args.binary, f"delay={delay}", args.calls)
        twice = 2 * float(delay.removesuffix("ms"))
        print(f"| delay={delay} | {p50:.3f} ms | {twice:.0f} ms | {p50 - twice:+.3f} ms |", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        argv = [args.binary, "bench", "lab", "--network", "lo", "--network", "delay=0ms",
                "--duration", args.duration, "--warmup", "2s", "--results-dir", tmp, "--no-history"]
        done = subprocess.run(argv, check=True, capture_output=True, text=True)
    rates = dict(re.findall(r"lab network=(\S+): (\d+) req/s", done.stderr))
    per_packet = re.findall(r"network (\S+ → \S+): (\d+) packets.*?\(([\d.]+) µs a packet\)", done.stderr)
    print()
    print(f"req/s: lo {rates.get('lo')}, delay=0s {rates.get('delay=0s')}"
          f" ({int(rates.get('delay=0s', 0)) / max(1, int(rates.get('lo', 1))):.2f}x)")
    for direction, packets, micros in per_packet:
        print(f"link {direction}: {packets} packets, {micros} µs of CPU a packet")


if __name__ == "__main__":
    sys.exit(main())
