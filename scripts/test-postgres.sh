#!/usr/bin/env bash
# A PostgreSQL server for tests/history.rs (run as root on Debian): installs Debian's
# postgresql if missing, starts its cluster, makes a role `grpclab_test` with a fresh random
# password and a database of the same name, and prints the URL to stdout:
#
#   export GRPCLAB_TEST_POSTGRES=$(bash scripts/test-postgres.sh)
#
# TCP logins on 127.0.0.1 authenticate with a password (SCRAM), so the tests exercise it.
set -euo pipefail
if ! command -v pg_lsclusters >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq postgresql >/dev/null
fi
if [ -z "$(pg_lsclusters --no-header)" ]; then
  pg_createcluster "$(ls /usr/lib/postgresql | sort -n | tail -1)" main >&2
fi
read -r version cluster port status _ < <(pg_lsclusters --no-header | head -1)
if [ "$status" != "online" ]; then
  pg_ctlcluster "$version" "$cluster" start >&2
fi
password="ci-$(od -An -N8 -tx8 /dev/urandom | tr -d ' \n')"
psql_as_postgres() { su postgres -c "psql -q -p $port -v ON_ERROR_STOP=1 -c \"$1\"" >&2; }
psql_as_postgres "DROP DATABASE IF EXISTS grpclab_test"
psql_as_postgres "DROP ROLE IF EXISTS grpclab_test"
psql_as_postgres "CREATE ROLE grpclab_test LOGIN PASSWORD '$password'"
su postgres -c "createdb -p $port -O grpclab_test grpclab_test" >&2
echo "postgres://grpclab_test:$password@127.0.0.1:$port/grpclab_test"
