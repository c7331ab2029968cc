#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Smoke run of rlock-bench against a private redis-server and rlockd: every
# mode for a few seconds (sync, shared, async, redis-direct, a contended
# resource, held locks, idle sessions, a mass release). Asserts only that
# each run completes and counts zero errors: timing belongs to ./scripts/bench.
#   smoke.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
export RLOCK_BUILD=$2
. "$src/scripts/bench_env.sh"
# The benchmarks' daemon, with room for a loaded machine: a Redis command that takes longer
# than the default 300 ms is answered UNAVAILABLE (documented), which this smoke would count
# as an error though nothing is wrong with the modes it checks (seen when it ran beside the
# whole suite under two busy loops). The leases here are 30 s, so a 3 s timeout keeps the
# rule that a renew can time out and be retried within the shortest one.
eval "$(declare -f bench_rlockd_conf | sed '1s/bench_rlockd_conf/bench_rlockd_conf_standard/')"
bench_rlockd_conf() {
    bench_rlockd_conf_standard
    printf '\n[redis]\ncommand_timeout = 3s\n\n[limits]\nmin_ttl = 10s\n'
}
work=$(mktemp -d /tmp/rlock-bench-smoke.XXXXXX)
cleanup() {
    bench_env_stop
    rm -rf "$work"
}
trap cleanup EXIT
bench_env_start "$work"

bench=$RLOCK_BUILD/bin/rlock-bench
runs=0
fail() {
    echo "FAIL: $*"
    echo "--- rlockd.log (tail):"
    tail -n 20 "$work/rlockd.log"
    exit 1
}
# run NAME ARGS...: rlock-bench --json ARGS must exit 0 and report "errors":0.
run() {
    local name=$1 out
    shift
    out=$("$bench" --json "$@") || fail "$name: rlock-bench exited $?"
    echo "$name: $out"
    case "$out" in
    *'"errors":0,'* | *'"errors":0}'*) ;;
    *) fail "$name: errors reported" ;;
    esac
    runs=$((runs + 1))
}

rl=(--server "$BENCH_RLOCKD_ADDR" --redis "$BENCH_REDIS_ADDR")
short=(--warmup 0.5 --duration 3)
run sync "${rl[@]}" "${short[@]}" --mode sync --threads 4
run shared "${rl[@]}" "${short[@]}" --mode shared --threads 4
run async "${rl[@]}" "${short[@]}" --mode async --threads 2 --conns 2 --inflight 8
run redis-direct --target redis-direct --server "$BENCH_REDIS_ADDR" "${short[@]}" --threads 4
run contended "${rl[@]}" --warmup 0.2 --duration 1 --threads 4 --resources 1 --wait 10000
run hold "${rl[@]}" --hold-locks 500 --sessions 10 --duration 1
run idle "${rl[@]}" --idle-sessions 100 --duration 1
run mass "${rl[@]}" --mass-release 2000
echo "$runs passed, 0 failed"
