#!/usr/bin/env python3
"""Instructions per call of two grpclab builds, counted by valgrind's callgrind: a figure that
does not move with the machine's noise (timing on a shared 2-core box swings 20-30 % round to
round; instruction counts repeat to a few parts in ten thousand).

For each binary and each role, the process runs under callgrind twice, for N1 and N2 unary
complex_proto calls (closed loop, 4 connections x 100 streams); instructions per call =
(total(N2) - total(N1)) / (N2 - N1), so start-up (the scenario's .proto compiled at run time,
runtimes, connections) cancels out.

  server: `BIN serve --impl lab --threads 1` under callgrind, loaded by NEW's client (native)
  client: `BIN load --cpus 1` under callgrind (our engine, then --transport h2, then our
          engine in an open loop) against NEW's lab server (native)

With --tls both sides speak TLS (a CA and a leaf for 127.0.0.1 made here with openssl; lab
serves with --tls-cert/--tls-key, the client trusts the CA with --cacert).

Usage: benches/instructions_ab.py OLD_BINARY NEW_BINARY [--n1 20000] [--n2 60000]
                                 [--roles server,engine,h2,open] [--tls]
Needs valgrind (Debian's valgrind package); openssl for --tls.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

from common import make_certificates

LOAD = ["--insecure", "--scenario", "complex_proto", "-c", "100", "--connections", "4", "--cpus", "1"]
# The server's extra flags (--tls adds the certificate).
SERVE = []


def use_tls(folder):
    """Makes a CA and a leaf for 127.0.0.1 and switches LOAD and SERVE to TLS."""
    ca, cert, key = make_certificates(folder)
    LOAD[LOAD.index("--insecure")] = "--cacert"
    LOAD.insert(LOAD.index("--cacert") + 1, ca)
    SERVE.extend(["--tls-cert", cert, "--tls-key", key])


def total_instructions(out_file):
    with open(out_file) as f:
        for line in f:
            if line.startswith("summary:") or line.startswith("totals:"):
                return int(line.split()[1])
    sys.exit(f"no instruction total in {out_file}")


def start(argv):
    """Starts a server; returns (process, "host:port") once it listens."""
    server = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    for line in server.stderr:
        if "listening on " in line:
            return server, line.split("listening on ")[1].strip()
    sys.exit(f"{argv} did not start")


def stop(server):
    server.terminate()
    try:
        server.wait(timeout=120)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def callgrind(argv, tmp, tag):
    out = os.path.join(tmp, f"{tag}.out")
    return ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *argv], out


def server_count(binary, new, n, tmp, tag):
    argv, out = callgrind([binary, "serve", "--impl", "lab", "--port", "0", "--threads", "1", *SERVE], tmp, tag)
    server, target = start(["taskset", "-c", "0", *argv])
    try:
        subprocess.run(["taskset", "-c", "1", new, "load", target, *LOAD, "-n", str(n), "-O", "json"],
                       check=True, capture_output=True)
    finally:
        stop(server)
    return total_instructions(out)


def client_count(binary, new, n, tmp, tag, extra):
    server, target = start(["taskset", "-c", "0", new, "serve", "--impl", "lab", "--port", "0", "--threads", "1", *SERVE])
    try:
        argv, out = callgrind([binary, "load", target, *LOAD, "-n", str(n), "-O", "json", *extra], tmp, tag)
        run = subprocess.run(["taskset", "-c", "1", *argv], capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"{argv} failed:\n{run.stderr[-2000:]}")
    finally:
        stop(server)
    return total_instructions(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--n1", type=int, default=20000)
    parser.add_argument("--n2", type=int, default=60000)
    parser.add_argument("--roles", default="server,engine,h2,open",
                        help="which of server, engine, h2, open to count (comma-separated)")
    parser.add_argument("--tls", action="store_true", help="both sides over TLS")
    args = parser.parse_args()
    roles = set(args.roles.split(","))
    unknown = roles - {"server", "engine", "h2", "open"}
    if unknown:
        sys.exit(f"--roles: unknown {', '.join(sorted(unknown))}; choose from server, engine, h2, open")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        if args.tls:
            use_tls(tmp)
        for key, role, measure in (
            ("server", "lab server", lambda b, n, tag: server_count(b, args.new, n, tmp, tag)),
            ("engine", "client, our engine", lambda b, n, tag: client_count(b, args.new, n, tmp, tag, [])),
            ("h2", "client, --transport h2", lambda b, n, tag: client_count(b, args.new, n, tmp, tag, ["--transport", "h2"])),
            # The open loop's ticket path (intended times, a shard's slots): a rate far above
            # what the client reaches under callgrind, so every call is due at once.
            ("open", "client, open loop", lambda b, n, tag: client_count(b, args.new, n, tmp, tag, ["--rps", "1000000"])),
        ):
            if key not in roles:
                continue
            per_call = {}
            for side, binary in (("A", args.old), ("B", args.new)):
                low = measure(binary, args.n1, f"{side}-{role[:6]}-1")
                high = measure(binary, args.n2, f"{side}-{role[:6]}-2")
                per_call[side] = (high - low) / (args.n2 - args.n1)
                print(f"{role} {side}: {per_call[side]:.0f} instructions per call", flush=True)
            rows.append((role, per_call["A"], per_call["B"]))
    print()
    print(f"| role | A instructions/call | B instructions/call | B/A |")
    print(f"|---|---:|---:|---:|")
    for role, a, b in rows:
        print(f"| {role} | {a:.0f} | {b:.0f} | {b / a:.4f} |")


if __name__ == "__main__":
    main()
