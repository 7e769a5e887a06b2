#!/bin/sh
# Builds the hand-written grpc-go flow client in module mode: grpc-go, protobuf-go and the
# protoc plugins from the Go module proxy at the versions go.mod and go.sum pin, protoc from
# Debian (peers/install.sh go). build.sh BUILD_DIR  ->  BUILD_DIR/flow_client
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
src="$out/src"
rm -rf "$src"
mkdir -p "$src/session" "$out/bin"
cp "$here/main.go" "$here/go.mod" "$here/go.sum" "$src/"
export GOCACHE="$out/.gocache"
GOBIN="$out/bin" go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
GOBIN="$out/bin" go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
proto="$here/../../scenarios/session"
protoc -I"$proto" \
  --plugin=protoc-gen-go="$out/bin/protoc-gen-go" \
  --go_out="$src/session" --go_opt=paths=source_relative \
  --go_opt=Msession.proto=flowclient/session \
  --plugin=protoc-gen-go-grpc="$out/bin/protoc-gen-go-grpc" \
  --go-grpc_out="$src/session" --go-grpc_opt=paths=source_relative \
  --go-grpc_opt=Msession.proto=flowclient/session \
  "$proto/session.proto"
cd "$src" && go build -mod=mod -o "$out/flow_client" .
