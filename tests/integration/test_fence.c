/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_fence.c — fencing tokens only ever grow: over 1000 sequential grants
 * of one resource, after the fence counter key is deleted, after FLUSHALL
 * wipes every key, after the fence key expires by its fence_ttl, and across
 * a restart of redis-server (which keeps nothing: the harness runs it
 * without persistence).
 */
#include "harness.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define FENCE_ROUNDS 1000
#define RES "fenced"

/* Acquire RES once (try, watchdog on), release it, return its fence. */
static uint64_t grant_once(struct rlock_client *c)
{
    struct rlock_acquire_opts o = { .ttl_ms = 10000 };
    struct rlock_lock *l = h_acquire_ok(c, RES, &o);
    ck_assert_int_eq(rlock_lock_state(l), RLOCK_HELD);
    uint64_t fence = rlock_lock_fence(l);
    h_assert_ok(c, rlock_release(l, 0));
    rlock_lock_free(l);
    return fence;
}

/* Assert that a fence granted after the fence key went is above the one before. */
static void assert_above(uint64_t fence, uint64_t before, const char *after_what)
{
    printf("fence: after %s: %" PRIu64 " (before %" PRIu64 ")\n", after_what, fence, before);
    ck_assert_msg(fence > before, "after %s: fence %" PRIu64 " not above %" PRIu64, after_what,
                  fence, before);
}

START_TEST(test_fence_monotonic)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    char lock_key[256], fence_key[256], val[128];
    h_lock_key(&f.e, RES, lock_key, sizeof lock_key);
    h_fence_key(&f.e, RES, fence_key, sizeof fence_key);

    /* Key layout: the lock key holds the token, the fence key the last fence. */
    struct rlock_acquire_opts o = { .ttl_ms = 10000 };
    struct rlock_lock *l = h_acquire_ok(f.c, RES, &o);
    h_assert_key_token(f.r, lock_key, rlock_lock_token(l));
    ck_assert_int_eq(h_get(f.r, fence_key, val, sizeof val), 1);
    ck_assert_uint_eq(strtoull(val, NULL, 10), rlock_lock_fence(l));
    uint64_t last = rlock_lock_fence(l);
    h_release_gone(&f, f.c, l);
    rlock_lock_free(l);

    int64_t t0 = h_now_ms();
    for (int i = 0; i < FENCE_ROUNDS; i++) {
        uint64_t fence = grant_once(f.c);
        ck_assert_msg(fence > last, "round %d: fence %" PRIu64 " not above %" PRIu64, i, fence,
                      last);
        last = fence;
    }
    printf("fence: %d acquire+release pairs in %" PRId64 " ms, last fence %" PRIu64 "\n",
           FENCE_ROUNDS, h_now_ms() - t0, last);

    ck_assert_int_eq(h_redis_int(f.r, "DEL %s", fence_key), 1);
    uint64_t fence = grant_once(f.c);
    assert_above(fence, last, "DEL of the fence key");
    last = fence;

    redisReply *rep = redisCommand(f.r, "FLUSHALL");
    ck_assert_ptr_nonnull(rep);
    ck_assert_int_eq(rep->type, REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    assert_above(grant_once(f.c), last, "FLUSHALL");

    h_fixture_stop(&f);
}
END_TEST

/*
 * The smallest fence_ttl (1 min, daemon/base/config.h) is too long to wait for: the
 * test checks that the daemon gave the fence key that ttl, then cuts the key's
 * life short with PEXPIRE and lets Redis expire it by itself.
 */
START_TEST(test_fence_after_fence_key_expired)
{
    struct h_fixture f;
    h_fixture_start(&f, "[limits]\nfence_ttl = 1m\n");
    char fence_key[256];
    h_fence_key(&f.e, RES, fence_key, sizeof fence_key);

    uint64_t before = grant_once(f.c);
    long long pttl = h_pttl(f.r, fence_key);
    ck_assert_msg(pttl > 0 && pttl <= 60000, "fence key PTTL %lld, not within fence_ttl = 1m",
                  pttl);
    ck_assert_int_eq(h_redis_int(f.r, "PEXPIRE %s 1", fence_key), 1);
    ck_assert_msg(h_wait_key_gone(f.r, fence_key, 30000, &f.e) >= 0,
                  "the fence key did not expire");
    assert_above(grant_once(f.c), before, "the fence key expired");

    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_fence_after_redis_restart)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    char fence_key[256];
    h_fence_key(&f.e, RES, fence_key, sizeof fence_key);

    uint64_t before = grant_once(f.c);
    ck_assert_int_eq(h_redis_kill(&f.e), 0);
    ck_assert_int_eq(h_redis_start(&f.e), 0);
    redisFree(f.r);
    f.r = h_redis(&f.e);
    ck_assert_ptr_nonnull(f.r);
    ck_assert_int_eq(h_key_exists(f.r, fence_key), 0);

    /* The daemon reconnects by itself; the waiter retries while it answers UNAVAILABLE. */
    struct h_waiter w;
    h_waiter_start(&w, &f.e, RES, 10000, 30000);
    enum rlock_err rc = h_waiter_join(&w);
    ck_assert_msg(rc == RLOCK_OK, "no grant within 30 s of the restart: %s", rlock_strerror(rc));
    assert_above(rlock_lock_fence(w.l), before, "a Redis restart");
    h_waiter_close(&w);

    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = { test_fence_monotonic, test_fence_after_fence_key_expired,
                             test_fence_after_redis_restart };
    return h_run_tests("fence", 300, tests, H_LEN(tests));
}
