# SPDX-License-Identifier: BSD-3-Clause
# Private servers for benchmarks and their smoke test: a redis-server on a
# free loopback port (the baseline's apps and rlockd reach Redis over TCP)
# and an rlockd on a unix socket (a per-host daemon), both in one temp dir
# and stopped by pid. Sourced, not executed; needs RLOCK_BUILD.
#
#   bench_env_start DIR     start both; sets BENCH_REDIS_ADDR/_PID, BENCH_RLOCKD_ADDR/_PID
#   bench_rlockd_restart    a fresh rlockd on the same Redis, which is emptied first
#   bench_env_stop          stop both (safe to call twice, from a trap)

BENCH_DIR=""
BENCH_REDIS_PID=""
BENCH_RLOCKD_PID=""

# Limits raised so that the standard set (a million locks, 10,000 sessions, 100,000 locks in
# one session, 32 waiters on one resource) measures the daemon, not its guards.
bench_rlockd_conf() {
    cat <<CONF
[server]
listen = $BENCH_RLOCKD_ADDR
max_sessions = 15000

[redis]
address = $BENCH_REDIS_ADDR

[session]
max_locks = 1000000

[limits]
max_locks = 4000000
max_waiters = 100000

[metrics]
listen = unix:$BENCH_DIR/metrics.sock
CONF
}

bench_redis_ping() {
    redis-cli -h 127.0.0.1 -p "$BENCH_REDIS_PORT" ping 2>/dev/null | grep PONG >/dev/null
}

bench_redis_start() {
    local tries
    for tries in $(seq 20); do
        BENCH_REDIS_PORT=$((20000 + RANDOM % 30000))
        redis-server --bind 127.0.0.1 --port "$BENCH_REDIS_PORT" --save '' --appendonly no \
            --dir "$BENCH_DIR" --logfile "$BENCH_DIR/redis.log" --daemonize no \
            --maxclients 10000 >/dev/null 2>&1 &
        BENCH_REDIS_PID=$!
        for _ in $(seq 100); do
            kill -0 "$BENCH_REDIS_PID" 2>/dev/null || break
            bench_redis_ping && break
            sleep 0.05
        done
        if bench_redis_ping; then
            BENCH_REDIS_ADDR=127.0.0.1:$BENCH_REDIS_PORT
            return 0
        fi
        # Most likely the port was taken: reap this one and draw another.
        kill "$BENCH_REDIS_PID" 2>/dev/null || true
        wait "$BENCH_REDIS_PID" 2>/dev/null || true
        BENCH_REDIS_PID=""
    done
    echo "redis-server did not start (see $BENCH_DIR/redis.log)" >&2
    return 1
}

bench_rlockd_start() {
    BENCH_RLOCKD_ADDR=unix:$BENCH_DIR/rlockd.sock
    bench_rlockd_conf > "$BENCH_DIR/rlockd.conf"
    "$RLOCK_BUILD/bin/rlockd" -c "$BENCH_DIR/rlockd.conf" >>"$BENCH_DIR/rlockd.log" 2>&1 &
    BENCH_RLOCKD_PID=$!
    for _ in $(seq 200); do
        kill -0 "$BENCH_RLOCKD_PID" 2>/dev/null || break
        "$RLOCK_BUILD/bin/rlockctl" --server "$BENCH_RLOCKD_ADDR" ping >/dev/null 2>&1 && return 0
        sleep 0.05
    done
    echo "rlockd did not start:" >&2
    tail -n 20 "$BENCH_DIR/rlockd.log" >&2
    return 1
}

# Stop pid: SIGTERM, SIGKILL after 10 s; reap it.
bench_kill() {
    local pid=$1
    [ -n "$pid" ] || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    for _ in $(seq 200); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    return 0
}

bench_env_start() {
    BENCH_DIR=$1
    # Thousands of sessions on each side of the daemon need thousands of descriptors.
    ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
    bench_redis_start && bench_rlockd_start
}

bench_rlockd_restart() {
    bench_kill "$BENCH_RLOCKD_PID"
    BENCH_RLOCKD_PID=""
    redis-cli -h 127.0.0.1 -p "$BENCH_REDIS_PORT" flushall >/dev/null
    bench_rlockd_start
}

bench_env_stop() {
    bench_kill "$BENCH_RLOCKD_PID"
    BENCH_RLOCKD_PID=""
    bench_kill "$BENCH_REDIS_PID"
    BENCH_REDIS_PID=""
}
