/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_wait.c — blocking acquires: waiters are granted in arrival order, a
 * wait that expires returns TIMEOUT on time, and a waiter behind a holder
 * that is killed is granted as soon as the holder's session ends.
 *
 * Every waiter runs on its own thread with its own client (its own session);
 * the main thread learns how many are queued from the daemon's Stats, so the
 * queue order is known before the holder lets go.
 */
#include "harness.h"

#include <stdio.h>
#include <string.h>

#define RES "wait/r"
#define CALL_TIMEOUT_MS 5000u
#define FIFO_WAITERS 20

/* One blocking acquire on its own thread; released after hold_ms once granted. */
struct waiter {
    struct rlock_client *c;
    uint32_t wait_ms;
    int hold_ms;
    atomic_int *grants;     /* shared grant counter; its value at the grant is `order` */
    int order;              /* position in the grant sequence, -1 if never granted */
    enum rlock_err rc;      /* the acquire's result */
    enum rlock_err rel_rc;  /* the release's result (when granted) */
    int64_t t_done;         /* when the acquire returned */
    uint64_t fence;         /* the grant's fencing token */
    struct h_thread thread;
};

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    struct rlock_lock *l = NULL;
    struct rlock_acquire_opts o = {.ttl_ms = 30000, .wait_ms = w->wait_ms};
    w->rc = rlock_acquire(w->c, RES, &o, CALL_TIMEOUT_MS, &l);
    w->t_done = h_now_ms();
    if (w->rc == RLOCK_OK) {
        w->order = atomic_fetch_add(w->grants, 1);
        w->fence = rlock_lock_fence(l);
        h_sleep_ms(w->hold_ms);
        w->rel_rc = rlock_release(l, CALL_TIMEOUT_MS);
        rlock_lock_free(l);
    }
    return NULL;
}

static void waiter_start(struct waiter *w, struct rlock_client *c, uint32_t wait_ms, int hold_ms,
                         atomic_int *grants)
{
    memset(w, 0, sizeof *w);
    w->c = c;
    w->wait_ms = wait_ms;
    w->hold_ms = hold_ms;
    w->grants = grants;
    w->order = -1;
    w->rc = w->rel_rc = RLOCK_ERR_INTERNAL;
    h_thread_start(&w->thread, waiter_main, w);
}

/* Wait (bounded) for n waiter threads to finish, then join them. */
static void waiters_join(struct waiter *w, int n, int timeout_ms)
{
    char msg[64];
    snprintf(msg, sizeof msg, "waiter threads still blocked after %d ms", timeout_ms);
    int64_t deadline = h_now_ms() + timeout_ms;
    for (int i = 0; i < n; i++)
        h_thread_join(&w[i].thread, deadline, msg);
}

struct queued {
    struct rlock_client *c;
    uint64_t want;
    uint64_t seen;
};

static int queued_reached(void *arg)
{
    struct queued *q = arg;
    struct rlock_stats st;
    if (rlock_stats(q->c, CALL_TIMEOUT_MS, &st) != RLOCK_OK)
        return 0;
    q->seen = st.waiters;
    return st.waiters == q->want;
}

/* Wait until the daemon reports exactly n waiters (asked through c). */
static void expect_waiters(struct rlock_client *c, uint64_t n)
{
    struct queued q = {c, n, UINT64_MAX};
    ck_assert_msg(h_wait_for(queued_reached, &q, 5000), "daemon reports %llu waiters, want %llu",
                  (unsigned long long)q.seen, (unsigned long long)n);
}

static struct rlock_lock *take(struct rlock_client *c)
{
    struct rlock_lock *l = NULL;
    struct rlock_acquire_opts o = {.ttl_ms = 30000, .wait_ms = 0};
    enum rlock_err rc = rlock_acquire(c, RES, &o, CALL_TIMEOUT_MS, &l);
    ck_assert_msg(rc == RLOCK_OK, "holder's acquire: %s", rlock_strerror(rc));
    return l;
}

START_TEST(test_fifo)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rlock_client *holder = f.c;
    struct rlock_lock *hl = take(holder);

    struct rlock_client *c[FIFO_WAITERS];
    for (int i = 0; i < FIFO_WAITERS; i++)
        c[i] = h_client_or_fail(&f.e, NULL);
    static struct waiter w[FIFO_WAITERS];
    atomic_int grants;
    atomic_init(&grants, 0);
    /* Waiter i starts only once i are queued, so the queue order is the start order. */
    for (int i = 0; i < FIFO_WAITERS; i++) {
        expect_waiters(holder, (uint64_t)i);
        waiter_start(&w[i], c[i], 30000, 5, &grants);
    }
    expect_waiters(holder, FIFO_WAITERS);

    int64_t t0 = h_now_ms();
    ck_assert_int_eq(rlock_release(hl, CALL_TIMEOUT_MS), RLOCK_OK);
    waiters_join(w, FIFO_WAITERS, 35000);
    printf("wait/fifo: %d waiters served in %lld ms; grant order:", FIFO_WAITERS,
           (long long)(h_now_ms() - t0));
    for (int i = 0; i < FIFO_WAITERS; i++)
        printf(" %d", w[i].order);
    printf("\n");
    fflush(stdout);

    for (int i = 0; i < FIFO_WAITERS; i++) {
        ck_assert_msg(w[i].rc == RLOCK_OK, "waiter %d: %s", i, rlock_strerror(w[i].rc));
        ck_assert_msg(w[i].rel_rc == RLOCK_OK, "waiter %d release: %s", i,
                      rlock_strerror(w[i].rel_rc));
        ck_assert_msg(w[i].order == i, "waiter %d was granted as number %d", i, w[i].order);
        rlock_close(c[i]);
    }
    ck_assert_int_eq(atomic_load(&grants), FIFO_WAITERS);
    expect_waiters(holder, 0);
    rlock_lock_free(hl);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_timeout)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rlock_client *holder = f.c;
    struct rlock_client *b = h_client_or_fail(&f.e, NULL);
    struct rlock_lock *hl = take(holder);

    for (int i = 0; i < 3; i++) {
        struct rlock_lock *l = NULL;
        struct rlock_acquire_opts o = {.ttl_ms = 30000, .wait_ms = 300};
        int64_t t0 = h_now_ms();
        enum rlock_err rc = rlock_acquire(b, RES, &o, CALL_TIMEOUT_MS, &l);
        int64_t dt = h_now_ms() - t0;
        printf("wait/timeout: 300 ms wait returned %s after %lld ms\n", rlock_strerror(rc),
               (long long)dt);
        fflush(stdout);
        ck_assert_msg(rc == RLOCK_ERR_TIMEOUT, "300 ms wait: %s (want TIMEOUT)", rlock_strerror(rc));
        ck_assert_ptr_null(l);
        /* Generous: the point is that the wait ends at its deadline, not at the 30 s lease. */
        ck_assert_msg(dt >= 150 && dt <= 3000, "300 ms wait took %lld ms", (long long)dt);
    }
    /* The expired waits left nothing queued, and the holder still holds. */
    expect_waiters(holder, 0);
    ck_assert_int_eq(rlock_lock_state(hl), RLOCK_HELD);
    rlock_lock_free(hl);
    rlock_close(b);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_holder_killed)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rlock_client *observer = f.c;
    struct h_holder holder;
    h_holder_start(&holder, &f.e, RES, 30000, 10000);

    struct rlock_client *wc = h_client_or_fail(&f.e, NULL);
    struct waiter w;
    atomic_int grants;
    atomic_init(&grants, 0);
    waiter_start(&w, wc, 10000, 0, &grants);
    expect_waiters(observer, 1);

    int64_t t_kill = h_holder_kill9(&holder);
    waiters_join(&w, 1, 12000);
    printf("wait/holder-killed: waiter got %s %lld ms after kill -9 of the holder\n",
           rlock_strerror(w.rc), (long long)(w.t_done - t_kill));
    fflush(stdout);
    ck_assert_msg(w.rc == RLOCK_OK, "waiter: %s", rlock_strerror(w.rc));
    ck_assert_msg(w.t_done - t_kill < 1000, "waiter granted %lld ms after the kill",
                  (long long)(w.t_done - t_kill));
    ck_assert_int_eq(w.rel_rc, RLOCK_OK);
    ck_assert_msg(w.fence > holder.fence, "waiter's fence %llu not above the dead holder's %llu",
                  (unsigned long long)w.fence, (unsigned long long)holder.fence);
    rlock_close(wc);
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = { test_fifo, test_timeout, test_holder_killed };
    return h_run_tests("integration_wait", 90, tests, H_LEN(tests));
}
