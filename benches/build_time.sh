#!/bin/bash
# What a new user waits for: a fresh clone's `cargo build --release` (the README's first
# command builds the same), wall time, for each commit given, one after the other (never
# two at once: they would share the machine's cores). Cargo's --timings report of each is
# kept beside it to show where the time went.
#
# Usage: bash benches/build_time.sh REV [REV ...]      (e.g. c74108e HEAD)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d /tmp/grpclab-build-time.XXXXXX)
printf '%-12s %10s  %s\n' commit wall timings
for rev in "$@"; do
  commit=$(git -C "$root" rev-parse --short "$rev")
  dir="$out/$commit"
  git clone -q "$root" "$dir"
  git -C "$dir" checkout -q "$commit"
  start=$(date +%s.%N)
  (cd "$dir" && cargo build --release --timings >"$dir.log" 2>&1)
  end=$(date +%s.%N)
  timings=$(ls "$dir"/target/cargo-timings/cargo-timing-2*.html | head -1)
  printf '%-12s %8.0f s  %s\n' "$commit" "$(echo "$end - $start" | bc)" "$timings"
done
