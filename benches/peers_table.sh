#!/usr/bin/env bash
# grpc_bench's table on this machine: every peer and built-in of peers/suite.toml at
# grpc_bench's defaults (1 server CPU, 512 MiB, 50 connections, 1000 streams, 20 s after a
# 5 s warmup), for each of grpc_bench's six unary scenarios (or those named). Prints each table.
#
#   bash benches/peers_table.sh [SCENARIO ...]
#
# Needs the toolchains (bash peers/install.sh); a missing one shows as a SKIPPED row.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
scenarios=("$@")
[ ${#scenarios[@]} -eq 0 ] && scenarios=(complex_proto string_10B string_100B string_1kB string_10kB large_complex)
for scenario in "${scenarios[@]}"; do
  echo "== $scenario"
  env -u GRPC_BENCHMARK_DURATION -u GRPC_BENCHMARK_WARMUP -u GRPC_SERVER_CPUS -u GRPC_SERVER_RAM \
    -u GRPC_CLIENT_CONNECTIONS -u GRPC_CLIENT_CONCURRENCY -u GRPC_CLIENT_QPS \
    GRPC_REQUEST_SCENARIO="$scenario" \
    target/release/grpclab bench --suite peers/suite.toml --results-dir results/peers 2>/dev/null
done
