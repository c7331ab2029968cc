#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The README tour, automated: ./scripts/run with a config whose Redis is not
# reachable (so it starts its private redis-server), then two `rlockctl run`
# on one resource: the second waits until the first command has exited.
# Finally Ctrl-C (SIGINT to the process group) stops rlockd and the private Redis.
#   tour_check.sh SOURCE_DIR BUILD_DIR
#
# Whatever fails, nothing may be left behind. scripts/run starts its private
# redis-server in a session of its own (so that Ctrl-C reaches rlockd alone),
# out of reach of a signal to scripts/run's process group; so every process
# below scripts/run (and below the backgrounded rlockctl) is recorded, by pid
# and start time, before anything is signalled, and killed by pid afterwards
# if it is still the same process.
set -euo pipefail
src=$1
build=$2
work=$(mktemp -d /tmp/rlock-tour.XXXXXX)
run_pid=""
a=""

# "PID STARTTIME" of every process below $1, read from /proc (start time: field 22 of stat).
tree_of() {
    local root=$1 st line rest
    for st in /proc/[0-9]*/stat; do
        line=$(cat "$st" 2>/dev/null) || continue
        rest=${line##*) } # the command name may hold spaces and parentheses
        # shellcheck disable=SC2086
        set -- $rest
        echo "${st//[!0-9]/} ${2:-} ${20:-}"
    done | awk -v root="$root" '
        { ppid[$1] = $2; start[$1] = $3 }
        END {
            want[root] = 1
            do {
                more = 0
                for (p in ppid)
                    if (!(p in want) && (ppid[p] in want)) { want[p] = 1; more = 1 }
            } while (more)
            for (p in want) if (p != root) print p, start[p]
        }'
}

# The start time of pid $1, or nothing when it is gone.
start_of() {
    local line
    line=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
    # shellcheck disable=SC2086
    set -- ${line##*) }
    echo "${20:-}"
}

# Stop the process $1 (a child of this script) and everything below it: SIGTERM to $1 so
# that its own clean-up runs, up to 10 s for it to go, then SIGKILL to its process group
# (when it leads one: $2 = group) and to every recorded descendant still alive.
stop_tree() {
    local root=$1 group=${2:-} tree pid start
    tree=$(tree_of "$root")
    kill -TERM "$root" 2>/dev/null || true
    for _ in $(seq 100); do
        kill -0 "$root" 2>/dev/null || break
        [ "$(cut -d' ' -f3 "/proc/$root/stat" 2>/dev/null)" = Z ] && break
        sleep 0.1
    done
    [ -n "$group" ] && kill -KILL -- "-$root" 2>/dev/null
    kill -KILL "$root" 2>/dev/null
    while read -r pid start; do
        [ -n "$pid" ] && [ "$(start_of "$pid")" = "$start" ] && kill -KILL "$pid" 2>/dev/null
    done <<< "$tree"
    return 0
}

cleanup() {
    trap - EXIT INT TERM
    set +eu # clean up as much as possible, whatever fails
    [ -n "$a" ] && stop_tree "$a"
    if [ -n "$run_pid" ]; then
        stop_tree "$run_pid" group
        # Its private Redis directory, should scripts/run not have removed it.
        private=$(sed -n 's|.*starting a private redis-server on unix:\(/tmp/rlockd-run\.[^/]*\)/redis.sock.*|\1|p' \
            "$work/run.log" 2>/dev/null)
        [ -n "$private" ] && rm -rf "$private"
    fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
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
grep -qF "rlockd listens for clients on: $RLOCK_SERVER" "$work/run.log" ||
    fail "scripts/run did not say the address it listens on"

# First holder: records its start and end; second: records when it got the lock.
"$ctl" run --wait 60s demo -- sh -c "date +%s%N > $work/a.start; sleep 1; date +%s%N > $work/a.end" &
a=$!
for _ in $(seq 100); do [ -s "$work/a.start" ] && break; sleep 0.05; done
[ -s "$work/a.start" ] || fail "first rlockctl run did not start its command"
"$ctl" run --wait 60s demo -- sh -c "date +%s%N > $work/b.start"
wait "$a" || fail "first rlockctl run failed"
a=""
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
a=""
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
