#!/usr/bin/env bash
# One generator against 2 and 4 sharing the same total offered rate (`load --shard I/N
# --start-at`, then `grpclab merge`): do the merged counts and rates agree with one
# generator's and with the server's own count, and how far apart did the generators start?
#
# lab server pinned to CPU 0 (one thread), every generator to CPU 1; an open loop at RATE
# req/s over 8 connections and 64 streams (split among the generators), complex_proto, no
# warmup (so the server's count of calls served is the measured calls'). Each round runs 1,
# 2 and 4 generators in turn; the table gives each figure's median over the rounds.
#
#   bash benches/shards.sh [RATE] [SECONDS] [ROUNDS]     (default: 20000 10 3)
#   GRPCLAB=path/to/grpclab picks a build; OUT=dir keeps the JSON (default: a temp dir)
set -euo pipefail
cd "$(dirname "$0")/.."
grpclab=${GRPCLAB:-target/release/grpclab}
rate=${1:-20000}
seconds=${2:-10}
rounds=${3:-3}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
port=50091
taskset -c 0 "$grpclab" serve --impl lab --threads 1 --port "$port" 2>/dev/null &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 50); do
  (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break
  sleep 0.1
done
served() { "$grpclab" stats --insecure "127.0.0.1:$port" | python3 -c 'import json,sys; print(json.load(sys.stdin)["calls"])'; }
for round in $(seq "$rounds"); do
  for gens in 1 2 4; do
    dir="$out/r$round-g$gens"
    mkdir -p "$dir"
    before=$(served)
    start=$(( $(date +%s) + 2 ))
    pids=()
    for i in $(seq 0 $((gens - 1))); do
      taskset -c 1 "$grpclab" load --insecure "127.0.0.1:$port" --scenario complex_proto \
        --shard "$i/$gens" --start-at "$start" --rps "$rate" -z "${seconds}s" \
        -c 64 --connections 8 --no-tui -O json -o "$dir/shard-$i.json" 2>"$dir/shard-$i.log" &
      pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid"; done
    after=$(served)
    "$grpclab" merge "$dir"/shard-*.json -O json -o "$dir/merged.json" 2>/dev/null
    echo "$((after - before))" > "$dir/served"
  done
done
python3 - "$out" "$rounds" "$rate" "$seconds" <<'PY'
import json, statistics, sys
out, rounds, rate, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
print(f"lab (1 thread, CPU 0), generators on CPU 1, open loop {rate:.0f} req/s for {seconds:.0f} s, "
      f"complex_proto, -c 64 --connections 8 split; medians of {rounds} rounds")
print(f"{'generators':>10} {'merged calls':>13} {'server served':>14} {'sum of rates':>13} "
      f"{'shared-window/s':>16} {'p50':>9} {'p99':>9} {'start skew':>11}")
for gens in (1, 2, 4):
    rows = []
    for r in range(1, rounds + 1):
        d = f"{out}/r{r}-g{gens}"
        m = json.load(open(f"{d}/merged.json"))
        served = int(open(f"{d}/served").read())
        facts = m["sharding"]["merge"]
        p = {pt["percentage"]: pt["latency"] for pt in m["latencyPercentiles"]}
        rows.append((m["count"], served, facts["sumOfRates"], facts["sharedWindowRps"],
                     p[50.0] / 1e3, p[99.0] / 1e3, facts["startSkew"] / 1e6))
    med = [statistics.median(col) for col in zip(*rows)]
    print(f"{gens:>10} {med[0]:>13.0f} {med[1]:>14.0f} {med[2]:>13.1f} {med[3]:>16.1f} "
          f"{med[4]:>7.1f}µs {med[5]:>7.1f}µs {med[6]:>9.2f}ms")
    agree = all(row[0] == row[1] for row in rows)
    print(f"{'':>10} merged count == server's count in every round: {agree}")
print(f"JSON: {out}")
PY
