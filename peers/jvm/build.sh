#!/bin/sh
# Builds one JVM peer with Maven, everything from Maven Central: build.sh SERVER SCENARIO_DIR BUILD_DIR
#
# SERVER is a folder here (grpc_java, armeria, zio, pekko). Its pom.xml names the libraries
# and the executables (protoc, protoc-gen-grpc-java) copied by `dependency:copy`, a Scala peer's
# codegen.xml its code generators (JVM programs run as protoc plugins: scala-plugin.sh); its generate.sh (or,
# for the Java peers, java-stubs.sh) runs protoc on the scenario's .proto into BUILD_DIR/src beside the server's own source; Maven
# compiles that folder. Maven's local repository is Maven's default (~/.m2) unless
# MAVEN_REPO_LOCAL names another, so a fresh machine downloads once and builds from nothing.
set -eu
server=$1
scenario=$(cd "$2" && pwd)
mkdir -p "$3"
out=$(cd "$3" && pwd)
here=$(pwd)
[ -f "$server/pom.xml" ] || { echo "build.sh: no JVM peer '$server' in $here (one of: $(ls -d */ | tr -d / | tr '\n' ' '))" >&2; exit 2; }

set -- -B -q -Dout="$out"
[ -n "${MAVEN_REPO_LOCAL:-}" ] && set -- "$@" -Dmaven.repo.local="$MAVEN_REPO_LOCAL"

rm -rf "$out/src" "$out/target"
mkdir -p "$out/src" "$out/bin"
mvn "$@" -f "$here/$server/pom.xml" dependency:copy
chmod +x "$out"/bin/*
# The server's class path; the code generators' (Scala peers) from their own codegen.xml, as they
# may be built for another Scala than the server (Pekko's generator is Scala 2.12).
mvn "$@" -f "$here/$server/pom.xml" dependency:build-classpath -DincludeScope=runtime -Dmdep.outputFile="$out/classpath.txt"
if [ -f "$server/codegen.xml" ]; then
  mvn "$@" -f "$here/$server/codegen.xml" dependency:build-classpath -Dmdep.outputFile="$out/codegen-classpath.txt"
fi
if [ -x "$server/generate.sh" ]; then
  (cd "$server" && ./generate.sh "$scenario" "$out")
else
  ./java-stubs.sh "$scenario" "$out"
fi
cp "$server"/GreeterServer.* "$out/src/"
mvn "$@" -f "$here/$server/pom.xml" compile
