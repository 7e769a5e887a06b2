#!/bin/sh
# Starts the Java peer: run.sh PORT BUILD_DIR. ParallelGC, heap fixed at 70 % of
# GRPC_SERVER_RAM (grpc_bench sets Min/MaxRAMPercentage=70 of the container's memory).
set -eu
ram=${GRPC_SERVER_RAM:-512m}
case "$ram" in
  *[gG]) mib=$(( ${ram%[gG]} * 1024 )) ;;
  *[mM]) mib=${ram%[mM]} ;;
  *[kK]) mib=$(( ${ram%[kK]} / 1024 )) ;;
  *) mib=$(( ram / 1048576 )) ;;
esac
heap=$(( mib * 70 / 100 ))
exec java -XX:+UseParallelGC -Xms${heap}m -Xmx${heap}m -cp "$2/classes:$($2/classpath.sh)" GreeterServer "$1"
