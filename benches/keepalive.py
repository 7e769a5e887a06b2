#!/usr/bin/env python3
"""CPU per keepalive PING, server and client: what holding silent connections alive costs.

N connections (default 1,000), each with one open client stream that stays silent: an Upload
call (`--scenario client_stream_1kB`) whose second message is due long after the run ends, so
only keepalive PINGs cross the wire. lab (`grpclab serve`, CPU 0) and the client (`grpclab
load`, CPU 1) in three runs:

  none    no PINGs (`serve --keepalive 0s`, no client keepalive): the base CPU of holding
          N open streams
  server  lab PINGs each connection whose client has been silent for --interval
          (`serve --keepalive`); the client answers each with a PING ACK
  client  the client PINGs each connection the server has been silent on for --interval
          (`load --keepalive`); lab answers each

Once the server holds N sockets and --settle seconds have passed, both processes' CPU time and
the TCP segments carrying data each way on the server's sockets (`ss -ti`: data_segs_out /
data_segs_in) are read, and again --window seconds later. A PING and its ACK are one segment
each way (nothing else moves on a silent stream), so

  pings/s            the PINGs sent in the window (segments from the pinging side), per second
  server µs/PING     (server CPU - the none run's server CPU) / PINGs
  client µs/PING     (client CPU - the none run's client CPU) / PINGs
  kernel %           the share of each process's CPU in the window spent in the kernel

Usage: benches/keepalive.py [--connections 1000] [--interval 50ms] [--settle 3] [--window 5]
       [--binary target/release/grpclab]
"""
import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def system_seconds(pid):
    """stime of a live process (all its threads), in seconds: the kernel's part."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[12]) / common.TICKS


def data_segments(port):
    """(segments out, segments in) carrying data, summed over the established sockets on the
    server's port."""
    sent, received = common.tcp_counters(port, ["data_segs_out", "data_segs_in"])
    return sent, received


def one(binary, mode, args):
    keepalive = args.interval if mode == "server" else "0s"
    server, target = common.start_server(
        ["--impl", "lab", "--max-connections", str(args.connections + 100), "--keepalive", keepalive],
        binary=binary)
    port = target.rsplit(":", 1)[1]
    client_args = ["taskset", "-c", "1", binary, "load", "--insecure", "--no-tui", "--no-history",
                   "--scenario", "client_stream_1kB", "--connections", str(args.connections),
                   "-c", str(args.connections), "--stream-call-count", "2",
                   "--stream-interval", "3600s", "-z", "1h", "-O", "json", target]
    if mode == "client":
        client_args += ["--keepalive", args.interval]
    client = subprocess.Popen(client_args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = common.socket_count(server.pid)
        deadline = time.time() + 60
        while common.socket_count(server.pid) - base < args.connections:
            if time.time() > deadline or client.poll() is not None:
                sys.exit(f"{mode}: the server holds {common.socket_count(server.pid) - base} of "
                         f"{args.connections} connections")
            time.sleep(0.05)
        time.sleep(args.settle)
        before = (common.cpu_seconds(server.pid), common.cpu_seconds(client.pid),
                  data_segments(port), system_seconds(server.pid), system_seconds(client.pid))
        time.sleep(args.window)
        after = (common.cpu_seconds(server.pid), common.cpu_seconds(client.pid),
                 data_segments(port), system_seconds(server.pid), system_seconds(client.pid))
        held = common.socket_count(server.pid) - base
        if held < args.connections:
            sys.exit(f"{mode}: connections were lost during the window ({held} held)")
    finally:
        client.terminate()
        client.wait()
        common.stop_server(server)
    segments_out = after[2][0] - before[2][0]
    segments_in = after[2][1] - before[2][1]
    pings = {"none": 0, "server": segments_out, "client": segments_in}[mode]
    return {
        "server_cpu": after[0] - before[0],
        "client_cpu": after[1] - before[1],
        "server_sys": after[3] - before[3],
        "client_sys": after[4] - before[4],
        "pings": pings,
        "segments": (segments_out, segments_in),
    }


def share(part, whole):
    return f"{part / whole * 100:.0f}" if whole else "–"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--interval", default="50ms")
    parser.add_argument("--settle", type=float, default=3.0)
    parser.add_argument("--window", type=float, default=5.0)
    parser.add_argument("--binary", default=common.BIN)
    args = parser.parse_args()
    runs = {mode: one(args.binary, mode, args) for mode in ("none", "server", "client")}
    base = runs["none"]
    print(f"{args.connections} connections, each one silent stream; keepalive {args.interval}; "
          f"window {args.window:.0f} s after {args.settle:.0f} s")
    print("| pinging side | pings/s | segments out/in (server) | server CPU % | client CPU % "
          "| server µs/PING | client µs/PING | kernel % server / client |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for mode, run in runs.items():
        per_ping = ["–", "–"]
        if run["pings"]:
            per_ping = [f"{(run[side] - base[side]) / run['pings'] * 1e6:.1f}"
                        for side in ("server_cpu", "client_cpu")]
        print(f"| {mode} | {run['pings'] / args.window:,.0f} | {run['segments'][0]:,} / "
              f"{run['segments'][1]:,} | {run['server_cpu'] / args.window * 100:.1f} | "
              f"{run['client_cpu'] / args.window * 100:.1f} | {per_ping[0]} | {per_ping[1]} | "
              f"{share(run['server_sys'], run['server_cpu'])} / {share(run['client_sys'], run['client_cpu'])} |")


if __name__ == "__main__":
    main()
