#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests: a temporary folder, a free port on 127.0.0.1, fsync off.
# Needs Debian's `postgresql` package; installs nothing. Run as root (initdb and the server run as the
# `postgres` user) or as any user allowed to run `initdb` itself.
#
#   scripts/postgres-test-cluster.sh start   prints `export PUSHGATE_TEST_POSTGRES_URL=...` and
#                                            `export PUSHGATE_TEST_POSTGRES_ROOT=...` (eval it)
#   scripts/postgres-test-cluster.sh restart ROOT   pg_ctl restart -m fast (same port), for fault tests
#   scripts/postgres-test-cluster.sh stop ROOT
#
# The cluster has a role and database `pushgate` (password `pushgate`, SCRAM over TCP, as in
# production); the unix socket in ROOT (trust) is only used to set it up.
set -euo pipefail

pg_bin() {
    local dir
    dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
    if [ -z "$dir" ] || [ ! -x "$dir/initdb" ]; then
        echo "postgres-test-cluster: no PostgreSQL server found (apt-get install postgresql)" >&2
        exit 1
    fi
    echo "$dir"
}

as_owner() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

free_port() {
    # Ask the kernel for a free port: bind port 0 and read back what it chose.
    python3 - <<'PY' 2>/dev/null || echo $((20000 + RANDOM % 20000))
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()
PY
}

start() {
    local bin root port
    bin=$(pg_bin)
    root=$(mktemp -d -t pushgate-pg.XXXXXX)
    chmod 755 "$root"
    if [ "$(id -u)" = 0 ]; then chown postgres:postgres "$root"; fi
    as_owner "$bin/initdb" -D "$root/data" -U postgres --auth-local=trust --auth-host=scram-sha-256 -E UTF8 \
        --no-sync >"$root/initdb.log" 2>&1 || { cat "$root/initdb.log" >&2; exit 1; }
    for attempt in 1 2 3 4 5; do
        port=$(free_port)
        if as_owner "$bin/pg_ctl" -D "$root/data" -l "$root/server.log" -w -t 60 -o \
            "-c listen_addresses=127.0.0.1 -p $port -k $root -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=400" \
            start >/dev/null; then
            break
        fi
        port=""
    done
    if [ -z "$port" ]; then cat "$root/server.log" >&2; exit 1; fi
    as_owner psql -h "$root" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 -q \
        -c "CREATE ROLE pushgate LOGIN PASSWORD 'pushgate' CREATEDB" -c "CREATE DATABASE pushgate OWNER pushgate" >&2
    echo "export PUSHGATE_TEST_POSTGRES_URL=postgres://pushgate:pushgate@127.0.0.1:$port/pushgate"
    echo "export PUSHGATE_TEST_POSTGRES_ROOT=$root"
}

stop() {
    local root=${1:?usage: $0 stop ROOT}
    local bin
    bin=$(pg_bin)
    if [ -f "$root/data/postmaster.pid" ]; then
        as_owner "$bin/pg_ctl" -D "$root/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$root"
}

restart() {
    local root=${1:?usage: $0 restart ROOT}
    as_owner "$(pg_bin)/pg_ctl" -D "$root/data" -l "$root/server.log" -m fast -w -t 60 restart >/dev/null
}

case "${1:-}" in
start) start ;;
restart) restart "${2:-}" ;;
stop) stop "${2:-}" ;;
*)
    echo "usage: $0 start | restart ROOT | stop ROOT" >&2
    exit 64
    ;;
esac
