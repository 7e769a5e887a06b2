#!/usr/bin/env python3
"""Garbage collection in a Flight Recorder file of `grpclab bench --profile cpu|alloc`: how many
collections, the pause time per second of the recording, the allocation rate, and the bytes
allocated per call (the calls grpclab measured in that window, from the row's JSON).

Allocation is read off the heap, not off allocation samples: before each collection the heap
holds what was allocated since the previous collection ended, so the sum over collections of
(heap used before this one - heap used after the previous one) is what the program allocated
between the first and the last collection (JFR's `jdk.GCHeapSummary`, every collector).

Usage: benches/jfr_gc.py RESULTS_DIR NAME [NAME ...]   (reads NAME.jfr and NAME.json there)
Needs the JDK's `jfr` tool (JAVA_HOME/bin or PATH).
"""
import json
import os
import re
import shutil
import subprocess
import sys


def seconds(duration):
    """JFR's JSON durations are ISO-8601 ('PT0.0123S', 'PT1M2.5S')."""
    match = re.fullmatch(r"PT(?:(\d+)H)?(?:(\d+)M)?(?:([\d.]+)S)?", duration)
    if not match:
        raise ValueError(f"not a duration: {duration}")
    hours, minutes, secs = (float(g) if g else 0.0 for g in match.groups())
    return hours * 3600 + minutes * 60 + secs


def timestamp(value):
    """An ISO-8601 instant to seconds of the day (enough for differences within a run)."""
    match = re.search(r"T(\d+):(\d+):([\d.]+)", value)
    hours, minutes, secs = match.groups()
    return int(hours) * 3600 + int(minutes) * 60 + float(secs)


def events(jfr_tool, path, kinds, stack_depth=None):
    """The recording's events of these kinds, as `jfr print --json` gives them (stack traces cut
    at `stack_depth` frames when given; jfr's own default is 5)."""
    depth = ["--stack-depth", str(stack_depth)] if stack_depth else []
    done = subprocess.run([jfr_tool, "print", "--json", *depth, "--events", ",".join(kinds), path],
                          capture_output=True, text=True)
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["no message"])[-1]
        sys.exit(f"{path}: jfr print failed: {reason}")
    output = done.stdout
    return json.loads(output)["recording"]["events"]


def summary(jfr_tool, folder, name):
    for kind in ("json", "jfr"):
        if not os.path.exists(os.path.join(folder, f"{name}.{kind}")):
            sys.exit(f"{name}.{kind} not found in {folder}: run `grpclab bench --profile cpu {name}` first")
    record = json.load(open(os.path.join(folder, f"{name}.json")))
    calls = record["load"]["count"]
    found = events(jfr_tool, os.path.join(folder, f"{name}.jfr"),
                   ["jdk.GarbageCollection", "jdk.GCHeapSummary"])
    collections = [e["values"] for e in found if e["type"] == "jdk.GarbageCollection"]
    heap = {}
    for e in found:
        if e["type"] == "jdk.GCHeapSummary":
            values = e["values"]
            heap[(values["gcId"], values["when"])] = (values["heapUsed"], timestamp(values["startTime"]))
    ids = sorted({gc_id for gc_id, _ in heap})
    allocated = 0
    for previous, current in zip(ids, ids[1:]):
        before = heap.get((current, "Before GC"))
        after = heap.get((previous, "After GC"))
        if before and after:
            allocated += max(0, before[0] - after[0])
    span = heap[(ids[-1], "Before GC")][1] - heap[(ids[0], "After GC")][1] if len(ids) > 1 else 0.0
    pauses = sum(seconds(c["sumOfPauses"]) for c in collections)
    duration = record["load"]["measuredWindow"] / 1e9  # the recording's window, in ns
    return {
        "name": name,
        "calls": calls,
        "collections": len(collections),
        "pause_ms_per_s": 1000 * pauses / duration if duration else float("nan"),
        "alloc_mb_per_s": allocated / span / 1e6 if span else float("nan"),
        # calls in the span between the first and last collection, at the window's rate
        "bytes_per_call": allocated / (calls * span / duration) if span and duration else float("nan"),
        "collectors": sorted({c["name"] for c in collections}),
    }


def jfr_tool_and_folder(usage):
    """The JDK's `jfr` tool and the results folder named by the command line, or exit saying
    what is missing."""
    if len(sys.argv) < 3:
        sys.exit(usage)
    java_home = os.environ.get("JAVA_HOME")
    jfr_tool = os.path.join(java_home, "bin", "jfr") if java_home else shutil.which("jfr")
    if not jfr_tool:
        sys.exit("jfr (the JDK's) not found: set JAVA_HOME or put the JDK's bin on PATH")
    return jfr_tool, sys.argv[1]


def main():
    jfr_tool, folder = jfr_tool_and_folder(__doc__)
    print("| server | calls | collections | GC pause ms/s | allocated MB/s | bytes/call |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in sys.argv[2:]:
        s = summary(jfr_tool, folder, name)
        print(f"| {s['name']} | {s['calls']} | {s['collections']} | {s['pause_ms_per_s']:.1f} | "
              f"{s['alloc_mb_per_s']:.0f} | {s['bytes_per_call']:.0f} |")


if __name__ == "__main__":
    main()
