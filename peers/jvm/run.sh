#!/bin/sh
# Starts a JVM peer built by build.sh (main class GreeterServer): run.sh PORT BUILD_DIR [CERT KEY]
#
# grpc_bench's JVM settings: ParallelGC (its `_pgc` rows), heap fixed at 70 % of
# GRPC_SERVER_RAM (grpc_bench sets Min/MaxRAMPercentage=70 of the container's memory).
# JVM_OPTS adds flags after these (an experiment's change, say), JAVA_HOME picks the JDK.
set -eu
port=$1
out=$2
shift 2
ram=${GRPC_SERVER_RAM:-512m}
case "$ram" in
  *[gG]) mib=$(( ${ram%[gG]} * 1024 )) ;;
  *[mM]) mib=${ram%[mM]} ;;
  *[kK]) mib=$(( ${ram%[kK]} / 1024 )) ;;
  *) mib=$(( ram / 1048576 )) ;;
esac
heap=$(( mib * 70 / 100 ))
java=java
[ -n "${JAVA_HOME:-}" ] && java="$JAVA_HOME/bin/java"
# shellcheck disable=SC2086 # JVM_OPTS is a list of flags
exec "$java" -XX:+UseParallelGC -Xms${heap}m -Xmx${heap}m ${JVM_OPTS:-} \
  -cp "$out/target/classes:$(cat "$out/classpath.txt")" GreeterServer "$port" "$@"
