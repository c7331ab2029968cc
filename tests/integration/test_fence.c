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
    struct rlock_lock *l = NULL;
    h_assert_ok(c, rlock_acquire(c, RES, &o, 0, &l));
    ck_assert_int_eq(rlock_lock_state(l), RLOCK_HELD);
    uint64_t fence = rlock_lock_fence(l);
    h_assert_ok(c, rlock_release(l, 0));
    rlock_lock_free(l);
    return fence;
}

START_TEST(test_fence_monotonic)
{
    struct h_env e;
    h_env_start_or_fail(&e, NULL);
    redisContext *r = h_redis(&e);
    ck_assert_ptr_nonnull(r);
    struct rlock_client *c = h_client(&e, NULL);
    ck_assert_ptr_nonnull(c);
    char lock_key[256], fence_key[256], val[128];
    h_lock_key(&e, RES, lock_key, sizeof lock_key);
    h_fence_key(&e, RES, fence_key, sizeof fence_key);

    /* Key layout: the lock key holds the token, the fence key the last fence. */
    struct rlock_acquire_opts o = { .ttl_ms = 10000 };
    struct rlock_lock *l = NULL;
    h_assert_ok(c, rlock_acquire(c, RES, &o, 0, &l));
    ck_assert_int_eq(h_get(r, lock_key, val, sizeof val), 1);
    ck_assert_str_eq(val, rlock_lock_token(l));
    ck_assert_int_eq(h_get(r, fence_key, val, sizeof val), 1);
    ck_assert_uint_eq(strtoull(val, NULL, 10), rlock_lock_fence(l));
    uint64_t last = rlock_lock_fence(l);
    h_assert_ok(c, rlock_release(l, 0));
    rlock_lock_free(l);
    ck_assert_int_eq(h_key_exists(r, lock_key), 0);

    int64_t t0 = h_now_ms();
    for (int i = 0; i < FENCE_ROUNDS; i++) {
        uint64_t f = grant_once(c);
        ck_assert_msg(f > last, "round %d: fence %" PRIu64 " not above %" PRIu64, i, f, last);
        last = f;
    }
    printf("fence: %d acquire+release pairs in %" PRId64 " ms, last fence %" PRIu64 "\n",
           FENCE_ROUNDS, h_now_ms() - t0, last);

    ck_assert_int_eq(h_redis_int(r, "DEL %s", fence_key), 1);
    uint64_t f = grant_once(c);
    printf("fence: after DEL of %s: %" PRIu64 " (before %" PRIu64 ")\n", fence_key, f, last);
    ck_assert_msg(f > last, "after DEL: fence %" PRIu64 " not above %" PRIu64, f, last);
    last = f;

    redisReply *rep = redisCommand(r, "FLUSHALL");
    ck_assert_ptr_nonnull(rep);
    ck_assert_int_eq(rep->type, REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    f = grant_once(c);
    printf("fence: after FLUSHALL: %" PRIu64 " (before %" PRIu64 ")\n", f, last);
    ck_assert_msg(f > last, "after FLUSHALL: fence %" PRIu64 " not above %" PRIu64, f, last);

    h_assert_env_alive(&e);
    rlock_close(c);
    redisFree(r);
    h_env_stop(&e);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fence");
    TCase *tc = tcase_create("fence");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_fence_monotonic);
    suite_add_tcase(s, tc);
    return h_run_suite(s);
}
