#!/bin/sh
# ScalaPB messages (with grpc-java method descriptors) and zio-grpc services for the scenario's
# .proto: generate.sh SCENARIO_DIR BUILD_DIR. Both generators are protoc plugins run on the JVM.
set -eu
../scala-plugin.sh "$2" scalapb.ScalaPbCodeGenerator > "$2/bin/protoc-gen-scala"
../scala-plugin.sh "$2" scalapb.zio_grpc.ZioCodeGenerator > "$2/bin/protoc-gen-zio"
chmod +x "$2/bin/protoc-gen-scala" "$2/bin/protoc-gen-zio"
"$2/bin/protoc-linux-x86_64.exe" -I"$1" \
  --plugin=protoc-gen-scala="$2/bin/protoc-gen-scala" --scala_out=grpc:"$2/src" \
  --plugin=protoc-gen-zio="$2/bin/protoc-gen-zio" --zio_out="$2/src" "$1/helloworld.proto"
