#!/usr/bin/env python3
"""Study 2: where should `lab` decode requests? inline / task / pool / adaptive, per message size
and server thread count, with `grpclab compare`'s 99.9 % intervals.

For every cell (scenario x server threads) one `grpclab compare` runs the four placements
interleaved for --rounds rounds, adaptive first, so every fixed placement is compared with
adaptive. The harness's defaults apply otherwise (grpc_bench's: 50 connections x 1000 streams,
512 MiB); server threads = GRPC_SERVER_CPUS (lab's I/O threads, its cgroup CPU quota and
pinned cores), pool threads = the same number. With 2 server threads on this 2-core machine the
client shares a core with the server (the harness warns); the 1-thread cells are clean.

With --spare-core-scenarios, extra cells run lab with 1 I/O thread on 2 cores (a suite entry
with `--threads 1`, GRPC_SERVER_CPUS=2): the only shape here where a pool worker has a core the
I/O thread does not use, so the only one where adaptive may offload.

Per cell it prints req/s and p99 (mean ± 99.9 % CI) per placement, each fixed placement's
ratio to adaptive with its interval, and whether adaptive is within the interval of the best
fixed placement (the best one is not significantly better than adaptive), for req/s and p99.
Every compare's JSON and per-run records stay under --out.

With --qps SCENARIO=RATE,..., the cells run open loop at that offered rate instead (the same
rate for every placement, below every placement's capacity): latency compared at equal load,
where closed-loop p99 at saturation mostly restates Little's law.

Usage: scripts/study_placement.py [--rounds 5] [--duration 3s] [--warmup 1s]
       [--scenarios string_10B,...] [--threads 1,2] [--out results/study_placement]
       [--qps string_10B=300000,...]
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "grpclab")
SCENARIOS = ["string_10B", "string_1kB", "string_10kB", "complex_proto", "large_complex"]
PLACEMENTS = ["adaptive", "inline", "task", "pool"]


def run_cell(args, scenario, threads, io_threads=None):
    """One compare of the four placements. `threads`: server CPUs (and I/O threads, unless
    `io_threads` pins them lower through a suite entry)."""
    sides = [f"lab --decode {p} --pool-threads {io_threads or threads}" for p in PLACEMENTS]
    tag = f"t{threads}" if io_threads is None else f"io{io_threads}-cpus{threads}"
    out_dir = os.path.join(args.out, f"{scenario}-{tag}")
    os.makedirs(out_dir, exist_ok=True)
    suite = []
    if io_threads is not None:
        path = os.path.join(out_dir, "suite.toml")
        with open(path, "w") as f:
            f.write(f"[[implementation]]\nname = \"lab\"\ncommand = \"exec '{BIN}' serve --impl lab "
                    f"--port {{port}} --threads {io_threads}\"\n")
        suite = ["--suite", path]
    rate = args.rates.get(scenario)
    qps = ["--qps", str(rate)] if rate else []
    argv = [BIN, "compare", *sides, "--rounds", str(args.rounds), "--duration", args.duration,
            "--warmup", args.warmup, "--scenario", scenario, "--server-cpus", str(threads),
            "--results-dir", out_dir, "-O", "json", *suite, *qps]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"compare failed for {scenario} x {threads}:\n{proc.stderr[-3000:]}")
    report = json.loads(proc.stdout)
    with open(os.path.join(out_dir, "cell.json"), "w") as f:
        json.dump(report, f, indent=1)
    return report


def within(report, metric, higher_is_better):
    """(best fixed placement, ratio text, adaptive within its interval?) for one metric."""
    fixed = report["comparisons"]
    pick = max if higher_is_better else min
    best = pick(fixed, key=lambda c: c[metric]["b"]["mean"])
    c = best[metric]
    ok = best[metric]["verdict"] != "faster"
    return best["side"].split()[2], f"{c['ratio']:.3f} [{c['ratio_low']:.3f}, {c['ratio_high']:.3f}]", ok


def progress(scenario, threads, report):
    verdicts = [within(report, "rps", True), within(report, "p99_ns", False)]
    print(f"{scenario:14} threads {threads}: best req/s {verdicts[0][0]} "
          f"(ratio to adaptive {verdicts[0][1]}, adaptive within: {verdicts[0][2]}); "
          f"best p99 {verdicts[1][0]} (adaptive within: {verdicts[1][2]})", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", default="3s")
    parser.add_argument("--warmup", default="1s")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--spare-core-scenarios", default="large_complex,string_10kB",
                        help="scenarios also run with 1 I/O thread on 2 cores; empty to skip")
    parser.add_argument("--out", default=os.path.join(ROOT, "results", "study_placement"))
    parser.add_argument("--qps", default="", help="open loop: SCENARIO=RATE,... (req/s)")
    args = parser.parse_args()
    args.rates = {}
    for item in [i for i in args.qps.split(",") if i]:
        scenario, _, rate = item.partition("=")
        if not rate.isdigit():
            sys.exit(f"--qps {item!r}: expected SCENARIO=RATE, e.g. string_10B=300000")
        args.rates[scenario] = int(rate)
    if args.rates:
        args.scenarios = ",".join(s for s in args.scenarios.split(",") if s in args.rates)
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    os.makedirs(args.out, exist_ok=True)
    cells = []
    for threads in [int(t) for t in args.threads.split(",")]:
        for scenario in args.scenarios.split(","):
            report = run_cell(args, scenario, threads)
            cells.append((scenario, str(threads), report))
            progress(scenario, threads, report)
    for scenario in [s for s in args.spare_core_scenarios.split(",") if s]:
        report = run_cell(args, scenario, 2, io_threads=1)
        cells.append((scenario, "1 I/O on 2 cores", report))
        progress(scenario, "1 I/O on 2 cores", report)

    print()
    load = (f"open loop at {args.qps}" if args.rates else "closed loop, 50 x 1000")
    print(f"lab decode placement, {load}, {args.rounds} interleaved rounds per cell, {args.duration} "
          f"after {args.warmup} warmup; means ± 99.9 % CI; ratios are placement / adaptive")
    print()
    print("| scenario | threads | placement | req/s | req/s ratio [CI] | p99 ms | p99 ratio [CI] |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for scenario, threads, report in cells:
        first = report["comparisons"][0]
        a_rps, a_p99 = first["rps"]["a"], first["p99_ns"]["a"]
        print(f"| {scenario} | {threads} | adaptive | {a_rps['mean']:.0f} ± {a_rps['ci_half_width']:.0f} | "
              f"1 | {a_p99['mean'] / 1e6:.2f} ± {a_p99['ci_half_width'] / 1e6:.2f} | 1 |")
        for c in report["comparisons"]:
            placement = c["side"].split()[2]
            rps, p99 = c["rps"], c["p99_ns"]
            print(f"| | | {placement} | {rps['b']['mean']:.0f} ± {rps['b']['ci_half_width']:.0f} | "
                  f"{rps['ratio']:.3f} [{rps['ratio_low']:.3f}, {rps['ratio_high']:.3f}] | "
                  f"{p99['b']['mean'] / 1e6:.2f} ± {p99['b']['ci_half_width'] / 1e6:.2f} | "
                  f"{p99['ratio']:.3f} [{p99['ratio_low']:.3f}, {p99['ratio_high']:.3f}] |")
    print()
    print("| scenario | threads | best fixed (req/s) | adaptive within its CI | best fixed (p99) | adaptive within its CI |")
    print("|---|---:|---|---|---|---|")
    for scenario, threads, report in cells:
        rps = within(report, "rps", True)
        p99 = within(report, "p99_ns", False)
        print(f"| {scenario} | {threads} | {rps[0]} {rps[1]} | {'yes' if rps[2] else 'NO'} | "
              f"{p99[0]} {p99[1]} | {'yes' if p99[2] else 'NO'} |")


if __name__ == "__main__":
    main()
