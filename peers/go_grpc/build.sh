#!/bin/sh
# Builds the Go peer against Debian's grpc-go and protobuf-go (GOPATH mode over
# /usr/share/gocode: no module download): build.sh SCENARIO_DIR BUILD_DIR
set -eu
scenario=$1
out=$2
src="$out/src/peer"
mkdir -p "$src/helloworld"
cp main.go "$src/"
protoc -I"$scenario" --go_out="$src/helloworld" --go_opt=paths=source_relative \
  --go_opt=Mhelloworld.proto=peer/helloworld \
  --go-grpc_out="$src/helloworld" --go-grpc_opt=paths=source_relative \
  --go-grpc_opt=Mhelloworld.proto=peer/helloworld \
  "$scenario/helloworld.proto"
GO111MODULE=off GOPATH="$out:/usr/share/gocode" GOCACHE="$out/.gocache" go build -o "$out/server" peer
