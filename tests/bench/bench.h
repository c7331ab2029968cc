/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench.h — rlock-bench: what a run is asked to do (the command line, parsed
 * once in main.c), the error classes it counts, and the entry point of each
 * kind of run.
 *
 * Kinds of run:
 *   pairs   acquire+release pairs as fast as the workers go (pairs.c with
 *           target_direct.c or target_rlockd.c; async_pairs.c)
 *   hold    many locks held by many sessions, the daemon's cost while idle (hold.c)
 *   idle    many sessions doing nothing but keepalives (hold.c)
 *   mass    one session with many locks closes: how long until Redis is clean (mass.c)
 */
#ifndef BENCH_H
#define BENCH_H

#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "rlock.h"

#include "report.h"

enum bench_target { BENCH_RLOCKD, BENCH_DIRECT };
enum bench_mode { BENCH_SYNC, BENCH_SHARED, BENCH_ASYNC };
enum bench_kind { BENCH_PAIRS, BENCH_HOLD, BENCH_IDLE, BENCH_MASS };

struct bench_opts {
    enum bench_target target;
    enum bench_mode mode;
    enum bench_kind kind;
    const char *server;      /* rlockd, or Redis for redis-direct */
    const char *redis;       /* Redis behind rlockd (pid lookup, key polling); may be NULL */
    const char *key_prefix;  /* lock keys are PREFIX{resource}, as rlockd writes them */
    unsigned threads;
    unsigned conns;          /* async: asynchronous clients */
    unsigned inflight;       /* async: pairs in flight per client */
    uint64_t resources;
    uint32_t hold_us;
    uint32_t wait_ms;        /* 0: try, and retry after retry_us when busy */
    uint32_t retry_us;
    uint32_t ttl_ms;
    uint32_t session_timeout_ms; /* 0: the daemon's default */
    double warmup_s;
    double duration_s;
    pid_t rlockd_pid;        /* 0: look it up by the address it listens on */
    pid_t redis_pid;
    uint64_t hold_locks;     /* hold: locks in all */
    uint64_t sessions;       /* hold: sessions sharing them */
    uint64_t idle_sessions;  /* idle */
    uint64_t mass_locks;     /* mass */
    double mass_timeout_s;
    int json;
};

/* Why a request failed, as counted in errors_<name>. NOT_ACQUIRED is only
 * an error where nothing else can hold the lock (a busy try is retried). */
#define BENCH_ERRORS(X)                                                                       \
    X(NOT_ACQUIRED, "not_acquired") X(TIMEOUT, "timeout") X(NOT_HELD, "not_held")             \
    X(INVALID, "invalid") X(UNAUTHENTICATED, "unauthenticated")                               \
    X(PERMISSION_DENIED, "permission_denied") X(LIMIT_EXCEEDED, "limit_exceeded")             \
    X(UNAVAILABLE, "unavailable") X(SHUTTING_DOWN, "shutting_down") X(INTERNAL, "internal")   \
    X(CANCELLED, "cancelled") X(ALREADY_HELD, "already_held") X(ARG, "arg")                   \
    X(NOMEM, "nomem") X(CONNECT, "connect") X(CLOSED, "closed") X(DEADLINE, "deadline")       \
    X(PROTOCOL, "protocol") X(IN_CALLBACK, "in_callback") X(REDIS, "redis")                   \
    X(LOST, "lost") X(UNRELEASED, "unreleased") X(OTHER, "other")

enum bench_err {
    BERR_NONE = 0,
#define X(id, name) BERR_##id,
    BENCH_ERRORS(X)
#undef X
    BERR_COUNT
};

/* "timeout" for BERR_TIMEOUT. */
const char *bench_err_name(enum bench_err e);
/* The class of a librlock result (RLOCK_OK gives BERR_NONE). */
enum bench_err bench_err_of_rlock(int rlock_err);

static inline int64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Sleep until the CLOCK_MONOTONIC time t (ns). */
void bench_sleep_until(int64_t t_ns);

/* Runs: each fills r and returns 0, or prints why to stderr and returns -1. */
/* The TLS options of every rlock_connect, for a tls:// --server: from $RLOCK_TLS_CA and
 * $RLOCK_TLS_SERVER_NAME (as rlockctl reads them). */
void bench_tls(struct rlock_options *o);

int pairs_run_threads(const struct bench_opts *o, struct report *r);
int async_pairs_run(const struct bench_opts *o, struct report *r);
int hold_run(const struct bench_opts *o, struct report *r);
int idle_run(const struct bench_opts *o, struct report *r);
int mass_run(const struct bench_opts *o, struct report *r);

#endif
