#!/bin/sh
# Prints the classpath of Debian's grpc-java, netty and protobuf-java jars; fails naming the
# first jar that is missing.
set -eu
cp=""
for jar in grpc-api grpc-core grpc-context grpc-netty grpc-protobuf grpc-protobuf-lite grpc-stub \
  protobuf guava failureaccess netty-common netty-buffer netty-transport netty-resolver netty-codec \
  netty-codec-http netty-codec-http2 netty-codec-socks netty-handler netty-handler-proxy perfmark-api opencensus-api \
  error_prone_annotations jsr305; do
  file="/usr/share/java/$jar.jar"
  if [ -f "$file" ]; then
    cp="$cp${cp:+:}$file"
  else
    case "$jar" in
      # Optional at run time for this server: present on some Debian releases only.
      failureaccess|opencensus-api|error_prone_annotations|jsr305) ;;
      *) echo "missing $file (install libgrpc-java, libprotobuf-java, libnetty-java, libperfmark-java: bash peers/install.sh java)" >&2; exit 1 ;;
    esac
  fi
done
echo "$cp"
