#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The unit's SystemCallFilter= against the system calls rlockd really makes:
# rlockd runs under strace with a real redis-server through a workload that
# touches every path the service takes (start, sessions and locks over a unix
# socket, Stats, /metrics, /readyz, a SIGHUP reload, the systemd notify
# protocol with its watchdog, the journald stream check, a SIGTERM shutdown),
# and every call it made must be allowed by the unit's filter: in the sets its
# SystemCallFilter= lines allow and in none they deny (as systemd-analyze
# syscall-filter expands them). A call outside would fail with EPERM under
# systemd, which these machines cannot boot.
#   syscalls_check.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
unit=$src/systemd/rlockd.service
tmp=$(mktemp -d /tmp/rlock-sys.XXXXXX)
redis_pid=""
rlockd_pid=""
strace_pid=""
cleanup() {
    for pid in $rlockd_pid $strace_pid $redis_pid; do
        kill -KILL "$pid" 2>/dev/null || true
    done
    wait 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; [ -f "$tmp/rlockd.log" ] && tail -20 "$tmp/rlockd.log"; exit 1; }
command -v strace >/dev/null || fail "strace is not installed"

# Wait up to $1 tenths of a second for the command in the rest of the arguments.
wait_for() {
    local n=$1
    shift
    for _ in $(seq "$n"); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    return 1
}
http_get() { # SOCKET PATH: the status code
    /usr/bin/python3 - "$1" "$2" <<'PY'
import http.client, socket, sys
class C(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(5)
        self.sock.connect(sys.argv[1])
c = C("localhost", timeout=5)
c.request("GET", sys.argv[2])
print(c.getresponse().status)
PY
}

redis-server --port 0 --unixsocket "$tmp/redis.sock" --unixsocketperm 700 --save '' \
    --appendonly no --dir "$tmp" --loglevel warning --daemonize no >"$tmp/redis.log" 2>&1 &
redis_pid=$!
wait_for 100 redis-cli -s "$tmp/redis.sock" ping || fail "redis-server did not start"

cat > "$tmp/rlockd.conf" <<CONF
[server]
listen = unix:$tmp/rlockd.sock

[redis]
address = unix:$tmp/redis.sock

[metrics]
listen = unix:$tmp/metrics.sock
CONF
# The notify socket: a bound datagram socket that nobody reads is enough for sendto.
/usr/bin/python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])' "$tmp/notify.sock"
[ -S "$tmp/notify.sock" ] || fail "no notify socket"
# JOURNAL_STREAM naming the log file: the stderr check takes the journald path.
touch "$tmp/rlockd.log"
journal=$(stat -c '%d:%i' "$tmp/rlockd.log")
NOTIFY_SOCKET=$tmp/notify.sock WATCHDOG_USEC=400000 JOURNAL_STREAM=$journal \
    strace -f -qq -o "$tmp/trace" "$build/bin/rlockd" -c "$tmp/rlockd.conf" \
    >>"$tmp/rlockd.log" 2>&1 &
strace_pid=$!
rlockd_pid=$strace_pid # until rlockd's own pid is known: strace's first line names it

ctl=$build/bin/rlockctl
export RLOCK_SERVER=unix:$tmp/rlockd.sock
wait_for 200 "$ctl" ping || fail "rlockd did not come up"
rlockd_pid=$(sed -n '1s/^\([0-9]*\) .*/\1/p' "$tmp/trace")
[ -n "$rlockd_pid" ] && [ "$rlockd_pid" != "$strace_pid" ] || fail "no rlockd pid in the trace"
"$ctl" run --ttl 1s sys-1 -- sleep 1 || fail "rlockctl run"
"$ctl" stats --json >/dev/null || fail "rlockctl stats"
[ "$(http_get "$tmp/metrics.sock" /metrics)" = 200 ] || fail "/metrics"
[ "$(http_get "$tmp/metrics.sock" /readyz)" = 200 ] || fail "/readyz"
kill -HUP "$rlockd_pid"
wait_for 50 grep -q "reloaded" "$tmp/rlockd.log" || fail "no reload"
"$ctl" ping >/dev/null || fail "ping after the reload"
kill -TERM "$rlockd_pid"
for _ in $(seq 100); do kill -0 "$strace_pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$strace_pid" 2>/dev/null && fail "rlockd did not exit on SIGTERM"
wait "$strace_pid" || fail "rlockd (under strace) exited with $?"
rlockd_pid=""
strace_pid=""
grep -q 'WATCHDOG=1' "$tmp/trace" || fail "the watchdog path did not run"
grep -q '^<6>' "$tmp/rlockd.log" || fail "the journald path did not run"

# The calls made (strace lines: "PID name(args..."), and what the unit allows.
sed -n 's/^[0-9]* *\([a-z0-9_]*\)(.*/\1/p' "$tmp/trace" | sort -u > "$tmp/used"
[ "$(wc -l < "$tmp/used")" -gt 20 ] || fail "strace saw too few calls: $(cat "$tmp/used")"
expand() { # a syscall set of systemd-analyze, its nested sets expanded
    systemd-analyze syscall-filter "$1" | tail -n +2 | sed 's/^ *//; /^#/d; /^$/d' |
        while read -r s; do
            case $s in @*) expand "$s" ;; *) echo "$s" ;; esac
        done
}
: > "$tmp/allowed"
: > "$tmp/denied"
# A value starting with "~" denies every set it lists; otherwise it allows them.
while read -r line; do
    value=${line#SystemCallFilter=}
    list=allowed
    case $value in '~'*) list=denied value=${value#\~} ;; esac
    for set in $value; do
        expand "$set" >> "$tmp/$list"
    done
done < <(grep '^SystemCallFilter=' "$unit")
sort -u -o "$tmp/allowed" "$tmp/allowed"
sort -u -o "$tmp/denied" "$tmp/denied"
[ -s "$tmp/allowed" ] || fail "the unit has no SystemCallFilter= allow list"
outside=$(comm -23 "$tmp/used" "$tmp/allowed" | tr '\n' ' ')
[ -z "$outside" ] || fail "rlockd calls what the unit does not allow: $outside"
denied=$(comm -12 "$tmp/used" "$tmp/denied" | tr '\n' ' ')
[ -z "$denied" ] || fail "rlockd calls what the unit denies: $denied"
echo "syscalls check: ok ($(wc -l < "$tmp/used") calls, all in the unit's filter)"
