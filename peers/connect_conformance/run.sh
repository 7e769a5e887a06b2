#!/bin/sh
# Connect's conformance suite (connectrpc.com/conformance, from the Go module proxy) with
# grpclab's client under test (crates/grpclab-conformance): the runner starts its reference
# servers on loopback, sends each test case to the client and judges what comes back.
#   run.sh [RUNNER FLAGS...]      e.g. run.sh --run 'gRPC-Web**'
# CONFORMANCE_CLIENT: the client binary (default: target/release/grpclab-conformance-client,
# built if missing). Needs Go (bash peers/install.sh go).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
version=v1.0.7
out="$here/.build"
mkdir -p "$out/bin"
GOBIN="$out/bin" go install "connectrpc.com/conformance/cmd/connectconformance@$version"
# The suite's own .proto files, read by the client at start (never copied into the repo).
proto="$(go env GOMODCACHE)/connectrpc.com/conformance@$version/proto"
client=${CONFORMANCE_CLIENT:-$root/target/release/grpclab-conformance-client}
if [ ! -x "$client" ]; then
  cargo build --release -p grpclab-conformance --manifest-path "$root/Cargo.toml"
fi
exec "$out/bin/connectconformance" --mode client --conf "$here/config.yaml" "$@" -- "$client" "$proto"
