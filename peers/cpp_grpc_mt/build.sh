#!/bin/sh
# Builds the C++ peer against Debian's libgrpc++: build.sh SCENARIO_DIR BUILD_DIR
set -eu
scenario=$1
out=$2
protoc -I"$scenario" --cpp_out="$out" --grpc_out="$out" \
  --plugin=protoc-gen-grpc="$(command -v grpc_cpp_plugin)" "$scenario/helloworld.proto"
g++ -O2 -std=c++17 -I"$out" server.cc "$out/helloworld.pb.cc" "$out/helloworld.grpc.pb.cc" \
  -o "$out/server" $(pkg-config --cflags --libs grpc++ protobuf) -lpthread
