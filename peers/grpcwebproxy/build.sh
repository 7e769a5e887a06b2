#!/bin/sh
# grpcwebproxy (improbable-eng/grpc-web's gRPC-Web to gRPC proxy, the role Envoy's grpc_web
# filter plays; Envoy itself is in no registry here) from the Go module proxy:
#   build.sh BUILD_DIR      -> BUILD_DIR/bin/grpcwebproxy
# It serves gRPC-Web (binary and text) over HTTP/1.1 in plaintext (HTTP/2 only with TLS)
# and calls its backend over gRPC:
#   grpcwebproxy --backend_addr=HOST:PORT --run_tls_server=false \
#     --server_bind_address=127.0.0.1 --server_http_debug_port=PORT --allow_all_origins
# It logs every call at info level; it has no flag to turn that off.
set -eu
out=$(mkdir -p "$1/bin" && cd "$1" && pwd)
GOBIN="$out/bin" GOFLAGS=-mod=mod go install github.com/improbable-eng/grpc-web/go/grpcwebproxy@v0.15.0
