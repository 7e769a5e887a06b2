#!/usr/bin/env bash
# Where two client builds differ, instruction by instruction: each client runs under
# callgrind for N1 and N2 unary complex_proto calls (closed loop, 4 connections x 100 streams,
# one thread) against NEW's lab server; the difference per call (start-up cancels out) is
# printed by source file (inlined code counts where it was written, whichever function it was
# inlined into) and by function. instructions_ab.py says how much; this says where.
#
# Usage: bash benches/callgrind_by_file.sh OLD_BINARY NEW_BINARY [N1 N2]
#   SCENARIO=server_stream_1kB CONCURRENCY=64 bash benches/callgrind_by_file.sh OLD NEW 500 1500
#   (another built-in scenario: a streaming one's calls carry many messages each)
# Needs valgrind (callgrind, callgrind_annotate). Server on CPU 0, clients on CPU 1.
set -euo pipefail
old=$1 new=$2 n1=${3:-20000} n2=${4:-60000}
scenario=${SCENARIO:-complex_proto} concurrency=${CONCURRENCY:-100}
work=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
taskset -c 0 "$new" serve --impl lab --port "$port" > "$work/lab.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
for side in old new; do
  bin=$old; [ "$side" = new ] && bin=$new
  for n in "$n1" "$n2"; do
    taskset -c 1 valgrind --tool=callgrind --callgrind-out-file="$work/$side.$n.out" "$bin" load \
      "127.0.0.1:$port" --insecure --scenario "$scenario" -c "$concurrency" --connections 4 --cpus 1 \
      -n "$n" --no-history > /dev/null 2>&1
    callgrind_annotate --threshold=100 --auto=no "$work/$side.$n.out" 2>/dev/null \
      | grep -E '^\s*[0-9,]+ \(' | grep -v '=>' | sed 's/([^)]*%)//' \
      | awk '{c=$1; gsub(",","",c); $1=""; print c "\t" $0}' > "$work/$side.$n.self"
  done
done
python3 - "$work" "$n1" "$n2" "$old" "$new" <<'PY'
import re, sys
work, n1, n2, old, new = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
# Each build's own checkout path, so the same source file matches in both.
roots = [re.sub(r'/target/.*$', '/', p) for p in (old, new)]
def load(path, by_file):
    costs = {}
    for line in open(path):
        count, name = line.rstrip('\n').split('\t', 1)
        name = re.sub(r'\s+', ' ', name.strip())
        if 'PROGRAM TOTALS' in name:
            continue
        # The object file the function is in (each build's own binary) is not part of its name.
        name = re.sub(r'\s*\[[^\]]*\]$', '', name)
        for root in roots:
            name = name.replace(root, '')
        if by_file:
            name = name.split(':', 1)[0]
            name = re.sub(r'^.*?/(src/.*)$', r'\1', name) if not name.startswith('crates/') else name
        costs[name] = costs.get(name, 0) + int(count)
    return costs
for by_file, title in ((True, 'source file'), (False, 'function')):
    per_call = {}
    for side in ('old', 'new'):
        a = load(f'{work}/{side}.{n1}.self', by_file)
        b = load(f'{work}/{side}.{n2}.self', by_file)
        per_call[side] = {k: (b.get(k, 0) - a.get(k, 0)) / (n2 - n1) for k in set(a) | set(b)}
    o, n = per_call['old'], per_call['new']
    print(f'\n| by {title} | old / call | new / call | change |')
    print('|---|---:|---:|---:|')
    print(f'| all | {sum(o.values()):.1f} | {sum(n.values()):.1f} | {sum(n.values()) - sum(o.values()):+.1f} |')
    keys = sorted(set(o) | set(n), key=lambda k: -abs(n.get(k, 0) - o.get(k, 0)))
    for k in keys[:15]:
        print(f'| {k[-100:]} | {o.get(k, 0):.1f} | {n.get(k, 0):.1f} | {n.get(k, 0) - o.get(k, 0):+.1f} |')
PY
