#!/usr/bin/env python3
"""Connections at scale: what one `grpclab serve` (CPU 0) and one `grpclab load` (CPU 1) pay
per connection they hold, and how fast the client opens them.

For each N: a fresh server (--max-connections N + 100), then `load --connections N -c N` at a
low open-loop rate (every connection a call every few seconds: mostly idle, as mobile and IoT
clients are) for --hold seconds. Once the server holds N sockets, both processes' resident
memory is read; per connection = (RSS - the same process's RSS before any connection) / N.
The client's base is its RSS after one connection's run of the same shape.

  connect_s     seconds from the client's start until the server holds N sockets
  connects/s    connections established per second, from the server's first socket to its
                Nth (sockets counted every 50 ms: a rate, not a latency)
  server_kib    server RSS per connection (KiB)      client_kib   client RSS per connection
  kernel KiB/conn  what the kernel holds per connection, both its sockets (slab objects of
                the socket, inode, file, dentry and epoll entry, and TCP buffer pages; root)
  server/client µs per call   CPU per call of each process while all N connections are held
                (from one second after the last connect to the end: the calls' cost with N
                sockets in the kernel's tables and the processes' maps)
  calls         calls the server counted, equal to the client's count (checked)

--calls-per-conn-s 1 with --counts 19000 is the IoT / mobile shape: every connection one call
a second.

Usage: benches/connections.py [--counts 1000,5000,15000] [--hold 10] [--calls-per-conn-s 0.2]
       [--binary target/release/grpclab] [--impl lab|tonic-mt|tonic-st]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


# The kernel's caches a TCP connection's sockets live in (slab objects: the socket, its inode,
# its file, the epoll registration, the dentry), beside the socket buffers' pages.
KERNEL_CACHES = ("TCP", "sock_inode_cache", "filp", "dentry", "eventpoll_epi")


def kernel_bytes():
    """Bytes the kernel holds in KERNEL_CACHES' active objects plus TCP socket buffer pages
    (/proc/slabinfo, root only, and /proc/net/sockstat); None without /proc/slabinfo."""
    try:
        with open("/proc/slabinfo") as f:
            lines = f.readlines()
    except OSError:
        return None
    total = 0
    for line in lines:
        fields = line.split()
        if fields and fields[0] in KERNEL_CACHES:
            total += int(fields[1]) * int(fields[3])  # active objects x object size
    with open("/proc/net/sockstat") as f:
        for line in f:
            if line.startswith("TCP:"):
                words = line.split()
                total += int(words[words.index("mem") + 1]) * os.sysconf("SC_PAGE_SIZE")
    return total


def one(binary, n, hold, per_conn_rate, impl):
    server_args = ["--impl", impl]
    if impl == "lab":
        server_args += ["--max-connections", str(n + 100)]  # lab closes past 10,000 by default
    server, target = common.start_server(server_args)
    try:
        server_base, _ = common.memory_kib(server.pid)
        kernel_base = kernel_bytes()
        base_sockets = common.socket_count(server.pid)
        rate = max(1.0, n * per_conn_rate)
        out = tempfile.TemporaryFile()
        err = tempfile.TemporaryFile()
        argv = ["taskset", "-c", "1", binary, "load", target, "--insecure", "--scenario", "complex_proto",
                "--connections", str(n), "-c", str(n), "--rps", str(rate), "-z", f"{hold}s", "--cpus", "1",
                "-O", "json"]
        started = time.monotonic()
        client = subprocess.Popen(argv, stdout=out, stderr=err)
        connect_s = first_s = None
        kernel_kib = None
        client_kib = server_kib = None
        mark = None
        while os.waitid(os.P_PID, client.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
            held = common.socket_count(server.pid) - base_sockets
            if first_s is None and held >= 1:
                first_s = time.monotonic() - started
            if connect_s is None and held >= n:
                connect_s = time.monotonic() - started
                time.sleep(1.0)  # the first calls on every connection made and answered
                server_rss, _ = common.memory_kib(server.pid)
                client_rss, _ = common.memory_kib(client.pid)
                server_kib = (server_rss - server_base) / n
                client_kib = client_rss / n
                kernel_now = kernel_bytes()
                if kernel_base is not None and kernel_now is not None:
                    # Both ends of every connection are on this machine: per connection,
                    # two sockets.
                    kernel_kib = (kernel_now - kernel_base) / 1024 / n
                try:
                    mark = (common.cpu_seconds(server.pid), common.cpu_seconds(client.pid),
                            common.server_stats(target)["calls"])
                except (FileNotFoundError, ProcessLookupError):
                    mark = None  # the client ended meanwhile: no steady window
            time.sleep(0.05)
        # The client has ended but is not reaped: its whole CPU comes with its rusage.
        _, status, rusage = os.wait4(client.pid, 0)
        client.returncode = code = os.waitstatus_to_exitcode(status)
        err.seek(0)
        out.seek(0)
        if code != 0:
            sys.exit(f"client failed ({code}) at {n} connections: {err.read().decode(errors='replace')}")
        report = json.loads(out.read())
        served = common.server_stats(target)["calls"]
        server_us = client_us = None
        if mark is not None:
            # The admin call that read the mark's count is one call: noise at these counts.
            window_calls = max(served - mark[2], 1)
            server_us = (common.cpu_seconds(server.pid) - mark[0]) * 1e6 / window_calls
            client_us = (rusage.ru_utime + rusage.ru_stime - mark[1]) * 1e6 / window_calls
    finally:
        common.stop_server(server)
    if report["count"] != served:
        sys.exit(f"{n} connections: the client counted {report['count']} calls, the server {served}")
    connects_per_s = None
    # Sockets are counted every 50 ms: all N seen within two counts is too fast to time.
    if connect_s is not None and first_s is not None and connect_s - first_s >= 0.1:
        connects_per_s = (n - 1) / (connect_s - first_s)
    return {"connections": n, "connect_s": connect_s, "connects_per_s": connects_per_s,
            "server_us_per_call": server_us, "client_us_per_call": client_us,
            "server_kib": server_kib, "kernel_kib_per_connection": kernel_kib,
            "client_rss_kib": client_kib, "calls": served,
            "errors": report["count"] - report["statusCodeDistribution"].get("OK", 0)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--counts", default="1000,5000,15000")
    parser.add_argument("--hold", type=int, default=10)
    parser.add_argument("--calls-per-conn-s", type=float, default=0.2)
    parser.add_argument("--binary", default=common.BIN)
    parser.add_argument("--impl", default="lab", help="the server: lab, tonic-mt or tonic-st")
    args = parser.parse_args()
    common.BIN = args.binary
    rows = []
    for n in [int(c) for c in args.counts.split(",")]:
        row = one(args.binary, n, args.hold, args.calls_per_conn_s, args.impl)
        rows.append(row)
        print(json.dumps(row), flush=True)
    # The client's figure includes its base; per connection above base from two sizes.
    if len(rows) >= 2:
        a, b = rows[0], rows[-1]
        slope = (b["client_rss_kib"] * b["connections"] - a["client_rss_kib"] * a["connections"]) / (
            b["connections"] - a["connections"])
        print(f"client RSS per added connection ({a['connections']} -> {b['connections']}): {slope:.1f} KiB")
    print(f"{'connections':>11} {'connect s':>9} {'connects/s':>10} {'server KiB/conn':>15} "
          f"{'client KiB/conn':>15} {'kernel KiB/conn':>15} {'server µs/call':>14} {'client µs/call':>14} {'calls':>8} {'errors':>6}")
    for r in rows:
        print(f"{r['connections']:>11} {r['connect_s'] or 0:>9.2f} {r['connects_per_s'] or 0:>10.0f} "
              f"{r['server_kib'] or 0:>15.1f} {r['client_rss_kib'] or 0:>15.1f} "
              f"{r['kernel_kib_per_connection'] or 0:>15.1f} "
              f"{r['server_us_per_call'] or 0:>14.2f} {r['client_us_per_call'] or 0:>14.2f} "
              f"{r['calls']:>8} {r['errors']:>6}")


if __name__ == "__main__":
    main()
