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

#include <pthread.h>
#include <signal.h>
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
    pthread_t thread;
    atomic_int done;
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
    atomic_store(&w->done, 1);
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
    atomic_init(&w->done, 0);
    ck_assert_int_eq(pthread_create(&w->thread, NULL, waiter_main, w), 0);
}

struct all_done {
    struct waiter *w;
    int n;
};

static int all_done(void *arg)
{
    struct all_done *a = arg;
    for (int i = 0; i < a->n; i++)
        if (!atomic_load(&a->w[i].done))
            return 0;
    return 1;
}

/* Wait (bounded) for n waiter threads to finish, then join them. */
static void waiters_join(struct waiter *w, int n, int timeout_ms)
{
    struct all_done a = {w, n};
    ck_assert_msg(h_wait_for(all_done, &a, timeout_ms), "waiter threads still blocked after %d ms",
                  timeout_ms);
    for (int i = 0; i < n; i++)
        pthread_join(w[i].thread, NULL);
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

static struct rlock_client *client(struct h_env *e)
{
    struct rlock_client *c = h_client(e, NULL);
    ck_assert_ptr_nonnull(c);
    return c;
}

START_TEST(test_fifo)
{
    struct h_env e;
    ck_assert_int_eq(h_env_start(&e, NULL), 0);
    struct rlock_client *holder = client(&e);
    struct rlock_lock *hl = take(holder);

    struct rlock_client *c[FIFO_WAITERS];
    for (int i = 0; i < FIFO_WAITERS; i++)
        c[i] = client(&e);
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
    rlock_close(holder);
    h_env_stop(&e);
}
END_TEST

START_TEST(test_timeout)
{
    struct h_env e;
    ck_assert_int_eq(h_env_start(&e, NULL), 0);
    struct rlock_client *holder = client(&e);
    struct rlock_client *b = client(&e);
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
        ck_assert_msg(dt >= 150 && dt <= 450, "300 ms wait took %lld ms", (long long)dt);
    }
    /* The expired waits left nothing queued, and the holder still holds. */
    expect_waiters(holder, 0);
    ck_assert_int_eq(rlock_lock_state(hl), RLOCK_HELD);
    rlock_lock_free(hl);
    rlock_close(b);
    rlock_close(holder);
    h_env_stop(&e);
}
END_TEST

START_TEST(test_holder_killed)
{
    struct h_env e;
    ck_assert_int_eq(h_env_start(&e, NULL), 0);
    char bin[512], out[400], res[] = RES, ttl[] = "30000";
    ck_assert_ptr_nonnull(h_bin("rlock-holder", bin, sizeof bin));
    snprintf(out, sizeof out, "%s/holder.out", e.dir);
    char *argv[] = {bin, e.rlockd_addr, res, ttl, NULL};
    pid_t pid = h_spawn(argv, out);
    ck_assert_int_gt(pid, 0);
    char line[256];
    unsigned long long fence = 0;
    ck_assert_msg(h_wait_line(out, "HELD ", pid, 10000, line, sizeof line) == 0,
                  "rlock-holder did not report HELD");
    ck_assert_int_eq(sscanf(line, "HELD %llu", &fence), 1);

    struct rlock_client *observer = client(&e);
    struct rlock_client *wc = client(&e);
    struct waiter w;
    atomic_int grants;
    atomic_init(&grants, 0);
    waiter_start(&w, wc, 10000, 0, &grants);
    expect_waiters(observer, 1);

    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    int64_t t_kill = h_now_ms();
    int status;
    ck_assert_int_eq(h_wait_exit(pid, 5000, &status), 0);
    waiters_join(&w, 1, 12000);
    printf("wait/holder-killed: waiter got %s %lld ms after kill -9 of the holder\n",
           rlock_strerror(w.rc), (long long)(w.t_done - t_kill));
    fflush(stdout);
    ck_assert_msg(w.rc == RLOCK_OK, "waiter: %s", rlock_strerror(w.rc));
    ck_assert_msg(w.t_done - t_kill < 1000, "waiter granted %lld ms after the kill",
                  (long long)(w.t_done - t_kill));
    ck_assert_int_eq(w.rel_rc, RLOCK_OK);
    ck_assert_msg(w.fence > fence, "waiter's fence %llu not above the dead holder's %llu",
                  (unsigned long long)w.fence, fence);
    rlock_close(wc);
    rlock_close(observer);
    h_env_stop(&e);
}
END_TEST

static Suite *wait_suite(void)
{
    Suite *s = suite_create("integration_wait");
    struct {
        const char *name;
        const TTest *test;
    } cases[] = {
        {"fifo", test_fifo},
        {"timeout", test_timeout},
        {"holder_killed", test_holder_killed},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_set_timeout(tc, 90);
        tcase_add_test(tc, cases[i].test);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void)
{
    return h_run_suite(wait_suite());
}
