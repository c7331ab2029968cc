/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_classic.c — rlockd and apps using the classic pattern (SET NX PX to take,
 * the compare-and-delete Lua script to release) share the same keys:
 *  - the classic release, given rlockd's token, deletes rlockd's key, and the
 *    rlockd holder learns it lost the lock at its next renewal;
 *  - a key taken with SET NX PX blocks rlockd, and an rlockd waiter gets the
 *    lock once that key expires.
 */
#include "harness.h"

#include <stdio.h>
#include <string.h>

/* The classic unlock script, exactly as the articles that teach the pattern give it. */
static const char seed_unlock[] = "if redis.call(\"get\", KEYS[1]) == ARGV[1] then\n"
                                  "    return redis.call(\"del\", KEYS[1])\n"
                                  "else\n"
                                  "    return 0\n"
                                  "end\n";

#define SEED_TTL_MS 1500
#define FOREIGN_TOKEN "0f7c1d2e-seed-app-token"

START_TEST(test_classic_unlock_steals_rlockd_lock)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    char key[256];
    h_lock_key(&f.e, "seed1", key, sizeof key);

    struct rlock_acquire_opts o = { .ttl_ms = SEED_TTL_MS };
    struct rlock_lock *l = h_acquire_ok(f.c, "seed1", &o);
    const char *token = rlock_lock_token(l);

    /* A foreign token does not unlock it; rlockd's own token does. */
    ck_assert_int_eq(h_redis_int(f.r, "EVAL %s 1 %s %s", seed_unlock, key, FOREIGN_TOKEN), 0);
    ck_assert_int_eq(h_key_exists(f.r, key), 1);
    int64_t t0 = h_now_ms();
    ck_assert_int_eq(h_redis_int(f.r, "EVAL %s 1 %s %s", seed_unlock, key, token), 1);
    ck_assert_int_eq(h_key_exists(f.r, key), 0);

    /* The watchdog renews every ttl/3, finds the key gone and reports it. */
    int64_t deadline = t0 + 3 * SEED_TTL_MS;
    while ((atomic_load(&f.lost.count) == 0 || rlock_lock_state(l) != RLOCK_LOST) &&
           h_now_ms() < deadline) {
        h_assert_env_alive(&f.e);
        h_sleep_ms(10);
    }
    int64_t first = atomic_load(&f.lost.first_ms);
    printf("classic: lost-lock callback %lld ms after the foreign unlock, reason %s, state %d\n",
           first ? (long long)(first - t0) : -1LL,
           rlock_lost_reason_str((enum rlock_lost_reason)atomic_load(&f.lost.reason)),
           (int)rlock_lock_state(l));
    ck_assert_msg(atomic_load(&f.lost.count) == 1, "on_lost called %d times within %d ms",
                  atomic_load(&f.lost.count), 3 * SEED_TTL_MS);
    ck_assert_int_eq(rlock_lock_state(l), RLOCK_LOST);
    ck_assert_int_eq(rlock_lock_lost_reason(l), RLOCK_LOST_MISSING);
    ck_assert_int_eq(atomic_load(&f.lost.reason), RLOCK_LOST_MISSING);

    /* A renewal never recreates the key. */
    h_sleep_ms(SEED_TTL_MS);
    ck_assert_int_eq(h_key_exists(f.r, key), 0);
    ck_assert_int_eq(atomic_load(&f.lost.count), 1);

    rlock_lock_free(l);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_classic_set_nx_blocks_rlockd)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    char key[256];
    h_lock_key(&f.e, "seed2", key, sizeof key);

    /* The classic app takes the lock. */
    redisReply *rep = redisCommand(f.r, "SET %s %s NX PX %d", key, FOREIGN_TOKEN, SEED_TTL_MS);
    int64_t t_set = h_now_ms();
    ck_assert_ptr_nonnull(rep);
    ck_assert_msg(rep->type == REDIS_REPLY_STATUS && strcmp(rep->str, "OK") == 0,
                  "SET NX PX did not take the free key");
    freeReplyObject(rep);

    /* rlockd's try-acquire sees it held. */
    struct rlock_acquire_opts try_o = { .ttl_ms = 10000 };
    struct rlock_lock *l = NULL;
    enum rlock_err rc = rlock_acquire(f.c, "seed2", &try_o, 0, &l);
    char msg[320];
    ck_assert_msg(rc == RLOCK_ERR_NOT_ACQUIRED, "try-acquire of a seed-held key: %s",
                  h_rlock_err(f.c, rc, msg, sizeof msg));
    h_assert_key_token(f.r, key, FOREIGN_TOKEN);

    /* A waiter gets it once the classic app's key expires. */
    struct rlock_acquire_opts wait_o = { .ttl_ms = 10000, .wait_ms = 5000 };
    l = h_acquire_ok(f.c, "seed2", &wait_o);
    int64_t waited = h_now_ms() - t_set;
    printf("classic: rlockd waiter granted %lld ms after the classic app's SET NX PX %d\n",
           (long long)waited, SEED_TTL_MS);
    ck_assert_msg(waited >= SEED_TTL_MS - 200, "granted after %lld ms, before the key expired",
                  (long long)waited);
    ck_assert_msg(waited < 4000, "granted only after %lld ms", (long long)waited);
    h_assert_key_token(f.r, key, rlock_lock_token(l));

    /* Now the classic app is the one kept out, and cannot unlock it. */
    rep = redisCommand(f.r, "SET %s %s NX PX %d", key, FOREIGN_TOKEN, SEED_TTL_MS);
    ck_assert_ptr_nonnull(rep);
    ck_assert_int_eq(rep->type, REDIS_REPLY_NIL);
    freeReplyObject(rep);
    ck_assert_int_eq(h_redis_int(f.r, "EVAL %s 1 %s %s", seed_unlock, key, FOREIGN_TOKEN), 0);
    ck_assert_int_eq(rlock_lock_state(l), RLOCK_HELD);

    h_release_gone(&f, f.c, l);
    rlock_lock_free(l);
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = { test_classic_unlock_steals_rlockd_lock, test_classic_set_nx_blocks_rlockd };
    return h_run_tests("classic", 60, tests, H_LEN(tests));
}
