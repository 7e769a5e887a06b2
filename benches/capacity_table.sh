#!/usr/bin/env bash
# Capacity at an SLO for every built-in server: `grpclab capacity` against `grpclab serve`,
# server pinned to CPU 0 (one thread), client to CPU 1, grpc_bench's 50 connections and 1000
# streams, complex_proto; prints one row per server and keeps each search's JSON.
#
#   bash benches/capacity_table.sh [SLO ...]     (default: 'p99<=10ms' 'errors<=0.1%')
#   GRPCLAB=path/to/grpclab picks a build; OUT=dir keeps the JSON (default: a temp dir)
set -euo pipefail
cd "$(dirname "$0")/.."
grpclab=${GRPCLAB:-target/release/grpclab}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
slos=("$@")
[ ${#slos[@]} -eq 0 ] && slos=('p99<=10ms' 'errors<=0.1%')
slo_args=()
for slo in "${slos[@]}"; do slo_args+=(--slo "$slo"); done
printf '%-10s %12s %22s %10s %12s %10s %7s  %s\n' server "capacity/s" "interval" "knee/s" "server cpu" "memory" probes stopped
port=50081
for impl in lab tonic-mt tonic-st; do
  port=$((port + 1))
  taskset -c 0 "$grpclab" serve --impl "$impl" --threads 1 --port "$port" 2>/dev/null &
  server=$!
  for _ in $(seq 50); do
    (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break
    sleep 0.1
  done
  code=0
  taskset -c 1 "$grpclab" capacity --insecure "127.0.0.1:$port" --scenario complex_proto \
    --connections 50 -c 1000 --server-pid "$server" "${slo_args[@]}" -O json \
    -o "$out/$impl.json" 2>"$out/$impl.log" || code=$?
  kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true
  python3 - "$out/$impl.json" "$impl" "$code" <<'PY'
import json, sys
path, impl, code = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    r = json.load(open(path))
except Exception as err:
    print(f"{impl:<10} no report (exit {code}): {err}")
    sys.exit(0)
cap, fail = r.get("capacity_rps"), r.get("lowest_failing_rps")
interval = f"[{cap:.0f}, {fail:.0f})" if cap and fail else "-"
server = r.get("server_at_capacity") or {}
cpu = f"{server['cpu_percent']:.0f} %" if server else "-"
mem = f"{server['rss_bytes'] / 2**20:.1f} MiB" if server else "-"
knee = f"{r['knee_rps']:.0f}" if r.get("knee_rps") else "-"
capacity = ("≥" if r.get("client_bound") else "") + (f"{cap:.0f}" if cap else "none")
print(f"{impl:<10} {capacity:>12} {interval:>22} {knee:>10} {cpu:>12} {mem:>10} {len(r['probes']):>7}  {r['stopped_because'][:60]}")
PY
done
echo "JSON and logs: $out"
