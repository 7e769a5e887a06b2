#!/usr/bin/env python3
"""What each wire protocol costs: the same server and payload over gRPC, gRPC-Web (binary
and text) and Connect (unary; binary codec, or JSON with --codec json), side by side.

Servers: lab (`grpclab serve --impl lab --grpc-web`: gRPC and binary gRPC-Web, unary, over
HTTP/2 on its own engine), grpcwebproxy in front of lab (peers/grpcwebproxy: gRPC-Web over
HTTP/1.1 to the proxy, gRPC on to lab; both on CPU 0, the proxy with GOMAXPROCS=1, server CPU
the two together), tonic-mt with tonic-web's layer (`grpclab serve --impl tonic-mt
--grpc-web`: gRPC, gRPC-Web, gRPC-Web text) and the connect-go peer (peers/connect_go: gRPC, gRPC-Web, Connect
from one handler; GOMAXPROCS=1). Each window: a fresh server on CPU 0, `grpclab load
--transport h2 --protocol P` on CPU 1 (closed loop, --connections x -c streams, the scenario's
payload), so only the protocol differs between the rows of one server. Server CPU =
utime+stime over the measured window / calls completed in it; client CPU the same for the
load. Rounds alternate the protocols; medians of --rounds.

connect-go's rows include Connect's GET (`--connect-get`: the message in the URL's query),
over HTTP/2 and HTTP/1.1.

With --feed N the calls are server streams instead: the streaming echo's Feed, N replies of
100 bytes to each request (gRPC-Web's trailer frame, Connect's end-stream message; over
HTTP/1.1 a stream holds its connection to its end), and CPU is per reply message.

With --upload N or --pingpong N the calls stream their requests: the echo's Upload (N
requests of 100 bytes, one reply) or PingPong (N round trips), in gRPC and Connect only
(gRPC-Web has no request streams), over HTTP/2; CPU is per request message.

Usage: benches/protocols.py [--rounds 3] [--duration 6] [--warmup 2] [--scenario complex_proto]
                            [--feed N | --upload N | --pingpong N]
                            [--servers lab,grpcwebproxy,tonic-mt,connect-go] [--codec json]

With --codec json every call is protobuf's JSON mapping (application/grpc+json,
grpc-web+json, application/json; connect+json on a stream): connect-go's rows only, since
lab, tonic and grpcwebproxy serve the binary codec alone.
Needs Go and protoc for the connect-go peer and grpcwebproxy (bash peers/install.sh go).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from common import (BIN, ROOT, build, cpu_seconds, free_port, median, run_client, start_server,
                    stop_server, wait_listening)

# Each server's rows: (protocol, HTTP/1.1). Over HTTP/1.1 each connection carries one call at
# a time, so those rows open as many connections as the others have streams (the same calls
# in flight).
SERVERS = {
    "lab": [("grpc", False), ("grpc-web", False)],
    "grpcwebproxy + lab": [("grpc-web", True), ("grpc-web-text", True)],
    "tonic-mt + tonic-web": [("grpc", False), ("grpc-web", False), ("grpc-web-text", False),
                             ("grpc-web", True)],
    "connect-go": [("grpc", False), ("grpc-web", False), ("connect", False),
                   ("connect-get", False), ("grpc-web", True), ("connect", True),
                   ("connect-get", True)],
}
# Connect's GET: the protocol connect with --connect-get (unary calls only).
GET = "connect-get"
# A server without gRPC rows of its own is compared with its backend's gRPC.
BASELINE = {"grpcwebproxy + lab": "lab"}


def build_connect_go(scenario, folder):
    """Builds the connect-go peer for `scenario` into `folder`; returns its server binary."""
    subprocess.run(["./build.sh", os.path.join(ROOT, "scenarios", scenario), folder],
                   cwd=os.path.join(ROOT, "peers", "connect_go"), check=True,
                   capture_output=True)
    return os.path.join(folder, "server")


def build_grpcwebproxy(folder):
    """Builds grpcwebproxy into `folder`; returns its binary."""
    subprocess.run(["./build.sh", folder], cwd=os.path.join(ROOT, "peers", "grpcwebproxy"),
                   check=True, capture_output=True)
    return os.path.join(folder, "bin", "grpcwebproxy")


def start(name, builds):
    """Starts one server on CPU 0 (a proxy beside its backend); returns ([processes], target)."""
    if name == "lab":
        server, target = start_server(["--impl", "lab", "--grpc-web"])
        return [server], target
    if name == "grpcwebproxy + lab":
        lab, backend = start_server(["--impl", "lab"])
        port = free_port()
        proxy = subprocess.Popen(
            ["taskset", "-c", "0", builds["grpcwebproxy"], f"--backend_addr={backend}",
             "--run_tls_server=false", "--server_bind_address=127.0.0.1",
             f"--server_http_debug_port={port}",
             "--allow_all_origins"],
            env=dict(os.environ, GOMAXPROCS="1"), stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        wait_listening(port, proxy)
        return [proxy, lab], f"127.0.0.1:{port}"
    if name != "connect-go":
        server, target = start_server(["--impl", "tonic-mt", "--grpc-web"])
        return [server], target
    port = free_port()
    env = dict(os.environ, GOMAXPROCS="1", GRPC_SERVER_HOST="127.0.0.1")
    server = subprocess.Popen(["taskset", "-c", "0", builds["connect-go"], str(port)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_listening(port, server)
    return [server], f"127.0.0.1:{port}"


# --feed: the streaming echo's server stream, N replies of 100 bytes each.
FEED_CALL = ["--proto", os.path.join(ROOT, "scenarios", "streaming", "streaming.proto"),
             "--call", "grpclab.streaming.v1.StreamingEcho.Feed"]
PAYLOAD_100B = "eHh4" * 33 + "eA=="  # 100 bytes of "x", base64


def call_of(args):
    """What each call sends: the scenario, or the echo's Feed, Upload or PingPong."""
    echo = ["--proto", FEED_CALL[1], "--call"]
    if args.feed:
        return FEED_CALL + ["-d", json.dumps({"count": args.feed, "payload": PAYLOAD_100B})]
    if args.upload or args.pingpong:
        method = "Upload" if args.upload else "PingPong"
        return echo + [f"grpclab.streaming.v1.StreamingEcho.{method}", "-d",
                       json.dumps({"payload": PAYLOAD_100B}), "--stream-call-count",
                       str(args.upload or args.pingpong)]
    return ["--scenario", args.scenario]


def window(name, row, builds, args):
    protocol, http1 = row
    servers, target = start(name, builds)
    call = call_of(args)
    try:
        marks = {}
        argv = ["taskset", "-c", "1", BIN, "load", target, "-O", "json", "--insecure",
                "--no-history"] + call + ["--transport", "h2",
                "--protocol", "connect" if protocol == GET else protocol,
                "--codec", args.codec, "-c", str(args.streams),
                "--connections",
                str(args.streams if http1 else args.connections), "-z", f"{args.duration}s",
                "--warmup", f"{args.warmup}s", "--cpus", "1"] + (["--http1"] if http1 else []) \
            + (["--connect-get"] if protocol == GET else [])
        def server_cpu_now():
            return sum(cpu_seconds(server.pid) for server in servers)
        stdout, client_cpu, _ = run_client(argv, args.warmup,
                                           lambda: marks.update(cpu=server_cpu_now()))
        server_cpu = server_cpu_now() - marks["cpu"]
    finally:
        for server in servers:
            stop_server(server)
    report = json.loads(stdout)
    ok = report["statusCodeDistribution"].get("OK", 0)
    if ok != report["count"]:
        sys.exit(f"{name} {protocol}: {report['count'] - ok} calls failed: {report.get('errorDistribution')}")
    # Per call, per reply message of a feed, or per request message of a request stream.
    if args.feed:
        units = report.get("messagesReceived", ok)
    elif args.upload or args.pingpong:
        units = report.get("messagesSent", ok)
    else:
        units = ok
    units = max(units, 1)
    return {"rps": report["measuredRps"], "server_us": server_cpu * 1e6 / units,
            "client_us": client_cpu * 1e6 / units}


def label(row):
    protocol, http1 = row
    protocol = "connect GET" if protocol == GET else protocol
    return f"{protocol} (HTTP/1.1)" if http1 else protocol


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=6)
    parser.add_argument("--warmup", type=float, default=2)
    parser.add_argument("--scenario", default="complex_proto")
    parser.add_argument("--streams", type=int, default=50)
    parser.add_argument("--connections", type=int, default=2)
    parser.add_argument("--feed", type=int, default=0,
                        help="server streams of N replies instead of unary calls")
    parser.add_argument("--upload", type=int, default=0,
                        help="client streams of N requests (Upload) instead of unary calls")
    parser.add_argument("--pingpong", type=int, default=0,
                        help="bidi streams of N round trips (PingPong) instead of unary calls")
    parser.add_argument("--servers", default="lab,grpcwebproxy,tonic-mt,connect-go",
                        help="which servers' rows, comma-separated")
    parser.add_argument("--codec", choices=["proto", "json"], default="proto")
    args = parser.parse_args()
    wanted = set(args.servers.split(","))
    if args.codec == "json":
        if wanted - {"connect-go"} and args.servers != parser.get_default("servers"):
            sys.exit("--codec json: only connect-go serves JSON; give --servers connect-go")
        wanted = {"connect-go"}
    unknown = wanted - {name.split(" ")[0] for name in SERVERS}
    if unknown:
        sys.exit(f"--servers: unknown {', '.join(sorted(unknown))}; "
                 "the servers are lab, grpcwebproxy, tonic-mt and connect-go")
    if sum(1 for mode in (args.feed, args.upload, args.pingpong) if mode) > 1:
        sys.exit("give one of --feed, --upload and --pingpong")
    requests = bool(args.upload or args.pingpong)
    unit = "reply" if args.feed else "request" if requests else "call"
    build()
    with tempfile.TemporaryDirectory() as folder:
        builds = {}
        if "connect-go" in wanted:
            builds["connect-go"] = build_connect_go(args.scenario, folder)
        if "grpcwebproxy" in wanted:
            builds["grpcwebproxy"] = build_grpcwebproxy(os.path.join(folder, "grpcwebproxy"))
        # GET is for unary calls; lab serves gRPC-Web's unary calls only.
        # Request streams: gRPC and Connect over HTTP/2 (gRPC-Web has none).
        rows = {(name, row): [] for name, server_rows in SERVERS.items() for row in server_rows
                if name.split(" ")[0] in wanted and not (args.feed and row[0] == GET)
                and not (args.feed and name == "lab" and row[0] != "grpc")
                and not (requests and (row[1] or row[0] not in ("grpc", "connect")))}
        for round_ in range(args.rounds):
            for (name, row), results in rows.items():
                results.append(window(name, row, builds, args))
                r = results[-1]
                print(f"round {round_ + 1}: {name} {label(row)}: {r['rps']:.0f} req/s, "
                      f"server {r['server_us']:.2f} µs/{unit}, client {r['client_us']:.2f} "
                      f"µs/{unit}", file=sys.stderr)
    if args.feed:
        what = f"server streams of {args.feed} x 100 B replies (Feed)"
    elif args.upload:
        what = f"client streams of {args.upload} x 100 B requests (Upload)"
    elif args.pingpong:
        what = f"bidi streams of {args.pingpong} x 100 B round trips (PingPong)"
    else:
        what = args.scenario
    what += ", JSON codec" if args.codec == "json" else ""
    http1 = (f" ({args.streams} HTTP/1.1 connections)"
             if any(row[1] for (_, row) in rows) else "")
    print(f"\n{what}, {args.streams} streams on {args.connections} HTTP/2 connections"
          f"{http1}, closed loop, server CPU 0 (1 thread), "
          f"grpclab load --transport h2 on CPU 1; medians of {args.rounds} rounds (range)\n")
    print(f"| server | protocol | calls/s | server µs/{unit} | client µs/{unit} | server vs its gRPC |")
    print("|---|---|---:|---:|---:|---:|")
    for (name, row), results in rows.items():
        def stat(key):
            values = [r[key] for r in results]
            return median(values), min(values), max(values)
        rps, server, client = stat("rps"), stat("server_us"), stat("client_us")
        base_rows = rows.get((BASELINE.get(name, name), ("grpc", False)))
        base = median([r["server_us"] for r in base_rows]) if base_rows else server[0]
        print(f"| {name} | {label(row)} | {rps[0]:,.0f} ({rps[1]:,.0f}-{rps[2]:,.0f}) | "
              f"{server[0]:.2f} ({server[1]:.2f}-{server[2]:.2f}) | "
              f"{client[0]:.2f} ({client[1]:.2f}-{client[2]:.2f}) | {server[0] / base:.2f}x |")


if __name__ == "__main__":
    main()
