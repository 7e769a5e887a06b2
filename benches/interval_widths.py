#!/usr/bin/env python3
"""How many rounds buy how narrow an interval: runs `grpclab compare lab lab` (A/A) for
--rounds rounds (or reads a compare.json given), then for the first 3, 5 and 10 rounds and each
confidence level prints the half-width of the ratio's interval, as compare computes it (delta
method on the log of the ratio, Welch-Satterthwaite degrees of freedom), and the round-to-round
spread of each side.

  python3 benches/interval_widths.py [--grpclab target/release/grpclab] [--rounds 10]
                                     [--duration 5s] [--from results/<stamp>/compare.json]
"""
import argparse
import json
import math
import os
import subprocess
import sys


def t_pdf(x, df):
    return math.exp(
        math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
        - (df + 1) / 2 * math.log1p(x * x / df)
    )


def t_cdf_upper_half(x, df, steps=4000):
    """P(0 <= T <= x) by Simpson's rule (x >= 0)."""
    h = x / steps
    total = t_pdf(0, df) + t_pdf(x, df)
    for i in range(1, steps):
        total += (4 if i % 2 else 2) * t_pdf(i * h, df)
    return total * h / 3


def t_critical(df, level):
    """Two-sided critical t: P(|T| <= t) = level, by bisection."""
    target = level / 2
    low, high = 0.0, 1.0
    while t_cdf_upper_half(high, df) < target:
        high *= 2
    for _ in range(60):
        mid = (low + high) / 2
        if t_cdf_upper_half(mid, df) < target:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def half_width_percent(a, b, level):
    """The ratio interval's upper half-width in percent of the ratio, as compare builds it."""
    def rel(values):
        n = len(values)
        mean = sum(values) / n
        var = sum((v - mean) ** 2 for v in values) / (n - 1)
        return var / (n * mean * mean), n
    rel_a, n_a = rel(a)
    rel_b, n_b = rel(b)
    df = (rel_a + rel_b) ** 2 / (rel_a ** 2 / (n_a - 1) + rel_b ** 2 / (n_b - 1))
    return 100 * (math.exp(t_critical(df, level) * math.sqrt(rel_a + rel_b)) - 1)


def spread(values):
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    return 100 * sd / mean, max(values) / min(values)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--grpclab", default="target/release/grpclab")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--duration", default="5s")
    parser.add_argument("--from", dest="source")
    args = parser.parse_args()
    if args.source:
        report = json.load(open(args.source))
    else:
        run = subprocess.run(
            [args.grpclab, "compare", "lab", "lab", "--rounds", str(args.rounds),
             "--duration", args.duration, "--warmup", "1s", "-O", "json"],
            stdout=subprocess.PIPE, stderr=sys.stderr, check=True)
        report = json.loads(run.stdout)
    a, b = report["sides"][0], report["sides"][1]
    rounds = len(a["rps"])
    print(f"A/A: {a['side']} vs {b['side']}, {rounds} rounds each, "
          f"{report['settings']['duration_s']}s windows")
    for key, name in [("rps", "req/s"), ("p99_ns", "p99"), ("cpu_ns_per_call", "cpu/call")]:
        if not a[key] or not b[key]:
            continue
        cv_a, range_a = spread(a[key])
        cv_b, range_b = spread(b[key])
        print(f"  {name:<9} round-to-round: sd {cv_a:.1f} % / {cv_b:.1f} % of the mean, "
              f"max/min {range_a:.2f} / {range_b:.2f}")
    print()
    print(f"{'metric':<9} {'rounds':>6} {'95 %':>9} {'99 %':>9} {'99.9 %':>9}   "
          "(ratio interval half-width, % of the ratio)")
    for key, name in [("rps", "req/s"), ("p99_ns", "p99"), ("cpu_ns_per_call", "cpu/call")]:
        if not a[key] or not b[key]:
            continue
        for n in (3, 5, 10):
            if n > rounds:
                continue
            cells = [half_width_percent(a[key][:n], b[key][:n], level) for level in (0.95, 0.99, 0.999)]
            print(f"{name:<9} {n:>6} " + " ".join(f"{c:>8.1f}%" for c in cells))


if __name__ == "__main__":
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    main()
