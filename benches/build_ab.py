#!/usr/bin/env python3
"""Two builds of grpclab side by side, on the figures a change to the code must not move:
lab's server CPU per call (saturated, and at a fixed offered rate) and the client's CPU per
call against lab, on both client transports.

  servers: `grpclab compare lab-before lab-after` over a suite whose two entries start each
           binary's `serve --impl lab` (rounds interleaved), then the server CPU per request
           of each side from the rounds' records (scripts/compare_cpu.py)
  clients: benches/client_ab.py OLD NEW, once on our engine and once with --transport h2

Usage: benches/build_ab.py OLD_BINARY NEW_BINARY [--rounds 7] [--duration 5] [--warmup 2]
       [--rate 30000] [--client-rounds 5] [--skip-clients] [--one-per-read]
Build the old one from a fixed commit: git worktree add /tmp/old REV && cargo build
--release --manifest-path /tmp/old/Cargo.toml (then OLD_BINARY = /tmp/old/target/release/grpclab).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def compare(old, new, args, qps, shape=()):
    """Runs one server compare (`shape`: extra compare flags); returns its verdict lines and the
    CPU table."""
    with tempfile.TemporaryDirectory() as tmp:
        suite = os.path.join(tmp, "ab.toml")
        with open(suite, "w") as f:
            for name, binary in (("lab-before", old), ("lab-after", new)):
                f.write(f'[[implementation]]\nname = "{name}"\n'
                        f'command = "exec {binary} serve --impl lab --port {{port}} --threads {{threads}}"\n\n')
        argv = [new, "compare", "lab-before", "lab-after", "--suite", suite,
                "--rounds", str(args.rounds), "--duration", f"{args.duration}s",
                "--warmup", f"{args.warmup}s", "--results-dir", os.path.join(tmp, "results")]
        if qps:
            argv += ["--qps", str(qps)]
        argv += list(shape)
        run = subprocess.run(argv, capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"compare failed ({run.returncode}):\n{run.stdout}\n{run.stderr}")
        folder = re.search(r"^results: (.+)$", run.stderr, re.M)
        if not folder:
            sys.exit(f"compare printed no results folder:\n{run.stderr}")
        cpu = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "compare_cpu.py"),
                              folder.group(1).strip()], capture_output=True, text=True)
        return run.stdout, cpu.stdout + cpu.stderr


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--duration", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--rate", type=int, default=30000)
    parser.add_argument("--client-rounds", type=int, default=5)
    parser.add_argument("--skip-clients", action="store_true")
    parser.add_argument("--one-per-read", action="store_true",
                        help="also a closed loop of 100 connections x 1 call: each read brings one "
                             "request, so a connection turn's own cost shows")
    args = parser.parse_args()
    shapes = [("saturated (closed loop)", 0, ()), (f"{args.rate} req/s offered", args.rate, ())]
    if args.one_per_read:
        shapes.append(("100 connections x 1 call (closed loop)", 0,
                       ("--concurrency", "100", "--connections", "100")))
    for label, qps, shape in shapes:
        table, cpu = compare(args.old, args.new, args, qps, shape)
        print(f"## lab server, {label}: grpclab compare lab-before lab-after\n")
        print(table)
        print(cpu, flush=True)
    if args.skip_clients:
        return
    for label, extra in (("our engine", []), ("--transport h2", ["--args=--transport=h2"])):
        print(f"## client against lab, {label}: benches/client_ab.py\n", flush=True)
        subprocess.run([sys.executable, os.path.join(HERE, "client_ab.py"), args.old, args.new,
                        "--rounds", str(args.client_rounds), "--duration", "8", "--warmup", "2",
                        *extra], check=True)
        print(flush=True)


if __name__ == "__main__":
    main()
