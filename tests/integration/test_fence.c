/*
 * test_fence.c — fencing tokens only ever grow: over 1000 sequential grants
 * of one resource, after the fence counter key is deleted, and after
 * FLUSHALL wipes every key.
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
    printf("fence: after DEL of %s: %" PRIu64 " (before %" PRIu64 ")\n", fence_key, fence, last);
    ck_assert_msg(fence > last, "after DEL: fence %" PRIu64 " not above %" PRIu64, fence, last);
    last = fence;

    redisReply *rep = redisCommand(f.r, "FLUSHALL");
    ck_assert_ptr_nonnull(rep);
    ck_assert_int_eq(rep->type, REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    fence = grant_once(f.c);
    printf("fence: after FLUSHALL: %" PRIu64 " (before %" PRIu64 ")\n", fence, last);
    ck_assert_msg(fence > last, "after FLUSHALL: fence %" PRIu64 " not above %" PRIu64, fence,
                  last);

    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = { test_fence_monotonic };
    return h_run_tests("fence", 300, tests, H_LEN(tests));
}
