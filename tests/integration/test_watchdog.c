/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_watchdog.c — the daemon's renewal of leases.
 *  - A 1 s lease held for 10 s by a live session (which holds a 30 s one too)
 *    never gets near expiry, and the client vouches for it all along.
 *  - With the watchdog off, a 1 s lease runs out by itself...
 *  - ...unless the holder extends it explicitly; an Extend's ttl becomes the
 *    lock's, so extend(0) renews to the ttl of the latest Extend.
 */
#include "harness.h"

#include <stdio.h>
#include <string.h>

#define WD_TTL_MS 1000
#define WD_HOLD_MS 10000
#define WD_POLL_MS 50

START_TEST(test_watchdog_renews)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    char key[256];
    h_lock_key(&f.e, "wd", key, sizeof key);

    /* A long lease taken first: the client's keepalives must follow the shortest one. */
    struct rlock_acquire_opts lo = { .ttl_ms = 30000 };
    struct rlock_lock *longer = h_acquire_ok(f.c, "wd-long", &lo);
    struct rlock_acquire_opts o = { .ttl_ms = WD_TTL_MS };
    struct rlock_lock *l = h_acquire_ok(f.c, "wd", &o);
    ck_assert_uint_eq(rlock_lock_ttl_ms(l), WD_TTL_MS);
    h_assert_key_token(f.r, key, rlock_lock_token(l));

    int64_t start = h_now_ms();
    long long min_pttl = WD_TTL_MS;
    int polls = 0;
    while (h_now_ms() - start < WD_HOLD_MS) {
        long long pttl = h_pttl(f.r, key);
        ck_assert_msg(pttl > 0, "PTTL %lld after %lld ms of holding", pttl,
                      (long long)(h_now_ms() - start));
        ck_assert_msg(pttl <= WD_TTL_MS, "PTTL %lld above the lease", pttl);
        if (pttl < min_pttl)
            min_pttl = pttl;
        ck_assert_int_eq(rlock_lock_state(l), RLOCK_HELD);
        ck_assert_int_eq(atomic_load(&f.lost.count), 0);
        h_assert_env_alive(&f.e);
        polls++;
        h_sleep_ms(WD_POLL_MS);
    }
    printf("watchdog: %d polls over %d ms, lowest PTTL %lld ms of %d\n", polls, WD_HOLD_MS,
           min_pttl, WD_TTL_MS);
    h_assert_key_token(f.r, key, rlock_lock_token(l));

    h_release_gone(&f, f.c, l);
    h_release_gone(&f, f.c, longer);
    ck_assert_int_eq(atomic_load(&f.lost.count), 0);
    rlock_lock_free(l);
    rlock_lock_free(longer);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_watchdog_off_expires)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    char key[256];
    h_lock_key(&f.e, "wdoff", key, sizeof key);

    struct rlock_acquire_opts o = { .ttl_ms = WD_TTL_MS, .watchdog_off = 1 };
    int64_t t0 = h_now_ms();
    struct rlock_lock *l = h_acquire_ok(f.c, "wdoff", &o);
    long long pttl = h_pttl(f.r, key);
    ck_assert_msg(pttl > 0 && pttl <= WD_TTL_MS, "PTTL right after acquire: %lld", pttl);

    int64_t gone = h_wait_key_gone(f.r, key, 3 * WD_TTL_MS, &f.e);
    ck_assert_msg(gone >= 0, "watchdog-off key still there after %d ms", 3 * WD_TTL_MS);
    int64_t since = h_now_ms() - t0;
    printf("watchdog off: key expired %lld ms after acquire (ttl %d)\n", (long long)since,
           WD_TTL_MS);
    ck_assert_msg(since >= WD_TTL_MS - 100, "key gone after only %lld ms", (long long)since);

    /* Once expired, the resource is free again. */
    struct rlock_client *c2 = h_client_or_fail(&f.e, NULL);
    struct rlock_lock *l2 = h_acquire_ok(c2, "wdoff", NULL);
    h_release_gone(&f, c2, l2);
    rlock_lock_free(l2);
    rlock_close(c2);

    rlock_lock_free(l);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_watchdog_off_extend)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    char key[256];
    h_lock_key(&f.e, "wdext", key, sizeof key);

    struct rlock_acquire_opts o = { .ttl_ms = WD_TTL_MS, .watchdog_off = 1 };
    struct rlock_lock *l = h_acquire_ok(f.c, "wdext", &o);
    h_sleep_ms(WD_TTL_MS / 2);
    long long before = h_pttl(f.r, key);
    ck_assert_msg(before > 0 && before < WD_TTL_MS - 300, "PTTL half-way: %lld", before);

    h_assert_ok(f.c, rlock_extend(l, 5000, 0));
    long long after = h_pttl(f.r, key);
    printf("watchdog off: extend(5000) took PTTL from %lld to %lld ms\n", before, after);
    ck_assert_msg(after > 4000 && after <= 5000, "PTTL after extend(5000): %lld", after);

    /* Past the original lease, the lock is still there and held. */
    h_sleep_ms(WD_TTL_MS);
    ck_assert_int_eq(h_key_exists(f.r, key), 1);
    ck_assert_int_eq(rlock_lock_state(l), RLOCK_HELD);

    /* extend(0) renews to the lock's own ttl (the latest lease it was given). */
    h_sleep_ms(WD_TTL_MS);
    before = h_pttl(f.r, key);
    h_assert_ok(f.c, rlock_extend(l, 0, 0));
    after = h_pttl(f.r, key);
    long long own = rlock_lock_ttl_ms(l);
    printf("watchdog off: extend(0) took PTTL from %lld to %lld ms (lock ttl %lld)\n", before,
           after, own);
    /* An Extend's ttl becomes the lock's: extend(0) reuses the 5000 of the last one. */
    ck_assert_msg(own == 5000, "lock ttl after extend(5000) then extend(0): %lld", own);
    ck_assert_msg(after > own - 300 && after <= own, "PTTL after extend(0): %lld", after);

    h_release_gone(&f, f.c, l);
    rlock_lock_free(l);
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = { test_watchdog_renews, test_watchdog_off_expires,
                             test_watchdog_off_extend };
    return h_run_tests("watchdog", 60, tests, H_LEN(tests));
}
