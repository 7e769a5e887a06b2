#!/usr/bin/env bash
# A PostgreSQL server for tests/history.rs (run as root on Debian): installs Debian's
# postgresql if missing, starts its cluster and prints, as shell `export` lines to `eval`:
#
#   eval "$(bash scripts/test-postgres.sh)"
#
# - GRPCLAB_TEST_POSTGRES: a URL for the role `grpclab_test` (a fresh random password) and
#   its database of the same name. TCP logins on 127.0.0.1 authenticate with a password
#   (SCRAM), so the tests exercise it.
# - GRPCLAB_TEST_POSTGRES_ODD_PASSWORD: the password of the role `grpclab_test_odd` (database
#   `grpclab_test_odd`), which holds the characters that end a URL's parts (/ @ ? = & and a
#   space): the leak tests give it in every form the driver reads.
# - GRPCLAB_TEST_POSTGRES_TLS: a URL for the role `grpclab_test_tls`, which may log in over
#   TLS only (pg_hba's hostnossl ... reject), and GRPCLAB_TEST_POSTGRES_CA: the CA (PEM) of
#   the server's certificate, both made here with openssl for 127.0.0.1 and localhost.
set -euo pipefail
if ! command -v pg_lsclusters >/dev/null || ! command -v openssl >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq postgresql openssl >/dev/null
fi
if [ -z "$(pg_lsclusters --no-header)" ]; then
  pg_createcluster "$(ls /usr/lib/postgresql | sort -n | tail -1)" main >&2
fi
read -r version cluster port status _ < <(pg_lsclusters --no-header | head -1)
if [ "$status" != "online" ]; then
  pg_ctlcluster "$version" "$cluster" start >&2
fi
random() { od -An -N8 -tx8 /dev/urandom | tr -d ' \n'; }
psql_as_postgres() { su postgres -c "psql -q -p $port -v ON_ERROR_STOP=1 -c \"$1\"" >&2; }
role_with_database() { # NAME PASSWORD
  psql_as_postgres "DROP DATABASE IF EXISTS $1"
  psql_as_postgres "DROP ROLE IF EXISTS $1"
  psql_as_postgres "CREATE ROLE $1 LOGIN PASSWORD '$2'"
  su postgres -c "createdb -p $port -O $1 $1" >&2
}

password="ci-$(random)"
role_with_database grpclab_test "$password"
odd_password="ci/@?=& $(random)"
role_with_database grpclab_test_odd "$odd_password"
tls_password="ci-$(random)"
role_with_database grpclab_test_tls "$tls_password"

# TLS: a CA and a server certificate signed by it, for 127.0.0.1 and localhost.
data=$(su postgres -c "psql -tA -p $port -c 'SHOW data_directory'")
tls_dir="$data/grpclab-test-tls"
mkdir -p "$tls_dir"
(
  cd "$tls_dir"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
    -subj "/CN=grpclab test CA" -keyout ca.key -out ca.pem 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -subj "/CN=127.0.0.1" -keyout server.key -out server.csr 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > server.ext
  openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 \
    -extfile server.ext -out server.pem 2>/dev/null
  chown postgres:postgres server.key server.pem
  chmod 600 server.key
)
hba=$(su postgres -c "psql -tA -p $port -c 'SHOW hba_file'")
if ! grep -q grpclab_test_tls "$hba"; then
  sed -i "1i hostnossl all grpclab_test_tls all reject" "$hba"
fi
psql_as_postgres "ALTER SYSTEM SET ssl = on"
psql_as_postgres "ALTER SYSTEM SET ssl_cert_file = '$tls_dir/server.pem'"
psql_as_postgres "ALTER SYSTEM SET ssl_key_file = '$tls_dir/server.key'"
psql_as_postgres "SELECT pg_reload_conf()"

echo "export GRPCLAB_TEST_POSTGRES='postgres://grpclab_test:$password@127.0.0.1:$port/grpclab_test'"
echo "export GRPCLAB_TEST_POSTGRES_ODD_PASSWORD='$odd_password'"
echo "export GRPCLAB_TEST_POSTGRES_TLS='postgres://grpclab_test_tls:$tls_password@127.0.0.1:$port/grpclab_test_tls'"
echo "export GRPCLAB_TEST_POSTGRES_CA='$tls_dir/ca.pem'"
