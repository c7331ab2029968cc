/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_deadlock.c — a wait that would close a cycle of this daemon's
 * sessions is refused with DEADLOCK (docs/protocol.md §6.13):
 *  - two_party: A holds X and waits for Y; B holds Y and asks for X with a
 *    long wait: B gets RLOCK_ERR_DEADLOCK at once (well within 100 ms of its
 *    call), naming X, Y and A's session; A's wait goes on and is granted
 *    when B lets Y go;
 *  - three_party: A, B, C hold X, Y, Z; A waits for Y, B for Z; C asking for
 *    X is refused, the message naming all three;
 *  - owners: two owners (threads) of one client, each holding one lock and
 *    waiting for the other's: the second wait is refused;
 *  - no_false_alarm: waits without a cycle (a waiter behind a holder that
 *    waits elsewhere, a shared wait behind an exclusive hold) are granted in
 *    turn, and nothing says deadlock;
 *  - owners_apart: one owner of a session holds X while another owner of it
 *    waits for Y: a wait for X by Y's holder is no cycle (owners are apart).
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct rlock_client *named_client(struct h_env *e, const char *name)
{
    struct rlock_options o = {.client_name = name};
    return h_client_or_fail(e, &o);
}

struct waiter {
    struct rlock_client *c;
    const char *resource;
    uint64_t owner;
    int shared;
    uint32_t wait_ms;
    enum rlock_err rc;
    struct rlock_lock *l;
};

static void *wait_main(void *arg)
{
    struct waiter *w = arg;
    struct rlock_acquire_opts o = {.ttl_ms = 10000, .wait_ms = w->wait_ms, .owner = w->owner,
                                   .shared = w->shared};
    w->rc = rlock_acquire(w->c, w->resource, &o, 0, &w->l);
    if (w->rc == RLOCK_OK) {
        rlock_release(w->l, 5000);
        rlock_lock_free(w->l);
    }
    return NULL;
}

/* Start a waiter thread, and wait until the daemon counts `waiters` queued in all. */
static void start_waiter(struct rlock_client *stats, pthread_t *t, struct waiter *w,
                         uint64_t held, uint64_t waiters)
{
    ck_assert_int_eq(pthread_create(t, NULL, wait_main, w), 0);
    ck_assert_int_ge(h_wait_stats_of(stats, held, waiters, 10000, NULL), 0);
}

/* An acquire of resource with a long wait, refused DEADLOCK at once; its message in msg. */
static void refused_deadlock(struct rlock_client *c, const char *resource, uint64_t owner,
                             char *msg, size_t len)
{
    struct rlock_acquire_opts o = {.ttl_ms = 10000, .wait_ms = 30000, .owner = owner};
    struct rlock_lock *l = NULL;
    int64_t t0 = h_now_ms();
    enum rlock_err rc = rlock_acquire(c, resource, &o, 0, &l);
    int64_t took = h_now_ms() - t0;
    snprintf(msg, len, "%s", rlock_last_error()->message);
    printf("deadlock: %s in %lld ms: %s\n", rlock_strerror(rc), (long long)took, msg);
    ck_assert_msg(rc == RLOCK_ERR_DEADLOCK, "acquire of %s: %s, want DEADLOCK", resource,
                  rlock_strerror(rc));
    /* Found when the wait would start: a round trip, not a wait (generous for a loaded
     * machine; the wait asked for is 30 s). */
    ck_assert_msg(took < 5000, "DEADLOCK after %lld ms", (long long)took);
}

/* The first 8 characters of c's session id, as the message names sessions. */
static const char *sid8(struct rlock_client *c, char buf[9])
{
    snprintf(buf, 9, "%s", rlock_session_id(c));
    return buf;
}

static void assert_names(const char *msg, const char *const *words, int n)
{
    for (int i = 0; i < n; i++)
        ck_assert_msg(strstr(msg, words[i]) != NULL, "'%s' lacks '%s'", msg, words[i]);
}

START_TEST(test_two_party)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct rlock_client *a = named_client(&f.e, "dl-a");
    struct rlock_client *b = named_client(&f.e, "dl-b");
    /* A's hold and A's wait by one owner (a thread's own owner is not the other's). */
    struct rlock_acquire_opts a7 = {.ttl_ms = 10000, .owner = 7};
    struct rlock_acquire_opts ho = {.ttl_ms = 10000};
    struct rlock_lock *ax = h_acquire_ok(a, "dl-X", &a7);
    struct rlock_lock *by = h_acquire_ok(b, "dl-Y", &ho);
    struct waiter wa = {.c = a, .resource = "dl-Y", .owner = 7, .wait_ms = 30000};
    pthread_t t;
    start_waiter(b, &t, &wa, 2, 1);
    char msg[512];
    refused_deadlock(b, "dl-X", 0, msg, sizeof msg);
    char ida[9];
    const char *words[] = {"deadlock", "dl-X held by session", sid8(a, ida), "dl-a, owner 7",
                           "waiting for dl-Y held by this session"};
    assert_names(msg, words, 5);
    /* The other wait goes on, and is granted once B lets Y go. */
    ck_assert_int_eq(rlock_release(by, 5000), RLOCK_OK);
    rlock_lock_free(by);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(wa.rc, RLOCK_OK);
    rlock_lock_free(ax);
    rlock_close(a);
    rlock_close(b);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_three_party)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct rlock_client *a = named_client(&f.e, "dl-a");
    struct rlock_client *b = named_client(&f.e, "dl-b");
    struct rlock_client *c = named_client(&f.e, "dl-c");
    struct rlock_acquire_opts a7 = {.ttl_ms = 10000, .owner = 7};
    struct rlock_acquire_opts b8 = {.ttl_ms = 10000, .owner = 8};
    struct rlock_acquire_opts ho = {.ttl_ms = 10000};
    struct rlock_lock *ax = h_acquire_ok(a, "dl-X", &a7);
    struct rlock_lock *by = h_acquire_ok(b, "dl-Y", &b8);
    struct rlock_lock *cz = h_acquire_ok(c, "dl-Z", &ho);
    struct waiter wa = {.c = a, .resource = "dl-Y", .owner = 7, .wait_ms = 30000};
    struct waiter wb = {.c = b, .resource = "dl-Z", .owner = 8, .wait_ms = 30000};
    pthread_t ta, tb;
    start_waiter(c, &ta, &wa, 3, 1);
    start_waiter(c, &tb, &wb, 3, 2);
    char msg[512];
    refused_deadlock(c, "dl-X", 0, msg, sizeof msg);
    char ida[9], idb[9];
    const char *words[] = {"dl-X held by session", sid8(a, ida), "waiting for dl-Y held by session",
                           sid8(b, idb), "waiting for dl-Z held by this session"};
    assert_names(msg, words, 5);
    ck_assert_int_eq(rlock_release(cz, 5000), RLOCK_OK); /* B gets Z, lets Y go: A gets Y */
    rlock_lock_free(cz);
    ck_assert_int_eq(pthread_join(tb, NULL), 0);
    ck_assert_int_eq(wb.rc, RLOCK_OK);
    ck_assert_int_eq(rlock_release(by, 5000), RLOCK_OK);
    rlock_lock_free(by);
    ck_assert_int_eq(pthread_join(ta, NULL), 0);
    ck_assert_int_eq(wa.rc, RLOCK_OK);
    rlock_lock_free(ax);
    rlock_close(a);
    rlock_close(b);
    rlock_close(c);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_owners)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct rlock_client *c = named_client(&f.e, "dl-owners");
    struct rlock_acquire_opts o1 = {.ttl_ms = 10000, .owner = 1};
    struct rlock_acquire_opts o2 = {.ttl_ms = 10000, .owner = 2};
    struct rlock_lock *x = h_acquire_ok(c, "dl-X", &o1);
    struct rlock_lock *y = h_acquire_ok(c, "dl-Y", &o2);
    struct waiter w1 = {.c = c, .resource = "dl-Y", .owner = 1, .wait_ms = 30000};
    pthread_t t;
    start_waiter(c, &t, &w1, 2, 1);
    char msg[512];
    refused_deadlock(c, "dl-X", 2, msg, sizeof msg);
    const char *words[] = {"dl-X held by this session (owner 1), waiting for dl-Y held by this "
                           "session (owner 2)"};
    assert_names(msg, words, 1);
    ck_assert_int_eq(rlock_release(y, 5000), RLOCK_OK);
    rlock_lock_free(y);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(w1.rc, RLOCK_OK);
    rlock_lock_free(x);
    rlock_close(c);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_no_false_alarm)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct rlock_client *a = named_client(&f.e, "dl-a");
    struct rlock_client *b = named_client(&f.e, "dl-b");
    struct rlock_client *c = named_client(&f.e, "dl-c");
    struct rlock_acquire_opts ho = {.ttl_ms = 10000};
    /* A holds X and waits for Y, which C holds; B waits for X. No cycle: each is granted
     * in turn. */
    struct rlock_acquire_opts a7 = {.ttl_ms = 10000, .owner = 7};
    struct rlock_lock *ax = h_acquire_ok(a, "dl-X", &a7);
    struct rlock_lock *cy = h_acquire_ok(c, "dl-Y", &ho);
    struct waiter wb = {.c = b, .resource = "dl-X", .wait_ms = 30000};
    struct waiter wa = {.c = a, .resource = "dl-Y", .owner = 7, .wait_ms = 30000};
    pthread_t tb, ta;
    start_waiter(a, &tb, &wb, 2, 1);
    start_waiter(a, &ta, &wa, 2, 2);
    /* A shared wait behind an exclusive hold. */
    struct rlock_lock *bs = h_acquire_ok(b, "dl-S", &ho);
    struct rlock_client *d = named_client(&f.e, "dl-d");
    struct waiter ws = {.c = d, .resource = "dl-S", .shared = 1, .wait_ms = 30000};
    pthread_t ts;
    start_waiter(a, &ts, &ws, 3, 3);
    ck_assert_int_eq(rlock_release(bs, 5000), RLOCK_OK);
    rlock_lock_free(bs);
    ck_assert_int_eq(pthread_join(ts, NULL), 0);
    ck_assert_int_eq(ws.rc, RLOCK_OK);
    ck_assert_int_eq(rlock_release(cy, 5000), RLOCK_OK);
    rlock_lock_free(cy);
    ck_assert_int_eq(pthread_join(ta, NULL), 0);
    ck_assert_int_eq(wa.rc, RLOCK_OK);
    ck_assert_int_eq(rlock_release(ax, 5000), RLOCK_OK);
    rlock_lock_free(ax);
    ck_assert_int_eq(pthread_join(tb, NULL), 0);
    ck_assert_int_eq(wb.rc, RLOCK_OK);
    ck_assert_int_eq(h_log_count(&f.e, "deadlock"), 0);
    rlock_close(a);
    rlock_close(b);
    rlock_close(c);
    rlock_close(d);
    h_fixture_stop(&f);
}
END_TEST

/* A's owner 1 holds X, A's owner 2 waits for Y, which B holds; B asking for X waits for
 * owner 1, which waits for nothing: no cycle, B just waits (and times out). */
START_TEST(test_owners_apart)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct rlock_client *a = named_client(&f.e, "dl-a");
    struct rlock_client *b = named_client(&f.e, "dl-b");
    struct rlock_acquire_opts a1 = {.ttl_ms = 10000, .owner = 1};
    struct rlock_acquire_opts ho = {.ttl_ms = 10000};
    struct rlock_lock *ax = h_acquire_ok(a, "dl-X", &a1);
    struct rlock_lock *by = h_acquire_ok(b, "dl-Y", &ho);
    struct waiter wa = {.c = a, .resource = "dl-Y", .owner = 2, .wait_ms = 30000};
    pthread_t t;
    start_waiter(b, &t, &wa, 2, 1);
    struct rlock_acquire_opts bo = {.ttl_ms = 10000, .wait_ms = 500};
    struct rlock_lock *none = NULL;
    ck_assert_int_eq(rlock_acquire(b, "dl-X", &bo, 0, &none), RLOCK_ERR_TIMEOUT);
    ck_assert_int_eq(rlock_release(by, 5000), RLOCK_OK);
    rlock_lock_free(by);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(wa.rc, RLOCK_OK);
    rlock_lock_free(ax);
    rlock_close(a);
    rlock_close(b);
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_two_party, test_three_party, test_owners, test_no_false_alarm,
                            test_owners_apart};
    return h_run_tests("deadlock", 90, tests, H_LEN(tests));
}
