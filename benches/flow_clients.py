#!/usr/bin/env python3
"""One flow, two clients: grpclab's declarative flow against the same flow written by hand
on grpc-go (peers/go_flow_client), judged by client CPU per flow at the same work.

The flow is docs/examples/session-flow.toml's (login -> list with the token, as data and as a
bearer header -> get the first item; the list's first sku checked by a regular expression,
its count and the item's price by ranges), read from that file without its think time and
its every-10th wrong answer, so both clients run flows back to back and every flow passes. k6, the usual scripted
tool for this, is not here: its licence (AGPL) keeps it off this machine's registry list; a
grpc-go program with generated stubs is the lower bound a hand-written script can reach.

One lab server (1 thread) pinned to CPU 0; each client pinned to CPU 1, one connection,
CONCURRENCY flows in progress, FLOWS flows per run; client CPU from wait4 (utime+stime of the
whole process, start-up included: FLOWS large enough to make it small), flows/s from the
client's own clock. Rounds alternate the clients; medians and ranges are printed.

Usage: benches/flow_clients.py [--flows 60000] [--concurrency 8] [--rounds 5] [BIN]
Needs Go and protoc (`bash peers/install.sh go`); builds the Go client into a scratch folder.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from common import BIN, ROOT, start_server, stop_server

EXAMPLE = os.path.join(ROOT, "docs", "examples", "session-flow.toml")


def workload_text():
    """The guide's example without its think time and its every-10th wrong answer."""
    with open(EXAMPLE) as f:
        text = f.read()
    cut = text.replace(", fault_every = 10", "").replace('think = "1ms"\n', "")
    if cut == text or "fault_every" in cut or "think" in cut:
        sys.exit(f"{EXAMPLE} changed: update benches/flow_clients.py (and peers/go_flow_client)")
    return cut


def timed(argv):
    """Runs argv to its end; (stdout, client CPU seconds from wait4)."""
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = child.stdout.read()
    err = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{argv[2]} failed: {err.strip()}")
    return out, usage.ru_utime + usage.ru_stime


def grpclab_run(binary, target, workload, flows, concurrency):
    out, cpu = timed(["taskset", "-c", "1", binary, "load", target, "--insecure", "--cpus", "1",
                      "--no-history", "-O", "json", "-c", str(concurrency), "-n", str(flows),
                      "--workload", workload])
    report = json.loads(out)
    flow = report["mix"]["flows"][0]
    seconds = report["measuredWindow"] / 1e9 if report.get("measuredWindow") else report["total"] / 1e9
    return flow["count"], flow["passed"], seconds, cpu


def go_run(client, target, flows, concurrency):
    out, cpu = timed(["taskset", "-c", "1", client, target, str(flows), str(concurrency)])
    report = json.loads(out)
    return report["flows"], report["passed"], report["seconds"], cpu


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary", nargs="?", default=BIN)
    parser.add_argument("--flows", type=int, default=60000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["sh", os.path.join(ROOT, "peers", "go_flow_client", "build.sh"), tmp],
                       check=True, capture_output=True)
        client = os.path.join(tmp, "flow_client")
        workload = os.path.join(tmp, "flow.toml")
        with open(workload, "w") as f:
            f.write(workload_text())
        server, target = start_server(["--impl", "lab"], binary=args.binary)
        results = {"grpclab": [], "grpc-go by hand": []}
        try:
            for _ in range(args.rounds):
                for name in results:
                    if name == "grpclab":
                        run = grpclab_run(args.binary, target, workload, args.flows, args.concurrency)
                    else:
                        run = go_run(client, target, args.flows, args.concurrency)
                    count, passed, seconds, cpu = run
                    if passed != count or count != args.flows:
                        sys.exit(f"{name}: {passed} of {count} flows passed, {args.flows} asked for")
                    results[name].append((cpu / count * 1e6, count / seconds))
        finally:
            stop_server(server)
    print(f"{args.flows} flows x {args.rounds} rounds, {args.concurrency} in progress, lab server on CPU 0")
    print(f"{'client':18} {'CPU us/flow (median, range)':>30} {'flows/s (median)':>18}")
    for name, runs in results.items():
        cpu = sorted(r[0] for r in runs)
        rate = statistics.median(r[1] for r in runs)
        print(f"{name:18} {statistics.median(cpu):10.1f} ({cpu[0]:.1f}-{cpu[-1]:.1f}){'':9} {rate:18.0f}")
    ratio = statistics.median(r[0] for r in results["grpc-go by hand"]) / statistics.median(
        r[0] for r in results["grpclab"])
    print(f"grpc-go by hand spends {ratio:.2f}x grpclab's client CPU per flow")


if __name__ == "__main__":
    sys.exit(main())
