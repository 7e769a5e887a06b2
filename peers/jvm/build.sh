#!/bin/sh
# Builds one JVM peer with Maven, everything from Maven Central: build.sh SERVER SCENARIO_DIR BUILD_DIR
#
# SERVER is a folder here (grpc_java, armeria, zio, pekko). Its pom.xml names the libraries,
# the code generators (provided scope: on the generator's class path, not the server's) and the
# executables (protoc, protoc-gen-grpc-java) copied by `dependency:copy`; its generate.sh (or,
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

set -- -B -q -f "$here/$server/pom.xml" -Dout="$out"
[ -n "${MAVEN_REPO_LOCAL:-}" ] && set -- "$@" -Dmaven.repo.local="$MAVEN_REPO_LOCAL"

rm -rf "$out/src" "$out/target"
mkdir -p "$out/src" "$out/bin"
mvn "$@" dependency:copy
chmod +x "$out"/bin/*
# The server's class path (compile and runtime scopes) and the generators' (compile and provided).
mvn "$@" dependency:build-classpath -DincludeScope=runtime -Dmdep.outputFile="$out/classpath.txt"
mvn "$@" dependency:build-classpath -DincludeScope=compile -Dmdep.outputFile="$out/codegen-classpath.txt"
if [ -x "$server/generate.sh" ]; then
  (cd "$server" && ./generate.sh "$scenario" "$out")
else
  ./java-stubs.sh "$scenario" "$out"
fi
cp "$server"/GreeterServer.* "$out/src/"
mvn "$@" compile
