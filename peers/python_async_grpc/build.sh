#!/bin/sh
# Generates the scenario's stubs with grpcio-tools: build.sh SCENARIO_DIR BUILD_DIR
set -eu
python3 -m grpc_tools.protoc -I"$1" --python_out="$2" --grpc_python_out="$2" "$1/helloworld.proto"
