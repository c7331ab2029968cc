/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_trace.c — a trace id set on an acquire (rlock_acquire_opts.trace_id;
 * Acquire.trace_id, docs/protocol.md §6.12) is on every line rlockd logs
 * about that lock:
 *  - grant_wait_release_loss: A takes R with a W3C traceparent; B waits for R
 *    with its own id: B's wait, A's release (A's id), B's grant (B's id), and
 *    B's loss when an operator takes R away (B's id) are each logged with the
 *    right id, session id and client name;
 *  - timeout: a traced wait that runs out says so;
 *  - renewal_failure: with Redis stopped (SIGSTOP) past the command timeout,
 *    the failed renewal of a traced lock is logged with its id;
 *  - untraced_quiet: the same operations without an id add no trace line;
 *  - bad_ids: a trace id with a space, a quote, or of 129 bytes is refused
 *    (RLOCK_ERR_ARG) before it is sent; sent anyway (a raw frame), the daemon
 *    answers INVALID for an Acquire, a Release and an Extend alike.
 */
#include "harness.h"
#include "harness_raw.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRACE_A "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
#define TRACE_B "b-wait-1"

static struct rlock_client *named_client(struct h_env *e, const char *name)
{
    struct rlock_options o = {.client_name = name};
    return h_client_or_fail(e, &o);
}

/* Wait for a line of rlockd's log holding first and, after it, second (may be NULL). */
static void expect_line(const struct h_env *e, const char *first, const char *second)
{
    char path[400];
    h_env_path(e, "rlockd.log", path, sizeof path);
    int64_t deadline = h_now_ms() + 10000;
    for (;;) {
        char *log = h_read_file(path);
        for (char *p = log != NULL ? strstr(log, first) : NULL; p != NULL;
             p = strstr(p + 1, first)) {
            char *end = strchr(p, '\n');
            char *line = strndup(p, end != NULL ? (size_t)(end - p) : strlen(p));
            ck_assert_ptr_nonnull(line);
            if (second == NULL || strstr(line, second) != NULL) {
                printf("trace: %s\n", line);
                free(line);
                free(log);
                return;
            }
            free(line);
        }
        free(log);
        ck_assert_msg(h_now_ms() < deadline, "no log line with '%s'%s%s", first,
                      second != NULL ? " and then " : "", second != NULL ? second : "");
        h_sleep_ms(50);
    }
}

struct waiter {
    struct h_env *e;
    const char *resource, *trace;
    uint32_t wait_ms;
    struct rlock_client *c;
    struct rlock_lock *l;
    enum rlock_err rc;
};

static void *wait_main(void *arg)
{
    struct waiter *w = arg;
    struct rlock_acquire_opts o = {.ttl_ms = 10000, .wait_ms = w->wait_ms, .trace_id = w->trace};
    w->rc = rlock_acquire(w->c, w->resource, &o, 0, &w->l);
    return NULL;
}

START_TEST(test_grant_wait_release_loss)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct rlock_client *a = named_client(&f.e, "trace-a");
    struct rlock_client *b = named_client(&f.e, "trace-b");
    struct rlock_acquire_opts ao = {.ttl_ms = 10000, .trace_id = TRACE_A};
    struct rlock_lock *la = h_acquire_ok(a, "tr-1", &ao);
    char want[256];
    snprintf(want, sizeof want, "trace " TRACE_A ": session %s (trace-a): granted tr-1",
             rlock_session_id(a));
    expect_line(&f.e, want, NULL);

    struct waiter w = {.e = &f.e, .resource = "tr-1", .trace = TRACE_B, .wait_ms = 10000, .c = b};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, wait_main, &w), 0);
    ck_assert_int_ge(h_wait_stats_of(a, 1, 1, 10000, NULL), 0);
    snprintf(want, sizeof want, "trace " TRACE_B ": session %s (trace-b): acquire tr-1 waits",
             rlock_session_id(b));
    expect_line(&f.e, want, "held through this daemon");

    ck_assert_int_eq(rlock_release(la, 5000), RLOCK_OK);
    rlock_lock_free(la);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(w.rc, RLOCK_OK);
    snprintf(want, sizeof want, "trace " TRACE_A ": session %s (trace-a): released tr-1",
             rlock_session_id(a));
    expect_line(&f.e, want, "ms held");
    snprintf(want, sizeof want, "trace " TRACE_B ": session %s (trace-b): granted tr-1",
             rlock_session_id(b));
    expect_line(&f.e, want, "after");

    struct rlock_forced forced;
    ck_assert_int_eq(rlock_force_release(a, "tr-1", 5000, &forced), RLOCK_OK);
    snprintf(want, sizeof want, "session %s (unix): lost lock tr-1", rlock_session_id(b));
    expect_line(&f.e, want, "; trace " TRACE_B);
    rlock_lock_free(w.l);
    rlock_close(a);
    rlock_close(b);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_timeout)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct rlock_client *a = named_client(&f.e, "trace-a");
    struct rlock_client *c = named_client(&f.e, "trace-c");
    struct rlock_acquire_opts ao = {.ttl_ms = 10000};
    struct rlock_lock *la = h_acquire_ok(a, "tr-2", &ao);
    struct rlock_acquire_opts co = {.ttl_ms = 10000, .wait_ms = 200, .trace_id = "c-1"};
    struct rlock_lock *none = NULL;
    ck_assert_int_eq(rlock_acquire(c, "tr-2", &co, 0, &none), RLOCK_ERR_TIMEOUT);
    char want[256];
    snprintf(want, sizeof want, "trace c-1: session %s (trace-c): acquire tr-2: timed out",
             rlock_session_id(c));
    expect_line(&f.e, want, NULL);
    rlock_lock_free(la);
    rlock_close(a);
    rlock_close(c);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_renewal_failure)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct rlock_client *a = named_client(&f.e, "trace-a");
    struct rlock_acquire_opts ao = {.ttl_ms = 3000, .trace_id = "renew-1"};
    struct rlock_lock *la = h_acquire_ok(a, "tr-3", &ao);
    /* Renewals come every ttl/3 = 1 s; Redis stopped for 2.5 s misses at least one past the
     * daemon's command timeout. */
    h_sigstop(f.e.redis_pid, "redis");
    h_sleep_ms(2500);
    h_sigcont(f.e.redis_pid, "redis");
    char want[256];
    snprintf(want, sizeof want, "trace renew-1: session %s: renew of tr-3", rlock_session_id(a));
    expect_line(&f.e, want, "failed");
    rlock_lock_free(la);
    rlock_close(a);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_untraced_quiet)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct rlock_client *a = named_client(&f.e, "quiet-a");
    struct rlock_client *b = named_client(&f.e, "quiet-b");
    struct rlock_acquire_opts ao = {.ttl_ms = 10000};
    struct rlock_lock *la = h_acquire_ok(a, "tr-4", &ao);
    struct rlock_acquire_opts bo = {.ttl_ms = 10000, .wait_ms = 100};
    struct rlock_lock *none = NULL;
    ck_assert_int_eq(rlock_acquire(b, "tr-4", &bo, 0, &none), RLOCK_ERR_TIMEOUT);
    ck_assert_int_eq(rlock_release(la, 5000), RLOCK_OK);
    rlock_lock_free(la);
    ck_assert_int_eq(h_log_count(&f.e, "trace "), 0);
    rlock_close(a);
    rlock_close(b);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_bad_ids)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    char longest[RLOCK_TRACE_MAX + 2];
    memset(longest, 'x', sizeof longest - 1);
    longest[sizeof longest - 1] = '\0'; /* 129 bytes */
    const char *bad[] = {"has space", "quo\"te", "back\\slash", "tab\there", longest};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct rlock_acquire_opts o = {.ttl_ms = 10000, .trace_id = bad[i]};
        struct rlock_lock *l = NULL;
        ck_assert_int_eq(rlock_acquire(f.c, "tr-5", &o, 0, &l), RLOCK_ERR_ARG);
    }
    /* The longest allowed is taken. */
    longest[RLOCK_TRACE_MAX] = '\0';
    struct rlock_acquire_opts ok = {.ttl_ms = 10000, .trace_id = longest};
    struct rlock_lock *l = h_acquire_ok(f.c, "tr-5", &ok);
    char want[RLOCK_TRACE_MAX + 16];
    snprintf(want, sizeof want, "trace %s: ", longest);
    expect_line(&f.e, want, "granted tr-5");
    rlock_lock_free(l);

    /* The daemon checks them too. */
    struct h_raw raw;
    h_raw_session(&raw, &f.e, "raw-trace");
    Rlock__V1__Acquire acq = RLOCK__V1__ACQUIRE__INIT;
    acq.resource = "tr-6";
    acq.trace_id = "has space";
    Rlock__V1__Release rel = RLOCK__V1__RELEASE__INIT;
    rel.resource = "tr-6";
    rel.trace_id = "quo\"te";
    Rlock__V1__Extend ext = RLOCK__V1__EXTEND__INIT;
    ext.resource = "tr-6";
    char too_long[RLOCK_TRACE_MAX + 2];
    memset(too_long, 'y', sizeof too_long - 1);
    too_long[sizeof too_long - 1] = '\0';
    ext.trace_id = too_long;
    Rlock__V1__Request reqs[3];
    for (int i = 0; i < 3; i++) {
        rlock__v1__request__init(&reqs[i]);
        reqs[i].id = 100 + (uint64_t)i;
    }
    reqs[0].body_case = RLOCK__V1__REQUEST__BODY_ACQUIRE;
    reqs[0].acquire = &acq;
    reqs[1].body_case = RLOCK__V1__REQUEST__BODY_RELEASE;
    reqs[1].release = &rel;
    reqs[2].body_case = RLOCK__V1__REQUEST__BODY_EXTEND;
    reqs[2].extend = &ext;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(h_raw_send(&raw, &reqs[i]), 0);
        Rlock__V1__ServerMessage *m = NULL;
        ck_assert_int_eq(h_raw_read(&raw, h_now_ms() + 5000, &m), 1);
        const Rlock__V1__Response *r = h_raw_response(m);
        ck_assert_ptr_nonnull(r);
        ck_assert_uint_eq(r->id, 100 + (uint64_t)i);
        ck_assert_int_eq(r->status, RLOCK__V1__STATUS__STATUS_INVALID);
        ck_assert_msg(strstr(r->message, "trace_id") != NULL, "message '%s'", r->message);
        h_raw_free(m);
    }
    h_raw_close(&raw);
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_grant_wait_release_loss, test_timeout, test_renewal_failure,
                            test_untraced_quiet, test_bad_ids};
    return h_run_tests("trace", 60, tests, H_LEN(tests));
}
