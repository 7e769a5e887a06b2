#!/bin/sh
# Java messages and grpc-java stubs for the scenario's .proto (the Java peers: grpc_java, armeria):
# java-stubs.sh SCENARIO_DIR BUILD_DIR, with the protoc and plugin their pom.xml copied to BUILD_DIR/bin
set -eu
"$2/bin/protoc-linux-x86_64.exe" -I"$1" --java_out="$2/src" \
  --plugin=protoc-gen-grpc-java="$2/bin/protoc-gen-grpc-java-linux-x86_64.exe" \
  --grpc-java_out=@generated=omit:"$2/src" "$1/helloworld.proto"
