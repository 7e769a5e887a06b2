#!/usr/bin/env bash
# The client's CPU per call with call templates, against lab (1 thread, CPU 0; the client on
# CPU 1, 50 connections x 1000 streams, complex_proto), through client_ab.py:
#   1. a constant payload vs the same message with `name` rendered per call (-d template);
#   2. a constant payload vs per-call metadata (-m '{"x-request-id":"{{.UUID}}"}');
#   3. with OLD given: OLD vs NEW on the templated payload (before/after a change).
# Usage: benches/template_cost.sh [OLD_BINARY] [NEW_BINARY]  (ROUNDS, DURATION env: 5, 8)
set -euo pipefail
cd "$(dirname "$0")"
new=${2:-../target/release/grpclab}
rounds=${ROUNDS:-5}
duration=${DURATION:-8}
# One line, no spaces: client_ab.py splits extra flags on spaces.
data='-d={"request":{"name":"n{{.RequestNumber}}","d":4.55332,"f":232.3,"b":true,"n":32,"l":444325235223,"c1":"ofcouse","pets":[{"name":"Bof_the_dog","color":"BLUE"},{"name":"Kim_the_cat","color":"RED"}]}}'
common=(--rounds "$rounds" --duration "$duration" --warmup 2)
echo "## 1. constant payload (A) vs templated name (B)"
python3 client_ab.py "$new" "$new" "${common[@]}" "--b-args=$data"
echo
echo "## 2. constant metadata (A) vs per-call x-request-id (B)"
python3 client_ab.py "$new" "$new" "${common[@]}" '--b-args=-m={"x-request-id":"{{.UUID}}"}'
if [[ -n "${1:-}" ]]; then
  echo
  echo "## 3. templated payload: $1 (A) vs $new (B)"
  python3 client_ab.py "$1" "$new" "${common[@]}" "--args=$data"
fi
