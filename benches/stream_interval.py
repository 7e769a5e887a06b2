#!/usr/bin/env python3
"""The time between paced messages (`--stream-interval`), as each client keeps it.

A client stream of 201 messages (`StreamingEcho.Upload`, 1-byte payloads) against lab (1 thread,
CPU 0), 5 calls one after another, the client on CPU 1: the call's mean latency over 200
intervals is the interval the client really kept. For each binary given (both transports)
and for ghz (`bash peers/install.sh clients`), at each interval.

Usage: benches/stream_interval.py BINARY [BINARY ...] [--intervals 200us,500us,2ms]
"""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys

from common import ROOT, start_server, stop_server

PROTO = os.path.join(ROOT, "scenarios", "streaming", "streaming.proto")
CALL = "grpclab.streaming.v1.StreamingEcho.Upload"
COMMON = ["--insecure", "--proto", PROTO, "--call", CALL, "-d", '{"payload":"YQ=="}', "--stream-call-count", "201",
          "-n", "5", "-c", "1", "-O", "json"]


def children_cpu_s():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def kept_interval_us(argv):
    """The interval kept (µs) and the client's CPU per message sent (µs)."""
    before = children_cpu_s()
    out = subprocess.run(["taskset", "-c", "1"] + argv, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"failed: {' '.join(argv)}\n{out.stderr[-2000:]}")
    cpu_per_message_us = (children_cpu_s() - before) / (5 * 201) * 1e6
    return json.loads(out.stdout)["average"] / 200 / 1e3, cpu_per_message_us


def cells(kept):
    return " | ".join(f"{interval:.0f} ({cpu:.0f} CPU)" for interval, cpu in kept)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binaries", nargs="+")
    parser.add_argument("--intervals", default="200us,500us,2ms")
    args = parser.parse_args()
    ghz = shutil.which("ghz") or os.path.expanduser("~/go/bin/ghz")
    server, target = start_server(["--impl", "lab"])
    try:
        intervals = args.intervals.split(",")
        print("| client | " + " | ".join(f"{i} asked: µs kept (µs CPU/message)" for i in intervals) + " |")
        print("|---|" + "---:|" * len(intervals))
        for binary in args.binaries:
            for transport in ("lab", "h2"):
                kept = [kept_interval_us([binary, "load", "--no-history", "--transport", transport, *COMMON,
                                          "--stream-interval", i, target]) for i in intervals]
                print(f"| {binary} --transport {transport} | " + cells(kept) + " |")
        if os.path.isfile(ghz):
            kept = [kept_interval_us([ghz, *COMMON, "--stream-interval", i, target]) for i in intervals]
            print(f"| ghz | " + cells(kept) + " |")
    finally:
        stop_server(server)


if __name__ == "__main__":
    main()
