#!/usr/bin/env python3
"""Client cost: `grpclab load` versus h2load against the same server, side by side.

The server (`grpclab serve --threads 1`, tonic-mt unless --server-args says otherwise) is pinned
to CPU 0, each client in turn to CPU 1. Both clients drive complex_proto over 50 connections x 1000 concurrent streams
for DURATION seconds after a WARMUP; h2load sends the very bytes grpclab sends (written by
`grpclab encode`) with content-type: application/grpc and te: trailers.

Client CPU is utime+stime of the client process over the measured window: read from
/proc/PID/stat when the warmup ends, and from wait4()'s rusage when the client exits.
Requests are the client's own count for the measured window. Peak memory is ru_maxrss.
Rounds alternate the two clients so drift hits both; the table shows per-round figures and
the medians, and the ratio grpclab / h2load of the medians.

Clients: grpclab on its own HTTP/2 engine (--transport lab), grpclab on the h2 crate
(--transport h2), and h2load.

Usage: benches/client_cost.py [--rounds 3] [--duration 20] [--warmup 5]
Needs: h2load (Debian package nghttp2-client), taskset; builds grpclab in release mode.
"""
import argparse
import shlex
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

from common import BIN, build, cpu_seconds, run_client, start_server as start


def start_server(server_args):
    return start(shlex.split(server_args))


def grpclab_round(target, args, transport="lab"):
    argv = ["taskset", "-c", "1", BIN, "load", target, "--insecure", "--scenario", "complex_proto", "-c", "1000", "--connections", "50",
            "-z", f"{args.duration}s", "--warmup", f"{args.warmup}s", "--cpus", "1", "-O", "json",
            "--transport", transport]
    stdout, cpu, rss = run_client(argv, args.warmup)
    report = json.loads(stdout)
    errors = report["count"] - report["statusCodeDistribution"].get("OK", 0)
    return {"requests": report["count"], "errors": errors, "rps": report.get("measuredRps", report.get("rps")), "cpu": cpu, "rss_kib": rss}


def h2load_round(target, args, request_file):
    argv = ["taskset", "-c", "1", "h2load", "-t", "1", "-c", "50", "-m", "20",
            "-D", str(args.duration), f"--warm-up-time={args.warmup}", "-d", request_file,
            "-H", "content-type: application/grpc", "-H", "te: trailers",
            f"http://{target}/helloworld.Greeter/SayHello"]
    stdout, cpu, rss = run_client(argv, args.warmup)
    done = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded", stdout)
    rps = re.search(r"finished in [^,]+, ([\d.]+) req/s", stdout)
    if not done or not rps:
        sys.exit(f"cannot read h2load's output:\n{stdout}")
    requests, succeeded = int(done.group(1)), int(done.group(2))
    return {"requests": requests, "errors": requests - succeeded, "rps": float(rps.group(1)),
            "cpu": cpu, "rss_kib": rss}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--server-args", default="--impl tonic-mt",
                        help="the server under load: grpclab serve arguments")
    parser.add_argument("--rss-durations", default="2,8,32",
                        help="grpclab runs (seconds, no warmup) whose peak RSS shows memory does "
                             "not grow with the number of requests; empty to skip")
    args = parser.parse_args()
    if not shutil.which("h2load"):
        sys.exit("h2load not found: apt-get install nghttp2-client")
    build()
    request_file = os.path.join(tempfile.mkdtemp(), "complex_proto.bin")
    subprocess.run([BIN, "encode", "--scenario", "complex_proto", "-o", request_file],
                   check=True, capture_output=True)
    server, target = start_server(args.server_args)
    clients = ["grpclab", "grpclab-h2", "h2load"]
    rows = {name: [] for name in clients}
    growth = []
    try:
        for seconds in [int(s) for s in args.rss_durations.split(",") if s]:
            argv = ["taskset", "-c", "1", BIN, "load", target, "--insecure", "--scenario", "complex_proto", "-c", "1000", "--connections", "50",
                    "-z", f"{seconds}s", "--cpus", "1", "-O", "json"]
            stdout, _, rss = run_client(argv, 0)
            growth.append((seconds, json.loads(stdout)["count"], rss))
        for round_no in range(1, args.rounds + 1):
            for name in clients:
                server_cpu_before = cpu_seconds(server.pid)
                if name == "grpclab":
                    row = grpclab_round(target, args, "lab")
                elif name == "grpclab-h2":
                    row = grpclab_round(target, args, "h2")
                else:
                    row = h2load_round(target, args, request_file)
                row["server_cpu"] = cpu_seconds(server.pid) - server_cpu_before
                row["round"] = round_no
                rows[name].append(row)
                us = row["cpu"] * 1e6 / max(row["requests"], 1)
                print(f"round {round_no} {name:8} {row['rps']:>10.0f} req/s  {us:6.2f} µs/req client CPU"
                      f"  {row['rss_kib'] / 1024:6.1f} MiB peak  errors {row['errors']}", flush=True)
    finally:
        server.terminate()
        server.wait()

    def med(name, key):
        return statistics.median(r[key] for r in rows[name])

    def us_per_req(name):
        return statistics.median(r["cpu"] * 1e6 / max(r["requests"], 1) for r in rows[name])

    print()
    print(f"client cost, complex_proto, 50 connections x 1000 streams, {args.duration}s after "
          f"{args.warmup}s warmup, server `grpclab serve {args.server_args}` on CPU 0, client on CPU 1, "
          f"medians of {args.rounds} rounds")
    print()
    print("| client | req/s | client CPU µs/req | peak RSS MiB | errors |")
    print("|---|---:|---:|---:|---:|")
    for name in clients:
        print(f"| {name} | {med(name, 'rps'):.0f} | {us_per_req(name):.2f} | "
              f"{med(name, 'rss_kib') / 1024:.1f} | {med(name, 'errors'):.0f} |")
    if growth:
        print()
        print("| grpclab run | requests | peak RSS MiB |")
        print("|---|---:|---:|")
        for seconds, requests, rss in growth:
            print(f"| {seconds} s | {requests} | {rss / 1024:.1f} |")
    print()
    for name in ("grpclab", "grpclab-h2"):
        print(f"ratio {name} / h2load, client CPU µs per request: {us_per_req(name) / us_per_req('h2load'):.2f}")
    print("(grpclab = --transport lab, our engine; grpclab-h2 = --transport h2, the h2 crate; "
          "bars: issue 2 at most 1.5, issue 5 at most 0.5)")


if __name__ == "__main__":
    main()
