#!/usr/bin/env python3
"""Client A/B on server streaming: two `grpclab` binaries as load clients of the built-in
`server_stream_1kB` scenario (100 replies of 1 kB per call) against the same lab server, side
by side, for a change to the client's streaming receive path.

The server is `grpclab serve --impl lab --threads 1` from the newer binary (B), pinned to CPU 0;
the clients take turns on CPU 1, closed loop, 4 connections x 64 streams, rounds interleaved
(A B A B ...). Client CPU per received message = utime+stime over the measured window (after the
warmup) / messages received in that window. The table shows each round, the medians, and B/A.

With --stamp-b, side B also asks the server to stamp every reply and reads each one's stamp
(`"stamp": true` in the request, `--stream-stamp sent_unix_nanos`): give the same binary twice
for what reading stamps costs the client. With --rps N both sides run an open loop of N calls/s
(the same offered load, so a server slowed by stamping does not change the client's batching).

With --transport h2 both clients run on the h2 crate's transport (the reference) instead of
grpclab's engine.

Usage: benches/stream_client_ab.py OLD_BINARY [NEW_BINARY] [--rounds 5] [--duration 8] [--warmup 2] [--stamp-b] [--rps N]
                                   [--transport engine|h2]
"""
import argparse
import json
import os
import statistics

from common import BIN, build, run_client, start_server, stop_server


def stamped_payload():
    """The scenario's own request with `"stamp": true` added."""
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "scenarios", "server_stream_1kB", "payload")) as f:
        request = json.load(f)
    request["stamp"] = True
    return json.dumps(request)


def round_of(binary, target, args, stamp=False):
    argv = ["taskset", "-c", "1", binary, "load", target, "--insecure", "--scenario", "server_stream_1kB",
            "-c", "64", "--connections", "4", "-z", f"{args.duration}s", "--warmup", f"{args.warmup}s",
            "--cpus", "1", "--no-history", "-O", "json"]
    if stamp:
        argv += ["-d", stamped_payload(), "--stream-stamp", "sent_unix_nanos"]
    if args.rps:
        argv += ["--rps", str(args.rps)]
    argv += ["--transport", args.transport]
    stdout, cpu, _ = run_client(argv, args.warmup)
    report = json.loads(stdout)
    received = max(report.get("messagesReceived", 0), 1)
    return {"msgs_per_s": received / (report["measuredWindow"] / 1e9), "us_per_msg": 1e6 * cpu / received}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old")
    parser.add_argument("new", nargs="?", default=BIN)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--stamp-b", action="store_true", help="side B reads every reply's stamp")
    parser.add_argument("--rps", type=int, default=0, help="open loop at this many calls/s (0: closed loop)")
    parser.add_argument("--transport", choices=["engine", "h2"], default="engine",
                        help="the clients' transport")
    args = parser.parse_args()
    if args.new == BIN:
        build()
    server, target = start_server(["--impl", "lab"])
    rows = {"A": [], "B": []}
    try:
        for r in range(args.rounds):
            for side, binary in (("A", args.old), ("B", args.new)):
                row = round_of(binary, target, args, stamp=args.stamp_b and side == "B")
                rows[side].append(row)
                print(f"round {r + 1} {side}: {row['msgs_per_s']:>10.0f} msgs/s  {row['us_per_msg']:6.3f} µs/msg", flush=True)
    finally:
        stop_server(server)
    med = {side: {k: statistics.median(r[k] for r in rows[side]) for k in ("msgs_per_s", "us_per_msg")} for side in rows}
    print()
    print("| client | msgs/s received (median) | client CPU µs per received message (median) |")
    print("|---|---:|---:|")
    for side, binary in (("A", args.old), ("B", args.new)):
        label = f"{binary} (stamped)" if args.stamp_b and side == "B" else binary
        print(f"| {side}: {label} | {med[side]['msgs_per_s']:.0f} | {med[side]['us_per_msg']:.3f} |")
    print()
    print(f"B/A client CPU per message (medians): {med['B']['us_per_msg'] / med['A']['us_per_msg']:.3f}; "
          f"B/A msgs/s: {med['B']['msgs_per_s'] / med['A']['msgs_per_s']:.3f}")


if __name__ == "__main__":
    main()
