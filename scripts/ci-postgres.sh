#!/usr/bin/env bash
# A throwaway PostgreSQL for the archive tests (docs/fleet.md): Debian's
# `postgresql` package, a cluster in a temporary directory owned by a
# non-root user, listening on a unix socket and on TLS-only 127.0.0.1, with role
# `pathsonde` and database `pathsonde_test`.  Idempotent: a second call
# finds the cluster running and only prints the line again.
#
# Prints two lines on stdout, for `eval`:
#   export PATHSONDE_TEST_POSTGRES=postgresql://pathsonde@/pathsonde_test?host=DIR&port=P
#   export PATHSONDE_TEST_POSTGRES_TLS=postgresql://pathsonde@localhost:P/pathsonde_test \
#          PATHSONDE_TEST_POSTGRES_CA=DIR/root.crt   (TLS-only TCP; DIR/root.crt is the throwaway CA)
# and writes the same line to $PATHSONDE_PG_DIR/env.  Progress goes to stderr.
#
#   eval "$(bash scripts/ci-postgres.sh)"     # start (or find) it
#   (in a `set -e` script: pg_env="$(bash scripts/ci-postgres.sh)"; eval "$pg_env",
#   so that a failure stops it: `eval "$(…)"` would hide the exit code)
#   bash scripts/ci-postgres.sh --stop         # stop it and remove the directory
#
# The cluster also has a role `pathsonde_pw` (password `pathsonde-test`,
# scram-sha-256 over the socket) so that the tests exercise PGPASSWORD and
# ~/.pgpass against a real server; every other local login is trusted,
# which is why the directory is private to this machine and thrown away.
set -euo pipefail

dir="${PATHSONDE_PG_DIR:-${TMPDIR:-/tmp}/pathsonde-pg}"
data="$dir/data"
sock="$dir/sock"
say() { printf 'ci-postgres: %s\n' "$*" >&2; }

bindir() {
  local d
  d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
  [ -n "$d" ] && [ -x "$d/initdb" ] && printf '%s\n' "$d"
}

bin="$(bindir || true)"
if [ -z "$bin" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    say "PostgreSQL is not installed and installing it needs root (apt-get install postgresql)"
    exit 1
  fi
  say "installing Debian's postgresql package"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  # The package would start a cluster of its own on port 5432; this script
  # does not use it, and policy-rc.d keeps it from starting in a container.
  apt-get install -y -qq postgresql >&2
  bin="$(bindir)"
fi

# The server refuses to run as root: run it as `postgres` (the package's
# user) when we are root, else as ourselves.
if [ "$(id -u)" -eq 0 ]; then
  owner=postgres
  # From /: the postgres user may not be allowed into the checkout.
  as_owner() { (cd / && runuser -u postgres -- "$@"); }
else
  owner="$(id -un)"
  as_owner() { "$@"; }
fi

if [ "${1:-}" = "--stop" ]; then
  if [ -d "$data" ]; then
    as_owner "$bin/pg_ctl" -D "$data" -m fast -w stop >&2 || true
  fi
  rm -rf "$dir"
  say "stopped; removed $dir"
  exit 0
fi

mkdir -p "$dir" "$sock"
chown "$owner" "$dir" "$sock"
chmod 0755 "$dir" "$sock"

if [ ! -s "$data/PG_VERSION" ]; then
  rm -rf "$data"
  say "initdb $data"
  as_owner "$bin/initdb" -D "$data" -U postgres --auth-local=trust --auth-host=reject \
    --no-sync -E UTF8 --locale=C.UTF-8 >/dev/null
  # The password role authenticates for real; everyone else is trusted on
  # this private socket.
  cat >"$data/pg_hba.conf" <<'EOF'
# pathsonde's throwaway test cluster: the unix socket, and TLS-only TCP on
# 127.0.0.1 for the archive's TLS tests (a plain TCP login has no line here,
# so it is refused).
local   all pathsonde_pw scram-sha-256
local   all all          trust
hostssl all all 127.0.0.1/32 trust
EOF
  chown "$owner" "$data/pg_hba.conf"
  # A throwaway CA (root.crt, what a client checks against) and a server
  # certificate it signed naming only "localhost": verify-full to localhost
  # passes, to 127.0.0.1 fails, verify-ca passes both.
  say "a throwaway CA and server certificate for TLS"
  openssl req -x509 -newkey rsa:2048 -nodes -days 7 -subj "/CN=pathsonde test CA" \
    -keyout "$dir/ca.key" -out "$dir/root.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj /CN=localhost \
    -keyout "$data/server.key" -out "$dir/server.csr" 2>/dev/null
  printf 'subjectAltName=DNS:localhost\nbasicConstraints=critical,CA:FALSE\n' >"$dir/server.ext"
  openssl x509 -req -in "$dir/server.csr" -CA "$dir/root.crt" -CAkey "$dir/ca.key" \
    -CAcreateserial -days 7 -extfile "$dir/server.ext" -out "$data/server.crt" 2>/dev/null
  rm -f "$dir/ca.key" "$dir/server.csr" "$dir/server.ext" "$dir/root.srl"
  chown "$owner" "$data/server.key" "$data/server.crt"
  chmod 0600 "$data/server.key"
  chmod 0644 "$dir/root.crt"
  # A free TCP port, kept for the cluster's life (the socket's name carries
  # it too).
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' >"$dir/port"
fi
port="$(cat "$dir/port")"

if ! as_owner "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then
  say "starting on unix socket $sock and TLS-only 127.0.0.1:$port"
  as_owner "$bin/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 30 \
    -o "-k $sock -p $port -c listen_addresses=127.0.0.1 -c max_connections=200 -c ssl=on -c ssl_cert_file=$data/server.crt -c ssl_key_file=$data/server.key" start >/dev/null
fi

psql_admin() { "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$sock" -p "$port" -U postgres -d postgres "$@"; }
has() { [ "$(psql_admin -tAc "$1")" = "1" ]; }
has "SELECT 1 FROM pg_roles WHERE rolname = 'pathsonde'" ||
  psql_admin -c "CREATE ROLE pathsonde LOGIN CREATEDB CREATEROLE"
has "SELECT 1 FROM pg_roles WHERE rolname = 'pathsonde_pw'" ||
  psql_admin -c "CREATE ROLE pathsonde_pw LOGIN PASSWORD 'pathsonde-test'"
has "SELECT 1 FROM pg_database WHERE datname = 'pathsonde_test'" ||
  psql_admin -c "CREATE DATABASE pathsonde_test OWNER pathsonde"
# The password role may use the test database (its own schemas there).
psql_admin -c "GRANT CREATE, CONNECT ON DATABASE pathsonde_test TO pathsonde_pw"

line="export PATHSONDE_TEST_POSTGRES='postgresql://pathsonde@/pathsonde_test?host=$sock&port=$port'"
tls="export PATHSONDE_TEST_POSTGRES_TLS='postgresql://pathsonde@localhost:$port/pathsonde_test' PATHSONDE_TEST_POSTGRES_CA='$dir/root.crt'"
printf '%s\n%s\n' "$line" "$tls" >"$dir/env"
say "ready: $("$bin/postgres" --version)"
printf '%s\n%s\n' "$line" "$tls"
