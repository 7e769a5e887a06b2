#!/bin/sh
# Prints a protoc plugin that runs a JVM code generator (a ScalaPB CodeGenApp: reads protoc's
# request on stdin, writes the response to stdout) on the class path build.sh resolved:
# scala-plugin.sh BUILD_DIR MAIN_CLASS > BUILD_DIR/bin/protoc-gen-NAME
set -eu
java=java
[ -n "${JAVA_HOME:-}" ] && java="$JAVA_HOME/bin/java"
printf '#!/bin/sh\nexec %s -cp "%s" %s\n' "$java" "$(cat "$1/codegen-classpath.txt")" "$2"
