#!/usr/bin/env python3
"""lab's distance to the physical limit: lab beside a raw-TCP floor of the same wire sizes, one run.

The floor (benches/floor/floor.c, built here with cc -O2) is one epoll thread answering
fixed-size requests with fixed-size replies, one write per read: what a request costs a server
when only the kernel's TCP path is left. Its sizes are lab's bytes on the wire per call,
measured in this run from the lab server's sockets (the kernel's bytes received and sent
per call served, `ss -ti`), so the two servers move the same bytes.

Two loads, each server alone on CPU 0 with its client on CPU 1:
  - saturation: closed loop, 50 connections x 20 requests in flight (grpclab load: -c 1000
    (other closed shapes with --closed, e.g. 1000x1,100x1,1x1: one call in flight per connection)
    --connections 50; the floor's client: 20 per connection);
  - low load: open loop at each of --rates req/s over 4 connections, with two arrival
    patterns: x1, single requests evenly paced (grpclab load -c 4: one stream per connection,
    so one call per write; the floor's client paced by a timerfd), and x16, 16 consecutive
    requests per write on one connection (grpclab load -c 64: a connection takes as many
    consecutive calls as it has free streams and sends those due together; the floor's
    client the same). A server's CPU per request at low load is mostly wake-ups, so the
    arrival pattern decides it; each pattern is compared with itself.
Per window (after the warmup): server CPU µs per request = Δ(the scheduler's exact runtime of
every thread, /proc/PID/task/*/schedstat) / requests served (lab: its admin counters; the
floor: replies its client received). Not utime+stime: this kernel samples those at its 250 Hz
tick, which is biased when the work is paced by timers aligned with that tick. Rounds alternate the two;
the table shows medians and lab / floor.

Beside the CPU, per request and over the same window: the server's system calls (perf stat's
raw_syscalls:sys_enter tracepoint on the server's threads; n/a without perf) and its context
switches, voluntary and involuntary (/proc/PID/task/*/status): where lab's distance to the floor
is the kernel's and where it is its own.

A third load, streaming: lab answering streaming_ping_pong messages at --ping-pong-rate
messages/s (4 connections x 64 streams, 10 round trips per call), beside the floor answering
single requests evenly paced at the same rate with lab's bytes per message.

Usage: benches/floor.py [--rounds 3] [--duration 8] [--warmup 2] [--rates 30000,40000]
       [--ping-pong-rate 40000]
       [--scenario complex_proto] [--lab-args ""] [--uring]
"""
import argparse
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time

from common import (BIN, ROOT, build, median, run_client, server_stats, start_server, stop_server,
                    tcp_counters)

FLOOR_SOURCE = os.path.join(ROOT, "benches", "floor", "floor.c")
URING_FLOOR_SOURCE = os.path.join(ROOT, "benches", "floor", "floor_uring.c")


def build_floor():
    """Compiles the floor into a temporary directory; returns the binary's path."""
    out = os.path.join(tempfile.mkdtemp(prefix="grpclab-floor-"), "floor")
    subprocess.run(["cc", "-O2", "-o", out, FLOOR_SOURCE], check=True)
    return out


def build_uring_floor():
    """Compiles the io_uring floor's server; one line and exit 2 when liburing is missing."""
    out = os.path.join(tempfile.mkdtemp(prefix="grpclab-floor-uring-"), "floor_uring")
    built = subprocess.run(["cc", "-O2", "-o", out, URING_FLOOR_SOURCE, "-luring"],
                           capture_output=True, text=True)
    if built.returncode != 0:
        print("--uring: benches/floor/floor_uring.c did not build (it needs liburing: "
              "apt-get install liburing-dev): " + built.stderr.strip().splitlines()[-1],
              file=sys.stderr)
        sys.exit(2)
    return out


def cpu_seconds(pid):
    """CPU time of every thread of a live process, exact: the scheduler's runtime in ns."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:
            pass  # a thread that ended meanwhile
    return total / 1e9


def context_switches(pid):
    """Voluntary + involuntary context switches of every thread of a live process so far."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/status") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        total += int(line.split()[1])
        except FileNotFoundError:
            pass  # a thread that ended meanwhile
    return total


class SyscallCount:
    """Counts a live process's system calls (every thread it has when started) from `start()` to
    `stop()`, with perf's raw_syscalls:sys_enter tracepoint; also its context switches over
    the same span. Without perf (or the permission), both stay None and the table says n/a."""

    def __init__(self, pid):
        self.pid = pid
        self.perf = None
        self.out = tempfile.NamedTemporaryFile(suffix=".perf", delete=False).name
        self.switches = None
        self.syscalls = None

    def start(self):
        self.switches = -context_switches(self.pid)
        try:
            self.perf = subprocess.Popen(["perf", "stat", "-x", ",", "-o", self.out, "-e",
                                          "raw_syscalls:sys_enter", "-p", str(self.pid)],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except FileNotFoundError:
            self.perf = None

    def stop(self):
        self.switches += context_switches(self.pid)
        if self.perf is None:
            return
        self.perf.send_signal(signal.SIGINT)
        self.perf.wait()
        with open(self.out) as f:
            for line in f:
                fields = line.split(",")
                if len(fields) >= 3 and fields[2] == "raw_syscalls:sys_enter" and fields[0].isdigit():
                    self.syscalls = int(fields[0])
        os.unlink(self.out)


def per_call(count, calls):
    return None if count is None else count / calls


def socket_bytes(target):
    """(bytes received, bytes sent) over the server's established TCP connections on `target`'s
    port, from the kernel's per-socket counters (`ss -ti`)."""
    received, sent = tcp_counters(target.rsplit(":", 1)[1], ["bytes_received", "bytes_sent"])
    return received, sent


def lab_load_args(mode, rate, batch):
    if mode == "saturation":
        # Closed loop: `batch` is (connections, calls in flight on each).
        connections, in_flight = batch
        return ["-c", str(connections * in_flight), "--connections", str(connections)]
    if mode == "ping-pong":
        # streaming_ping_pong: 10 round trips per call, so calls at a tenth of the message
        # rate; 64 streams on each of 4 connections (benches/streaming_bars.py's shape).
        return ["--scenario", "streaming_ping_pong", "--rps", str(rate // 10), "-c", "256",
                "--connections", "4"]
    # A connection takes as many consecutive calls as it has free streams and sends those due
    # together: `batch` streams per connection make batches of up to `batch` calls.
    return ["--rps", str(rate), "-c", str(4 * batch), "--connections", "4"]


def measure_lab(lab_args, mode, rate, scenario, duration, warmup, batch=16):
    """One window of lab (1 thread, CPU 0) under grpclab load (CPU 1)."""
    server, target = start_server(["--impl", "lab"] + lab_args)
    counter = SyscallCount(server.pid)
    try:
        marks = {}

        def at_warmup_end():
            counter.start()
            marks["cpu"] = cpu_seconds(server.pid)
            marks["io"] = socket_bytes(target)
            marks["calls"] = server_stats(target)["calls"]

        argv = ["taskset", "-c", "1", BIN, "load", target, "--insecure", "-z", f"{duration}s",
                "--warmup", f"{warmup}s", "--cpus", "1", "-O", "json"]
        load_args = lab_load_args(mode, rate, batch)
        if "--scenario" not in load_args:
            load_args = ["--scenario", scenario] + load_args
        argv += load_args
        marks_end = {}
        # The connections close when the client ends: read their counters just before.
        timer = threading.Timer(warmup + duration - 0.3, lambda: marks_end.update(io=socket_bytes(target)))
        timer.start()
        run_client(argv, warmup, at_warmup_end)
        counter.stop()
        timer.join()
        read, written = marks_end["io"]
        # The counters cover 0.3 s less than the window: scale the calls to the same span.
        span = (duration - 0.3) / duration
        cpu = cpu_seconds(server.pid) - marks["cpu"]
        # The admin RPC that reads the counters is one call and a few hundred bytes: noise.
        calls = server_stats(target)["calls"] - marks["calls"]
    finally:
        stop_server(server)
    calls = max(calls, 1)
    return {
        "rps": calls / duration,
        "server_us": cpu * 1e6 / calls,
        "request_bytes": (read - marks["io"][0]) / (calls * span),
        "reply_bytes": (written - marks["io"][1]) / (calls * span),
        "syscalls": per_call(counter.syscalls, calls),
        "switches": per_call(counter.switches, calls),
    }


def measure_floor(floor, sizes, mode, rate, duration, warmup, batch=1, server_binary=None):
    """One window of the floor server (CPU 0; `server_binary`'s when given, the epoll one's
    otherwise) under the epoll floor's client (CPU 1)."""
    request, reply = (str(round(size)) for size in sizes)
    port = str(20000 + os.getpid() % 12000)
    server = subprocess.Popen(["taskset", "-c", "0", server_binary or floor, "server", port,
                               request, reply])
    try:
        time.sleep(0.3)
        if server.poll() is not None:
            sys.exit(f"the floor server did not start (port {port})")
        marks = {}
        counter = SyscallCount(server.pid)
        if mode == "saturation":
            connections, in_flight = batch
            shape = [str(connections), str(in_flight), str(warmup), str(duration)]
        else:
            shape = ["4", "1", str(warmup), str(duration), str(rate), str(batch)]
        argv = ["taskset", "-c", "1", floor, "client", port, request, reply] + shape
        def at_warmup_end():
            counter.start()
            marks["cpu"] = cpu_seconds(server.pid)

        stdout, _, _ = run_client(argv, warmup, at_warmup_end)
        cpu = cpu_seconds(server.pid) - marks["cpu"]
        counter.stop()
    finally:
        server.kill()
        server.wait()
    words = stdout.split()
    replies, seconds = int(words[1]), float(words[3])
    replies = max(replies, 1)
    return {"rps": replies / seconds, "server_us": cpu * 1e6 / replies,
            "syscalls": per_call(counter.syscalls, replies),
            "switches": per_call(counter.switches, replies)}


def arrivals(rate, batch):
    """A cell's arrival pattern: closed loop (its shape) or x<requests per write>."""
    return f"closed {batch[0]}x{batch[1]}" if rate is None else f"x{batch}"


def paired(a, b):
    """The cells two servers' rounds share in a table: a / b's CPU per request (median and the
    rounds' range), then their syscalls and context switches per request, a / b."""
    ratios = sorted(x["server_us"] / y["server_us"] for x, y in zip(a, b))
    return (f"{median(ratios):.2f}x (rounds {ratios[0]:.2f}-{ratios[-1]:.2f}) | "
            f"{fmt(median_of(a, 'syscalls'))} / {fmt(median_of(b, 'syscalls'))} | "
            f"{fmt(median_of(a, 'switches'))} / {fmt(median_of(b, 'switches'))}")


def fmt(value):
    return "n/a" if value is None else f"{value:.3f}"


def median_of(results, key):
    """The median of a per-call count over rounds; None when a round could not count it."""
    values = [r[key] for r in results]
    return None if any(v is None for v in values) else median(values)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--rates", default="30000,40000", help="low-load rates, comma-separated")
    parser.add_argument("--scenario", default="complex_proto")
    parser.add_argument("--lab-args", default="", help="extra `serve --impl lab` flags")
    parser.add_argument("--ping-pong-rate", type=int, default=40000,
                        help="streaming ping-pong messages/s beside the floor at that rate (0: skip)")
    parser.add_argument("--closed", default="50x20",
                        help="closed-loop shapes CONNECTIONSxIN_FLIGHT, comma-separated (50x20 is "
                             "the saturation row; 1000x1,100x1,1x1 are the low-batching shapes)")
    parser.add_argument("--uring", action="store_true",
                        help="also the io_uring floor (benches/floor/floor_uring.c, needs liburing)")
    args = parser.parse_args()
    if args.ping_pong_rate < 0 or 0 < args.ping_pong_rate < 10:
        sys.exit(f"--ping-pong-rate {args.ping_pong_rate}: give messages per second, at least 10 "
                 "(10 round trips per call), or 0 to skip the streaming row")
    build()
    floor = build_floor()
    uring = build_uring_floor() if args.uring else None
    lab_args = shlex.split(args.lab_args)
    # (load label, arrival pattern): saturation is closed loop; each rate runs with single
    # requests (batch 1) and with grpclab load's default pattern here (16 per write).
    cells = []
    for shape in args.closed.split(","):
        try:
            connections, in_flight = (int(n) for n in shape.split("x"))
            assert connections > 0 and in_flight > 0
        except (ValueError, AssertionError):
            print(f"--closed {shape}: give CONNECTIONSxIN_FLIGHT, e.g. 50x20", file=sys.stderr)
            sys.exit(2)
        label = "saturation" if shape == "50x20" else "closed loop"
        cells.append((label, None, (connections, in_flight)))
    for rate in filter(None, args.rates.split(",")):  # --rates "": no open-loop rows
        cells += [(f"{int(rate)} req/s", int(rate), 1), (f"{int(rate)} req/s", int(rate), 16)]
    if args.ping_pong_rate:
        # Each ping-pong message against the floor's single requests at the same rate, with
        # lab's bytes per message (its HEADERS amortised over the call's 10 messages).
        cells.append((f"{args.ping_pong_rate} msgs/s ping-pong", args.ping_pong_rate, 1))
    results = {}
    for round_number in range(1, args.rounds + 1):
        for label, rate, batch in cells:
            mode = ("saturation" if rate is None
                    else "ping-pong" if label.endswith("ping-pong") else "open loop")
            lab = measure_lab(lab_args, mode, rate, args.scenario, args.duration, args.warmup, batch)
            sizes = (lab["request_bytes"], lab["reply_bytes"])
            floor_mode = "open loop" if mode == "ping-pong" else mode
            floor_result = measure_floor(floor, sizes, floor_mode, rate, args.duration, args.warmup,
                                         batch)
            measured = [("lab", lab), ("floor", floor_result)]
            if uring:
                measured.append(("uring", measure_floor(floor, sizes, floor_mode, rate, args.duration,
                                                        args.warmup, batch, server_binary=uring)))
            for name, result in measured:
                results.setdefault((label, batch, name), []).append(result)
                print(f"round {round_number} {label:>14} {arrivals(rate, batch):<6} {name:<5} {result['rps']:>9.0f} req/s "
                      f"server {result['server_us']:6.2f} µs/req  {fmt(result['syscalls'])} syscalls, "
                      f"{fmt(result['switches'])} context switches per req"
                      + (f"  wire {sizes[0]:.0f} B in / {sizes[1]:.0f} B out per call" if name == "lab" else ""),
                      flush=True)
    print()
    print(f"scenario {args.scenario}; lab {' '.join(lab_args) or '(defaults)'}; medians of {args.rounds} rounds")
    print("server CPU from the scheduler's exact runtime (/proc/PID/task/*/schedstat)")
    print("arrivals: closed CxN = C connections x N in flight (saturation: 50x20); x1 = single requests evenly paced over")
    print("4 connections (lab: grpclab load -c 4); x16 = 16 consecutive requests per write on one")
    print("connection (lab: grpclab load -c 64, its pattern with 16 streams per connection);")
    print("ping-pong: lab's streaming_ping_pong messages (4 connections x 64 streams, 10 round trips")
    print("per call) against the floor's single requests evenly paced at the same rate")
    print("syscalls: perf's raw_syscalls:sys_enter on the server over the window; context switches:")
    print("voluntary + involuntary, every server thread (/proc/PID/task/*/status); both per request")
    print("| load | arrivals | lab req/s | floor req/s | lab µs/req | floor µs/req | lab / floor "
          "| syscalls/req lab / floor | context switches/req lab / floor | wire B/call (in/out) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for label, rate, batch in cells:
        lab = results[(label, batch, "lab")]
        fl = results[(label, batch, "floor")]
        print(f"| {label} | {arrivals(rate, batch)} | {median([r['rps'] for r in lab]):.0f} | "
              f"{median([r['rps'] for r in fl]):.0f} | {median([r['server_us'] for r in lab]):.2f} | "
              f"{median([r['server_us'] for r in fl]):.2f} | {paired(lab, fl)} | "
              f"{median([r['request_bytes'] for r in lab]):.0f} / {median([r['reply_bytes'] for r in lab]):.0f} |")
    if uring:
        print()
        print("The io_uring floor (benches/floor/floor_uring.c: SINGLE_ISSUER | DEFER_TASKRUN, multishot")
        print("accept and receive into a provided buffer ring, a turn's sends submitted with its wait)")
        print("beside the epoll floor, the same client and sizes: what a completion-driven transport")
        print("removes of the kernel's share at each arrival pattern.")
        print("| load | arrivals | epoll floor µs/req | io_uring floor µs/req | io_uring / epoll "
              "| syscalls/req io_uring / epoll | context switches/req io_uring / epoll |")
        print("|---|---|---|---|---|---|---|")
        for label, rate, batch in cells:
            fl = results[(label, batch, "floor")]
            ur = results[(label, batch, "uring")]
            print(f"| {label} | {arrivals(rate, batch)} | {median([r['server_us'] for r in fl]):.2f} | "
                  f"{median([r['server_us'] for r in ur]):.2f} | {paired(ur, fl)} |")


if __name__ == "__main__":
    main()
