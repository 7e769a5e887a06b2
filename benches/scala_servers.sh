#!/usr/bin/env bash
# The seed's question on the real systems (docs/studies/scala-servers.md): its configuration
# scaled to this machine — 1 server CPU, 512 MiB, 50 connections x 1000 streams, closed loop —
# for the JVM rows of peers/suite.toml on the seed's 100-byte payload (string_100B) and on
# complex_proto; then each row once more under Flight Recorder on string_100B: `--profile cpu`
# (execution samples: their shares by named frames, benches/jfr_frames.py, and GC figures from
# the recording, benches/jfr_gc.py) and `--profile alloc` (allocation sites; it fixes TLABs at
# 16 KiB, so its GC figures are not used).
#
#   bash benches/scala_servers.sh [table|profile|alloc|all]     (default: all)
#
# WARMUP (default 30s: the JIT's tiers settle within it, docs/studies/scala-servers.md says how
# that was chosen) and DURATION (default 30s) override the windows. Results under
# results/scala-servers/<stamp>/. Needs the JVM toolchain (bash peers/install.sh jvm).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
what=${1:-all}
rows=(java_hotspot_grpc_pgc java_hotspot_grpc_pgc_direct scala_zio scala_pekko java_armeria java_armeria_blocking)
seed_config() {
  env -u GRPC_CLIENT_QPS GRPC_SERVER_CPUS=1 GRPC_SERVER_RAM=512m \
    GRPC_CLIENT_CONNECTIONS=50 GRPC_CLIENT_CONCURRENCY=1000 \
    GRPC_BENCHMARK_WARMUP="${WARMUP:-30s}" GRPC_BENCHMARK_DURATION="${DURATION:-30s}" "$@"
}
if [ "$what" = table ] || [ "$what" = all ]; then
  for scenario in string_100B complex_proto; do
    echo "== $scenario"
    seed_config GRPC_REQUEST_SCENARIO="$scenario" \
      target/release/grpclab bench --suite peers/suite.toml --results-dir results/scala-servers "${rows[@]}" 2>/dev/null
  done
fi
if [ "$what" = profile ] || [ "$what" = all ]; then
  echo "== string_100B under Flight Recorder: execution samples and GC"
  seed_config GRPC_REQUEST_SCENARIO=string_100B \
    target/release/grpclab bench --suite peers/suite.toml --results-dir results/scala-servers \
    --profile cpu "${rows[@]}" 2>/dev/null
  latest=$(ls -d results/scala-servers/*/ | sort | tail -1)
  python3 benches/jfr_gc.py "$latest" "${rows[@]}"
  python3 benches/jfr_frames.py "$latest" "${rows[@]}"
fi
if [ "$what" = alloc ] || [ "$what" = all ]; then
  echo "== string_100B under Flight Recorder: allocation sites"
  seed_config GRPC_REQUEST_SCENARIO=string_100B \
    target/release/grpclab bench --suite peers/suite.toml --results-dir results/scala-servers \
    --profile alloc "${rows[@]}" 2>/dev/null
fi
