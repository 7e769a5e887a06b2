#!/usr/bin/env python3
"""Where a JVM server's time goes, by the frames the seed's question names: the share of Flight
Recorder execution samples (`grpclab bench --profile cpu`, the measured window only) whose stack
holds a frame of each group, e.g. protobuf parsing, sending a reply, the effect runtime.

Shares are inclusive (a sample counts for every group its stack touches), so they do not add
up to 100 %. Execution samples cover Java threads running Java code: time in stop-the-world
collections is not in them (benches/jfr_gc.py measures it from the same recording).

Usage: benches/jfr_frames.py RESULTS_DIR NAME [NAME ...]   (reads NAME.jfr there)
Needs the JDK's `jfr` tool (JAVA_HOME/bin or PATH).
"""
import os
import re
import sys

from jfr_gc import events, jfr_tool_and_folder

# (column, regular expression over "class.method" frames). The names are those of today's
# versions: ScalaPB's parseFrom, protobuf-java's parse/mergeFrom behind grpc-java's marshaller,
# grpc-java's ServerCallImpl.sendMessage, Armeria's ArmeriaServerCall.sendMessage, Pekko gRPC's
# marshalling.
GROUPS = [
    ("parse request", r"parseFrom|mergeFrom|Marshaller\.parse|Unmarshal"),
    ("send reply", r"sendMessage|writeMessage|Marshaller\.stream|Marshal.*marshal"),
    ("effect runtime", r"^(zio\.|cats\.effect\.)"),
    ("actor/stream runtime", r"^org\.apache\.pekko\.(actor|dispatch|stream)\."),
    ("netty", r"^io\.netty\."),
    ("HTTP/2 codec", r"[Hh]ttp2"),
]


def frames_of(event):
    trace = event["values"].get("stackTrace") or {}
    names = []
    for frame in trace.get("frames", []):
        method = frame.get("method") or {}
        kind = (method.get("type") or {}).get("name", "?")
        names.append(f"{kind.replace('/', '.')}.{method.get('name', '?')}")
    return names


def shares(jfr_tool, folder, name):
    found = events(jfr_tool, os.path.join(folder, f"{name}.jfr"), ["jdk.ExecutionSample"], 128)
    stacks = [frames_of(e) for e in found]
    patterns = [(column, re.compile(expression)) for column, expression in GROUPS]
    counts = {column: 0 for column, _ in GROUPS}
    for stack in stacks:
        for column, pattern in patterns:
            if any(pattern.search(frame) for frame in stack):
                counts[column] += 1
    total = len(stacks)
    return total, {column: 100.0 * n / total if total else float("nan") for column, n in counts.items()}


def main():
    jfr_tool, folder = jfr_tool_and_folder(__doc__)
    print("| server | samples | " + " | ".join(f"{c} %" for c, _ in GROUPS) + " |")
    print("|---|---:|" + "---:|" * len(GROUPS))
    for name in sys.argv[2:]:
        if not os.path.exists(os.path.join(folder, f"{name}.jfr")):
            sys.exit(f"{name}.jfr not found in {folder}: run `grpclab bench --profile cpu {name}` first")
        total, by_group = shares(jfr_tool, folder, name)
        print(f"| {name} | {total} | " + " | ".join(f"{by_group[c]:.1f}" for c, _ in GROUPS) + " |")


if __name__ == "__main__":
    main()
