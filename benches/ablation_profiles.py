#!/usr/bin/env python3
"""Where each step of the ablation study (docs/studies/ablation.md) spends a saturated server's
CPU: one `perf record` of each step's server, the same load, the top functions by self time.

Steps (as benches/ablation.py): tonic-mt; lab --transport h2 --codec prost (lab's service on
the h2 crate, prost messages); lab --codec prost (+ our HTTP/2 engine); lab (+ the view codec).
Each server runs alone with one thread on CPU 0 (`grpclab serve --threads 1`), saturated by
`grpclab load` on CPU 1 (complex_proto, 50 connections x 1000 streams). After --warmup seconds,
`perf record -F 999` samples the server for --duration seconds; the table per step gives the
kernel's share of the samples, then the --top functions by self time (no call graphs: what a
function itself costs is what moves between steps).

Usage: benches/ablation_profiles.py [--duration 5] [--warmup 2] [--top 12]
Needs perf (Debian's linux-perf) and permission to sample another process (root, or
kernel.perf_event_paranoid <= 1).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from common import BIN, build, start_server, stop_server

STEPS = [
    ("0. tonic-mt", ["--impl", "tonic-mt"]),
    ("1. lab, h2 crate + prost", ["--impl", "lab", "--transport", "h2", "--codec", "prost"]),
    ("2. + our HTTP/2 engine", ["--impl", "lab", "--codec", "prost"]),
    ("3. + view codec (lab)", ["--impl", "lab"]),
]


def profile(impl_args, duration, warmup, top, tmp, tag):
    """Samples one saturated server; returns (kernel share %, [(self %, function)])."""
    server, target = start_server(impl_args)
    data = os.path.join(tmp, f"{tag}.data")
    try:
        client = subprocess.Popen(
            ["taskset", "-c", "1", BIN, "load", target, "--insecure", "--scenario", "complex_proto",
             "-c", "1000", "--connections", "50", "-z", f"{warmup + duration + 2}s", "--cpus", "1"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(warmup)
        subprocess.run(["perf", "record", "-q", "-F", "999", "-p", str(server.pid), "-o", data,
                        "--", "sleep", str(duration)],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client.wait()
    finally:
        stop_server(server)

    def report(sort):
        out = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", sort,
                              "--stdio"], capture_output=True, text=True, check=True).stdout
        rows = []
        for line in out.splitlines():
            match = re.match(r"\s*([\d.]+)%\s+(.*)$", line)
            if match and not line.lstrip().startswith("#"):
                rows.append((float(match.group(1)), match.group(2).strip()))
        return rows

    kernel = sum(share for share, name in report("dso") if "kernel" in name)
    functions = report("sym")[:top]
    return kernel, functions


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    if not shutil.which("perf"):
        sys.exit("perf is not installed: apt-get install linux-perf")
    build()
    with tempfile.TemporaryDirectory() as tmp:
        for number, (label, impl_args) in enumerate(STEPS):
            kernel, functions = profile(impl_args, args.duration, args.warmup, args.top, tmp,
                                        f"step{number}")
            print(f"### {label} (`serve {' '.join(impl_args)}`): kernel {kernel:.1f} % of samples")
            print()
            print("| self % | function |")
            print("|---:|---|")
            for share, name in functions:
                # `[.] name` (user) / `[k] name` (kernel): keep the mark, shorten generics.
                name = re.sub(r"<[^<>]*(<[^<>]*>[^<>]*)*>", "<..>", name)
                print(f"| {share:.2f} | `{name[:110]}` |")
            print(flush=True)


if __name__ == "__main__":
    main()
