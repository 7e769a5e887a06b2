#!/usr/bin/env bash
# The regression gate A/A on the real server: `grpclab compare lab lab --fail-if ...` N times
# (default 20) at each confidence level; prints how many runs exited 0 (passed), 3 (the gate
# failed: a false alarm, since both sides are the same build) or anything else. The gate's
# promise is at least 19 of 20 passes.
#
#   bash benches/gate_aa.sh [RUNS] [ROUNDS]      (GRPCLAB=path/to/grpclab to pick a build)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-20}
rounds=${2:-3}
grpclab=${GRPCLAB:-target/release/grpclab}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '%-10s %6s %6s %8s %8s\n' confidence rounds passed failed other
for level in 0.999 0.95; do
  passed=0 failed=0 other=0
  for _ in $(seq "$runs"); do
    code=0
    "$grpclab" compare lab lab --rounds "$rounds" --confidence "$level" \
      --duration 1s --warmup 0s --connections 2 --concurrency 20 \
      --fail-if 'req/s<-5%' --fail-if 'p99>+10%' --fail-if 'cpu/call>+5%' \
      --results-dir "$work" >/dev/null 2>"$work/stderr" || code=$?
    case $code in
      0) passed=$((passed + 1)) ;;
      3) failed=$((failed + 1)); grep -h "FAILED" "$work"/*/compare.txt | tail -n 3 >&2 || true ;;
      *) other=$((other + 1)); tail -n 2 "$work/stderr" >&2 ;;
    esac
    rm -rf "${work:?}"/2*
  done
  printf '%-10s %6s %6s %8s %8s\n' "$level" "$rounds" "$passed" "$failed" "$other"
done
