#!/bin/sh
# ScalaPB messages and Pekko gRPC's server side for the scenario's .proto:
# generate.sh SCENARIO_DIR BUILD_DIR. Both generators are protoc plugins run on the JVM.
set -eu
../scala-plugin.sh "$2" scalapb.ScalaPbCodeGenerator > "$2/bin/protoc-gen-scala"
../scala-plugin.sh "$2" org.apache.pekko.grpc.gen.Main > "$2/bin/protoc-gen-pekko"
chmod +x "$2/bin/protoc-gen-scala" "$2/bin/protoc-gen-pekko"
"$2/bin/protoc-linux-x86_64.exe" -I"$1" \
  --plugin=protoc-gen-scala="$2/bin/protoc-gen-scala" --scala_out="$2/src" \
  --plugin=protoc-gen-pekko="$2/bin/protoc-gen-pekko" \
  --pekko_out=language=scala,generate_client=false,generate_server=true:"$2/src" \
  "$1/helloworld.proto"
