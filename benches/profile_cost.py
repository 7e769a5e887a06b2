#!/usr/bin/env python3
"""What `--profile cpu` (frame pointers) and `--profile cpu-dwarf` cost and give, side by side.

Runs `grpclab bench lab` (server pinned by the harness, complex_proto, the harness's defaults
otherwise) without a profile, with `--profile cpu` and with `--profile cpu-dwarf`, interleaved
for ROUNDS rounds, and prints per mode the medians of: lab's req/s while profiled, the
perf.data size for the window, and the share of samples whose stacks are flat (at most two
user-space frames) — the measure of whether stacks through tokio, h2 and prost unwound.

Usage: benches/profile_cost.py [--rounds 3] [--duration 8] [--warmup 2]
Needs: perf (Debian: linux-perf), root or kernel.perf_event_paranoid <= 1.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from common import BIN, build

MODES = [("none", []), ("cpu (fp)", ["--profile", "cpu"]), ("cpu-dwarf", ["--profile", "cpu-dwarf"])]


def one(mode_args, duration, warmup):
    with tempfile.TemporaryDirectory() as results:
        env = dict(os.environ, GRPC_BENCHMARK_DURATION=f"{duration}s", GRPC_BENCHMARK_WARMUP=f"{warmup}s")
        run = subprocess.run([BIN, "bench", "lab", "--no-tui", "--results-dir", results, *mode_args],
                             env=env, capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"bench failed: {run.stderr}")
        folder = os.path.join(results, os.listdir(results)[0])
        record = json.load(open(os.path.join(folder, "lab.json")))
        rps = record["load"]["measuredRps"]
        data = os.path.join(folder, "lab.perf.data")
        size = os.path.getsize(data) / (1 << 20) if os.path.exists(data) else None
        profile = record.get("cpu_profile") or {}
        return rps, size, profile.get("flat_percent"), record.get("profile_note")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args()
    build()
    rows = {name: [] for name, _ in MODES}
    for round_ in range(1, args.rounds + 1):
        for name, mode_args in MODES:
            rps, size, flat, note = one(mode_args, args.duration, args.warmup)
            rows[name].append((rps, size, flat))
            extra = f"  perf.data {size:.1f} MiB  flat {flat:.1f} %" if size is not None and flat is not None else ""
            print(f"round {round_} {name:<10} {rps:>10.0f} req/s{extra}{'  NOTE ' + note if note else ''}", flush=True)
    base = statistics.median(r[0] for r in rows["none"])
    print(f"\n| mode | lab req/s (median) | vs no profile | perf.data MiB ({args.duration} s window) | samples with flat stacks |")
    print("|---|---|---|---|---|")
    for name, _ in MODES:
        rps = statistics.median(r[0] for r in rows[name])
        sizes = [r[1] for r in rows[name] if r[1] is not None]
        flats = [r[2] for r in rows[name] if r[2] is not None]
        size = f"{statistics.median(sizes):.1f}" if sizes else "-"
        flat = f"{statistics.median(flats):.1f} %" if flats else "-"
        print(f"| {name} | {rps:.0f} | {rps / base:.3f} | {size} | {flat} |")


if __name__ == "__main__":
    main()
