#!/usr/bin/env python3
"""Streaming bars (issue 17): lab against tonic-mt on bidi ping-pong, and our client engine
against the h2 crate's transport, side by side in one run.

Every window is a fresh server with one thread pinned to CPU 0 (`grpclab serve --threads 1`)
and `grpclab load` (one thread) pinned to CPU 1, driving the built-in `streaming_ping_pong`
scenario (10 round trips of 100 B per call, strict ping-pong) over --connections x -c streams.
Three loads:
  - servers at saturation: closed loop with our engine as the client; msgs/s each server
    serves at the same concurrency, and its CPU per message;
  - servers at equal offered rates: open loop at each of --rates calls/s (10 messages each),
    which both serve; server CPU per message;
  - clients against lab: our engine (`--transport lab`) and the h2 crate (`--transport h2`),
    closed loop; the client's CPU per message it sent.
Server CPU per message = Δ(utime+stime) of the server after the warmup / Δ messages its admin
counters report served (both servers count one per ping-pong message). Client CPU per message
= the client's CPU after the warmup / messages it sent in the measured window. Rounds alternate
the sides so drift hits both; tables show medians; ratios are per round, then the median.

Usage: benches/streaming_bars.py [--rounds 5] [--duration 8] [--warmup 2] [--rates 4000,16000]
       [--concurrency 64] [--connections 4]
"""
import argparse

from common import build, measure_server, median

SCENARIO = ["--scenario", "streaming_ping_pong"]


def row_of(measured, duration):
    report = measured["report"]
    sent = report.get("messagesSent", 0)
    received = report.get("messagesReceived", 0)
    round_trip = report.get("roundTrip") or {}
    return {
        "msgs": received / duration,
        "calls": measured["rps"],
        "server_us": measured["server_cpu_s"] * 1e6 / max(measured["served"], 1),
        "server_cpu_pct": measured["server_cpu_pct"],
        "client_us": measured["client_cpu_s"] * 1e6 / max(sent, 1),
        "rt_avg_us": round_trip.get("average", 0) / 1e3,
        "errors": measured["errors"],
    }


COLUMNS = [("msgs", "msgs/s (round trips)", "{:.0f}"), ("calls", "calls/s", "{:.0f}"),
           ("server_us", "server CPU µs/msg", "{:.3f}"), ("server_cpu_pct", "server CPU %", "{:.0f}"),
           ("client_us", "client CPU µs/msg", "{:.3f}"), ("rt_avg_us", "round trip avg µs", "{:.0f}"),
           ("errors", "errors", "{:.0f}")]


def table(title, results, names):
    print()
    print(f"### {title}")
    print()
    print("| side | " + " | ".join(t for _, t, _ in COLUMNS) + " |")
    print("|---|" + "---:|" * len(COLUMNS))
    for name in names:
        rows = results[name]
        print(f"| {name} | " + " | ".join(fmt.format(median([r[k] for r in rows])) for k, _, fmt in COLUMNS) + " |")


def ratio(results, a, b, key):
    return median([x[key] / y[key] for x, y in zip(results[a], results[b]) if y[key]])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--rates", default="4000,16000",
                        help="calls/s of the equal-rate loads, comma-separated (10 messages per call)")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--connections", type=int, default=4)
    args = parser.parse_args()
    build()
    servers = {"tonic-mt": ["--impl", "tonic-mt"], "lab": ["--impl", "lab"]}
    clients = {"client lab engine": ["--transport", "lab"], "client h2 crate": ["--transport", "h2"]}
    rates = [int(rate) for rate in args.rates.split(",") if rate]
    saturation = {name: [] for name in servers}
    equal_rate = {rate: {name: [] for name in servers} for rate in rates}
    client_rows = {name: [] for name in clients}

    def window(impl_args, load_args):
        measured = measure_server(impl_args, SCENARIO + load_args, args.duration, args.warmup,
                                  concurrency=args.concurrency, connections=args.connections)
        return row_of(measured, args.duration)

    for round_no in range(1, args.rounds + 1):
        for name, impl_args in servers.items():
            row = window(impl_args, [])
            saturation[name].append(row)
            print(f"round {round_no} saturation {name:9} {row['msgs']:>9.0f} msgs/s  server "
                  f"{row['server_us']:.3f} µs/msg ({row['server_cpu_pct']:.0f}% CPU)  errors {row['errors']}",
                  flush=True)
        for rate in rates:
            for name, impl_args in servers.items():
                row = window(impl_args, ["--rps", str(rate)])
                equal_rate[rate][name].append(row)
                print(f"round {round_no} {rate} calls/s {name:9} {row['msgs']:>9.0f} msgs/s  server "
                      f"{row['server_us']:.3f} µs/msg ({row['server_cpu_pct']:.0f}% CPU)  errors {row['errors']}",
                      flush=True)
        for name, load_args in clients.items():
            row = window(servers["lab"], load_args)
            client_rows[name].append(row)
            print(f"round {round_no} {name:18} {row['msgs']:>9.0f} msgs/s  client "
                  f"{row['client_us']:.3f} µs/msg  errors {row['errors']}", flush=True)

    print()
    print(f"streaming_ping_pong (10 round trips of 100 B per call), {args.connections} connections x "
          f"{args.concurrency} streams, {args.duration}s after {args.warmup}s warmup, server (1 thread) on "
          f"CPU 0, grpclab load (1 thread) on CPU 1; medians of {args.rounds} rounds")
    table("servers at saturation (client: our engine)", saturation, servers)
    for rate in rates:
        table(f"servers at {rate} calls/s = {rate * 10} msgs/s offered (client: our engine)",
              equal_rate[rate], servers)
    table("clients against lab at saturation", client_rows, clients)
    print()
    print(f"lab / tonic-mt msgs/s at saturation: {ratio(saturation, 'lab', 'tonic-mt', 'msgs'):.2f}x (bar >= 5)")
    for rate in rates:
        print(f"lab / tonic-mt server CPU per message at {rate * 10} msgs/s offered: "
              f"{ratio(equal_rate[rate], 'lab', 'tonic-mt', 'server_us'):.3f} (bar <= 0.333)")
    print(f"our engine / h2 crate client CPU per message against lab: "
          f"{ratio(client_rows, 'client lab engine', 'client h2 crate', 'client_us'):.3f} (bar <= 0.5)")


if __name__ == "__main__":
    main()
