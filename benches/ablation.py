#!/usr/bin/env python3
"""Where lab's lead over tonic-mt comes from: one technique per step, each step a `grpclab compare`.

Steps (each a server command line for `grpclab compare`):
  0. tonic-mt                              the reference server (tonic on hyper's HTTP/2)
  1. lab --transport h2 --codec prost      lab's service on the h2 crate, decoding into prost's
                                           structs and encoding replies with prost (a typical
                                           service)
  2. lab --codec prost                     + grpclab's own HTTP/2 engine
  3. lab                                   + lab's zero-allocation view codec (the default)

For each scenario and load (saturation, and each --qps rate), every consecutive pair is one
interleaved compare (--rounds rounds, intervals at --confidence), and so is the whole path
(step 0 against the last step). The table gives each step's ratio of server CPU per call with
its interval, req/s and p99 ratios, and checks that the product of the step ratios agrees with
the end-to-end ratio. Allocations per call come from one saturated window per step (the
server's admin counters; tonic-mt reports none through them, so only lab's steps have them).

Usage: benches/ablation.py [--scenarios complex_proto,string_100B,string_10kB]
       [--qps 30000] [--rounds 3] [--duration 5] [--warmup 2] [--confidence 0.95]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

from common import BIN, build, measure_server

STEPS = [
    ("tonic-mt", "tonic-mt"),
    ("lab, h2 crate + prost", "lab --transport h2 --codec prost"),
    ("+ our HTTP/2 engine", "lab --codec prost"),
    ("+ view codec (lab)", "lab"),
]


def compare(a, b, scenario, qps, args, results_dir):
    """One interleaved compare of server command lines `a` and `b`; returns its comparison."""
    argv = [BIN, "compare", a, b, "--rounds", str(args.rounds), "--duration", f"{args.duration}s",
            "--warmup", f"{args.warmup}s", "--scenario", scenario, "--qps", str(qps),
            "--confidence", str(args.confidence), "--results-dir", results_dir, "-O", "json"]
    out = subprocess.run(argv, capture_output=True, text=True)
    if out.returncode not in (0, 3):
        sys.exit(f"compare failed ({out.returncode}): {' '.join(argv)}\n{out.stderr}")
    return json.loads(out.stdout)["comparisons"][0]


def ratio_text(comparison):
    if comparison is None:
        return "n/a"
    mark = "" if comparison["verdict"] == "no_significant_difference" else " *"
    return f"{comparison['ratio']:.3f} [{comparison['ratio_low']:.3f}, {comparison['ratio_high']:.3f}]{mark}"


def allocations(step_command, scenario, args):
    """Allocations per call of one lab step, saturated (None for tonic-mt)."""
    implementation, *extra = step_command.split()
    if implementation != "lab":
        return None
    window = measure_server(["--impl", "lab"] + extra, ["--scenario", scenario],
                            args.duration, args.warmup)
    return window["allocs"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenarios", default="complex_proto,string_100B,string_10kB")
    parser.add_argument("--qps", default="30000", help="open-loop rates besides saturation, comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--confidence", default="0.95")
    args = parser.parse_args()
    build()
    results_dir = tempfile.mkdtemp(prefix="grpclab-ablation-")
    loads = [0] + [int(rate) for rate in args.qps.split(",") if rate]
    tables = []
    for scenario in args.scenarios.split(","):
        allocs = [allocations(command, scenario, args) for _, command in STEPS]
        for qps in loads:
            load = "saturation" if qps == 0 else f"{qps} req/s"
            rows = []
            for (name_a, a), (name_b, b) in zip(STEPS, STEPS[1:]):
                rows.append((name_b, compare(a, b, scenario, qps, args, results_dir)))
                print(f"{scenario} {load}: {name_b}: cpu/call {ratio_text(rows[-1][1].get('cpu_ns_per_call'))}",
                      flush=True)
            whole = compare(STEPS[0][1], STEPS[-1][1], scenario, qps, args, results_dir)
            tables.append((scenario, load, rows, whole, allocs))
    print()
    print(f"Ratios B/A of means, [interval at {args.confidence}], * = significant; "
          f"{args.rounds} rounds of {args.duration} s after {args.warmup} s per side.")
    for scenario, load, rows, whole, allocs in tables:
        print()
        print(f"### {scenario}, {load}")
        print()
        print("| step | server CPU/call B/A | req/s B/A | p99 B/A | CPU/call of B (µs) | allocs/call of B |")
        print("|---|---|---|---|---|---|")
        product = 1.0
        for index, (name, comparison) in enumerate(rows, start=1):
            cpu = comparison.get("cpu_ns_per_call")
            if cpu is not None:
                product *= cpu["ratio"]
            b_cpu = f"{cpu['b']['mean'] / 1e3:.2f}" if cpu else "n/a"
            alloc = allocs[index]
            print(f"| {name} | {ratio_text(cpu)} | {ratio_text(comparison['rps'])} | "
                  f"{ratio_text(comparison['p99_ns'])} | {b_cpu} | "
                  f"{'n/a' if alloc is None else f'{alloc:.1f}'} |")
        cpu = whole.get("cpu_ns_per_call")
        print(f"| tonic-mt -> lab (one compare) | {ratio_text(cpu)} | {ratio_text(whole['rps'])} | "
              f"{ratio_text(whole['p99_ns'])} | {cpu['a']['mean'] / 1e3:.2f} -> {cpu['b']['mean'] / 1e3:.2f} | |"
              if cpu else f"| tonic-mt -> lab (one compare) | n/a | {ratio_text(whole['rps'])} | | | |")
        if cpu:
            inside = cpu["ratio_low"] <= product <= cpu["ratio_high"]
            print(f"| product of the steps | {product:.3f} ({'inside' if inside else 'outside'} the "
                  f"end-to-end interval) | | | | |")


if __name__ == "__main__":
    main()
