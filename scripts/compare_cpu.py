#!/usr/bin/env python3
"""Server CPU per request from a `grpclab compare` results folder: for each side, the median
over rounds of (server CPU % / 100) / measured req/s, in µs, and each side's ratio to A.

Usage: scripts/compare_cpu.py RESULTS_DIR   (the folder `grpclab compare` printed)
"""
import glob
import json
import os
import statistics
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sides = {}
    for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
        try:
            record = json.load(open(path))
        except (OSError, ValueError):
            continue
        load = record.get("load") if isinstance(record, dict) else None
        if not load or "usage" not in record:
            continue
        rps = load.get("measuredRps", load.get("rps"))
        side = record["name"].rsplit("-", 1)[0]
        sides.setdefault(side, []).append(record["usage"]["cpu_percent"] / 100 / rps * 1e6)
    if not sides:
        sys.exit(f"no round records in {sys.argv[1]}")
    first = None
    print("| side | rounds | server CPU µs/req (median) | ratio to A |")
    print("|---|---|---|---|")
    for side, values in sides.items():
        median = statistics.median(values)
        first = first or median
        print(f"| {side} | {len(values)} | {median:.2f} | {median / first:.3f} |")


if __name__ == "__main__":
    main()
