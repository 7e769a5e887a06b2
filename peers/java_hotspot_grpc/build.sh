#!/bin/sh
# Builds the Java peer against Debian's grpc-java jars: build.sh SCENARIO_DIR BUILD_DIR
set -eu
scenario=$1
out=$2
cp=$(./classpath.sh)
mkdir -p "$out/src" "$out/classes"
protoc -I"$scenario" --java_out="$out/src" --grpc-java_out=@generated=omit:"$out/src" \
  --plugin=protoc-gen-grpc-java="$(command -v grpc_java_plugin)" "$scenario/helloworld.proto"
# The 1.41 plugin marks stubs @javax.annotation.Generated, which Java 11+ no longer ships;
# the annotation does nothing at run time, so it is dropped rather than adding a jar for it.
perl -0pi -e 's/\@javax\.annotation\.Generated\([^@]*?"\)\n//s' "$out/src/helloworld/GreeterGrpc.java"
javac -nowarn -d "$out/classes" -cp "$cp" GreeterServer.java $(find "$out/src" -name '*.java')
cp classpath.sh "$out/"
