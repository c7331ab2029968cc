/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_cancel.c — stopping an acquire that waits: cancellation tokens,
 * rlock_shutdown and rlock_close from other threads.
 *
 *  - rlock_cancel wakes a thread waiting (30 s) for a held resource at once:
 *    CANCELLED, and rlockd drops the waiter; a fired token stays fired; one
 *    token cancels every acquire watching it.
 *  - rlock_shutdown wakes it with CLOSED; rlock_close then frees the client.
 *  - 1,000 races between a cancel and the grant (the resource free, or held by
 *    another session that lets go at a random moment): every outcome is OK
 *    with a fresh hold, or CANCELLED; in the end no lock key is left in Redis
 *    and rlockd counts no lock and no waiter, so a grant that raced the cancel
 *    was given back.
 *  - An acquire cancelled just as its grant comes, followed at once by another
 *    acquire of the same resource by the same thread: the thread does not
 *    hold the resource after CANCELLED, so the second acquire must not be
 *    treated as a re-entry of the cancelled grant.
 *  - rlock_close while threads wait in acquire: every call returns CLOSED
 *    before the client is freed (run under ASan for use after free).
 */
#include "harness.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CALL_TIMEOUT_MS 5000u
#define LONG_WAIT_MS 30000u
#define WAKE_LIMIT_MS 100 /* a cancelled, shut down or closed waiter returns within this */

static void sleep_us(long us)
{
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* --- one waiting acquire on its own thread ------------------------------------------ */

struct waiter {
    struct rlock_client *c;
    const char *resource;
    uint32_t wait_ms;
    struct rlock_cancel *cancel;
    enum rlock_err rc;
    struct rlock_lock *l;
    struct rlock_error err;
    int64_t returned_ms;
};

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    struct rlock_acquire_opts o = {.ttl_ms = 10000, .wait_ms = w->wait_ms, .cancel = w->cancel};
    w->rc = rlock_acquire(w->c, w->resource, &o, CALL_TIMEOUT_MS, &w->l);
    w->returned_ms = h_now_ms();
    w->err = *rlock_last_error();
    return NULL;
}

/* Wait until rlockd counts held locks and waiters, failing the test otherwise. */
static void expect_stats(struct h_env *e, uint64_t held, uint64_t waiters, int timeout_ms,
                         const char *when)
{
    struct rlock_stats st;
    ck_assert_msg(h_wait_stats(e, held, waiters, timeout_ms, &st) == 0,
                  "%s: rlockd counts %" PRIu64 " held locks and %" PRIu64
                  " waiters, want %" PRIu64 " and %" PRIu64 " (waited %d ms)",
                  when, st.held_locks, st.waiters, held, waiters, timeout_ms);
}

/* --- threads of one client waiting for a resource another session holds ------------- */

#define MAX_WAITERS 3

struct waiting {
    struct rlock_client *holder; /* the other session */
    struct rlock_lock *hl;       /* its lock */
    int n;
    struct waiter w[MAX_WAITERS];
    struct h_thread t[MAX_WAITERS];
};

/*
 * Let another session hold res, start n threads of f->c acquiring it (wait
 * 30 s; the first watching first_k, the others k; either may be NULL) and wait
 * until rlockd counts them waiting, with held locks held meanwhile.
 */
static void waiting_start(struct waiting *g, struct h_fixture *f, const char *res, int n,
                          struct rlock_cancel *first_k, struct rlock_cancel *k, uint64_t held)
{
    ck_assert_int_le(n, MAX_WAITERS);
    g->n = n;
    g->holder = h_client_or_fail(&f->e, NULL);
    g->hl = h_acquire_ok(g->holder, res, NULL);
    for (int i = 0; i < n; i++) {
        g->w[i] = (struct waiter){.c = f->c, .resource = res, .wait_ms = LONG_WAIT_MS,
                                  .cancel = i == 0 ? first_k : k};
        h_thread_start(&g->t[i], waiter_main, &g->w[i]);
    }
    expect_stats(&f->e, held, (uint64_t)n, 5000, "with the acquires waiting");
    for (int i = 0; i < n; i++)
        ck_assert_msg(!h_thread_done(&g->t[i]), "waiter %d returned while the lock was held: %s",
                      i, rlock_strerror(g->w[i].rc));
}

/*
 * Join the waiters (within 5 s of since, when what woke them) and check that
 * each returned want, within WAKE_LIMIT_MS + slack_ms of since.
 */
static void waiting_join(struct waiting *g, int64_t since, enum rlock_err want, const char *what,
                         int64_t slack_ms)
{
    for (int i = 0; i < g->n; i++) {
        struct waiter *w = &g->w[i];
        h_thread_join(&g->t[i], since + 5000, "a waiting acquire did not return within 5 s");
        int64_t woke = w->returned_ms - since;
        printf("cancel: waiter %d returned %s %lld ms after %s\n", i, rlock_strerror(w->rc),
               (long long)woke, what);
        ck_assert_msg(w->rc == want, "waiter %d after %s: %s (%s), want %s", i, what,
                      rlock_strerror(w->rc), w->err.message, rlock_strerror(want));
        ck_assert_int_eq(w->err.code, want);
        ck_assert_ptr_null(w->l);
        ck_assert_msg(woke < WAKE_LIMIT_MS + slack_ms, "waiter %d returned %lld ms after %s", i,
                      (long long)woke, what);
    }
}

/* The other session lets go (the key goes) and ends. */
static void waiting_end(struct waiting *g, struct h_fixture *f)
{
    ck_assert_int_eq(rlock_lock_state(g->hl), RLOCK_HELD);
    h_release_gone(f, g->holder, g->hl);
    rlock_lock_free(g->hl);
    rlock_close(g->holder);
}

/* --- cancellation tokens ------------------------------------------------------------ */

START_TEST(test_cancel_wakes_waiter)
{
    static const char res[] = "cancel/held";
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rlock_cancel *k = rlock_cancel_new();
    ck_assert_ptr_nonnull(k);
    ck_assert_int_eq(rlock_cancel_fired(k), 0);
    struct waiting g;
    waiting_start(&g, &f, res, 1, k, NULL, 1);

    int64_t t_cancel = h_now_ms();
    rlock_cancel(k);
    waiting_join(&g, t_cancel, RLOCK_ERR_CANCELLED, "rlock_cancel", 0);
    ck_assert_int_eq(rlock_cancel_fired(k), 1);
    int64_t t0 = h_now_ms();
    expect_stats(&f.e, 1, 0, 2000, "after the cancel");
    printf("cancel: rlockd counted no waiter %lld ms after the cancel returned\n",
           (long long)(h_now_ms() - t0));

    /* The session goes on; a fired token stays fired. */
    h_assert_ok(f.c, rlock_ping(f.c, CALL_TIMEOUT_MS, NULL));
    struct rlock_acquire_opts ok = {.ttl_ms = 10000, .wait_ms = LONG_WAIT_MS, .cancel = k};
    struct rlock_lock *l = NULL;
    enum rlock_err rc = rlock_acquire(f.c, res, &ok, CALL_TIMEOUT_MS, &l);
    ck_assert_msg(rc == RLOCK_ERR_CANCELLED, "acquire with a fired token: %s",
                  rlock_strerror(rc));
    expect_stats(&f.e, 1, 0, 2000, "after the second cancel");

    /* Nothing of the cancelled acquires lingers: the holder lets go, the client takes it once. */
    waiting_end(&g, &f);
    struct rlock_acquire_opts o = {.ttl_ms = 10000, .wait_ms = 2000};
    l = h_acquire_ok(f.c, res, &o);
    ck_assert_uint_eq(rlock_lock_hold_count(l), 1);
    h_release_gone(&f, f.c, l);
    expect_stats(&f.e, 0, 0, 2000, "at the end");
    ck_assert_int_eq(atomic_load(&f.lost.count), 0);
    rlock_lock_free(l);
    rlock_cancel_free(k);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_cancel_one_token_many_waiters)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rlock_cancel *k = rlock_cancel_new();
    ck_assert_ptr_nonnull(k);
    struct waiting g;
    waiting_start(&g, &f, "cancel/many", MAX_WAITERS, k, k, 1);
    int64_t t_cancel = h_now_ms();
    rlock_cancel(k);
    waiting_join(&g, t_cancel, RLOCK_ERR_CANCELLED, "rlock_cancel", 0);
    expect_stats(&f.e, 1, 0, 2000, "after the cancel");
    waiting_end(&g, &f);
    rlock_cancel_free(k);
    h_fixture_stop(&f);
}
END_TEST

/* --- rlock_shutdown from another thread ----------------------------------------------- */

START_TEST(test_cancel_shutdown_wakes_waiter)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    /* A lock of the client that shuts down: LOST then, quietly, and released by rlockd. */
    struct rlock_lock *mine = h_acquire_ok(f.c, "cancel/mine", NULL);
    char mine_key[512];
    h_lock_key(&f.e, "cancel/mine", mine_key, sizeof mine_key);
    struct waiting g;
    waiting_start(&g, &f, "cancel/shutdown", 1, NULL, NULL, 2);

    int64_t t_shut = h_now_ms();
    rlock_shutdown(f.c);
    waiting_join(&g, t_shut, RLOCK_ERR_CLOSED, "rlock_shutdown", 0);
    printf("cancel: (%s)\n", g.w[0].err.message);
    ck_assert_int_eq(rlock_client_alive(f.c), 0);
    ck_assert_int_eq(rlock_ping(f.c, CALL_TIMEOUT_MS, NULL), RLOCK_ERR_CLOSED);
    ck_assert_int_eq(rlock_lock_state(mine), RLOCK_LOST);
    ck_assert_int_eq(rlock_lock_lost_reason(mine), RLOCK_LOST_SESSION);
    ck_assert_msg(h_wait_key_gone(f.r, mine_key, 5000, &f.e) >= 0,
                  "rlockd did not release the lock of the shut down session");
    expect_stats(&f.e, 1, 0, 5000, "after rlock_shutdown");
    /* The application ended the session itself: no lost-lock callback. */
    h_sleep_ms(200);
    ck_assert_int_eq(atomic_load(&f.lost.count), 0);

    /* rlock_close frees the client, and the handle not freed yet. */
    rlock_close(f.c);
    f.c = NULL;
    /* The other session is unaffected. */
    waiting_end(&g, &f);
    h_fixture_stop(&f);
}
END_TEST

/* --- rounds of races ----------------------------------------------------------------- */

#define RACE_WAIT_MS 5000u

/*
 * What the race tests share: threads that run one round at a time in step with
 * the main thread (barrier go, their part, barrier done), one of which fires
 * the round's token after its delay.
 */
struct rounds {
    pthread_barrier_t go, done;
    atomic_int stop;
    struct rlock_cancel *k; /* this round's token, set by the main thread before go */
    long cancel_after_us;
};

static void rounds_init(struct rounds *r, unsigned threads)
{
    ck_assert_int_eq(pthread_barrier_init(&r->go, NULL, threads + 1), 0);
    ck_assert_int_eq(pthread_barrier_init(&r->done, NULL, threads + 1), 0);
    atomic_init(&r->stop, 0);
}

/* A round thread's wait for the next round: 0 to run it, -1 to leave. */
static int rounds_next(struct rounds *r)
{
    pthread_barrier_wait(&r->go);
    return atomic_load(&r->stop) ? -1 : 0;
}

/* The main thread runs one round (with a fresh token) and waits until it is over. */
static void rounds_run(struct rounds *r, long cancel_after_us)
{
    r->k = rlock_cancel_new();
    ck_assert_ptr_nonnull(r->k);
    r->cancel_after_us = cancel_after_us;
    pthread_barrier_wait(&r->go);
    pthread_barrier_wait(&r->done);
    rlock_cancel_free(r->k);
    r->k = NULL;
}

/* Let the round threads t[n] leave, and join them. */
static void rounds_end(struct rounds *r, struct h_thread *t, int n)
{
    atomic_store(&r->stop, 1);
    pthread_barrier_wait(&r->go);
    for (int j = 0; j < n; j++)
        h_thread_join(&t[j], h_now_ms() + 5000, "a round thread did not stop");
    pthread_barrier_destroy(&r->go);
    pthread_barrier_destroy(&r->done);
}

static void *canceller_main(void *arg)
{
    struct rounds *r = arg;
    while (rounds_next(r) == 0) {
        sleep_us(r->cancel_after_us);
        rlock_cancel(r->k);
        pthread_barrier_wait(&r->done);
    }
    return NULL;
}

/* Grants that raced a cancel are given back by the library: no lock key stays (5 s). */
static void expect_no_lock_keys(struct h_fixture *f, const char *when)
{
    int64_t deadline = h_now_ms() + 5000;
    long long keys;
    char example[512] = "";
    while ((keys = h_count_lock_keys(f->r, &f->e, example, sizeof example)) != 0 &&
           h_now_ms() < deadline)
        h_sleep_ms(20);
    ck_assert_msg(keys == 0, "%s: %lld lock key(s) left in Redis, e.g. %s", when, keys, example);
}

/* --- 1,000 races between a cancel and a grant ------------------------------------------ */

#define RACES 1000
#define RACE_MAX_DELAY_US 2000

enum race_outcome { RACE_OK, RACE_CANCELLED, RACE_OTHER };

struct race {
    struct rounds rd;            /* first: the canceller gets &race as &rd */
    struct rlock_client *c;      /* the acquirer's */
    const char *resource;
    /* one round, set by the main thread before it runs */
    struct rlock_lock *held;     /* the other session's lock to let go, or NULL (free) */
    long release_after_us;
    /* one round's results */
    enum rlock_err rc;
    char msg[256];
    uint32_t holds;
    enum rlock_lock_state state;
    enum rlock_err release_rc;
    enum rlock_err holder_release_rc;
};

static void *race_acquirer(void *arg)
{
    struct race *r = arg;
    while (rounds_next(&r->rd) == 0) {
        struct rlock_acquire_opts o = {
            .ttl_ms = 10000, .wait_ms = RACE_WAIT_MS, .cancel = r->rd.k};
        struct rlock_lock *l = NULL;
        r->rc = rlock_acquire(r->c, r->resource, &o, CALL_TIMEOUT_MS, &l);
        snprintf(r->msg, sizeof r->msg, "%s", rlock_last_error()->message);
        if (r->rc == RLOCK_OK) {
            r->holds = rlock_lock_hold_count(l);
            r->state = rlock_lock_state(l);
            r->release_rc = rlock_release(l, CALL_TIMEOUT_MS);
            rlock_lock_free(l);
        }
        pthread_barrier_wait(&r->rd.done);
    }
    return NULL;
}

static void *race_releaser(void *arg)
{
    struct race *r = arg;
    while (rounds_next(&r->rd) == 0) {
        if (r->held != NULL) {
            sleep_us(r->release_after_us);
            r->holder_release_rc = rlock_release(r->held, CALL_TIMEOUT_MS);
        }
        pthread_barrier_wait(&r->rd.done);
    }
    return NULL;
}

START_TEST(test_cancel_races)
{
    static const char res[] = "cancel/race";
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rlock_client *holder = h_client_or_fail(&f.e, NULL);
    struct race r = {.c = f.c, .resource = res};
    rounds_init(&r.rd, 3);
    struct h_thread t[3];
    h_thread_start(&t[0], race_acquirer, &r);
    h_thread_start(&t[1], canceller_main, &r.rd);
    h_thread_start(&t[2], race_releaser, &r);

    unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
    printf("cancel: races with seed %u\n", seed);
    int outcomes[2][3] = {{0}}; /* [resource held][outcome] */
    /* OK with hold count 2 or more right after a CANCELLED: the acquire re-entered a grant
     * that raced the earlier cancel (several in a row can pile up). */
    int reentered = 0;
    char first_reentry[512] = "", failure[768] = "";
    enum rlock_err prev_rc = RLOCK_OK;
    long prev_cancel_us = 0;
    int64_t t0 = h_now_ms();
    for (int i = 0; i < RACES && !failure[0]; i++) {
        int held = rand_r(&seed) % 2;
        r.held = NULL;
        if (held) {
            /* Waits out a grant of the previous round still being given back. */
            struct rlock_acquire_opts ho = {.ttl_ms = 10000, .wait_ms = RACE_WAIT_MS};
            enum rlock_err hrc = rlock_acquire(holder, res, &ho, CALL_TIMEOUT_MS, &r.held);
            if (hrc != RLOCK_OK) {
                snprintf(failure, sizeof failure,
                         "round %d: the other session cannot take the resource (%s: %s): a "
                         "grant of an earlier round was not given back", i, rlock_strerror(hrc),
                         rlock_last_error()->message);
                break;
            }
        }
        r.release_after_us = rand_r(&seed) % (RACE_MAX_DELAY_US + 1);
        r.rc = RLOCK_ERR_INTERNAL;
        r.holds = 0;
        r.release_rc = r.holder_release_rc = RLOCK_OK;
        rounds_run(&r.rd, rand_r(&seed) % (RACE_MAX_DELAY_US + 1));
        rlock_lock_free(r.held);

        enum race_outcome oc = r.rc == RLOCK_OK              ? RACE_OK
                               : r.rc == RLOCK_ERR_CANCELLED ? RACE_CANCELLED
                                                             : RACE_OTHER;
        outcomes[held][oc]++;
        int reentry = oc == RACE_OK && r.holds >= 2 && r.state == RLOCK_HELD &&
                      prev_rc == RLOCK_ERR_CANCELLED;
        if (reentry && reentered++ == 0)
            snprintf(first_reentry, sizeof first_reentry,
                     "round %d (resource %s): a fresh acquire got hold count %u; round %d before "
                     "it was CANCELLED %ld us into its acquire", i, held ? "held" : "free",
                     r.holds, i - 1, prev_cancel_us);
        prev_rc = r.rc;
        prev_cancel_us = r.rd.cancel_after_us;
        const char *bad = NULL;
        if (oc == RACE_OTHER)
            bad = "the acquire ended with neither OK nor CANCELLED";
        else if (oc == RACE_OK && r.state != RLOCK_HELD)
            bad = "a granted acquire is not held";
        else if (oc == RACE_OK && r.holds != 1 && !reentry)
            bad = "a granted acquire is not a fresh single hold";
        else if (oc == RACE_OK && r.release_rc != RLOCK_OK)
            bad = "the release of a granted acquire failed";
        else if (r.holder_release_rc != RLOCK_OK)
            bad = "the other session's release failed";
        if (bad != NULL)
            snprintf(failure, sizeof failure,
                     "round %d (resource %s, cancel after %ld us, release after %ld us): %s: "
                     "acquire %s (%s), hold count %u, state %d, release %s, holder's release %s",
                     i, held ? "held" : "free", r.rd.cancel_after_us, r.release_after_us, bad,
                     rlock_strerror(r.rc), r.msg, r.holds, (int)r.state,
                     rlock_strerror(r.release_rc), rlock_strerror(r.holder_release_rc));
    }
    rounds_end(&r.rd, t, 3);
    printf("cancel: %d races in %lld ms; resource free: %d OK, %d CANCELLED; held by another "
           "session: %d OK, %d CANCELLED; %d OK with hold count > 1 right after a CANCELLED\n",
           RACES, (long long)(h_now_ms() - t0), outcomes[0][RACE_OK],
           outcomes[0][RACE_CANCELLED], outcomes[1][RACE_OK], outcomes[1][RACE_CANCELLED],
           reentered);
    ck_assert_msg(!failure[0], "%s", failure);
    /* Both outcomes happened: the cancels did race the grants. */
    ck_assert_int_gt(outcomes[0][RACE_OK] + outcomes[1][RACE_OK], 0);
    ck_assert_int_gt(outcomes[0][RACE_CANCELLED] + outcomes[1][RACE_CANCELLED], 0);
    expect_no_lock_keys(&f, "after the races");
    expect_stats(&f.e, 0, 0, 5000, "after the races");
    h_assert_ok(f.c, rlock_ping(f.c, CALL_TIMEOUT_MS, NULL));
    ck_assert_int_eq(atomic_load(&f.lost.count), 0);
    rlock_close(holder);
    h_fixture_stop(&f);
    /* Last, so that the leak checks above run whatever happens here. */
    ck_assert_msg(reentered == 0,
                  "%d acquire(s) right after a CANCELLED re-entered the cancelled grant; first: %s",
                  reentered, first_reentry);
}
END_TEST

/* --- cancelled as the grant arrives, then acquired again at once ----------------------- */

#define REACQUIRE_ROUNDS 2000
#define CALIBRATION_ROUNDS 50

struct reacquire {
    struct rounds rd; /* first: the canceller gets &reacquire as &rd */
    struct rlock_client *c;
    const char *resource;
    /* results */
    enum rlock_err first_rc, second_rc;
    char second_msg[256];
    uint32_t holds; /* of the lock the thread ended up with, if any */
    int second_no_reentry;
    enum rlock_err release_rc;
};

static void *reacquire_main(void *arg)
{
    struct reacquire *q = arg;
    for (int round = 0; rounds_next(&q->rd) == 0; round++) {
        struct rlock_acquire_opts o = {
            .ttl_ms = 10000, .wait_ms = RACE_WAIT_MS, .cancel = q->rd.k};
        struct rlock_lock *l = NULL;
        q->first_rc = rlock_acquire(q->c, q->resource, &o, CALL_TIMEOUT_MS, &l);
        q->second_rc = RLOCK_OK;
        q->release_rc = RLOCK_OK;
        q->holds = 0;
        if (q->first_rc == RLOCK_ERR_CANCELLED) {
            /* The thread holds nothing now: this acquire is not a re-entry. */
            q->second_no_reentry = round % 2;
            struct rlock_acquire_opts o2 = {.ttl_ms = 10000, .no_reentry = q->second_no_reentry};
            q->second_rc = rlock_acquire(q->c, q->resource, &o2, CALL_TIMEOUT_MS, &l);
            snprintf(q->second_msg, sizeof q->second_msg, "%s", rlock_last_error()->message);
        }
        if (l != NULL) {
            q->holds = rlock_lock_hold_count(l);
            q->release_rc = rlock_release(l, CALL_TIMEOUT_MS);
            rlock_lock_free(l);
        }
        pthread_barrier_wait(&q->rd.done);
    }
    return NULL;
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* Median microseconds an acquire of the free resource takes here (acquired and released). */
static long grant_median_us(struct rlock_client *c, const char *resource)
{
    long lat[CALIBRATION_ROUNDS];
    for (int i = 0; i < CALIBRATION_ROUNDS; i++) {
        struct timespec a, b;
        struct rlock_acquire_opts o = {.ttl_ms = 10000, .wait_ms = RACE_WAIT_MS};
        clock_gettime(CLOCK_MONOTONIC, &a);
        struct rlock_lock *l = h_acquire_ok(c, resource, &o);
        clock_gettime(CLOCK_MONOTONIC, &b);
        lat[i] = (b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000;
        h_assert_ok(c, rlock_release(l, CALL_TIMEOUT_MS));
        rlock_lock_free(l);
    }
    qsort(lat, CALIBRATION_ROUNDS, sizeof lat[0], cmp_long);
    return lat[CALIBRATION_ROUNDS / 2] < 10 ? 10 : lat[CALIBRATION_ROUNDS / 2];
}

START_TEST(test_cancel_then_reacquire)
{
    static const char res[] = "cancel/reacquire";
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    /* The cancels aim around the moment the grant comes back. */
    long median = grant_median_us(f.c, res);

    struct reacquire q = {.c = f.c, .resource = res};
    rounds_init(&q.rd, 2);
    struct h_thread t[2];
    h_thread_start(&t[0], reacquire_main, &q);
    h_thread_start(&t[1], canceller_main, &q.rd);
    unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
    printf("cancel: re-acquire rounds with seed %u, cancels within 0..%ld us (grant median %ld "
           "us)\n", seed, 2 * median, median);
    int granted = 0, cancelled = 0, again_ok = 0, again_not_acquired = 0;
    int again_reentered = 0, again_refused = 0; /* hold count > 1, ALREADY_HELD */
    char failure[768] = "", first_reentry[768] = "";
    int64_t t0 = h_now_ms();
    for (int i = 0; i < REACQUIRE_ROUNDS && !failure[0]; i++) {
        rounds_run(&q.rd, rand_r(&seed) % (2 * median + 1));
        const char *with = q.second_no_reentry ? " with no_reentry" : "";
        if (q.first_rc == RLOCK_OK) {
            granted++;
            if (q.holds != 1)
                snprintf(failure, sizeof failure, "round %d: a granted acquire has hold count %u",
                         i, q.holds);
        } else if (q.first_rc != RLOCK_ERR_CANCELLED) {
            snprintf(failure, sizeof failure, "round %d: the acquire returned %s", i,
                     rlock_strerror(q.first_rc));
        } else {
            cancelled++;
            if (q.second_rc == RLOCK_OK && q.holds == 1) {
                again_ok++;
            } else if (q.second_rc == RLOCK_ERR_NOT_ACQUIRED) {
                again_not_acquired++; /* the cancelled grant not given back yet: tolerated */
            } else if ((q.second_rc == RLOCK_OK && q.holds >= 2) ||
                       (q.second_rc == RLOCK_ERR_ALREADY_HELD && q.second_no_reentry)) {
                if (again_reentered + again_refused == 0)
                    snprintf(first_reentry, sizeof first_reentry,
                             "round %d (cancel after %ld us): after CANCELLED, the same thread's "
                             "acquire%s of the resource returned %s (%s) with hold count %u", i,
                             q.rd.cancel_after_us, with, rlock_strerror(q.second_rc),
                             q.second_msg, q.holds);
                if (q.second_rc == RLOCK_OK)
                    again_reentered++;
                else
                    again_refused++;
            } else {
                snprintf(failure, sizeof failure,
                         "round %d (cancel after %ld us): after CANCELLED, the same thread's "
                         "acquire%s returned %s (%s) with hold count %u", i,
                         q.rd.cancel_after_us, with, rlock_strerror(q.second_rc), q.second_msg,
                         q.holds);
            }
        }
        if (!failure[0] && q.release_rc != RLOCK_OK)
            snprintf(failure, sizeof failure, "round %d: release: %s", i,
                     rlock_strerror(q.release_rc));
    }
    rounds_end(&q.rd, t, 2);
    printf("cancel: re-acquire rounds in %lld ms: %d granted before the cancel, %d cancelled; "
           "then %d granted afresh, %d NOT_ACQUIRED, %d re-entered the cancelled grant (hold "
           "count > 1), %d refused as ALREADY_HELD (no_reentry)\n",
           (long long)(h_now_ms() - t0), granted, cancelled, again_ok, again_not_acquired,
           again_reentered, again_refused);
    ck_assert_msg(!failure[0], "%s", failure);
    ck_assert_int_gt(granted, 0);
    ck_assert_int_gt(cancelled, 0);
    expect_no_lock_keys(&f, "after the rounds");
    expect_stats(&f.e, 0, 0, 5000, "after the rounds");
    h_fixture_stop(&f);
    /* The thread held nothing after CANCELLED: its next acquire is no re-entry. */
    ck_assert_msg(again_reentered + again_refused == 0,
                  "%d of %d acquires right after a CANCELLED were taken for a re-entry of the "
                  "cancelled grant; first: %s",
                  again_reentered + again_refused, cancelled, first_reentry);
}
END_TEST

/* --- rlock_close while threads wait in acquire ----------------------------------------- */

START_TEST(test_cancel_close_while_waiting)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rlock_cancel *k = rlock_cancel_new(); /* watched by one of them, never fired */
    ck_assert_ptr_nonnull(k);
    struct waiting g;
    waiting_start(&g, &f, "cancel/close", MAX_WAITERS, k, NULL, 1);

    struct rlock_client *c = f.c;
    f.c = NULL;
    int64_t t_close = h_now_ms();
    rlock_close(c);
    int64_t t_closed = h_now_ms();
    int returned_before = 0;
    for (int i = 0; i < g.n; i++)
        returned_before += h_thread_done(&g.t[i]);
    printf("cancel: rlock_close returned after %lld ms with %d of %d waiting calls finished\n",
           (long long)(t_closed - t_close), returned_before, g.n);
    ck_assert_msg(t_closed - t_close < 5000, "rlock_close took %lld ms",
                  (long long)(t_closed - t_close));
    waiting_join(&g, t_close, RLOCK_ERR_CLOSED, "rlock_close began", t_closed - t_close);
    expect_stats(&f.e, 1, 0, 5000, "after the close");
    waiting_end(&g, &f);
    rlock_cancel_free(k);
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_cancel_wakes_waiter,        test_cancel_one_token_many_waiters,
                            test_cancel_shutdown_wakes_waiter, test_cancel_races,
                            test_cancel_then_reacquire,      test_cancel_close_while_waiting};
    return h_run_tests("cancel", 240, tests, H_LEN(tests));
}
