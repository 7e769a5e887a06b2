#!/usr/bin/env bash
# Installs every peer's toolchain on a fresh Debian machine, from Debian's packages, PyPI, npm,
# Maven Central and the Go module proxy (the registries this machine reaches). Idempotent: what is there is left alone.
#
#   bash peers/install.sh            # everything
#   bash peers/install.sh go cpp     # some: go, cpp, jvm, python, node, rust, clients
#
# A peer whose toolchain is missing is not fatal: `grpclab bench --suite peers/suite.toml`
# shows it as one SKIPPED row naming what to install.
set -euo pipefail
cd "$(dirname "$0")"

want=("$@")
# The other load generators' versions (the clients toolchain).
GHZ_VERSION=v0.121.0
FORTIO_VERSION=v1.68.2
[ ${#want[@]} -eq 0 ] && want=(go cpp jvm python node rust clients)

apt_install() {
  local missing=()
  for package in "$@"; do
    dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

for toolchain in "${want[@]}"; do
  case "$toolchain" in
    go)
      # Go itself (the machine's, or Debian's when there is none: grpc-go 1.85 needs Go 1.24 or
      # newer) and protoc; grpc-go, protobuf-go and the protoc plugins come from the Go module
      # proxy when the peer is built (peers/go_grpc/build.sh, pinned by go.mod and go.sum).
      command -v go >/dev/null || apt_install golang-go
      apt_install protobuf-compiler
      ;;
    cpp)
      apt_install g++ make pkg-config libgrpc++-dev protobuf-compiler-grpc protobuf-compiler \
        libprotobuf-dev
      ;;
    jvm)
      # A JDK and Maven, then every JVM peer built once into a scratch folder: the libraries,
      # the Scala compiler, protoc and the code generators land in Maven's local repository
      # (~/.m2), so later builds (one per scenario family, maybe several at once) download
      # nothing; Maven 3.8's local repository is not safe for concurrent downloads.
      command -v java >/dev/null && command -v mvn >/dev/null || apt_install default-jdk-headless maven
      # A marker per set of POMs in the local repository: done once, until a POM changes.
      marker="${MAVEN_REPO_LOCAL:-$HOME/.m2/repository}/.grpclab-peers-$(cat jvm/*/pom.xml jvm/*/codegen.xml | sha256sum | cut -c1-16)"
      [ -f "$marker" ] && { echo "peers/install.sh: jvm ready"; continue; }
      scratch=$(mktemp -d)
      for server in jvm/*/pom.xml; do
        server=$(basename "$(dirname "$server")")
        if ! (cd jvm && ./build.sh "$server" ../../scenarios/string_10B "$scratch/$server") >"$scratch/log" 2>&1; then
          tail -30 "$scratch/log" >&2
          echo "peers/install.sh: the JVM peer '$server' did not build (above)" >&2
          rm -rf "$scratch"
          exit 1
        fi
      done
      rm -rf "$scratch"
      touch "$marker"
      ;;
    python)
      if ! python3 -c "import grpc, grpc_tools" 2>/dev/null; then
        python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
          grpcio grpcio-tools
      fi
      ;;
    node)
      command -v node >/dev/null && command -v npm >/dev/null || apt_install nodejs npm
      (cd node_grpcjs && { [ -d node_modules/@grpc/grpc-js ] || npm install --silent --no-audit --no-fund; })
      ;;
    rust)
      # rust_ntex_grpc: ntex 4 asks for Rust 1.97, newer than the stable toolchain here; the
      # machine's image carries a nightly that is. Its crates come from crates.io at build time.
      if ! cargo +nightly --version >/dev/null 2>&1; then
        rustup toolchain install nightly --profile minimal || {
          echo "peers/install.sh: no nightly Rust and rustup could not install one; rust_ntex_grpc will be SKIPPED" >&2
          exit 1
        }
      fi
      ;;
    clients)
      # Other load generators, for tests/ghz_differential.rs and benches/clients.py: ghz and
      # fortio from the Go module proxy, at pinned versions, into Go's bin folder ($(go env
      # GOPATH)/bin). k6 is not installed: the registry here marks it not to be used (AGPL).
      command -v go >/dev/null || apt_install golang-go
      # fortio: 1.68.2, the newest whose dependencies the proxy here serves (1.69 and later
      # need grol.io/grol, refused).
      gobin="$(go env GOPATH)/bin"
      installed() { [ -x "$gobin/$1" ] && go version -m "$gobin/$1" | grep -q "^[[:space:]]*mod[[:space:]].*[[:space:]]$2[[:space:]]"; }
      installed ghz "$GHZ_VERSION" || go install "github.com/bojand/ghz/cmd/ghz@$GHZ_VERSION"
      installed fortio "$FORTIO_VERSION" || go install "fortio.org/fortio@$FORTIO_VERSION"
      ;;
    *)
      echo "unknown toolchain '$toolchain': choose go, cpp, jvm, python, node, rust or clients" >&2
      exit 2
      ;;
  esac
  echo "peers/install.sh: $toolchain ready"
done
