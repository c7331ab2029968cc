/*
 * test_watchdog.c — the daemon's renewal of leases.
 *  - A 1 s lease held for 10 s by a live session never gets near expiry.
 *  - With the watchdog off, a 1 s lease runs out by itself...
 *  - ...unless the holder extends it explicitly.
 */
#include "harness.h"

#include <stdio.h>
#include <string.h>

#define WD_TTL_MS 1000
#define WD_HOLD_MS 10000
#define WD_POLL_MS 50

START_TEST(test_watchdog_renews)
{
    struct h_env e;
    h_env_start_or_fail(&e, NULL);
    redisContext *r = h_redis(&e);
    ck_assert_ptr_nonnull(r);
    struct h_lost lost = { 0 };
    struct rlock_options co = { .on_lost = h_lost_cb, .on_lost_arg = &lost };
    struct rlock_client *c = h_client(&e, &co);
    ck_assert_ptr_nonnull(c);
    char key[256], val[128];
    h_lock_key(&e, "wd", key, sizeof key);

    struct rlock_acquire_opts o = { .ttl_ms = WD_TTL_MS };
    struct rlock_lock *l = NULL;
    h_assert_ok(c, rlock_acquire(c, "wd", &o, 0, &l));
    ck_assert_uint_eq(rlock_lock_ttl_ms(l), WD_TTL_MS);
    ck_assert_int_eq(h_get(r, key, val, sizeof val), 1);
    ck_assert_str_eq(val, rlock_lock_token(l));

    int64_t start = h_now_ms();
    long long min_pttl = WD_TTL_MS;
    int polls = 0;
    while (h_now_ms() - start < WD_HOLD_MS) {
        long long pttl = h_pttl(r, key);
        ck_assert_msg(pttl > 0, "PTTL %lld after %lld ms of holding", pttl,
                      (long long)(h_now_ms() - start));
        ck_assert_msg(pttl <= WD_TTL_MS, "PTTL %lld above the lease", pttl);
        if (pttl < min_pttl)
            min_pttl = pttl;
        ck_assert_int_eq(rlock_lock_state(l), RLOCK_HELD);
        ck_assert_int_eq(atomic_load(&lost.count), 0);
        h_assert_env_alive(&e);
        polls++;
        h_sleep_ms(WD_POLL_MS);
    }
    printf("watchdog: %d polls over %d ms, lowest PTTL %lld ms of %d\n", polls, WD_HOLD_MS,
           min_pttl, WD_TTL_MS);
    ck_assert_int_eq(h_get(r, key, val, sizeof val), 1);
    ck_assert_str_eq(val, rlock_lock_token(l));

    h_assert_ok(c, rlock_release(l, 0));
    ck_assert_int_eq(rlock_lock_state(l), RLOCK_RELEASED);
    ck_assert_int_eq(h_key_exists(r, key), 0);
    ck_assert_int_eq(atomic_load(&lost.count), 0);
    rlock_lock_free(l);
    rlock_close(c);
    redisFree(r);
    h_env_stop(&e);
}
END_TEST

START_TEST(test_watchdog_off_expires)
{
    struct h_env e;
    h_env_start_or_fail(&e, NULL);
    redisContext *r = h_redis(&e);
    ck_assert_ptr_nonnull(r);
    struct rlock_client *c = h_client(&e, NULL);
    ck_assert_ptr_nonnull(c);
    char key[256];
    h_lock_key(&e, "wdoff", key, sizeof key);

    struct rlock_acquire_opts o = { .ttl_ms = WD_TTL_MS, .watchdog_off = 1 };
    struct rlock_lock *l = NULL;
    int64_t t0 = h_now_ms();
    h_assert_ok(c, rlock_acquire(c, "wdoff", &o, 0, &l));
    long long pttl = h_pttl(r, key);
    ck_assert_msg(pttl > 0 && pttl <= WD_TTL_MS, "PTTL right after acquire: %lld", pttl);

    int64_t gone = h_wait_key_gone(r, key, 3 * WD_TTL_MS, &e);
    ck_assert_msg(gone >= 0, "watchdog-off key still there after %d ms", 3 * WD_TTL_MS);
    int64_t since = h_now_ms() - t0;
    printf("watchdog off: key expired %lld ms after acquire (ttl %d)\n", (long long)since,
           WD_TTL_MS);
    ck_assert_msg(since >= WD_TTL_MS - 100, "key gone after only %lld ms", (long long)since);

    /* Once expired, the resource is free again. */
    struct rlock_client *c2 = h_client(&e, NULL);
    ck_assert_ptr_nonnull(c2);
    struct rlock_lock *l2 = NULL;
    h_assert_ok(c2, rlock_acquire(c2, "wdoff", NULL, 0, &l2));
    h_assert_ok(c2, rlock_release(l2, 0));
    rlock_lock_free(l2);
    rlock_close(c2);

    h_assert_env_alive(&e);
    rlock_lock_free(l);
    rlock_close(c);
    redisFree(r);
    h_env_stop(&e);
}
END_TEST

START_TEST(test_watchdog_off_extend)
{
    struct h_env e;
    h_env_start_or_fail(&e, NULL);
    redisContext *r = h_redis(&e);
    ck_assert_ptr_nonnull(r);
    struct rlock_client *c = h_client(&e, NULL);
    ck_assert_ptr_nonnull(c);
    char key[256];
    h_lock_key(&e, "wdext", key, sizeof key);

    struct rlock_acquire_opts o = { .ttl_ms = WD_TTL_MS, .watchdog_off = 1 };
    struct rlock_lock *l = NULL;
    h_assert_ok(c, rlock_acquire(c, "wdext", &o, 0, &l));
    h_sleep_ms(WD_TTL_MS / 2);
    long long before = h_pttl(r, key);
    ck_assert_msg(before > 0 && before < WD_TTL_MS - 300, "PTTL half-way: %lld", before);

    h_assert_ok(c, rlock_extend(l, 5000, 0));
    long long after = h_pttl(r, key);
    printf("watchdog off: extend(5000) took PTTL from %lld to %lld ms\n", before, after);
    ck_assert_msg(after > 4000 && after <= 5000, "PTTL after extend(5000): %lld", after);

    /* Past the original lease, the lock is still there and held. */
    h_sleep_ms(WD_TTL_MS);
    ck_assert_int_eq(h_key_exists(r, key), 1);
    ck_assert_int_eq(rlock_lock_state(l), RLOCK_HELD);

    /* extend(0) renews to the lock's own ttl (the latest lease it was given). */
    h_sleep_ms(WD_TTL_MS);
    before = h_pttl(r, key);
    h_assert_ok(c, rlock_extend(l, 0, 0));
    after = h_pttl(r, key);
    long long own = rlock_lock_ttl_ms(l);
    printf("watchdog off: extend(0) took PTTL from %lld to %lld ms (lock ttl %lld)\n", before,
           after, own);
    ck_assert_msg(own == WD_TTL_MS || own == 5000, "lock ttl after extends: %lld", own);
    ck_assert_msg(after > own - 300 && after <= own, "PTTL after extend(0): %lld", after);

    h_assert_ok(c, rlock_release(l, 0));
    ck_assert_int_eq(h_key_exists(r, key), 0);
    h_assert_env_alive(&e);
    rlock_lock_free(l);
    rlock_close(c);
    redisFree(r);
    h_env_stop(&e);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("watchdog");
    TCase *tc = tcase_create("watchdog");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_watchdog_renews);
    tcase_add_test(tc, test_watchdog_off_expires);
    tcase_add_test(tc, test_watchdog_off_extend);
    suite_add_tcase(s, tc);
    return h_run_suite(s);
}
