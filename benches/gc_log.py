#!/usr/bin/env python3
"""GC at full speed: pause time and allocation of a JVM server from its unified GC log, over the
last WINDOW seconds before its last collection — for figures without Flight Recorder's cost
(benches/jfr_gc.py reads the same from a recording, which slows a one-core server 2-7x).

Start the server with `JVM_OPTS="-Xlog:gc:file=DIR/NAME.gc.log:uptime"` (peers/jvm/run.sh adds
JVM_OPTS; `grpclab bench` passes its environment to the servers), run the bench, then

    benches/gc_log.py WINDOW_SECONDS REQS_PER_S DIR/NAME.gc.log

REQS_PER_S is the row's req/s, for bytes per call. Lines read (JDK 17, any collector):
    [35.123s] GC(12) Pause Young (Allocation Failure) 120M->3M(343M) 2.345ms
"""
import re
import sys

LINE = re.compile(r"\[([\d.]+)s\].*GC\(\d+\) Pause .* (\d+)M->(\d+)M\(\d+M\) ([\d.]+)ms")


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    try:
        window, rate, path = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
    except ValueError:
        sys.exit(f"WINDOW_SECONDS and REQS_PER_S are numbers, not {sys.argv[1]!r} {sys.argv[2]!r}")
    if window <= 0 or rate <= 0:
        sys.exit("WINDOW_SECONDS and REQS_PER_S must be above 0")
    events = []
    try:
        with open(path) as log:
            for line in log:
                match = LINE.search(line)
                if match:
                    at, before, after, pause = match.groups()
                    events.append((float(at), int(before), int(after), float(pause)))
    except OSError as err:
        sys.exit(f"{path}: cannot read the GC log: {err.strerror}")
    if len(events) < 2:
        sys.exit(f"{path}: fewer than two collections logged: was the server started with -Xlog:gc?")
    end = events[-1][0]
    inside = [e for e in events if e[0] >= end - window]
    pauses = sum(e[3] for e in inside)
    allocated_mb = 0
    for previous, current in zip(events, events[1:]):
        if previous[0] >= end - window:
            allocated_mb += max(0, current[1] - previous[2])
    span = inside[-1][0] - inside[0][0] if len(inside) > 1 else window
    print(f"{path}: {len(inside)} collections in {window:.0f} s, "
          f"pause {pauses / window:.1f} ms/s, allocated {allocated_mb / span:.0f} MB/s, "
          f"{allocated_mb * 1048576 / span / rate:.0f} bytes/call at {rate:.0f} req/s")


if __name__ == "__main__":
    main()
