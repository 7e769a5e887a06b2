#!/usr/bin/env python3
"""The regression gate's power, measured: how often `compare --fail-if` catches a slowdown of a
known size, and how often it fails a build that did not change (a false alarm), by rounds and
confidence.

A known slowdown: lab with `serve --handler-spin T`, a busy-wait of T in every call's handler,
T a share (5 %, 10 %, 20 %) of lab's own CPU time per call, measured first (the mean of side A's
cpu/call over a calibration compare). 0 % is lab against itself.

Each trial is one `grpclab compare lab "lab --handler-spin T" --rounds MAX` (sides interleaved,
every round saved in compare.json); the gate is then judged on the first 3, 5 and 10 rounds of
that trial, at 95 %, 99 % and 99.9 %, with compare's own statistics (the ratio of means, its
log interval ±t standard errors by the delta method, Welch's degrees of freedom). The judgement
on all rounds at the run's confidence is checked against the verdict grpclab itself wrote, so
this script cannot drift from the gate it measures.

Rules: `req/s<-5%` and `cpu/call>+5%`. A trial "detects" when the rule fails.

Usage: benches/gate_power.py [--trials 8] [--rounds 10] [--duration 2s] [--warmup 1s]
                             [--spins 0,5,10,20] [--bin target/release/grpclab]
Needs scipy (PyPI: Student's t quantiles).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

from scipy.stats import norm, t as student_t

LEVELS = (0.95, 0.99, 0.999)
ROUND_COUNTS = (3, 5, 10)
# rule: (metric key in compare.json's sides, limit as a ratio, fails when above)
RULES = {
    "req/s<-5%": ("rps", 0.95, False),
    "cpu/call>+5%": ("cpu_ns_per_call", 1.05, True),
}


def mean_sd(values):
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else float("inf")
    return n, mean, sd


def interval(a, b, level):
    """compare's ratio interval of mean(b)/mean(a) (stats.rs `compare`)."""
    na, ma, sa = mean_sd(a)
    nb, mb, sb = mean_sd(b)
    ratio = mb / ma
    rel_a = sa ** 2 / (na * ma ** 2)
    rel_b = sb ** 2 / (nb * mb ** 2)
    denominator = rel_a ** 2 / (na - 1) + rel_b ** 2 / (nb - 1)
    df = (rel_a + rel_b) ** 2 / denominator if denominator > 0 else 1e9
    upper = 1 - (1 - level) / 2
    t = norm.ppf(upper) if df > 1e6 else student_t.ppf(upper, max(df, 1.0))
    half = t * math.sqrt(rel_a + rel_b)
    return ratio * math.exp(-half), ratio * math.exp(half)


def fails(rule, a, b, level):
    key, limit, above = RULES[rule]
    low, high = interval(a[key], b[key], level)
    return low > limit if above else high < limit


def run_compare(binary, sides, args, folder, extra=()):
    argv = [binary, "compare", *sides, "--rounds", str(args.rounds), "--duration", args.duration,
            "--warmup", args.warmup, "--no-history", "--results-dir", folder, "-O", "json",
            *extra]
    run = subprocess.run(argv, capture_output=True, text=True)
    if run.returncode not in (0, 3):
        sys.exit(f"{' '.join(argv)} exited {run.returncode}:\n{run.stderr[-2000:]}")
    return json.loads(run.stdout)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--duration", default="2s")
    parser.add_argument("--warmup", default="1s")
    parser.add_argument("--spins", default="0,5,10,20", help="slowdowns in % of lab's CPU per call")
    parser.add_argument("--bin", default="target/release/grpclab")
    args = parser.parse_args()
    if args.rounds < max(ROUND_COUNTS):
        sys.exit(f"--rounds must be at least {max(ROUND_COUNTS)}")
    spins = [float(s) for s in args.spins.split(",")]
    folder = tempfile.mkdtemp()

    calibration = run_compare(args.bin, ["lab", "lab"], args, folder)
    base_ns = sum(calibration["sides"][0]["cpu_ns_per_call"]) / len(calibration["sides"][0]["cpu_ns_per_call"])
    print(f"lab's CPU per call: {base_ns:.0f} ns (mean of {args.rounds} rounds)", flush=True)

    detected = {}  # (rule, rounds, level, spin) -> count
    for trial in range(1, args.trials + 1):
        for spin in spins:
            spin_ns = round(base_ns * spin / 100)
            b_side = "lab" if spin_ns == 0 else f"lab --handler-spin {spin_ns}ns"
            report = run_compare(args.bin, ["lab", b_side], args, folder,
                                 [flag for rule in RULES for flag in ("--fail-if", rule)])
            a, b = report["sides"][0], report["sides"][1]
            # The script's judgement on every round, at the run's confidence, is grpclab's own.
            level = report["confidence"]
            for verdict in report["gate"]:
                mine = fails(verdict["expression"], a, b, level)
                if mine != verdict["failed"]:
                    sys.exit(f"this script judged {verdict['expression']} {mine}, grpclab {verdict['failed']}: "
                             f"the statistics here no longer match compare's")
            for rounds in ROUND_COUNTS:
                prefix = lambda side: {key: side[key][:rounds] for key in ("rps", "cpu_ns_per_call")}
                for level in LEVELS:
                    for rule in RULES:
                        key = (rule, rounds, level, spin)
                        detected[key] = detected.get(key, 0) + fails(rule, prefix(a), prefix(b), level)
            ratio = (sum(b["rps"]) / len(b["rps"])) / (sum(a["rps"]) / len(a["rps"]))
            cpu = (sum(b["cpu_ns_per_call"]) / len(b["cpu_ns_per_call"])) / base_ns
            print(f"trial {trial} spin {spin:>4.0f} % ({spin_ns} ns): req/s B/A {ratio:.3f}, cpu/call B/base {cpu:.3f}",
                  flush=True)

    print()
    print(f"{args.trials} trials, rounds of {args.duration} after {args.warmup}; "
          f"share of trials in which the rule failed (0 %: false alarms; others: detections)")
    print()
    header = " | ".join(f"{s:.0f} %" for s in spins)
    print(f"| rule | rounds | confidence | {header} |")
    print("|---|---:|---:|" + "---:|" * len(spins))
    for rule in RULES:
        for rounds in ROUND_COUNTS:
            for level in LEVELS:
                cells = " | ".join(f"{100 * detected[(rule, rounds, level, s)] / args.trials:.0f} %" for s in spins)
                print(f"| `{rule}` | {rounds} | {level * 100:g} % | {cells} |")


if __name__ == "__main__":
    main()
