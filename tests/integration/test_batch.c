/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_batch.c — acquires and releases of one loop turn go to Redis as one
 * script call (daemon/redis/batch.c, lua/batch.lua), and every request still
 * gets its own answer.
 *
 * Requests are sent by asynchronous clients while rlockd is stopped
 * (SIGSTOP), so that it finds them all at once when it goes on and handles
 * them in one loop turn (64 frames per connection and turn); each case also
 * checks from /metrics that batches did form (a case that saw none could not
 * catch a batch's fault, and fails).
 *
 *  - answers_each: 64 try-acquires, every other resource already held by the
 *    copied SET NX code: each free one is granted (its key holds its own
 *    token, fences all different), each held one is refused NOT_ACQUIRED and
 *    its key untouched. Then, in one burst, the 32 locks released and 32 new
 *    resources acquired (both scripts in the same batches): all succeed, the
 *    released keys are gone and the new ones held. An answer given to the
 *    wrong request shows as a grant of a held resource or a refusal of a free
 *    one.
 *  - error_alone: among 17 try-acquires, one resource's fence key holds a
 *    list, so its script call fails (WRONGTYPE) after setting the lock key.
 *    That request alone is refused (INTERNAL), its lock key is deleted again
 *    by token, and the 16 others in its batch are granted.
 *  - sessions: 8 clients on one loop, each with 8 try-acquires, every other
 *    resource held by the copied code: the requests of different sessions
 *    share batches, and each gets its own answer, as in answers_each.
 */
#include "harness.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#define MAX_CLIENTS 8
#define MAX_REQS 128

struct req {
    int res;            /* resource number */
    int calls;          /* completions: must be 1 */
    enum rlock_err err;
    char msg[300];
    struct rlock_lock *l;
};

struct burst {
    struct rlock_client *c[MAX_CLIENTS];
    int nc;
    struct req r[MAX_REQS];
    int n;
    int done;
};

static void on_done(struct rlock_client *c, const struct rlock_result *res, void *arg)
{
    (void)c;
    struct req *q = arg;
    q->calls++;
    q->err = res->err;
    snprintf(q->msg, sizeof q->msg, "%s", res->error != NULL ? res->error->message : "");
    q->l = res->lock;
}

static void on_ready(struct rlock_client *c, const struct rlock_result *res, void *arg)
{
    (void)c;
    int *ok = arg;
    *ok = res->err == RLOCK_OK ? 1 : -1;
}

/* Serve every client until each request has completed (or 10 s pass). */
static void serve(struct burst *b, struct req *from, int count)
{
    int64_t end = h_now_ms() + 10000;
    for (;;) {
        int left = 0;
        for (int i = 0; i < count; i++)
            left += from[i].calls == 0;
        if (left == 0 || h_now_ms() > end)
            break;
        struct pollfd p[MAX_CLIENTS];
        for (int i = 0; i < b->nc; i++)
            p[i] = (struct pollfd){.fd = rlock_async_fd(b->c[i]),
                                   .events = (short)rlock_async_events(b->c[i])};
        int n = poll(p, (nfds_t)b->nc, 20);
        ck_assert_msg(n >= 0 || errno == EINTR, "poll: %s", strerror(errno));
        for (int i = 0; i < b->nc; i++)
            ck_assert_msg(rlock_async_process(b->c[i], n > 0 ? p[i].revents : 0) == RLOCK_OK,
                          "client %d's session ended", i);
    }
    for (int i = 0; i < count; i++)
        ck_assert_msg(from[i].calls == 1, "request %d (resource %d) completed %d times", i,
                      from[i].res, from[i].calls);
}

static void connect_all(struct h_env *e, struct burst *b, int nc)
{
    memset(b, 0, sizeof *b);
    b->nc = nc;
    int ready[MAX_CLIENTS] = {0};
    for (int i = 0; i < nc; i++) {
        char err[256] = "";
        ck_assert_msg(rlock_async_connect(e->rlockd_addr, NULL, on_ready, &ready[i], &b->c[i],
                                          err, sizeof err) == RLOCK_OK,
                      "rlock_async_connect: %s", err);
    }
    /* Hellos answered: a ping per client, served like any request. */
    struct req pings[MAX_CLIENTS];
    memset(pings, 0, sizeof pings);
    for (int i = 0; i < nc; i++)
        ck_assert_int_eq(rlock_async_ping(b->c[i], on_done, &pings[i], NULL), RLOCK_OK);
    serve(b, pings, nc);
    for (int i = 0; i < nc; i++)
        ck_assert_msg(ready[i] == 1, "client %d: Hello refused", i);
}

static void close_all(struct burst *b)
{
    for (int i = 0; i < b->n; i++)
        if (b->r[i].l != NULL)
            rlock_lock_free(b->r[i].l);
    for (int i = 0; i < b->nc; i++)
        rlock_close(b->c[i]);
}

static void resource_name(const char *prefix, int i, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%d", prefix, i);
}

/* Submit a try-acquire of prefix/res from client c as request q. */
static void submit_acquire(struct rlock_client *c, struct req *q, const char *prefix, int res)
{
    char name[64];
    resource_name(prefix, res, name, sizeof name);
    memset(q, 0, sizeof *q);
    q->res = res;
    struct rlock_acquire_opts o = {.ttl_ms = 30000};
    ck_assert_int_eq(rlock_async_acquire(c, name, &o, on_done, q, NULL), RLOCK_OK);
}

/* Write everything the clients have queued (the daemon is stopped: nothing comes back). */
static void write_out(struct burst *b)
{
    int64_t end = h_now_ms() + 5000;
    for (int i = 0; i < b->nc; i++)
        while (rlock_async_events(b->c[i]) & POLLOUT) {
            ck_assert_msg(h_now_ms() < end, "client %d could not write its requests", i);
            struct pollfd p = {.fd = rlock_async_fd(b->c[i]), .events = POLLOUT};
            int n = poll(&p, 1, 20);
            ck_assert_int_eq(rlock_async_process(b->c[i], n > 0 ? p.revents : 0), RLOCK_OK);
        }
}

/*
 * Try-acquire prefix/0 .. prefix/n-1 in one burst, request i from client i % nc, and
 * serve them all to completion. The daemon is stopped (SIGSTOP) while they are sent, so
 * that it finds them all waiting in one loop turn when it goes on: batches form however
 * fast it would have read them one by one.
 */
static void acquire_burst(struct burst *b, struct h_env *e, const char *prefix, int n)
{
    h_sigstop(e->rlockd_pid, "rlockd");
    for (int i = 0; i < n; i++)
        submit_acquire(b->c[i % b->nc], &b->r[i], prefix, i);
    b->n = n;
    write_out(b);
    h_sigcont(e->rlockd_pid, "rlockd");
    serve(b, b->r, n);
}

static double batched(const struct h_env *e)
{
    return h_metric(e, "rlockd_redis_batched_calls_total");
}

static void assert_batched(const struct h_env *e, double before, const char *what)
{
    double now = batched(e);
    printf("%s: %.0f calls went in %.0f batches so far\n", what, now,
           h_metric(e, "rlockd_redis_batches_total"));
    ck_assert_msg(now > before,
                  "%s: no call went to Redis in a batch (rlockd_redis_batched_calls_total "
                  "stayed %.0f): the case cannot see a batch's fault",
                  what, now);
}

/* Every granted lock of q[0..n-1] (resources of prefix): its key holds its token; fences
 * all different. */
static void assert_grants(struct req *q, int n, struct h_fixture *f, const char *prefix)
{
    for (int i = 0; i < n; i++) {
        if (q[i].err != RLOCK_OK)
            continue;
        char name[64], key[160];
        resource_name(prefix, q[i].res, name, sizeof name);
        ck_assert_msg(q[i].l != NULL, "%s granted without a handle", name);
        h_assert_key_token(f->r, h_lock_key(&f->e, name, key, sizeof key),
                           rlock_lock_token(q[i].l));
        for (int j = 0; j < i; j++)
            if (q[j].err == RLOCK_OK)
                ck_assert_msg(rlock_lock_fence(q[j].l) != rlock_lock_fence(q[i].l),
                              "two grants with fence %llu",
                              (unsigned long long)rlock_lock_fence(q[i].l));
    }
}

/* Take every other resource of prefix (odd numbers below n) with the copied SET NX code. */
static void hold_odd(struct h_fixture *f, const char *prefix, int n)
{
    char key[160], name[64];
    for (int i = 1; i < n; i += 2) {
        resource_name(prefix, i, name, sizeof name);
        redisReply *rep = redisCommand(f->r, "SET %s copied-%d NX PX 60000",
                                       h_lock_key(&f->e, name, key, sizeof key), i);
        ck_assert_msg(rep != NULL && rep->type == REDIS_REPLY_STATUS, "SET NX of %s", key);
        freeReplyObject(rep);
    }
}

/* Even resources granted, odd ones refused NOT_ACQUIRED with their keys untouched. */
static void assert_even_granted(struct burst *b, struct h_fixture *f, const char *prefix)
{
    char key[160], name[64];
    for (int i = 0; i < b->n; i++) {
        struct req *q = &b->r[i];
        resource_name(prefix, q->res, name, sizeof name);
        if (q->res % 2 == 0) {
            ck_assert_msg(q->err == RLOCK_OK, "free %s: %s (%s)", name, rlock_strerror(q->err),
                          q->msg);
            ck_assert_str_eq(rlock_lock_resource(q->l), name);
        } else {
            ck_assert_msg(q->err == RLOCK_ERR_NOT_ACQUIRED,
                          "%s, held by the copied SET NX code: %s (%s), not NOT_ACQUIRED",
                          name, rlock_strerror(q->err), q->msg);
            char want[32];
            snprintf(want, sizeof want, "copied-%d", q->res);
            h_assert_key_token(f->r, h_lock_key(&f->e, name, key, sizeof key), want);
        }
    }
    assert_grants(b->r, b->n, f, prefix);
}

START_TEST(test_answers_each)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    enum { N = 64 };
    char key[160], name[64];
    hold_odd(&f, "ans", N);
    struct burst b;
    connect_all(&f.e, &b, 1);
    double before = batched(&f.e);
    acquire_burst(&b, &f.e, "ans", N);
    assert_even_granted(&b, &f, "ans");
    assert_batched(&f.e, before, "64 acquires");

    /* Releases and acquires in one burst. */
    before = batched(&f.e);
    struct req rel[N / 2];
    memset(rel, 0, sizeof rel);
    h_sigstop(f.e.rlockd_pid, "rlockd");
    for (int i = 0; i < N / 2; i++) {
        rel[i].res = 2 * i;
        ck_assert_int_eq(rlock_async_release(b.r[2 * i].l, on_done, &rel[i], NULL), RLOCK_OK);
        submit_acquire(b.c[0], &b.r[N + i], "ans2", i);
    }
    b.n = N + N / 2;
    write_out(&b);
    h_sigcont(f.e.rlockd_pid, "rlockd");
    serve(&b, rel, N / 2);
    serve(&b, b.r + N, N / 2);
    for (int i = 0; i < N / 2; i++) {
        resource_name("ans", 2 * i, name, sizeof name);
        ck_assert_msg(rel[i].err == RLOCK_OK, "release of %s: %s (%s)", name,
                      rlock_strerror(rel[i].err), rel[i].msg);
        ck_assert_msg(!h_key_exists(f.r, h_lock_key(&f.e, name, key, sizeof key)),
                      "%s's key still there after its release", name);
        resource_name("ans2", i, name, sizeof name);
        ck_assert_msg(b.r[N + i].err == RLOCK_OK, "free %s: %s (%s)", name,
                      rlock_strerror(b.r[N + i].err), b.r[N + i].msg);
    }
    assert_grants(b.r + N, N / 2, &f, "ans2");
    assert_batched(&f.e, before, "32 releases and 32 acquires");
    close_all(&b);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_error_alone)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    enum { N = 17, BAD = 8 };
    char key[160], name[64];
    resource_name("err", BAD, name, sizeof name);
    char fence[200];
    snprintf(fence, sizeof fence, "%s", h_fence_key(&f.e, name, key, sizeof key));
    redisReply *rep = redisCommand(f.r, "RPUSH %s not-a-fence", fence);
    ck_assert_msg(rep != NULL && rep->type == REDIS_REPLY_INTEGER, "RPUSH %s", fence);
    freeReplyObject(rep);

    struct burst b;
    connect_all(&f.e, &b, 1);
    double before = batched(&f.e);
    acquire_burst(&b, &f.e, "err", N);
    for (int i = 0; i < N; i++) {
        resource_name("err", i, name, sizeof name);
        if (i == BAD)
            ck_assert_msg(b.r[i].err == RLOCK_ERR_INTERNAL,
                          "%s, whose fence key is a list: %s (%s), not INTERNAL", name,
                          rlock_strerror(b.r[i].err), b.r[i].msg);
        else
            ck_assert_msg(b.r[i].err == RLOCK_OK,
                          "%s, in a batch with a failing call: %s (%s)", name,
                          rlock_strerror(b.r[i].err), b.r[i].msg);
    }
    assert_grants(b.r, N, &f, "err");
    assert_batched(&f.e, before, "17 acquires, one failing");
    /* The failed call had set the lock key before its error: deleted by token. */
    resource_name("err", BAD, name, sizeof name);
    ck_assert_msg(h_wait_key_gone(f.r, h_lock_key(&f.e, name, key, sizeof key), 5000, &f.e) >= 0,
                  "the lock key of the failed acquire is still set 5 s later");
    close_all(&b);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_sessions)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    enum { NC = MAX_CLIENTS, PER = 8 };
    struct burst b;
    connect_all(&f.e, &b, NC);
    hold_odd(&f, "ses", NC * PER);
    double before = batched(&f.e);
    acquire_burst(&b, &f.e, "ses", NC * PER);
    assert_even_granted(&b, &f, "ses");
    assert_batched(&f.e, before, "8 sessions x 8 acquires");
    close_all(&b);
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("batch");
    TCase *tc = tcase_create("batch");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_answers_each);
    tcase_add_test(tc, test_error_alone);
    tcase_add_test(tc, test_sessions);
    suite_add_tcase(s, tc);
    return h_run_suite(s);
}
