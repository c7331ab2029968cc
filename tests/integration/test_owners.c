/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_owners.c — re-entry is per owner, not per client.
 *
 *  - 8 threads share one client and take turns on one resource (500 cycles
 *    each, acquire with a wait): a plain int incremented under the lock ends
 *    at exactly 4000, no two threads are ever inside at once, and the fences
 *    handed out grow strictly in lock order. Once with the threads as owners
 *    (the default), once with explicit owners 1..8.
 *  - The same owner acquiring again re-enters (same token and fence, hold
 *    count 2); another owner of the same client gets NOT_ACQUIRED without a
 *    wait, and with one waits until both holds are released, then gets a new
 *    token and a higher fence.
 *  - no_reentry: the owner's second acquire is refused (ALREADY_HELD) and the
 *    lock stays held once.
 *  - An explicit owner hands a lock between threads: a second thread acquiring
 *    with the same owner re-enters and releases its hold; the first keeps its
 *    own. Owners belong to a session: another client with the same owner id
 *    does not re-enter.
 */
#include "harness.h"

#include <inttypes.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CALL_TIMEOUT_MS 5000u
#define THREADS 8
#define CYCLES 500
#define CONTEND_WAIT_MS 30000u
#define CONTEND_TTL_MS 30000u

/* --- many threads, one client, one resource ------------------------------------- */

struct contend {
    struct rlock_client *c;
    const char *resource;
    int explicit_owners;
    pthread_barrier_t start;
    /* Guarded by the distributed lock alone: a second thread inside breaks them. */
    int counter;
    uint64_t last_fence;
    /* Threads between a granted acquire and the release. */
    atomic_int inside;
    atomic_int max_inside;
    atomic_int failures;
    pthread_mutex_t msg_mu;
    char first_failure[320];
};

struct contender {
    struct contend *s;
    int index;
    uint64_t owner_seen; /* rlock_lock_owner of its grants */
};

static void contend_fail(struct contend *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void contend_fail(struct contend *s, const char *fmt, ...)
{
    if (atomic_fetch_add(&s->failures, 1) > 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&s->msg_mu);
    vsnprintf(s->first_failure, sizeof s->first_failure, fmt, ap);
    pthread_mutex_unlock(&s->msg_mu);
    va_end(ap);
}

static void *contender_main(void *arg)
{
    struct contender *w = arg;
    struct contend *s = w->s;
    uint64_t owner = s->explicit_owners ? (uint64_t)w->index + 1 : 0;
    uint64_t want_owner = owner ? owner : rlock_thread_owner();
    pthread_barrier_wait(&s->start);
    for (int i = 0; i < CYCLES && atomic_load(&s->failures) == 0; i++) {
        struct rlock_acquire_opts o = {
            .ttl_ms = CONTEND_TTL_MS, .wait_ms = CONTEND_WAIT_MS, .owner = owner};
        struct rlock_lock *l = NULL;
        enum rlock_err rc = rlock_acquire(s->c, s->resource, &o, CALL_TIMEOUT_MS, &l);
        if (rc != RLOCK_OK) {
            contend_fail(s, "thread %d cycle %d: acquire: %s: %s", w->index, i,
                         rlock_strerror(rc), rlock_last_error()->message);
            break;
        }
        int now_inside = atomic_fetch_add(&s->inside, 1) + 1;
        int max = atomic_load(&s->max_inside);
        while (now_inside > max && !atomic_compare_exchange_weak(&s->max_inside, &max, now_inside))
            ;
        uint32_t holds = rlock_lock_hold_count(l);
        uint64_t fence = rlock_lock_fence(l);
        w->owner_seen = rlock_lock_owner(l);
        if (holds != 1)
            contend_fail(s, "thread %d cycle %d: hold count %u (another owner's hold re-entered)",
                         w->index, i, holds);
        if (w->owner_seen != want_owner)
            contend_fail(s, "thread %d: lock owner %#" PRIx64 ", want %#" PRIx64, w->index,
                         w->owner_seen, want_owner);
        if (fence <= s->last_fence)
            contend_fail(s, "thread %d cycle %d: fence %" PRIu64 " after %" PRIu64, w->index, i,
                         fence, s->last_fence);
        s->last_fence = fence;
        /* Read, let the others run, write: a second thread inside loses an increment. */
        int v = s->counter;
        sched_yield();
        s->counter = v + 1;
        atomic_fetch_sub(&s->inside, 1);
        rc = rlock_release(l, CALL_TIMEOUT_MS);
        rlock_lock_free(l);
        if (rc != RLOCK_OK) {
            contend_fail(s, "thread %d cycle %d: release: %s: %s", w->index, i,
                         rlock_strerror(rc), rlock_last_error()->message);
            break;
        }
    }
    return NULL;
}

static void run_contention(int explicit_owners, const char *resource)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct contend s = {.c = f.c, .resource = resource, .explicit_owners = explicit_owners};
    pthread_mutex_init(&s.msg_mu, NULL);
    ck_assert_int_eq(pthread_barrier_init(&s.start, NULL, THREADS + 1), 0);
    struct contender w[THREADS];
    struct h_thread t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (struct contender){.s = &s, .index = i};
        h_thread_start(&t[i], contender_main, &w[i]);
    }
    int64_t t0 = h_now_ms();
    pthread_barrier_wait(&s.start);
    for (int i = 0; i < THREADS; i++)
        h_thread_join(&t[i], t0 + 240000, "a contending thread still runs after 240 s");
    int64_t took = h_now_ms() - t0;
    printf("owners: %s owners: %d threads x %d cycles in %lld ms (%.1f cycles/s), count %d, "
           "max inside %d, last fence %" PRIu64 "\n",
           explicit_owners ? "explicit" : "thread", THREADS, CYCLES, (long long)took,
           took > 0 ? THREADS * CYCLES * 1000.0 / (double)took : 0.0, s.counter,
           atomic_load(&s.max_inside), s.last_fence);

    ck_assert_msg(atomic_load(&s.failures) == 0, "%d failure(s), first: %s",
                  atomic_load(&s.failures), s.first_failure);
    ck_assert_int_eq(s.counter, THREADS * CYCLES);
    ck_assert_int_eq(atomic_load(&s.max_inside), 1);
    /* Eight distinct owners, each the one the thread asked for. */
    for (int i = 0; i < THREADS; i++)
        for (int j = i + 1; j < THREADS; j++)
            ck_assert_msg(w[i].owner_seen != w[j].owner_seen, "threads %d and %d share owner %#"
                          PRIx64, i, j, w[i].owner_seen);
    char key[512];
    h_lock_key(&f.e, resource, key, sizeof key);
    ck_assert_int_eq(h_key_exists(f.r, key), 0);
    struct rlock_stats st;
    ck_assert_msg(h_wait_stats(&f.e, 0, 0, 5000, &st) == 0,
                  "rlockd still counts %" PRIu64 " held locks and %" PRIu64 " waiters",
                  st.held_locks, st.waiters);
    pthread_barrier_destroy(&s.start);
    pthread_mutex_destroy(&s.msg_mu);
    h_fixture_stop(&f);
}

START_TEST(test_owners_threads_exclude)
{
    run_contention(0, "owners/threads");
}
END_TEST

START_TEST(test_owners_explicit_exclude)
{
    run_contention(1, "owners/explicit");
}
END_TEST

/* --- re-entry for the same owner, waiting for another ------------------------------ */

struct acquirer {
    struct rlock_client *c;
    const char *resource;
    struct rlock_acquire_opts o;
    enum rlock_err rc;
    struct rlock_lock *l;
    struct rlock_error err;
    uint64_t thread_owner;
    int64_t returned_ms;
};

static void *acquirer_main(void *arg)
{
    struct acquirer *a = arg;
    a->thread_owner = rlock_thread_owner();
    a->rc = rlock_acquire(a->c, a->resource, &a->o, CALL_TIMEOUT_MS, &a->l);
    a->returned_ms = h_now_ms();
    a->err = *rlock_last_error();
    return NULL;
}

/* Run one acquire on another thread (another owner, unless o names one) and wait for it. */
static struct acquirer acquire_elsewhere(struct rlock_client *c, const char *resource,
                                         struct rlock_acquire_opts o)
{
    struct acquirer a = {.c = c, .resource = resource, .o = o};
    struct h_thread t;
    h_thread_start(&t, acquirer_main, &a);
    h_thread_join(&t, h_now_ms() + 10000, "an acquire on another thread did not return in 10 s");
    return a;
}

START_TEST(test_owners_reentry_same_owner)
{
    static const char res[] = "owners/reentry";
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    char key[512];
    h_lock_key(&f.e, res, key, sizeof key);

    struct rlock_acquire_opts o = {.ttl_ms = 10000};
    struct rlock_lock *l1 = h_acquire_ok(f.c, res, &o);
    /* A wait must not make the owner queue behind its own hold. */
    struct rlock_acquire_opts ow = {.ttl_ms = 10000, .wait_ms = 3000};
    struct rlock_lock *l2 = h_acquire_ok(f.c, res, &ow);
    ck_assert_str_eq(rlock_lock_token(l2), rlock_lock_token(l1));
    ck_assert_uint_eq(rlock_lock_fence(l2), rlock_lock_fence(l1));
    ck_assert_uint_eq(rlock_lock_hold_count(l1), 2);
    ck_assert_uint_eq(rlock_lock_hold_count(l2), 2);
    ck_assert_uint_eq(rlock_lock_owner(l1), rlock_thread_owner());
    ck_assert_uint_eq(rlock_lock_owner(l2), rlock_thread_owner());
    char token[128];
    snprintf(token, sizeof token, "%s", rlock_lock_token(l1));
    uint64_t fence = rlock_lock_fence(l1);
    h_assert_key_token(f.r, key, token);

    /* Another owner of the same client, without a wait: refused at once. */
    struct acquirer b = acquire_elsewhere(f.c, res, (struct rlock_acquire_opts){.ttl_ms = 10000});
    ck_assert_msg(b.rc == RLOCK_ERR_NOT_ACQUIRED, "another thread's try-acquire: %s (%s)",
                  rlock_strerror(b.rc), b.err.message);
    ck_assert_ptr_null(b.l);
    ck_assert_uint_ne(b.thread_owner, rlock_thread_owner());

    /* With a wait: it queues in the daemon until both holds are gone. */
    struct acquirer w = {.c = f.c, .resource = res,
                         .o = {.ttl_ms = 10000, .wait_ms = 20000}};
    struct h_thread tw;
    h_thread_start(&tw, acquirer_main, &w);
    struct rlock_stats st;
    ck_assert_msg(h_wait_stats(&f.e, 1, 1, 5000, &st) == 0,
                  "the other thread's acquire is not waiting in rlockd (held %" PRIu64
                  ", waiters %" PRIu64 ")", st.held_locks, st.waiters);
    ck_assert_msg(!h_thread_done(&tw), "the other owner got in while the lock was held twice: %s",
                  rlock_strerror(w.rc));

    h_assert_ok(f.c, rlock_release(l2, CALL_TIMEOUT_MS));
    ck_assert_int_eq(rlock_lock_state(l2), RLOCK_RELEASED);
    ck_assert_int_eq(rlock_lock_state(l1), RLOCK_HELD);
    ck_assert_uint_eq(rlock_lock_hold_count(l1), 1);
    /* One hold left: the waiter still waits (it would be granted within ms otherwise). */
    ck_assert_msg(h_wait_stats(&f.e, 1, 1, 5000, &st) == 0,
                  "after one of two releases: held %" PRIu64 ", waiters %" PRIu64,
                  st.held_locks, st.waiters);
    h_sleep_ms(200);
    ck_assert_msg(!h_thread_done(&tw), "the other owner got in with one hold left: %s",
                  rlock_strerror(w.rc));
    h_assert_key_token(f.r, key, token);

    int64_t t_release = h_now_ms();
    h_assert_ok(f.c, rlock_release(l1, CALL_TIMEOUT_MS));
    h_thread_join(&tw, h_now_ms() + 5000, "the waiter was not granted 5 s after the last release");
    printf("owners: the waiting owner got the lock %lld ms after the last release\n",
           (long long)(w.returned_ms - t_release));
    ck_assert_msg(w.rc == RLOCK_OK, "waiting acquire: %s (%s)", rlock_strerror(w.rc),
                  w.err.message);
    ck_assert_str_ne(rlock_lock_token(w.l), token);
    ck_assert_uint_gt(rlock_lock_fence(w.l), fence);
    ck_assert_uint_eq(rlock_lock_hold_count(w.l), 1);
    ck_assert_uint_eq(rlock_lock_owner(w.l), w.thread_owner);
    h_assert_key_token(f.r, key, rlock_lock_token(w.l));
    /* A lock handle may be used by another thread, one at a time. */
    h_release_gone(&f, f.c, w.l);

    rlock_lock_free(w.l);
    rlock_lock_free(l1);
    rlock_lock_free(l2);
    h_fixture_stop(&f);
}
END_TEST

/* --- no_reentry --------------------------------------------------------------------- */

START_TEST(test_owners_no_reentry)
{
    static const char res[] = "owners/noreentry";
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    char key[512];
    h_lock_key(&f.e, res, key, sizeof key);
    struct rlock_acquire_opts o = {.ttl_ms = 10000};
    struct rlock_lock *l = h_acquire_ok(f.c, res, &o);

    /* Without and with a wait: refused, and at once (a wait would end in TIMEOUT). */
    for (uint32_t wait = 0; wait <= 2000; wait += 2000) {
        struct rlock_acquire_opts n = {.ttl_ms = 10000, .wait_ms = wait, .no_reentry = 1};
        struct rlock_lock *l2 = NULL;
        enum rlock_err rc = rlock_acquire(f.c, res, &n, CALL_TIMEOUT_MS, &l2);
        ck_assert_msg(rc == RLOCK_ERR_ALREADY_HELD, "no_reentry acquire (wait %u ms): %s (%s)",
                      wait, rlock_strerror(rc), rlock_last_error()->message);
        ck_assert_ptr_null(l2);
        ck_assert_int_eq(rlock_last_error()->code, RLOCK_ERR_ALREADY_HELD);
        ck_assert_msg(rlock_last_error()->message[0] != '\0', "no message with ALREADY_HELD");
        ck_assert_int_eq(rlock_lock_state(l), RLOCK_HELD);
        ck_assert_uint_eq(rlock_lock_hold_count(l), 1);
        h_assert_key_token(f.r, key, rlock_lock_token(l));
    }
    /* no_reentry concerns the owner's own hold: another owner is simply excluded. */
    struct rlock_acquire_opts other = {.ttl_ms = 10000, .owner = 7, .no_reentry = 1};
    struct rlock_lock *l3 = NULL;
    enum rlock_err rc = rlock_acquire(f.c, res, &other, CALL_TIMEOUT_MS, &l3);
    ck_assert_msg(rc == RLOCK_ERR_NOT_ACQUIRED, "another owner's no_reentry acquire: %s",
                  rlock_strerror(rc));

    /* One release frees it: the refused acquires left no hold behind. */
    h_release_gone(&f, f.c, l);
    ck_assert_int_eq(rlock_release(l, CALL_TIMEOUT_MS), RLOCK_ERR_NOT_HELD);
    rlock_lock_free(l);
    h_fixture_stop(&f);
}
END_TEST

/* --- an explicit owner handed between threads -------------------------------------- */

#define HANDOVER_OWNER 42u

struct second_holder {
    struct rlock_client *c;
    const char *resource;
    enum rlock_err acquire_rc, refuse_rc, release_rc;
    char token[128];
    uint64_t fence;
    uint32_t holds_after_acquire, holds_after_release;
    uint64_t owner;
    enum rlock_lock_state state_after_release;
};

static void *second_holder_main(void *arg)
{
    struct second_holder *s = arg;
    struct rlock_acquire_opts o = {.ttl_ms = 10000, .owner = HANDOVER_OWNER};
    struct rlock_lock *l = NULL;
    s->acquire_rc = rlock_acquire(s->c, s->resource, &o, CALL_TIMEOUT_MS, &l);
    if (s->acquire_rc != RLOCK_OK)
        return NULL;
    snprintf(s->token, sizeof s->token, "%s", rlock_lock_token(l));
    s->fence = rlock_lock_fence(l);
    s->holds_after_acquire = rlock_lock_hold_count(l);
    s->owner = rlock_lock_owner(l);
    struct rlock_acquire_opts n = {.ttl_ms = 10000, .owner = HANDOVER_OWNER, .no_reentry = 1};
    struct rlock_lock *l2 = NULL;
    s->refuse_rc = rlock_acquire(s->c, s->resource, &n, CALL_TIMEOUT_MS, &l2);
    rlock_lock_free(l2);
    s->release_rc = rlock_release(l, CALL_TIMEOUT_MS);
    s->holds_after_release = rlock_lock_hold_count(l);
    s->state_after_release = rlock_lock_state(l);
    rlock_lock_free(l);
    return NULL;
}

START_TEST(test_owners_explicit_handover)
{
    static const char res[] = "owners/handover";
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    char key[512];
    h_lock_key(&f.e, res, key, sizeof key);
    struct rlock_acquire_opts o = {.ttl_ms = 10000, .owner = HANDOVER_OWNER};
    struct rlock_lock *l = h_acquire_ok(f.c, res, &o);
    ck_assert_uint_eq(rlock_lock_owner(l), HANDOVER_OWNER);
    ck_assert_uint_eq(rlock_lock_hold_count(l), 1);

    struct second_holder s = {.c = f.c, .resource = res};
    struct h_thread t;
    h_thread_start(&t, second_holder_main, &s);
    h_thread_join(&t, h_now_ms() + 10000, "the second thread did not finish in 10 s");
    ck_assert_msg(s.acquire_rc == RLOCK_OK, "second thread, owner %u: %s", HANDOVER_OWNER,
                  rlock_strerror(s.acquire_rc));
    ck_assert_str_eq(s.token, rlock_lock_token(l));
    ck_assert_uint_eq(s.fence, rlock_lock_fence(l));
    ck_assert_uint_eq(s.holds_after_acquire, 2);
    ck_assert_uint_eq(s.owner, HANDOVER_OWNER);
    ck_assert_msg(s.refuse_rc == RLOCK_ERR_ALREADY_HELD, "no_reentry with owner %u: %s",
                  HANDOVER_OWNER, rlock_strerror(s.refuse_rc));
    ck_assert_msg(s.release_rc == RLOCK_OK, "second thread's release: %s",
                  rlock_strerror(s.release_rc));
    ck_assert_int_eq(s.state_after_release, RLOCK_RELEASED);
    printf("owners: the second thread's released handle reports hold count %u\n",
           s.holds_after_release);

    /* The first thread's hold is intact. */
    ck_assert_int_eq(rlock_lock_state(l), RLOCK_HELD);
    ck_assert_uint_eq(rlock_lock_hold_count(l), 1);
    h_assert_key_token(f.r, key, rlock_lock_token(l));
    /* The calling thread as owner is someone else. */
    struct rlock_acquire_opts mine = {.ttl_ms = 10000};
    struct rlock_lock *l3 = NULL;
    enum rlock_err rc = rlock_acquire(f.c, res, &mine, CALL_TIMEOUT_MS, &l3);
    ck_assert_msg(rc == RLOCK_ERR_NOT_ACQUIRED, "thread owner vs owner %u: %s", HANDOVER_OWNER,
                  rlock_strerror(rc));
    /* Owners are per session: the same id on another client is another owner. */
    struct rlock_client *c2 = h_client_or_fail(&f.e, NULL);
    rc = rlock_acquire(c2, res, &o, CALL_TIMEOUT_MS, &l3);
    ck_assert_msg(rc == RLOCK_ERR_NOT_ACQUIRED, "owner %u on another client: %s",
                  HANDOVER_OWNER, rlock_strerror(rc));
    ck_assert_ptr_null(l3);
    rlock_close(c2);
    /* An owner id with the thread bit is the library's, not the application's. */
    struct rlock_acquire_opts bad = {.owner = RLOCK_OWNER_THREAD_BIT | 5};
    ck_assert_int_eq(rlock_acquire(f.c, res, &bad, CALL_TIMEOUT_MS, &l3), RLOCK_ERR_ARG);

    h_release_gone(&f, f.c, l);
    rlock_lock_free(l);
    h_fixture_stop(&f);
}
END_TEST

/* --- a thread owner is never reused ------------------------------------------------- */

#define SHORT_THREADS 20

/*
 * A thread that ends still holding a lock leaves it to its handle; threads
 * started later (which may get the same pthread_t or tid) are other owners
 * and must not re-enter it.
 */
START_TEST(test_owners_ended_thread_not_reused)
{
    static const char res[] = "owners/ended";
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    const struct rlock_acquire_opts o = {.ttl_ms = 10000};
    struct acquirer first = acquire_elsewhere(f.c, res, o);
    ck_assert_msg(first.rc == RLOCK_OK, "first thread: %s", rlock_strerror(first.rc));
    for (int i = 0; i < SHORT_THREADS; i++) {
        struct acquirer a = acquire_elsewhere(f.c, res, o);
        ck_assert_msg(a.thread_owner != first.thread_owner,
                      "thread %d has the ended thread's owner", i);
        ck_assert_msg(a.rc == RLOCK_ERR_NOT_ACQUIRED,
                      "thread %d, started after the holder ended: %s (hold count %u)", i,
                      rlock_strerror(a.rc), a.l ? rlock_lock_hold_count(a.l) : 0);
    }
    ck_assert_uint_eq(rlock_lock_hold_count(first.l), 1);
    h_release_gone(&f, f.c, first.l);
    rlock_lock_free(first.l);
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_owners_threads_exclude, test_owners_explicit_exclude,
                            test_owners_reentry_same_owner, test_owners_no_reentry,
                            test_owners_explicit_handover, test_owners_ended_thread_not_reused};
    return h_run_tests("owners", 300, tests, H_LEN(tests));
}
