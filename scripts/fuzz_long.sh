#!/usr/bin/env bash
# Longer fuzzing than CI's bounded run: each cargo-fuzz target for MINUTES minutes (default 10).
# A crash is minimised (cargo fuzz tmin) and copied into fuzz/regressions/<target>/, where
# `cargo test -p grpclab-h2 --test robustness` replays every file on each test run — commit
# it with the fix.
#
# Usage: scripts/fuzz_long.sh [MINUTES] [TARGET ...]   (targets: server_frames hpack_decoder client_frames)
# Needs: cargo-fuzz (`cargo install cargo-fuzz --locked`); runs on stable with --sanitizer none.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
minutes="${1:-10}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(server_frames hpack_decoder client_frames)
fi
command -v cargo-fuzz >/dev/null || { echo "cargo-fuzz is missing: cargo install cargo-fuzz --locked" >&2; exit 2; }
found=0
for target in "${targets[@]}"; do
  echo "== $target for $minutes min"
  mkdir -p "artifacts/$target" "regressions/$target"
  before=$(ls "artifacts/$target" | wc -l)
  if cargo fuzz run --sanitizer none "$target" -- -max_total_time=$((minutes * 60)) -print_final_stats=1; then
    echo "$target: no crash"
  fi
  for crash in artifacts/"$target"/crash-* artifacts/"$target"/oom-* artifacts/"$target"/timeout-*; do
    [ -e "$crash" ] || continue
    name=$(basename "$crash")
    [ -e "regressions/$target/$name" ] && continue
    echo "$target: minimising $name"
    cargo fuzz tmin --sanitizer none "$target" "$crash" -- -runs=10000 >/dev/null 2>&1 || true
    minimised=$(ls -t artifacts/"$target"/minimized-from-* 2>/dev/null | head -1 || true)
    cp "${minimised:-$crash}" "regressions/$target/$name"
    echo "$target: regression input fuzz/regressions/$target/$name"
    found=1
  done
  after=$(ls "artifacts/$target" | wc -l)
  echo "$target: $((after - before)) new artifact(s)"
done
exit $found
