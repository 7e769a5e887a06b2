#!/usr/bin/env python3
"""Load generators side by side: grpclab (our engine, and --transport h2), ghz, fortio and h2load
against one server, each asked for the same thing, each judged by the server's own count.

One server at a time (`grpclab serve --impl lab`, then `--impl tonic-mt`, 1 thread), pinned to
CPU 0; each client pinned to CPU 1 with the same connections, calls in flight and duration. Per
client: the calls it reports, the calls the server answered in its window (`grpclab stats`: the
truth), req/s from the server's count, client CPU per answered call (utime+stime of the whole
client process, from wait4), p50/p99 as the client reports them (h2load reports a mean only).

Two methods: `hello` (complex_proto's SayHello: grpclab, ghz, h2load with `grpclab encode`'s
frame) and `health` (grpc.health.v1.Health/Check, the only call fortio's gRPC load makes: all
five). k6 is not here: its licence (AGPL) keeps it off this machine's registry list.

--freeze: open loop at --rate calls/s for 6 s; the server is stopped (SIGSTOP) from 2 s to 3 s.
A client that keeps its schedule (no coordinated omission) sees one call in six delayed by up
to 1 s: p90 ~0.4 s and p99 ~0.94 s. A client that waits for the server before sending the
next call reports the freeze as a few slow calls and its p99 stays small.

Usage: benches/clients.py [--servers lab,tonic-mt] [--clients grpclab,grpclab-h2,ghz,fortio,h2load]
                          [--methods hello,health] [--duration 10] [--rounds 1]
                          [--connections 50] [--concurrency 1000] [--freeze] [--rate 2000]
Needs ghz and fortio (`bash peers/install.sh clients`) and h2load (Debian's nghttp2-client).
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from common import BIN, ROOT, build, server_stats, start_server, stop_server

CLIENTS = ["grpclab", "grpclab-h2", "ghz", "fortio", "h2load"]
HEALTH_PROTO = """syntax = "proto3";
package grpc.health.v1;
message HealthCheckRequest { string service = 1; }
message HealthCheckResponse {
  enum ServingStatus { UNKNOWN = 0; SERVING = 1; NOT_SERVING = 2; SERVICE_UNKNOWN = 3; }
  ServingStatus status = 1;
}
service Health { rpc Check(HealthCheckRequest) returns (HealthCheckResponse); }
"""


def go_tool(name):
    """A Go load generator: on PATH or in $(go env GOPATH)/bin."""
    found = shutil.which(name)
    if not found:
        gopath = subprocess.run(["go", "env", "GOPATH"], capture_output=True, text=True).stdout.strip()
        candidate = os.path.join(gopath or os.path.expanduser("~/go"), "bin", name)
        found = candidate if os.path.isfile(candidate) else None
    return found


class Method:
    """What the clients call: its schema for grpclab and ghz, its frame for h2load."""

    def __init__(self, name, folder):
        self.name = name
        if name == "hello":
            self.proto = os.path.join(ROOT, "scenarios", "complex_proto", "helloworld.proto")
            self.call = "helloworld.Greeter.SayHello"
            self.data = os.path.join(ROOT, "scenarios", "complex_proto", "payload")
            self.path = "/helloworld.Greeter/SayHello"
        else:
            self.proto = os.path.join(folder, "health.proto")
            with open(self.proto, "w") as f:
                f.write(HEALTH_PROTO)
            self.call = "grpc.health.v1.Health.Check"
            self.data = os.path.join(folder, "health.json")
            with open(self.data, "w") as f:
                f.write("{}")
            self.path = "/grpc.health.v1.Health/Check"
        self.frame = os.path.join(folder, f"{name}.bin")
        subprocess.run([BIN, "encode", "--proto", self.proto, "--call", self.call, "-D", self.data, "--output", self.frame],
                       check=True, capture_output=True)


def argv_for(client, method, target, args, out_json, rate=None):
    """The client's command line (pinned to CPU 1), or None when it cannot call `method`."""
    k, c, d = args.connections, args.concurrency, args.duration
    per_conn = max(c // k, 1)
    if client in ("grpclab", "grpclab-h2"):
        argv = [BIN, "load", target, "--insecure", "--proto", method.proto, "--call", method.call, "-D", method.data,
                "-c", str(c), "--connections", str(k), "-z", f"{d}s", "--cpus", "1", "-O", "json", "--no-history"]
        if client == "grpclab-h2":
            argv += ["--transport", "h2"]
        if rate:
            argv += ["--rps", str(rate)]
    elif client == "ghz":
        argv = [args.ghz, "--insecure", "--proto", method.proto, "--call", method.call, "-D", method.data,
                "-c", str(c), "--connections", str(k), "-z", f"{d}s", "-O", "json", target]
        if rate:
            argv += ["--rps", str(rate)]
    elif client == "fortio":
        if method.name != "health":
            return None
        argv = [args.fortio, "load", "-grpc", "-qps", str(rate or 0), "-c", str(k), "-s", str(per_conn),
                "-t", f"{d}s", "-json", out_json, "-loglevel", "Error", target]
    elif client == "h2load":
        argv = ["h2load", "-D", str(d), "-c", str(k), "-m", str(per_conn), "-d", method.frame,
                "-H", "content-type: application/grpc", "-H", "te: trailers", f"http://{target}{method.path}"]
        if rate:
            argv += [f"--rps={max(rate // k, 1)}"]
    else:
        sys.exit(f"unknown client {client!r}; known: {', '.join(CLIENTS)}")
    return ["taskset", "-c", "1"] + argv


def h2load_duration_ms(value):
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", value).groups()
    return float(number) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]


def read_report(client, stdout, out_json):
    """(calls reported, calls OK, p50 ms, p99 ms, slowest ms) from the client's own report."""
    if client in ("grpclab", "grpclab-h2", "ghz"):
        report = json.loads(stdout)
        marks = {round(m["percentage"]): m["latency"] / 1e6 for m in report.get("latencyDistribution") or []}
        ok = report["statusCodeDistribution"].get("OK", 0)
        return report["count"], ok, marks.get(50), marks.get(99), report.get("slowest", 0) / 1e6
    if client == "fortio":
        with open(out_json) as f:
            report = json.load(f)
        histogram = report["DurationHistogram"]
        marks = {p["Percentile"]: p["Value"] * 1e3 for p in histogram.get("Percentiles") or []}
        ok = report.get("RetCodes", {}).get("SERVING", 0)
        return histogram["Count"], ok, marks.get(50), marks.get(99), histogram["Max"] * 1e3
    # h2load: HTTP answers (it does not read grpc-status) and the mean time per request.
    done = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded", stdout)
    timing = re.search(r"time for request:\s+(\S+)\s+(\S+)\s+(\S+)", stdout)
    if not done:
        sys.exit(f"h2load printed no request counts:\n{stdout}")
    slowest = h2load_duration_ms(timing.group(2)) if timing else None
    return int(done.group(3)), int(done.group(4)), None, None, slowest


def run_one(client, method, server, target, args, rate=None, freeze_at=None):
    """One client run; returns its row."""
    with tempfile.TemporaryDirectory() as folder:
        out_json = os.path.join(folder, "fortio.json")
        argv = argv_for(client, method, target, args, out_json, rate)
        if argv is None:
            return None
        before = server_stats(target)["calls"]
        out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
        started = time.monotonic()
        proc = subprocess.Popen(argv, stdout=out, stderr=err)
        if freeze_at is not None:
            def freeze():
                time.sleep(freeze_at)
                os.kill(server.pid, signal.SIGSTOP)
                time.sleep(1.0)
                os.kill(server.pid, signal.SIGCONT)
            threading.Thread(target=freeze, daemon=True).start()
        _, status, rusage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - started
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            sys.exit(f"{client} failed ({code}): {' '.join(argv)}\n{stderr[-2000:]}{stdout[-2000:]}")
        time.sleep(0.2)  # calls answered as the client left still count on the server
        answered = server_stats(target)["calls"] - before
        count, ok, p50, p99, slowest = read_report(client, stdout, out_json)
        cpu = rusage.ru_utime + rusage.ru_stime
        return {
            "client": client, "reported": count, "ok": ok, "answered": answered,
            "rps": answered / args.duration, "us_per_call": 1e6 * cpu / max(answered, 1),
            "p50": p50, "p99": p99, "slowest": slowest, "wall": wall,
        }


def ms(value):
    return "n/a" if value is None else f"{value:.2f}"


def print_table(title, rows):
    print(f"\n### {title}\n")
    print("| client | req/s (server's count) | client CPU µs/call | calls reported | OK reported | answered by server | p50 ms | p99 ms | slowest ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['client']} | {row['rps']:,.0f} | {row['us_per_call']:.2f} | {row['reported']:,} | {row['ok']:,} | "
              f"{row['answered']:,} | {ms(row['p50'])} | {ms(row['p99'])} | {ms(row['slowest'])} |")
    sys.stdout.flush()


def median_row(rows):
    """The median of each figure over a client's rounds."""
    merged = dict(rows[0])
    for key in ("reported", "ok", "answered", "rps", "us_per_call", "p50", "p99", "slowest"):
        values = [r[key] for r in rows if r[key] is not None]
        merged[key] = statistics.median(values) if values else None
    for key in ("reported", "ok", "answered"):
        merged[key] = int(merged[key])
    return merged


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--servers", default="lab,tonic-mt")
    parser.add_argument("--clients", default=",".join(CLIENTS))
    parser.add_argument("--methods", default="hello,health")
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=1000)
    parser.add_argument("--freeze", action="store_true")
    parser.add_argument("--rate", type=int, default=2000)
    args = parser.parse_args()
    clients = [c for c in args.clients.split(",") if c]
    for client in clients:
        if client not in CLIENTS:
            sys.exit(f"unknown client {client!r}; known: {', '.join(CLIENTS)}")
    if args.duration < 1 or args.rounds < 1 or args.connections < 1 or args.concurrency < args.connections:
        sys.exit("--duration, --rounds and --connections must be at least 1, --concurrency at least --connections")
    args.ghz, args.fortio = go_tool("ghz"), go_tool("fortio")
    missing = [name for name, path in (("ghz", args.ghz), ("fortio", args.fortio), ("h2load", shutil.which("h2load")))
               if name in clients and not path]
    if missing:
        sys.exit(f"missing: {', '.join(missing)} (bash peers/install.sh clients; apt-get install nghttp2-client)")
    build()
    if args.freeze:
        args.duration = 6
    with tempfile.TemporaryDirectory() as folder:
        methods = [Method(name, folder) for name in args.methods.split(",") if name]
        for name in args.servers.split(","):
            for method in methods:
                server, target = start_server(["--impl", name])
                try:
                    results = {client: [] for client in clients}
                    for _ in range(args.rounds):
                        for client in clients:
                            row = run_one(client, method, server, target, args,
                                          rate=args.rate if args.freeze else None,
                                          freeze_at=2.0 if args.freeze else None)
                            if row:
                                results[client].append(row)
                finally:
                    stop_server(server)
                rows = [median_row(r) for r in results.values() if r]
                shape = (f"open loop {args.rate} calls/s for 6 s, server stopped 2-3 s (expected: p90 ~400 ms, p99 ~940 ms)"
                         if args.freeze else f"closed loop, {args.connections} connections x {args.concurrency} in flight, "
                         f"{args.duration} s, medians of {args.rounds} round(s)")
                print_table(f"{name}, {method.call}: {shape}", rows)


if __name__ == "__main__":
    main()
