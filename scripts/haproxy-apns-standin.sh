#!/usr/bin/env bash
# A fast APNs stand-in for benchmarks: haproxy (Debian's `haproxy` package), one thread,
# answering every HTTP/2 POST itself with 200 and a fresh apns-id (a UUID per answer, as APNs
# does), after reading the body, optionally holding every answer RTT_MS milliseconds first.
# This is the kind of stand-in the C pushd was measured against (see docs/benchmarks.md);
# it costs far less CPU per request than our simulator, so the gateway's own speed shows.
#
#   scripts/haproxy-apns-standin.sh start [PORT [RTT_MS [LOG_ADDR]]]
#       prints: APNS_HOST=127.0.0.1:PORT APNS_CA=FILE STANDIN_ROOT=DIR STANDIN_PID=PID
#   scripts/haproxy-apns-standin.sh stop ROOT
#
# RTT_MS (default 0) holds each answer that long with haproxy's tarpit (`timeout tarpit`,
# `http-request tarpit deny_status 200`), which waits on haproxy's own timers: native speed,
# no Lua. 0 answers at once (`http-request return`). Either way the apns-id is `%[uuid()]`.
# It accepts any provider token and any client (no client certificate is asked for), never
# answers anything but 200, and listens on loopback only.
#
# LOG_ADDR (127.0.0.1:PORT, optional; `pushgate-bench transactional` and `hol`) sends one raw
# syslog datagram there per request whose body contains `"bench_seq":`, and none for any other:
# "RECEIVED_US BODY", RECEIVED_US being the wall clock in microseconds when the request and its
# body were in (read by a rule, before the answer is held), BODY the request's body.
set -euo pipefail

command="${1:-}"
case "$command" in
start)
    command -v haproxy >/dev/null || { echo "haproxy is not installed (apt-get install haproxy)" >&2; exit 1; }
    port="${2:-0}"
    rtt_ms="${3:-0}"
    log_addr="${4:-}"
    case "$rtt_ms" in ''|*[!0-9]*) echo "RTT_MS must be a whole number of milliseconds" >&2; exit 64 ;; esac
    case "$log_addr" in ''|127.0.0.1:[0-9]*) ;; *) echo "LOG_ADDR must be 127.0.0.1:PORT" >&2; exit 64 ;; esac
    if [ "$port" = 0 ]; then
        port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    fi
    root=$(mktemp -d /tmp/pushgate-haproxy.XXXXXX)
    # A throwaway CA and a server certificate for 127.0.0.1 and localhost.
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -subj "/CN=pushgate bench stand-in CA" -keyout "$root/ca.key" -out "$root/ca.pem" 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -subj "/CN=127.0.0.1" -keyout "$root/server.key" -out "$root/server.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' > "$root/ext.cnf"
    openssl x509 -req -in "$root/server.csr" -CA "$root/ca.pem" -CAkey "$root/ca.key" -CAcreateserial \
        -days 2 -extfile "$root/ext.cnf" -out "$root/server.crt" 2>/dev/null
    cat "$root/server.crt" "$root/server.key" > "$root/server.pem"
    cat > "$root/haproxy.cfg" <<EOF
global
    nbthread 1
    pidfile $root/haproxy.pid
    tune.h2.max-concurrent-streams 1000
defaults
    mode http
    timeout client 300s
    timeout connect 5s
    timeout server 300s
    timeout http-request 300s
frontend apns
    bind 127.0.0.1:$port ssl crt $root/server.pem alpn h2
    http-request wait-for-body time 1s
EOF
    if [ -n "$log_addr" ]; then
        # A log line is written when the answer has gone, so the receipt time is taken by a rule
        # before the answer is held. Requests without the marker (a broadcast's) are not logged.
        cat >> "$root/haproxy.cfg" <<EOF
    log $log_addr len 4096 format raw local0
    log-format "%[var(txn.received)] %[var(txn.body)]"
    http-request set-log-level silent unless { req.body -m sub "\"bench_seq\":" }
    http-request set-var(txn.received) date(0,us)
    http-request set-var(txn.body) req.body
EOF
    fi
    if [ "$rtt_ms" -gt 0 ]; then
        printf '    timeout tarpit %sms\n    http-request tarpit deny_status 200 hdr apns-id "%%[uuid()]"\n' \
            "$rtt_ms" >> "$root/haproxy.cfg"
    else
        echo '    http-request return status 200 hdr apns-id "%[uuid()]"' >> "$root/haproxy.cfg"
    fi
    haproxy -D -f "$root/haproxy.cfg" >"$root/haproxy.log" 2>&1
    for _ in $(seq 50); do [ -s "$root/haproxy.pid" ] && break; sleep 0.1; done
    echo "APNS_HOST=127.0.0.1:$port APNS_CA=$root/ca.pem STANDIN_ROOT=$root STANDIN_PID=$(cat "$root/haproxy.pid")"
    ;;
stop)
    root="${2:?usage: $0 stop ROOT}"
    if [ -f "$root/haproxy.pid" ]; then kill "$(cat "$root/haproxy.pid")" 2>/dev/null || true; fi
    rm -rf "$root"
    ;;
*)
    echo "usage: $0 start [PORT [RTT_MS [LOG_ADDR]]] | stop ROOT" >&2
    exit 64
    ;;
esac
