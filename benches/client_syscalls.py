#!/usr/bin/env python3
"""Where a client's CPU goes: syscalls, wakeups and kernel share per request, grpclab vs h2load.

Explains issue 5's client bar. Against a server that is itself the bottleneck (tonic-mt on one
core) responses come back a few per write, so each client read, write and sleep/wake is shared by
few requests, and the kernel's share of the client's CPU decides its cost. This script counts, per
request in the measured window, the reads, writes, epoll waits and context switches of each
client (`perf stat` with syscall tracepoints, counting delayed past the warmup), and its kernel
share of CPU over the whole run (perf stat's user/sys times).

Setup as benches/client_cost.py: server `grpclab serve --threads 1 ARGS` on CPU 0, each client
on CPU 1, complex_proto, 50 connections x 1000 streams; rounds alternate the clients; medians.

Usage: benches/client_syscalls.py [--rounds 3] [--duration 10] [--warmup 3] [--server-args ...]
Needs: perf (Debian's linux-perf; root or perf_event_paranoid <= 1 for tracepoints), h2load.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile

from common import BIN, build, start_server, stop_server

EVENTS = {
    "reads": ["syscalls:sys_enter_read", "syscalls:sys_enter_recvfrom", "syscalls:sys_enter_readv"],
    "writes": ["syscalls:sys_enter_write", "syscalls:sys_enter_sendto", "syscalls:sys_enter_writev",
               "syscalls:sys_enter_sendmsg"],
    "epoll waits": ["syscalls:sys_enter_epoll_wait", "syscalls:sys_enter_epoll_pwait"],
    "context switches": ["context-switches"],
}


def perf_stat(client_argv, warmup):
    """Runs the client under perf stat (counting from the end of the warmup); returns
    (client stdout, {event: count}, user seconds, sys seconds)."""
    events = [e for names in EVENTS.values() for e in names] + ["task-clock"]
    out_file = tempfile.NamedTemporaryFile(suffix=".perf", delete=False).name
    argv = ["taskset", "-c", "1", "perf", "stat", "-x", ",", "-o", out_file,
            f"--delay={warmup * 1000}", "-e", ",".join(events)] + client_argv
    out = tempfile.TemporaryFile()
    proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE)
    # wait4's rusage covers perf and the client it reaped: the whole run, warmup included.
    _, status, rusage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"client failed: {shlex.join(argv)}\n{proc.stderr.read().decode(errors='replace')}")
    out.seek(0)
    stdout = out.read().decode(errors="replace")
    counts = {}
    with open(out_file) as f:
        text = f.read()
    os.unlink(out_file)
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) >= 3 and fields[0].replace(".", "").isdigit():
            counts[fields[2]] = float(fields[0])
    return stdout, counts, rusage.ru_utime, rusage.ru_stime


def grpclab_argv(target, args):
    return [BIN, "load", target, "--insecure", "--scenario", "complex_proto", "-c", "1000", "--connections", "50", "-z", f"{args.duration}s",
            "--warmup", f"{args.warmup}s", "--cpus", "1", "-O", "json"]


def h2load_argv(target, args, request_file):
    return ["h2load", "-t", "1", "-c", "50", "-m", "20", "-D", str(args.duration),
            f"--warm-up-time={args.warmup}", "-d", request_file,
            "-H", "content-type: application/grpc", "-H", "te: trailers",
            f"http://{target}/helloworld.Greeter/SayHello"]


def requests_of(name, stdout):
    if name == "grpclab":
        report = json.loads(stdout)
        return report["count"], report.get("measuredRps", report.get("rps"))
    done = re.search(r"requests: \d+ total, \d+ started, (\d+) done", stdout)
    rps = re.search(r"finished in [^,]+, ([\d.]+) req/s", stdout)
    if not done or not rps:
        sys.exit(f"cannot read h2load's output:\n{stdout}")
    return int(done.group(1)), float(rps.group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--server-args", default="--impl tonic-mt")
    args = parser.parse_args()
    for tool in ("perf", "h2load"):
        if not shutil.which(tool):
            sys.exit(f"{tool} not found: apt-get install "
                     f"{'linux-perf' if tool == 'perf' else 'nghttp2-client'}")
    build()
    request_file = os.path.join(tempfile.mkdtemp(), "complex_proto.bin")
    subprocess.run([BIN, "encode", "--scenario", "complex_proto", "-o", request_file],
                   check=True, capture_output=True)
    server, target = start_server(shlex.split(args.server_args))
    rows = {"grpclab": [], "h2load": []}
    try:
        for round_no in range(1, args.rounds + 1):
            for name in rows:
                argv = grpclab_argv(target, args) if name == "grpclab" else \
                    h2load_argv(target, args, request_file)
                stdout, counts, user, system = perf_stat(argv, args.warmup)
                requests, rps = requests_of(name, stdout)
                row = {"rps": rps, "kernel_share": system / max(user + system, 1e-9)}
                for label, names in EVENTS.items():
                    row[label] = sum(counts.get(n, 0) for n in names) / max(requests, 1)
                # task-clock is in msec over the counted window; requests over the same window.
                row["cpu_us"] = counts.get("task-clock", 0) * 1e3 / max(requests, 1)
                rows[name].append(row)
                print(f"round {round_no} {name:8} {rps:>9.0f} req/s  {row['cpu_us']:5.2f} µs/req  "
                      + "  ".join(f"{label} {row[label]:.3f}/req" for label in EVENTS), flush=True)
    finally:
        stop_server(server)
    print()
    print(f"per request, server `grpclab serve {args.server_args}` on CPU 0, client on CPU 1, "
          f"complex_proto, 50 x 1000, {args.duration}s after {args.warmup}s, medians of {args.rounds}")
    print()
    labels = ["cpu_us", "kernel_share"] + list(EVENTS)
    print("| client | req/s | CPU µs/req | " + " | ".join(f"{label}/req" for label in EVENTS) +
          " | kernel share of CPU (whole run) | kernel µs/req (est.) |")
    print("|---|---:|---:|" + "---:|" * len(EVENTS) + "---:|---:|")
    for name, runs in rows.items():
        med = {key: statistics.median(r[key] for r in runs) for key in ["rps"] + labels}
        print(f"| {name} | {med['rps']:.0f} | {med['cpu_us']:.2f} | "
              + " | ".join(f"{med[label]:.3f}" for label in EVENTS)
              + f" | {100 * med['kernel_share']:.0f} % | {med['cpu_us'] * med['kernel_share']:.2f} |")
    h2load_us = statistics.median(r["cpu_us"] for r in rows["h2load"])
    print()
    print(f"issue 5's client bar, half of h2load's CPU per request: {h2load_us / 2:.2f} µs "
          f"(compare the kernel µs/req column: wakeups and TCP, not user-space work)")


if __name__ == "__main__":
    main()
