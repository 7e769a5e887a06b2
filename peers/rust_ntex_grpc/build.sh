#!/bin/sh
# Builds the ntex-grpc peer: ntex-grpc-codegen (crates.io, pinned) generates the scenario's
# messages and service, then cargo builds the server with the versions Cargo.lock pins. ntex 4
# asks for Rust 1.97: the machine's nightly toolchain builds both. build.sh SCENARIO_DIR BUILD_DIR
set -eu
scenario=$1
out=$(mkdir -p "$2" && cd "$2" && pwd)
src="$out/src"
rm -rf "$src"
mkdir -p "$src/src"
cp Cargo.toml Cargo.lock "$src/"
cp src/main.rs "$src/src/"
cargo +nightly install --quiet --locked ntex-grpc-codegen --version 1.0.0 --root "$out/tools"
"$out/tools/bin/ntex-grpc" "$scenario/helloworld.proto" helloworld.rs --out-dir "$src/src" \
  --include-dir "$scenario" >/dev/null
CARGO_TARGET_DIR="$out/target" cargo +nightly build --quiet --release --locked \
  --manifest-path "$src/Cargo.toml"
cp "$out/target/release/server" "$out/server"
rm -rf "$out/target"
