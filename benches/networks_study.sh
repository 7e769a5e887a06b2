#!/usr/bin/env bash
# docs/studies/networks.md: req/s and p99 of lab, tonic-mt, grpc-go and grpc-java against
# the round trip (0, 1, 10, 50, 100 ms) and loss (0.1 %, 1 % at a 10 ms round trip), on
# complex_proto and large_complex (166 kB messages, where HTTP/2 windows bind), with
# grpc_bench's defaults otherwise (1000 streams, 50 connections, server on 1 CPU).
#
#   sudo bash benches/networks_study.sh [RESULTS_DIR]
#
# Each network is a row axis (`--network`): the link is grpclab's own emulation between two
# network namespaces (this kernel has no sch_netem). Root needed; the peers are built by
# the suite (bash peers/install.sh go jvm for their toolchains).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp/networks-study}"
bin="${GRPCLAB:-target/release/grpclab}"
mkdir -p "$out"
for scenario in ${SCENARIOS:-complex_proto large_complex}; do
  GRPC_REQUEST_SCENARIO="$scenario" GRPC_BENCHMARK_DURATION="${DURATION:-5s}" \
  GRPC_BENCHMARK_WARMUP="${WARMUP:-5s}" \
    "$bin" bench --suite peers/suite.toml --no-history --results-dir "$out/$scenario" \
      rust_lab rust_tonic_mt go_grpc java_hotspot_grpc_pgc \
      --network lo --network delay=500us --network delay=5ms --network delay=25ms \
      --network delay=50ms --network delay=5ms,loss=0.1% --network delay=5ms,loss=1%
done
# large_complex again on a jumbo link (mtu=65535, as loopback's): 44x fewer packets, so the
# link's emulation (~3-25 µs of CPU a packet) stops binding before the servers do.
GRPC_REQUEST_SCENARIO=large_complex GRPC_BENCHMARK_DURATION="${DURATION:-5s}" \
GRPC_BENCHMARK_WARMUP="${WARMUP:-5s}" \
  "$bin" bench --suite peers/suite.toml --no-history --results-dir "$out/large_complex_jumbo" \
    rust_lab rust_tonic_mt go_grpc java_hotspot_grpc_pgc \
    --network lo --network delay=500us,mtu=65535 --network delay=5ms,mtu=65535 \
    --network delay=50ms,mtu=65535
# One connection, 16 streams of 166 kB across a 100 ms round trip: where the connection
# windows bind (the study's "One connection" table).
GRPC_REQUEST_SCENARIO=large_complex GRPC_BENCHMARK_DURATION="${DURATION_ONE:-10s}" \
GRPC_BENCHMARK_WARMUP=3s GRPC_CLIENT_CONNECTIONS=1 GRPC_CLIENT_CONCURRENCY=16 \
  "$bin" bench --suite peers/suite.toml --no-history --results-dir "$out/one_connection" \
    rust_lab rust_tonic_mt go_grpc java_hotspot_grpc_pgc --network delay=50ms,mtu=65535 \
    > "$out/one_connection.table.txt"
for scenario in complex_proto large_complex large_complex_jumbo; do
  echo "## $scenario"
  cat "$out/$scenario"/*/sweep.md
done
