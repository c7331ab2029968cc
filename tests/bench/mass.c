/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mass.c — one session holding --mass-release locks closes: how long until
 * Redis holds none of their keys, and what the daemon's counters say about
 * it. Redis is watched with DBSIZE (one cheap call, polled every
 * millisecond, so the watching does not slow the deletes down): the
 * resources are new names, so each lock added two keys (the lock and its
 * fence counter, which stays) and the run is over when only the fence keys
 * are left. That needs a Redis nobody else writes to meanwhile; a SCAN at
 * the end confirms that none of the lock keys is left.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "redis_conn.h"
#include "rlock.h"
#include "spool.h"
#include "stats.h"
#include "window.h"

#define POLL_NS 1000000
#define STATS_EVERY 10 /* polls between two Stats requests */
#define ACQUIRE_INFLIGHT 256
#define ACQUIRE_TIMEOUT_S 600.0

/* Lock keys (not fence keys) whose names match pattern. -1 on error. */
static long long count_lock_keys(redisContext *rc, const char *pattern)
{
    long long n = 0;
    char cursor[32] = "0";
    do {
        redisReply *r = redisCommand(rc, "SCAN %s MATCH %s COUNT 10000", cursor, pattern);
        if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
            freeReplyObject(r);
            return -1;
        }
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
        redisReply *keys = r->element[1];
        for (size_t i = 0; i < keys->elements; i++) {
            size_t len = keys->element[i]->len;
            if (len < 6 || strcmp(keys->element[i]->str + len - 6, ":fence") != 0)
                n++;
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
    return n;
}

static int stats(struct rlock_client *c, struct rlock_stats *st)
{
    return rlock_stats(c, 0, st) == RLOCK_OK ? 0 : -1;
}

struct mass_watch {
    double keys_gone_ms;   /* -1: not within the timeout */
    double daemon_done_ms; /* Stats held_locks back to its level before; -1: not seen */
};

/* Poll Redis and the daemon from t_close until the keys are gone and the daemon agrees. */
static struct mass_watch watch(const struct bench_opts *o, redisContext *rc,
                               struct rlock_client *sc, long long target_dbsize,
                               uint64_t target_held, int64_t t_close)
{
    struct mass_watch mw = {-1, -1};
    int64_t end = t_close + (int64_t)(o->mass_timeout_s * 1e9);
    for (unsigned i = 0; bench_now_ns() < end; i++) {
        int64_t t = bench_now_ns();
        if (mw.keys_gone_ms < 0) {
            long long d = bench_redis_dbsize(rc);
            if (d >= 0 && d <= target_dbsize)
                mw.keys_gone_ms = (double)(bench_now_ns() - t_close) / 1e6;
        }
        struct rlock_stats st;
        if (mw.daemon_done_ms < 0 && i % STATS_EVERY == 0 && stats(sc, &st) == 0 &&
            st.held_locks <= target_held)
            mw.daemon_done_ms = (double)(bench_now_ns() - t_close) / 1e6;
        if (mw.keys_gone_ms >= 0 && mw.daemon_done_ms >= 0)
            break;
        bench_sleep_until(t + POLL_NS);
    }
    return mw;
}

static void report_counters(struct report *r, const char *when, const struct rlock_stats *s)
{
    char key[48];
#define COUNTER(field)                                                                        \
    snprintf(key, sizeof key, "stats_%s_" #field, when);                                      \
    report_u64(r, key, (uint64_t)s->field);
    COUNTER(sessions) COUNTER(held_locks) COUNTER(waiters) COUNTER(grants)
    COUNTER(locks_lost) COUNTER(redis_errors) COUNTER(script_reloads)
#undef COUNTER
}

int mass_run(const struct bench_opts *o, struct report *r)
{
    char err[256];
    if (o->redis == NULL) {
        fprintf(stderr, "rlock-bench: --mass-release needs --redis ADDR to watch the keys\n");
        return -1;
    }
    redisContext *rc = bench_redis_connect(o->redis, err, sizeof err);
    struct rlock_client *sc = NULL;
    struct rlock_options so = {.client_name = "rlock-bench-stats"};
    bench_tls(&so);
    if (rc == NULL || rlock_connect(o->server, &so, &sc, err, sizeof err) != RLOCK_OK) {
        fprintf(stderr, "rlock-bench: %s\n", err);
        redisFree(rc);
        return -1;
    }
    int rv = -1;
    struct spool *p = spool_open(o, 1, err, sizeof err);
    if (p == NULL) {
        fprintf(stderr, "rlock-bench: %s\n", err);
        goto out;
    }
    char tag[64], pattern[256];
    snprintf(tag, sizeof tag, "mass/%d-%" PRId64, (int)getpid(), bench_now_ns());
    snprintf(pattern, sizeof pattern, "%s{bench/%s/*", o->key_prefix, tag);
    long long d0 = bench_redis_dbsize(rc);
    int64_t t0 = bench_now_ns();
    uint64_t held = spool_acquire_all(p, o->mass_locks, ACQUIRE_INFLIGHT, tag, ACQUIRE_TIMEOUT_S);
    double acquire_s = (double)(bench_now_ns() - t0) / 1e9;
    long long d1 = bench_redis_dbsize(rc);
    struct rlock_stats before, after;
    if (stats(sc, &before) != 0) {
        fprintf(stderr, "rlock-bench: Stats: %s\n", rlock_last_error()->message);
        goto out;
    }
    uint64_t errors[BERR_COUNT];
    spool_errors(p, errors);
    char first_error[160];
    snprintf(first_error, sizeof first_error, "%s", spool_first_error(p));
    uint64_t unavailable = spool_retries(p);
    int64_t t_close = bench_now_ns();
    spool_close(p); /* a clean end of the session: the daemon releases every lock */
    p = NULL;
    double close_ms = (double)(bench_now_ns() - t_close) / 1e6;
    /* Every new resource added a lock key and a fence key; the fence keys stay. */
    struct mass_watch mw = watch(o, rc, sc, d1 - (long long)held,
                                 before.held_locks - held, t_close);
    long long left = count_lock_keys(rc, pattern);
    if (stats(sc, &after) != 0)
        memset(&after, 0, sizeof after);

    report_u64(r, "locks", held);
    report_real(r, "acquire_s", acquire_s, 2);
    report_real(r, "acquires_per_s", acquire_s > 0 ? (double)held / acquire_s : 0.0, 0);
    report_u64(r, "acquires_unavailable", unavailable);
    report_u64(r, "dbsize_added", d1 >= d0 ? (uint64_t)(d1 - d0) : 0);
    report_real(r, "close_call_ms", close_ms, 1);
    report_real(r, "keys_gone_ms", mw.keys_gone_ms, 1);
    report_real(r, "daemon_released_ms", mw.daemon_done_ms, 1);
    report_u64(r, "keys_left", left >= 0 ? (uint64_t)left : held);
    report_counters(r, "before", &before);
    report_counters(r, "after", &after);
    report_u64(r, "redis_errors_during", after.redis_errors - before.redis_errors);
    /* Keys still there at the end are releases that never happened. */
    if (left != 0) {
        errors[BERR_UNRELEASED] += left > 0 ? (uint64_t)left : held;
        if (first_error[0] == '\0')
            snprintf(first_error, sizeof first_error, "unreleased: lock keys left in Redis");
    }
    bench_report_errors(r, errors, first_error);
    rv = 0;
out:
    spool_close(p);
    rlock_close(sc);
    redisFree(rc);
    return rv;
}
