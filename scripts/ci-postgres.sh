#!/usr/bin/env bash
# A throwaway PostgreSQL for the archive tests (docs/fleet.md): Debian's
# `postgresql` package, a cluster in a temporary directory owned by a
# non-root user, listening on a unix socket only (no TCP), with role
# `pathsonde` and database `pathsonde_test`.  Idempotent: a second call
# finds the cluster running and only prints the line again.
#
# Prints one line on stdout, for `eval`:
#   export PATHSONDE_TEST_POSTGRES=postgresql://pathsonde@/pathsonde_test?host=DIR
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
# pathsonde's throwaway test cluster: unix socket only.
local all pathsonde_pw scram-sha-256
local all all          trust
EOF
  chown "$owner" "$data/pg_hba.conf"
fi

if ! as_owner "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then
  say "starting on unix socket $sock (no TCP)"
  as_owner "$bin/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 30 \
    -o "-k $sock -c listen_addresses='' -c max_connections=200" start >/dev/null
fi

psql_admin() { "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$sock" -U postgres -d postgres "$@"; }
has() { [ "$(psql_admin -tAc "$1")" = "1" ]; }
has "SELECT 1 FROM pg_roles WHERE rolname = 'pathsonde'" ||
  psql_admin -c "CREATE ROLE pathsonde LOGIN CREATEDB CREATEROLE"
has "SELECT 1 FROM pg_roles WHERE rolname = 'pathsonde_pw'" ||
  psql_admin -c "CREATE ROLE pathsonde_pw LOGIN PASSWORD 'pathsonde-test'"
has "SELECT 1 FROM pg_database WHERE datname = 'pathsonde_test'" ||
  psql_admin -c "CREATE DATABASE pathsonde_test OWNER pathsonde"
# The password role may use the test database (its own schemas there).
psql_admin -c "GRANT CREATE, CONNECT ON DATABASE pathsonde_test TO pathsonde_pw"

line="export PATHSONDE_TEST_POSTGRES='postgresql://pathsonde@/pathsonde_test?host=$sock'"
printf '%s\n' "$line" >"$dir/env"
say "ready: $("$bin/postgres" --version)"
printf '%s\n' "$line"
