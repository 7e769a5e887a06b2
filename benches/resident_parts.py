#!/usr/bin/env python3
"""What a server's resident memory is made of, at rest and under the standard bench row.

A server's RSS (what `bench` reports) counts two different things: the memory the process
allocated (anonymous pages: heap, stacks, buffers) and the pages of its executable and
libraries it has touched (file pages, shared with the page cache, dropped by the kernel under
pressure and read again when needed). For each server, pinned to CPU 0:

  at rest       one second after it listens
  under load    the last second of a 5 s closed loop of the standard row (complex_proto,
                50 connections x 1000 streams, `grpclab load` on CPU 1)

from /proc/PID/smaps_rollup: RSS, anonymous, and file pages, with the file pages of the
executable itself apart (/proc/PID/smaps).

  lab   `grpclab serve --impl lab --threads 1`
  --command 'NAME=CMD {port}'   any other server (repeatable), e.g. a peer's built binary:
        --command 'ntex=peers/rust_ntex_grpc/.build/HASH/server {port} 1'

Usage: benches/resident_parts.py [--binary target/release/grpclab] [--command NAME=CMD ...]
"""
import argparse
import os
import shlex
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def parts(pid):
    """(RSS, anonymous, file, the executable's own file pages), KiB."""
    rollup = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if rest.strip().endswith("kB"):
                rollup[key] = int(rest.split()[0])
    exe = os.path.realpath(f"/proc/{pid}/exe")
    own = 0
    current = None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5 and ":" in fields[3]:
                current = fields[5] if len(fields) > 5 else None
            elif fields[0] == "Rss:" and current == exe:
                own += int(fields[1])
    rss, anon = rollup["Rss"], rollup["Anonymous"]
    return rss, anon, rss - anon, own


def measure(name, argv, binary):
    port = common.free_port()
    argv = [a.replace("{port}", str(port)) for a in argv]
    server = subprocess.Popen(["taskset", "-c", "0"] + argv, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        common.wait_listening(port, server)
        time.sleep(1)
        rest = parts(server.pid)
        client = subprocess.Popen(
            ["taskset", "-c", "1", binary, "load", "--insecure", "--no-tui", "--no-history",
             "--scenario", "complex_proto", "--connections", "50", "-c", "1000", "-z", "5s",
             "-O", "json", f"127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(4.5)
        loaded = parts(server.pid)
        if client.wait() != 0:
            sys.exit(f"{name}: the load run failed ({client.returncode})")
    finally:
        server.terminate()
        server.wait()
    return rest, loaded


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=common.BIN)
    parser.add_argument("--command", action="append", default=[])
    args = parser.parse_args()
    servers = [("lab", [args.binary, "serve", "--impl", "lab", "--threads", "1", "--port", "{port}"])]
    for spec in args.command:
        name, _, command = spec.partition("=")
        if not command:
            sys.exit(f"--command {spec!r}: give NAME=COMMAND with {{port}} where the port goes")
        servers.append((name, shlex.split(command)))
    print("| server | when | RSS MiB | anonymous MiB | file pages MiB | of them its executable's MiB |")
    print("|---|---|---:|---:|---:|---:|")
    for name, argv in servers:
        rest, loaded = measure(name, argv, args.binary)
        for when, (rss, anon, file_pages, own) in (("at rest", rest), ("under load", loaded)):
            print(f"| {name} | {when} | {rss / 1024:.1f} | {anon / 1024:.1f} | {file_pages / 1024:.1f} "
                  f"| {own / 1024:.1f} |")


if __name__ == "__main__":
    main()
