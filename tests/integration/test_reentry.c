/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_reentry.c — a session that acquires a resource it already holds gets
 * the same lock back with a higher hold count, and the Redis key lives until
 * the last hold is released.
 *
 * One session takes resource R three times (the second and third with a wait,
 * which must not queue behind the session's own hold), then gives the holds
 * back one by one while a second session checks that R stays taken and the
 * key stays in Redis until the count reaches zero.
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RES "reentry/r"
#define CALL_TIMEOUT_MS 5000u
#define HOLDS 3

/* Another session's try-acquire of R must find it taken. */
static void expect_taken(struct rlock_client *other)
{
    struct rlock_lock *l = NULL;
    struct rlock_acquire_opts o = {.ttl_ms = 0, .wait_ms = 0};
    enum rlock_err rc = rlock_acquire(other, RES, &o, CALL_TIMEOUT_MS, &l);
    ck_assert_msg(rc == RLOCK_ERR_NOT_ACQUIRED, "other session's try-acquire: %s (want NOT_ACQUIRED)",
                  rlock_strerror(rc));
    ck_assert_ptr_null(l);
}

START_TEST(test_reentry)
{
    struct h_fixture f; /* f.c is session A, the one that re-enters */
    h_fixture_start(&f, NULL);
    struct rlock_client *b = h_client_or_fail(&f.e, NULL);
    char key[512];
    h_lock_key(&f.e, RES, key, sizeof key);

    struct rlock_lock *l[HOLDS];
    for (int i = 0; i < HOLDS; i++) {
        /* Re-entries ask to wait: a hold of one's own must not make them queue. */
        struct rlock_acquire_opts o = {.ttl_ms = 10000, .wait_ms = i == 0 ? 0 : 3000};
        int64_t t0 = h_now_ms();
        enum rlock_err rc = rlock_acquire(f.c, RES, &o, CALL_TIMEOUT_MS, &l[i]);
        int64_t dt = h_now_ms() - t0;
        ck_assert_msg(rc == RLOCK_OK, "acquire #%d: %s", i + 1, rlock_strerror(rc));
        printf("reentry: acquire #%d took %lld ms, fence %llu, hold count %u\n", i + 1,
               (long long)dt, (unsigned long long)rlock_lock_fence(l[i]),
               rlock_lock_hold_count(l[i]));
        ck_assert_msg(dt < 1000, "re-entry #%d took %lld ms", i + 1, (long long)dt);
        ck_assert_uint_eq(rlock_lock_hold_count(l[i]), (unsigned)(i + 1));
        ck_assert_str_eq(rlock_lock_token(l[i]), rlock_lock_token(l[0]));
        ck_assert_uint_eq(rlock_lock_fence(l[i]), rlock_lock_fence(l[0]));
        ck_assert_int_eq(rlock_lock_state(l[i]), RLOCK_HELD);
    }
    fflush(stdout);
    const char *token = rlock_lock_token(l[0]);
    uint64_t fence = rlock_lock_fence(l[0]);
    h_assert_key_token(f.r, key, token);
    expect_taken(b);

    /* Two of three holds returned: still held, key still there. */
    for (int i = HOLDS - 1; i >= 1; i--) {
        enum rlock_err rc = rlock_release(l[i], CALL_TIMEOUT_MS);
        ck_assert_msg(rc == RLOCK_OK, "release of hold %d: %s", i + 1, rlock_strerror(rc));
        h_assert_key_token(f.r, key, token);
        expect_taken(b);
    }

    /* The last hold deletes the key. */
    enum rlock_err rc = rlock_release(l[0], CALL_TIMEOUT_MS);
    ck_assert_msg(rc == RLOCK_OK, "last release: %s", rlock_strerror(rc));
    ck_assert_int_eq(h_key_exists(f.r, key), 0);

    /* One release too many. */
    rc = rlock_release(l[0], CALL_TIMEOUT_MS);
    ck_assert_msg(rc == RLOCK_ERR_NOT_HELD, "fourth release: %s (want NOT_HELD)", rlock_strerror(rc));

    /* Now the other session gets it, with a higher fence. */
    struct rlock_lock *lb = NULL;
    struct rlock_acquire_opts ob = {.ttl_ms = 10000, .wait_ms = 0};
    rc = rlock_acquire(b, RES, &ob, CALL_TIMEOUT_MS, &lb);
    ck_assert_msg(rc == RLOCK_OK, "other session's acquire after release: %s", rlock_strerror(rc));
    ck_assert_uint_gt(rlock_lock_fence(lb), fence);
    ck_assert_uint_eq(rlock_lock_hold_count(lb), 1);

    for (int i = 0; i < HOLDS; i++)
        rlock_lock_free(l[i]);
    rlock_lock_free(lb);
    rlock_close(b);
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = { test_reentry };
    return h_run_tests("integration_reentry", 60, tests, H_LEN(tests));
}
