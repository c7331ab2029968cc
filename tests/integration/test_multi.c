/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_multi.c — two rlockd (A and B) on one Redis, sharing its keys.
 *
 *   counter       the mutual-exclusion counter with half the workers on each
 *                 daemon: exact count, strictly increasing fences.
 *   handoff       a waiter on B behind a holder on A (ttl 30 s, watchdog on)
 *                 is granted promptly after A's release, over 50 handoffs
 *                 (p50/p99 printed); without release notices it would wait
 *                 for the holder's ttl.
 *   pubsub_killed the pub/sub connections are killed (CLIENT KILL TYPE
 *                 pubsub) while waiters on B wait: a release during the
 *                 reconnect, and one after it, still wake them promptly.
 *   subscriptions B subscribes only to the resources its waiters sleep on,
 *                 and gives each up when its last waiter leaves (granted or
 *                 timed out); the metrics say the same.
 *   lock_delay    a holder on A dies with lock_delay 1 s: B's waiter gets the
 *                 lock about 1 s later, not at the dead holder's 30 s ttl.
 *   notify_off    with [redis] notify = no nothing is subscribed and the
 *                 waiter is woken by its holder's-ttl timer.
 *
 * Figures are printed; the asserted bounds are generous (a loaded machine),
 * yet far below the 30 s ttl a missed notice would cost.
 */
#include "harness.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define TTL_MS 30000u
#define WAIT_MS 10000u        /* a waiter's wait: well below the 30 s ttl */
#define CALL_MS 5000u
#define PROMPT_MS 1000        /* "promptly": generous, and far below the ttl */
#define HANDOFF_MS 100        /* a handoff across daemons, typically */
#define HANDOFFS 50
/* 8 workers, 4 on each daemon: a queue of at most 7 ahead of a waiter keeps every wait far
 * below 10 s even on a loaded machine (16 saw waits over 10 s there), while a waiter that
 * sleeps for a holder's 30 s ttl is still over it. */
#define COUNTER_PROCS 8
#define COUNTER_ROUNDS 300
#define COUNTER_DEADLINE_MS 600000

/* --- two daemons ---------------------------------------------------------- */

struct duo {
    struct h_env a, b;
    redisContext *r;
    struct rlock_client *ca, *cb; /* one client on each */
};

static void duo_start(struct duo *d, const char *ini_a, const char *ini_b)
{
    memset(d, 0, sizeof *d);
    h_env_start_or_fail(&d->a, ini_a);
    ck_assert_msg(h_env_start_peer(&d->b, &d->a, ini_b) == 0, "could not start the second rlockd");
    d->r = h_redis(&d->a);
    ck_assert_ptr_nonnull(d->r);
    d->ca = h_client_or_fail(&d->a, NULL);
    d->cb = h_client_or_fail(&d->b, NULL);
}

static void duo_stop(struct duo *d)
{
    h_assert_env_alive(&d->a);
    h_assert_env_alive(&d->b);
    rlock_close(d->ca);
    rlock_close(d->cb);
    redisFree(d->r);
    h_env_stop(&d->b);
    h_env_stop(&d->a);
}

/* --- what Redis and the daemons say ---------------------------------------- */

/* "PREFIX{resource}:free", the channel of resource's release notices. */
static const char *channel(const struct h_env *e, const char *resource, char *buf, size_t len)
{
    snprintf(buf, len, "%s{%s}:free", e->prefix, resource);
    return buf;
}

/* Subscribers of chan (PUBSUB NUMSUB). */
static long long numsub(redisContext *r, const char *chan)
{
    redisReply *rep = redisCommand(r, "PUBSUB NUMSUB %s", chan);
    ck_assert_msg(rep != NULL && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2,
                  "PUBSUB NUMSUB %s failed", chan);
    long long n = rep->element[1]->integer;
    freeReplyObject(rep);
    return n;
}

/* Channels of resources of e with a subscriber (PUBSUB CHANNELS PREFIX{*). */
static long long channels(redisContext *r, const struct h_env *e)
{
    redisReply *rep = redisCommand(r, "PUBSUB CHANNELS %s{*", e->prefix);
    ck_assert_msg(rep != NULL && rep->type == REDIS_REPLY_ARRAY, "PUBSUB CHANNELS failed");
    long long n = (long long)rep->elements;
    freeReplyObject(rep);
    return n;
}

/* "PREFIXdaemons": its subscribers are the daemons listening for notices. */
static const char *daemons_channel(const struct h_env *e, char *buf, size_t len)
{
    snprintf(buf, len, "%sdaemons", e->prefix);
    return buf;
}

static long long daemons(redisContext *r, const struct h_env *e)
{
    char chan[128];
    return numsub(r, daemons_channel(e, chan, sizeof chan));
}

struct want {
    redisContext *r;
    const struct h_env *e;
    const char *chan; /* NULL: count the env's channels; else this one's subscribers */
    long long n;
    long long seen;
};

static int want_reached(void *arg)
{
    struct want *w = arg;
    w->seen = w->chan != NULL ? numsub(w->r, w->chan) : channels(w->r, w->e);
    return w->seen == w->n;
}

/* Wait (5 s at most) until chan has n subscribers (chan NULL: e has n channels). */
static void expect_subs(redisContext *r, const struct h_env *e, const char *chan, long long n)
{
    struct want w = {r, e, chan, n, -1};
    ck_assert_msg(h_wait_for(want_reached, &w, 5000), "%s: %lld subscribed, want %lld",
                  chan != NULL ? chan : "channels of the env", w.seen, n);
}

/* Acquires answered by e's daemon after more than 10 s (waits included): its latency
 * histogram's count less its bucket le="10". */
static double slow_acquires(const struct h_env *e)
{
    return h_metric(e, "rlockd_request_duration_seconds_count{op=\"acquire\"}") -
           h_metric(e, "rlockd_request_duration_seconds_bucket{op=\"acquire\",le=\"10\"}");
}

/* --- a waiter on its own thread -------------------------------------------- */

struct waiter {
    struct rlock_client *c;
    const char *resource;
    uint32_t wait_ms;
    enum rlock_err rc;
    int64_t granted_ms; /* h_now_ms() when its acquire returned OK */
    uint64_t fence;
    struct h_thread t;
};

/* Acquire, note the time, release at once. */
static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    struct rlock_lock *l = NULL;
    struct rlock_acquire_opts o = {.ttl_ms = TTL_MS, .wait_ms = w->wait_ms};
    w->rc = rlock_acquire(w->c, w->resource, &o, w->wait_ms + CALL_MS, &l);
    if (w->rc == RLOCK_OK) {
        w->granted_ms = h_now_ms();
        w->fence = rlock_lock_fence(l);
        rlock_release(l, CALL_MS);
        rlock_lock_free(l);
    }
    return NULL;
}

static void waiter_start(struct waiter *w, struct rlock_client *c, const char *resource,
                         uint32_t wait_ms)
{
    memset(w, 0, sizeof *w);
    w->c = c;
    w->resource = resource;
    w->wait_ms = wait_ms;
    w->rc = RLOCK_ERR_INTERNAL;
    h_thread_start(&w->t, waiter_main, w);
}

/* Join w and return how long after t0 it was granted; fails the test unless it was. */
static int64_t waiter_granted_after(struct waiter *w, int64_t t0, const char *what)
{
    h_thread_join(&w->t, h_now_ms() + w->wait_ms + 2 * CALL_MS, "a waiter's acquire hung");
    ck_assert_msg(w->rc == RLOCK_OK,
                  "%s: the waiter on B got %s, not the lock, %lld ms after the release (woken "
                  "only by the holder's ttl?)",
                  what, rlock_strerror(w->rc), (long long)(h_now_ms() - t0));
    return w->granted_ms - t0;
}

static struct rlock_lock *take(struct rlock_client *c, const char *resource)
{
    struct rlock_acquire_opts o = {.ttl_ms = TTL_MS, .wait_ms = CALL_MS};
    return h_acquire_ok(c, resource, &o);
}

static void release(struct rlock_client *c, struct rlock_lock *l)
{
    h_assert_ok(c, rlock_release(l, CALL_MS));
    rlock_lock_free(l);
}

/* Wait until the daemon of c reports held locks and waiters. */
static void expect_stats(struct rlock_client *c, uint64_t held, uint64_t waiters)
{
    struct rlock_stats st;
    ck_assert_msg(h_wait_stats_of(c, held, waiters, 5000, &st) >= 0,
                  "daemon reports %llu held, %llu waiting; want %llu, %llu",
                  (unsigned long long)st.held_locks, (unsigned long long)st.waiters,
                  (unsigned long long)held, (unsigned long long)waiters);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* --- tests ------------------------------------------------------------------ */

START_TEST(test_counter)
{
    struct duo d;
    duo_start(&d, NULL, NULL);
    const char *addrs[] = { d.a.rlockd_addr, d.b.rlockd_addr };
    h_counter_run(&d.a, addrs, 2, COUNTER_PROCS, COUNTER_ROUNDS, COUNTER_DEADLINE_MS);
    /* Each section waited at most for the others queued, never for a holder's 30 s ttl:
     * a waiter behind a lock the other daemon handed on among its own workers would
     * otherwise sleep that long (its own queue stands still once all its workers wait). */
    double slow_a = slow_acquires(&d.a), slow_b = slow_acquires(&d.b);
    printf("multi/counter: grants through A %.0f, through B %.0f; notices received A %.0f, "
           "B %.0f; acquires that took over 10 s: A %.0f, B %.0f\n",
           h_metric(&d.a, "rlockd_grants_total"), h_metric(&d.b, "rlockd_grants_total"),
           h_metric(&d.a, "rlockd_redis_notifications_total"),
           h_metric(&d.b, "rlockd_redis_notifications_total"), slow_a, slow_b);
    fflush(stdout);
    ck_assert_msg(slow_a == 0 && slow_b == 0,
                  "acquires that waited over 10 s: %.0f through A, %.0f through B", slow_a,
                  slow_b);
    duo_stop(&d);
}
END_TEST

START_TEST(test_handoff)
{
    static const char res[] = "multi/handoff";
    struct duo d;
    duo_start(&d, NULL, NULL);
    struct rlock_client *bw = h_client_or_fail(&d.b, NULL); /* the waiter's own session */
    char chan[256];
    channel(&d.a, res, chan, sizeof chan);
    int64_t lat[HANDOFFS];
    for (int i = 0; i < HANDOFFS; i++) {
        struct rlock_lock *l = take(d.ca, res);
        struct waiter w;
        waiter_start(&w, bw, res, WAIT_MS);
        expect_stats(d.cb, 0, 1);
        /* Every other round, release only once B's subscription is live; the others
         * race it (the confirmation then wakes the waiter). */
        if (i % 2 == 1)
            expect_subs(d.r, &d.a, chan, 1);
        int64_t t0 = h_now_ms();
        release(d.ca, l);
        lat[i] = waiter_granted_after(&w, t0, "handoff");
    }
    qsort(lat, HANDOFFS, sizeof lat[0], cmp_i64);
    int64_t p50 = lat[HANDOFFS / 2], p99 = lat[(HANDOFFS * 99) / 100];
    printf("multi/handoff: FIGURE A release -> B grant over %d handoffs (ttl %u ms, watchdog "
           "on): min %lld ms, p50 %lld ms, p99 %lld ms, max %lld ms\n",
           HANDOFFS, TTL_MS, (long long)lat[0], (long long)p50, (long long)p99,
           (long long)lat[HANDOFFS - 1]);
    fflush(stdout);
    /* The typical handoff within 100 ms (measured: 0-1 ms); the slowest within the generous
     * bound, as a loaded machine (a sanitizer build, parallel tests) may stall one. */
    ck_assert_msg(p50 <= HANDOFF_MS, "p50 of the handoffs %lld ms (bound %d ms)", (long long)p50,
                  HANDOFF_MS);
    ck_assert_msg(p99 < PROMPT_MS, "p99 of the handoffs %lld ms (bound %d ms)", (long long)p99,
                  PROMPT_MS);
    /* Nobody waits now: B has given the channel up. */
    expect_subs(d.r, &d.a, chan, 0);
    rlock_close(bw);
    duo_stop(&d);
}
END_TEST

#define KILLED_RES 3

/* Kill every pub/sub connection of the Redis (both daemons'). */
static void kill_pubsub(redisContext *r)
{
    long long n = h_redis_int(r, "CLIENT KILL TYPE pubsub");
    ck_assert_msg(n >= 2, "CLIENT KILL TYPE pubsub killed %lld connections", n);
}

START_TEST(test_pubsub_killed)
{
    static const char *const res[KILLED_RES] = { "multi/killed-0", "multi/killed-1",
                                                 "multi/killed-2" };
    struct duo d;
    duo_start(&d, NULL, NULL);
    struct rlock_lock *held[KILLED_RES];
    struct rlock_client *bw[KILLED_RES];
    struct waiter w[KILLED_RES];
    for (int i = 0; i < KILLED_RES; i++) {
        held[i] = take(d.ca, res[i]);
        bw[i] = h_client_or_fail(&d.b, NULL);
        waiter_start(&w[i], bw[i], res[i], WAIT_MS);
    }
    expect_stats(d.cb, 0, KILLED_RES);
    expect_subs(d.r, &d.a, NULL, KILLED_RES);

    /* 1: released at once after the kill, most likely before B is back: the
     * notice reaches nobody, and B's resubscription wakes the waiter. */
    kill_pubsub(d.r);
    int64_t t0 = h_now_ms();
    release(d.ca, held[0]);
    int64_t during = waiter_granted_after(&w[0], t0, "release right after the kill");

    /* 2: released once B has subscribed again: the notice wakes it. */
    char all[128];
    daemons_channel(&d.a, all, sizeof all);
    expect_subs(d.r, &d.a, NULL, KILLED_RES - 1);
    expect_subs(d.r, &d.a, all, 2);
    t0 = h_now_ms();
    release(d.ca, held[1]);
    int64_t after = waiter_granted_after(&w[1], t0, "release after the reconnect");

    /* 3: killed again, released once both are back. */
    kill_pubsub(d.r);
    expect_subs(d.r, &d.a, NULL, 1);
    expect_subs(d.r, &d.a, all, 2);
    t0 = h_now_ms();
    release(d.ca, held[2]);
    int64_t again = waiter_granted_after(&w[2], t0, "release after a second kill");

    printf("multi/pubsub_killed: FIGURE release -> grant on B: %lld ms during the reconnect, "
           "%lld ms after it, %lld ms after a second kill\n",
           (long long)during, (long long)after, (long long)again);
    fflush(stdout);
    ck_assert_msg(during < PROMPT_MS && after < PROMPT_MS && again < PROMPT_MS,
                  "not prompt: %lld, %lld, %lld ms", (long long)during, (long long)after,
                  (long long)again);
    ck_assert_msg(h_metric(&d.b, "rlockd_redis_pubsub_connected") == 1,
                  "B's pub/sub connection not ready again");
    for (int i = 0; i < KILLED_RES; i++)
        rlock_close(bw[i]);
    duo_stop(&d);
}
END_TEST

#define SUBS_RES 4

START_TEST(test_subscriptions)
{
    static const char *const res[SUBS_RES] = { "multi/subs-0", "multi/subs-1", "multi/subs-2",
                                               "multi/subs-3" };
    struct duo d;
    duo_start(&d, NULL, NULL);
    ck_assert_int_eq(daemons(d.r, &d.a), 2);
    ck_assert_int_eq(channels(d.r, &d.a), 0);

    /* Uncontended acquires (with a wait) subscribe nothing. */
    for (int i = 0; i < SUBS_RES; i++)
        release(d.cb, take(d.cb, res[i]));
    ck_assert_int_eq(channels(d.r, &d.a), 0);

    /* Waiters on B for every resource held on A, two on the first: one channel each,
     * subscribed by B alone. The last two resources' waiters give up after 5 s. */
    struct rlock_lock *held[SUBS_RES];
    struct rlock_client *bw[SUBS_RES + 1];
    struct waiter w[SUBS_RES + 1];
    for (int i = 0; i < SUBS_RES; i++)
        held[i] = take(d.ca, res[i]);
    for (int i = 0; i <= SUBS_RES; i++) {
        bw[i] = h_client_or_fail(&d.b, NULL);
        int r = i < SUBS_RES ? i : 0;
        waiter_start(&w[i], bw[i], res[r], r >= 2 ? 5000 : WAIT_MS);
    }
    expect_stats(d.cb, 0, SUBS_RES + 1);
    expect_subs(d.r, &d.a, NULL, SUBS_RES);
    for (int i = 0; i < SUBS_RES; i++) {
        char chan[256];
        ck_assert_int_eq(numsub(d.r, channel(&d.a, res[i], chan, sizeof chan)), 1);
    }
    ck_assert_msg(h_metric(&d.b, "rlockd_redis_subscriptions") == SUBS_RES,
                  "B reports %.0f subscriptions", h_metric(&d.b, "rlockd_redis_subscriptions"));
    ck_assert_msg(h_metric(&d.a, "rlockd_redis_subscriptions") == 0, "A has subscriptions");

    /* Granted: both waiters of the first resource, the one of the second. */
    int64_t t0 = h_now_ms();
    release(d.ca, held[0]);
    release(d.ca, held[1]);
    waiter_granted_after(&w[0], t0, "first resource");
    waiter_granted_after(&w[SUBS_RES], t0, "first resource, second waiter");
    waiter_granted_after(&w[1], t0, "second resource");
    expect_subs(d.r, &d.a, NULL, SUBS_RES - 2);

    /* Timed out: the last two give up, and their channels go too. */
    for (int i = 2; i < SUBS_RES; i++) {
        h_thread_join(&w[i].t, h_now_ms() + 5000 + 2 * CALL_MS, "a waiter's acquire hung");
        ck_assert_int_eq(w[i].rc, RLOCK_ERR_TIMEOUT);
    }
    expect_subs(d.r, &d.a, NULL, 0);
    expect_stats(d.cb, 0, 0);
    ck_assert_msg(h_metric(&d.b, "rlockd_redis_subscriptions") == 0, "B still reports some");
    double notices = h_metric(&d.b, "rlockd_redis_notifications_total");
    printf("multi/subscriptions: B received %.0f notices\n", notices);
    fflush(stdout);
    ck_assert_msg(notices >= 2, "B received %.0f notices", notices);
    ck_assert_int_eq(daemons(d.r, &d.a), 2);
    for (int i = 2; i < SUBS_RES; i++)
        release(d.ca, held[i]);
    for (int i = 0; i <= SUBS_RES; i++)
        rlock_close(bw[i]);
    duo_stop(&d);
}
END_TEST

START_TEST(test_lock_delay)
{
    static const char res[] = "multi/lock-delay";
    struct duo d;
    duo_start(&d, "[limits]\nlock_delay = 1s\n", NULL);
    struct h_holder h;
    h_holder_start(&h, &d.a, res, TTL_MS, 10000);
    struct waiter w;
    waiter_start(&w, d.cb, res, WAIT_MS);
    char chan[256];
    expect_subs(d.r, &d.a, channel(&d.a, res, chan, sizeof chan), 1);
    int64_t t_kill = h_holder_kill9(&h);
    int64_t dt = waiter_granted_after(&w, t_kill, "holder killed with lock_delay 1 s");
    printf("multi/lock_delay: FIGURE B granted %lld ms after kill -9 of the holder on A "
           "(lock_delay 1000 ms, ttl %u ms)\n",
           (long long)dt, TTL_MS);
    fflush(stdout);
    ck_assert_msg(dt >= 900, "granted %lld ms after the kill: before the lock_delay ended",
                  (long long)dt);
    ck_assert_msg(dt < 1000 + 4 * PROMPT_MS, "granted %lld ms after the kill", (long long)dt);
    ck_assert_msg(w.fence > h.fence, "fence %llu not above the dead holder's %llu",
                  (unsigned long long)w.fence, (unsigned long long)h.fence);
    duo_stop(&d);
}
END_TEST

START_TEST(test_notify_off)
{
    static const char res[] = "multi/notify-off";
    static const char off[] = "[redis]\nnotify = no\n";
    struct duo d;
    duo_start(&d, off, off);
    struct rlock_acquire_opts o = {.ttl_ms = 2000, .wait_ms = CALL_MS};
    struct rlock_lock *l = h_acquire_ok(d.ca, res, &o);
    struct waiter w;
    waiter_start(&w, d.cb, res, WAIT_MS);
    expect_stats(d.cb, 0, 1);
    h_sleep_ms(300);
    ck_assert_int_eq(daemons(d.r, &d.a), 0);
    ck_assert_int_eq(channels(d.r, &d.a), 0);
    ck_assert_msg(h_metric(&d.b, "rlockd_redis_pubsub_connected") == 0, "B reports pub/sub");
    int64_t t0 = h_now_ms();
    release(d.ca, l);
    int64_t dt = waiter_granted_after(&w, t0, "notify = no");
    printf("multi/notify_off: FIGURE B granted %lld ms after A's release (holder's ttl 2000 ms: "
           "woken by its timer)\n",
           (long long)dt);
    fflush(stdout);
    ck_assert_msg(dt < 2000 + 2 * PROMPT_MS, "granted %lld ms after the release", (long long)dt);
    duo_stop(&d);
}
END_TEST

int main(void)
{
    const TTest *tests[] = { test_counter,       test_handoff,   test_pubsub_killed,
                             test_subscriptions, test_lock_delay, test_notify_off };
    return h_run_tests("multi", COUNTER_DEADLINE_MS / 1000 + 60, tests, H_LEN(tests));
}
