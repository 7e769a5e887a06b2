#!/usr/bin/env python3
"""TLS cost: what TLS adds to grpclab's client and to the lab server, side by side in one run.

Three tables, every figure the median of --rounds rounds (rounds alternate the sides, so
drift hits all of them), complex_proto, 50 connections x 1000 streams, server `--threads 1`
on CPU 0, client on CPU 1; CPU is utime+stime from /proc/PID/stat over the measured window,
divided by the calls the client completed in it.

1. Client cost over TLS against lab over TLS: `grpclab load` (our engine, rustls) versus
   h2load (nghttp2, OpenSSL) sending the same framed request with ALPN h2.
   Bar (issue 15): grpclab's CPU per request at most 0.5x h2load's.
2. lab's server CPU per request at saturation (closed loop, grpclab as client), over h2c and
   over TLS. Bar: TLS costs at most 1 µs more per request.
3. lab and tonic-mt over TLS at the same offered load (open loop, --rps RATE, a rate both
   sustain). Bar: lab at most 1/3 of tonic-mt's CPU per request.

The certificates are made here with openssl (a CA and a leaf for localhost/127.0.0.1).

Usage: benches/tls_cost.py [--rounds 3] [--duration 10] [--warmup 3] [--rate 15000]
Needs: h2load (nghttp2-client), openssl, taskset; builds grpclab in release mode.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

from common import BIN, build, fresh_server_window, make_certificates, run_client, start_server, stop_server


def grpclab_window(target, tls_args, args, extra=()):
    """One grpclab load window; returns (calls, client CPU s, req/s, errors)."""
    argv = ["taskset", "-c", "1", BIN, "load", target, "--scenario", "complex_proto",
            "-c", "1000", "--connections", "50", "-z", f"{args.duration}s",
            "--warmup", f"{args.warmup}s", "--cpus", "1", "-O", "json", *tls_args, *extra]
    stdout, cpu, _ = run_client(argv, args.warmup)
    report = json.loads(stdout)
    ok = report["statusCodeDistribution"].get("OK", 0)
    return report["count"], cpu, report["measuredRps"], report["count"] - ok


def h2load_window(target, request_file, args):
    argv = ["taskset", "-c", "1", "h2load", "-t", "1", "-c", "50", "-m", "20",
            "-D", str(args.duration), f"--warm-up-time={args.warmup}", "-d", request_file,
            "-H", "content-type: application/grpc", "-H", "te: trailers",
            f"https://{target}/helloworld.Greeter/SayHello"]
    stdout, cpu, _ = run_client(argv, args.warmup)
    done = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded", stdout)
    rps = re.search(r"finished in [^,]+, ([\d.]+) req/s", stdout)
    if not done or not rps or "Application protocol: h2" not in stdout:
        sys.exit(f"cannot read h2load's output (or it did not negotiate h2 over TLS):\n{stdout}")
    requests, succeeded = int(done.group(1)), int(done.group(2))
    return requests, cpu, float(rps.group(1)), requests - succeeded


def server_window(impl_args, tls_args, args, extra=()):
    """A fresh server; its CPU per call over one grpclab window: (µs/call, req/s, errors)."""
    report, cpu, _ = fresh_server_window(
        impl_args,
        ["--scenario", "complex_proto", "-c", "1000", "--connections", "50",
         "-z", f"{args.duration}s", "--warmup", f"{args.warmup}s", "--cpus", "1",
         *tls_args, *extra],
        args.warmup)
    ok = report["statusCodeDistribution"].get("OK", 0)
    return cpu * 1e6 / max(ok, 1), report["measuredRps"], report["count"] - ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rate", type=int, default=15000,
                        help="table 3's offered load, req/s (both servers must sustain it)")
    args = parser.parse_args()
    for tool in ("h2load", "openssl", "taskset"):
        if not shutil.which(tool):
            sys.exit(f"{tool} not found (h2load: apt-get install nghttp2-client)")
    build()
    folder = tempfile.mkdtemp()
    ca, cert, key = make_certificates(folder)
    serve_tls = ["--tls-cert", cert, "--tls-key", key]
    load_tls = ["--cacert", ca]
    request_file = os.path.join(folder, "complex_proto.bin")
    subprocess.run([BIN, "encode", "--scenario", "complex_proto", "-o", request_file],
                   check=True, capture_output=True)

    # 1. Client cost over TLS, one lab server for all rounds.
    clients = {"grpclab (TLS)": [], "h2load (TLS)": []}
    server, target = start_server(["--impl", "lab", *serve_tls])
    try:
        for round_no in range(1, args.rounds + 1):
            for name, rows in clients.items():
                if name.startswith("grpclab"):
                    calls, cpu, rps, errors = grpclab_window(target, load_tls, args)
                else:
                    calls, cpu, rps, errors = h2load_window(target, request_file, args)
                rows.append((cpu * 1e6 / max(calls, 1), rps, errors))
                print(f"round {round_no} client {name:14} {rps:>9.0f} req/s "
                      f"{rows[-1][0]:6.2f} µs/req errors {errors}", flush=True)
    finally:
        stop_server(server)

    # 2 and 3. Server cost: a fresh server per window.
    sides = {
        "lab h2c, closed loop": (["--impl", "lab"], ["--insecure"], ()),
        "lab TLS, closed loop": (["--impl", "lab", *serve_tls], load_tls, ()),
        f"lab TLS, {args.rate} req/s": (["--impl", "lab", *serve_tls], load_tls,
                                         ("--rps", str(args.rate))),
        f"tonic-mt TLS, {args.rate} req/s": (["--impl", "tonic-mt", *serve_tls], load_tls,
                                              ("--rps", str(args.rate))),
    }
    servers = {name: [] for name in sides}
    for round_no in range(1, args.rounds + 1):
        for name, (impl_args, tls_args, extra) in sides.items():
            row = server_window(impl_args, tls_args, args, extra)
            servers[name].append(row)
            print(f"round {round_no} server {name:28} {row[1]:>9.0f} req/s "
                  f"{row[0]:6.2f} µs/req errors {row[2]}", flush=True)

    def med(rows, index):
        return statistics.median(row[index] for row in rows)

    print()
    print(f"TLS cost, complex_proto, 50 connections x 1000 streams, {args.duration}s after "
          f"{args.warmup}s warmup, server 1 thread on CPU 0, client on CPU 1, medians of "
          f"{args.rounds} rounds")
    print()
    print("| client, against lab over TLS | req/s | client CPU µs/req | errors |")
    print("|---|---:|---:|---:|")
    for name, rows in clients.items():
        print(f"| {name} | {med(rows, 1):.0f} | {med(rows, 0):.2f} | {med(rows, 2):.0f} |")
    ratio = med(clients["grpclab (TLS)"], 0) / med(clients["h2load (TLS)"], 0)
    print(f"\nratio grpclab / h2load over TLS, client CPU per request: {ratio:.2f} (bar: at most 0.5)")
    print()
    print("| server | req/s | server CPU µs/req | errors |")
    print("|---|---:|---:|---:|")
    for name, rows in servers.items():
        print(f"| {name} | {med(rows, 1):.0f} | {med(rows, 0):.2f} | {med(rows, 2):.0f} |")
    names = list(sides)
    extra_us = med(servers[names[1]], 0) - med(servers[names[0]], 0)
    third = med(servers[names[2]], 0) / med(servers[names[3]], 0)
    print(f"\nlab: TLS minus h2c at saturation: {extra_us:+.2f} µs/req (bar: at most +1 µs)")
    print(f"lab TLS / tonic-mt TLS at {args.rate} req/s, server CPU per request: {third:.2f} "
          f"(bar: at most 0.33)")


if __name__ == "__main__":
    main()
