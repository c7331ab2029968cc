#!/usr/bin/env bash
# The README tour, automated: ./scripts/run with a config whose Redis is not
# reachable (so it starts its private redis-server), then two `rlockctl run`
# on one resource: the second waits until the first command has exited.
# Finally Ctrl-C (SIGINT to the process group) stops rlockd and the private Redis.
#   tour_check.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$2
work=$(mktemp -d /tmp/rlock-tour.XXXXXX)
run_pid=""
cleanup() {
    [ -n "$run_pid" ] && kill -KILL -- "-$run_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "--- scripts/run output:"; cat "$work/run.log"; exit 1; }

sock=$work/rlockd.sock
# 127.0.0.1:1 refuses connections, so scripts/run must start a private Redis.
# Only the first "listen =" is the server's; the metrics endpoint goes on a socket of its own.
sed -e "0,/^listen = .*/s||listen = unix:$sock|" -e "s|^address = .*|address = 127.0.0.1:1|" \
    -e "/^\[metrics\]/,/^\[/s|^listen = .*|listen = unix:$work/metrics.sock|" \
    "$src/conf/rlockd.conf" > "$work/rlockd.conf"

RLOCKD_CONF=$work/rlockd.conf RLOCK_BUILD=$build setsid "$src/scripts/run" \
    > "$work/run.log" 2>&1 &
run_pid=$!

ctl=$build/bin/rlockctl
export RLOCK_SERVER=unix:$sock
for _ in $(seq 600); do
    "$ctl" ping >/dev/null 2>&1 && break
    kill -0 "$run_pid" 2>/dev/null || fail "scripts/run exited early"
    sleep 0.1
done
"$ctl" ping >/dev/null || fail "rlockd did not come up"
grep -q "starting a private redis-server" "$work/run.log" || fail "no private Redis started"

# First holder: records its start and end; second: records when it got the lock.
"$ctl" run --wait 60s demo -- sh -c "date +%s%N > $work/a.start; sleep 1; date +%s%N > $work/a.end" &
a=$!
for _ in $(seq 100); do [ -s "$work/a.start" ] && break; sleep 0.05; done
[ -s "$work/a.start" ] || fail "first rlockctl run did not start its command"
"$ctl" run --wait 60s demo -- sh -c "date +%s%N > $work/b.start"
wait "$a" || fail "first rlockctl run failed"
[ "$(cat "$work/b.start")" -ge "$(cat "$work/a.end")" ] ||
    fail "the second command ran while the first still held the lock"

# Without --wait, a held lock means exit status 75.
"$ctl" run demo -- sleep 2 &
a=$!
sleep 0.5
set +e
"$ctl" run demo -- true
rc=$?
set -e
wait "$a"
[ "$rc" -eq 75 ] || fail "try-acquire of a held lock exited $rc, expected 75"

# Ctrl-C: the whole foreground group gets SIGINT; rlockd and the private Redis stop.
kill -INT -- "-$run_pid"
for _ in $(seq 100); do kill -0 "$run_pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$run_pid" 2>/dev/null && fail "scripts/run still running 10 s after SIGINT"
run_pid=""
grep -q "SIGINT: shutting down" "$work/run.log" || fail "rlockd did not shut down on SIGINT"
private=$(sed -n 's|.*starting a private redis-server on unix:\(.*\)/redis.sock.*|\1|p' "$work/run.log")
if [ -n "$private" ] && [ -e "$private" ]; then
    fail "the private Redis directory $private was left behind"
fi
echo "tour check: ok (private Redis was in ${private:-?})"
