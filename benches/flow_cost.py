#!/usr/bin/env python3
"""What a flow step costs the client, in instructions per call (callgrind: a figure that does
not move with the machine's noise), against a plain call of the same method and payload.

Shapes, each run by `BIN load --cpus 1` under callgrind for N1 and N2 calls against lab
(native, CPU 0), closed loop, 4 connections x 100 streams; instructions per call =
(total(N2) - total(N1)) / calls(N2 - N1), so start-up cancels out:

  plain        --call grpclab.session.v1.Sessions.Login -d '{"user":"ann"}'
  two methods  a mix of two plain methods (the same call under two names): no flow, the
               cost of a mix's own figures per method
  step         a flow of one constant step (the same call and payload): the ticket, the run,
               the step's own figures and the flow's
  step+read    that step extracting the reply's token and checking it (reply kept, scanned)
  three steps  a flow of three constant steps (the same call): per call, a step's own cost
               with the flow's (its ticket, run and figures) shared by three calls
  a further step  derived: (3 x three steps - step) / 2, the cost of a constant step after the
               first; what a one-step flow costs beyond it is the flow's own (ticket, run, figures)
  three vars   login -> list -> get, each later step's data and metadata rendered with the
               flow's variables (per call: two extracts and two renderings)

The issue's target: a constant step within 5 % of a plain call.

Usage: benches/flow_cost.py [BIN] [--n1 20000] [--n2 60000]
Needs valgrind (Debian's valgrind package).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from common import BIN
from instructions_ab import start, stop, total_instructions

LOAD = ["--insecure", "-c", "100", "--connections", "4", "--cpus", "1", "--no-history", "-O", "json"]

LOGIN = 'call = "grpclab.session.v1.Sessions.Login"\ndata = { user = "ann" }\n'
WORKLOADS = {
    "two methods": '[[calls]]\nname = "a"\n' + LOGIN + '[[calls]]\nname = "b"\n' + LOGIN,
    "step": '[[flows]]\nname = "one"\n[[flows.steps]]\nname = "login"\n' + LOGIN,
    "step+read": '[[flows]]\nname = "one"\n[[flows.steps]]\nname = "login"\n' + LOGIN
    + 'extract = { token = "token" }\nexpect = { fields = [{ path = "token", matches = "^tok\\\\." }] }\n',
    "three steps": '[[flows]]\nname = "three"\n'
    + ''.join(f'[[flows.steps]]\nname = "login{i}"\n' + LOGIN for i in range(3)),
    "three vars": '[[flows]]\nname = "three"\n[[flows.steps]]\nname = "login"\n' + LOGIN
    + 'extract = { token = "token" }\n'
    + '[[flows.steps]]\nname = "list"\ncall = "grpclab.session.v1.Sessions.List"\n'
    + 'data = { token = "{{.vars.token}}" }\nmetadata = { authorization = "Bearer {{.vars.token}}" }\n'
    + 'extract = { sku = "items[0].sku" }\n'
    + '[[flows.steps]]\nname = "get"\ncall = "grpclab.session.v1.Sessions.Get"\n'
    + 'data = { token = "{{.vars.token}}", sku = "{{.vars.sku}}" }\n',
}


def client_total(binary, target, shape_args, n, tmp, tag):
    """Instructions of one client run of `n` tickets, and the calls it made."""
    out = os.path.join(tmp, f"{tag}.out")
    argv = ["taskset", "-c", "1", "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
            binary, "load", target, *LOAD, *shape_args, "-n", str(n)]
    done = subprocess.run(argv, check=True, capture_output=True, text=True)
    calls = json.loads(done.stdout)["count"]
    return total_instructions(out), calls


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary", nargs="?", default=BIN)
    parser.add_argument("--n1", type=int, default=20000)
    parser.add_argument("--n2", type=int, default=60000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server, target = start(["taskset", "-c", "0", args.binary, "serve", "--impl", "lab",
                                "--port", "0", "--threads", "1"])
        try:
            shapes = {"plain": ["--call", "grpclab.session.v1.Sessions.Login", "-d", '{"user":"ann"}']}
            for name, text in WORKLOADS.items():
                path = os.path.join(tmp, name.replace(" ", "_") + ".toml")
                with open(path, "w") as f:
                    f.write(text)
                shapes[name] = ["--workload", path]
            per_call = {}
            for name, shape in shapes.items():
                low, low_calls = client_total(args.binary, target, shape, args.n1, tmp, f"{name}1")
                high, high_calls = client_total(args.binary, target, shape, args.n2, tmp, f"{name}2")
                per_call[name] = (high - low) / max(1, high_calls - low_calls)
                print(f"{name:11} {per_call[name]:8.0f} instructions per call"
                      f" ({per_call[name] / per_call['plain']:.3f}x plain)", flush=True)
            # A step beyond the first: three steps' calls less the one-step flow's (its run,
            # ticket and flow figures), over the two further steps.
            if "three steps" in per_call and "step" in per_call:
                further = (3 * per_call["three steps"] - per_call["step"]) / 2
                flow = per_call["step"] - further
                print(f"{'a further step':11} {further:8.0f} instructions per call"
                      f" ({further / per_call['plain']:.3f}x plain); a flow's own cost:"
                      f" {flow:.0f} instructions per flow", flush=True)
        finally:
            stop(server)


if __name__ == "__main__":
    sys.exit(main())
