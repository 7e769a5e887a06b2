#!/bin/sh
# Builds the connect-go peer in module mode, connect-go and protobuf-go from the Go module
# proxy at the versions go.mod and go.sum pin, the protoc plugins too; protoc from Debian:
# build.sh SCENARIO_DIR BUILD_DIR
set -eu
scenario=$1
# The streaming echo (server streaming for each protocol) comes with every scenario.
streaming=$(cd "$(dirname "$0")/../../scenarios/streaming" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
src="$out/src"
rm -rf "$src"
mkdir -p "$src/helloworld" "$src/streaming" "$out/bin"
cp main.go go.mod go.sum "$src/"
export GOCACHE="$out/.gocache"
GOBIN="$out/bin" go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
GOBIN="$out/bin" go install connectrpc.com/connect/cmd/protoc-gen-connect-go@v1.21.1
# generate DIR NAME: DIR/NAME.proto's messages and connect handlers as Go package peer/NAME.
generate() {
  protoc -I"$1" \
    --plugin=protoc-gen-go="$out/bin/protoc-gen-go" \
    --go_out="$src/$2" --go_opt=paths=source_relative \
    --go_opt=M"$2".proto=peer/"$2" \
    --plugin=protoc-gen-connect-go="$out/bin/protoc-gen-connect-go" \
    --connect-go_out="$src/$2" --connect-go_opt=paths=source_relative \
    --connect-go_opt=M"$2".proto=peer/"$2" \
    "$1/$2.proto"
}
generate "$scenario" helloworld
generate "$streaming" streaming
cd "$src" && go build -mod=mod -o "$out/server" .
