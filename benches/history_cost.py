#!/usr/bin/env python3
"""What storing a run costs the client: `grpclab load` of a fixed number of calls, run with
--no-history, with the default SQLite store, and (given --postgres URL) with a PostgreSQL
store, rounds interleaved. Client CPU (utime+stime of the whole process, start to exit) and
wall time per run; the store's cost is the difference of the medians, paid once per run, after
the measured window (it never touches the calls' figures).

The server is `grpclab serve --impl lab --threads 1` pinned to CPU 0; the client runs on CPU 1.

Usage: benches/history_cost.py [--rounds 15] [--calls 2000] [--postgres URL]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from common import BIN, build, start_server, stop_server


def one_run(target, calls, store_args):
    argv = ["taskset", "-c", "1", BIN, "load", target, "--insecure", "--scenario", "complex_proto",
            "-n", str(calls), "-c", "50", "--connections", "2", "--cpus", "1", "-O", "json", "-o", os.devnull,
            *store_args]
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, rusage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - started
    stderr = proc.stderr.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0 or "WARNING" in stderr:
        sys.exit(f"client failed or did not store: {' '.join(argv)}\n{stderr}")
    return 1e3 * (rusage.ru_utime + rusage.ru_stime), 1e3 * wall


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--postgres", help="a postgres:// URL (with its password) to measure too")
    args = parser.parse_args()
    build()
    store_dir = tempfile.mkdtemp(prefix="grpclab-history-cost-")
    sides = [("none (--no-history)", ["--no-history"]),
             ("SQLite", ["--history", os.path.join(store_dir, "h.sqlite")])]
    if args.postgres:
        sides.append(("PostgreSQL", ["--history", args.postgres]))
    server, target = start_server(["--impl", "lab"])
    results = {name: [] for name, _ in sides}
    try:
        for _ in range(args.rounds):
            for name, store_args in sides:
                results[name].append(one_run(target, args.calls, store_args))
    finally:
        stop_server(server)
    base_cpu = statistics.median(cpu for cpu, _ in results[sides[0][0]])
    base_wall = statistics.median(wall for _, wall in results[sides[0][0]])
    print(f"grpclab load -n {args.calls} (complex_proto, lab server), {args.rounds} rounds interleaved; medians")
    print(f"{'store':<22} {'client CPU ms':>14} {'+ vs none':>10} {'wall ms':>9} {'+ vs none':>10}")
    for name, _ in sides:
        cpu = statistics.median(c for c, _ in results[name])
        wall = statistics.median(w for _, w in results[name])
        print(f"{name:<22} {cpu:>14.1f} {cpu - base_cpu:>+10.1f} {wall:>9.1f} {wall - base_wall:>+10.1f}")


if __name__ == "__main__":
    main()
