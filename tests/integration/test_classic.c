/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_classic.c — rlockd and apps using the classic pattern (SET NX PX to take,
 * the compare-and-delete Lua script to release) share the same keys:
 *  - the classic release, given rlockd's token, deletes rlockd's key, and the
 *    rlockd holder learns it lost the lock at its next renewal;
 *  - a key taken with SET NX PX blocks rlockd, and an rlockd waiter gets the
 *    lock once that key expires;
 *  - unannounced_release: the classic release deletes its key without the
 *    notice rlockd's waiters listen for (no PUBLISH); a waiter of rlockd is
 *    granted soon after, not when the key's 20 s lease would have ended: the
 *    daemon tries again a key that is not its own on a backoff (the time is
 *    printed; the limit is generous), and counts no such wait afterwards, nor
 *    after a wait behind such a key that timed out;
 *  - own_keys_not_polled: a key holding a token of the kind rlockd makes (as
 *    another rlockd on the same Redis sets it, which does publish its
 *    releases) is not tried again: rlockd_foreign_rechecks_total stays 0
 *    while a waiter waits behind it, nor behind rlockd's tombstone of one;
 *  - late_release: released 4 s into the wait, the key is still seen free
 *    within 1.5 s (the backoff is capped at 200 ms);
 *  - no_expiry: behind a key the copied code set without PX, the tries again
 *    stay on the backoff (about 15 in 2 s; bound 200), not one per turn;
 *  - foreign_budget: 2,000 resources held by the copied code, a waiter on
 *    each: the daemon's tries again stay within its budget (about 1,000 a
 *    second in all; each resource alone would try every 200 ms, 10,000 a
 *    second), and no wait is counted once their session is gone.
 */
#include "harness.h"
#include "harness_peer.h"

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

#define LONG_SEED_TTL_MS 20000
#define HELD_FOR_MS 500          /* the classic app's work, before its release */
#define UNANNOUNCED_WITHIN_MS 5000 /* generous: the backoff is at most 200 ms */
/* What the seeds' code puts in the key: a random (version 4) UUID. */
#define SEED_UUID_TOKEN "3b241101-e2bb-4255-8caf-4136c566a962"
/* A token of the kind rlockd makes (a version 8 UUID), as another rlockd would set it. */
#define RLOCKD_LIKE_TOKEN "6f1c2b3a-4d5e-8f70-9a1b-2c3d4e5f6a7b"

/* The classic app's release of key (token), HELD_FOR_MS after it starts, on its own connection. */
struct classic_release {
    struct h_env *e;
    const char *key;
    const char *token;
    int held_ms;    /* 0: HELD_FOR_MS */
    int64_t at_ms;  /* when the release was answered */
    long long deleted;
};

static void *classic_release_fn(void *arg)
{
    struct classic_release *c = arg;
    h_sleep_ms(c->held_ms != 0 ? c->held_ms : HELD_FOR_MS);
    redisContext *r = h_redis(c->e);
    if (r == NULL)
        return NULL;
    c->deleted = h_redis_int(r, "EVAL %s 1 %s %s", seed_unlock, c->key, c->token);
    c->at_ms = h_now_ms();
    redisFree(r);
    return NULL;
}

/* key taken as the classic app takes it: SET NX PX LONG_SEED_TTL_MS with token. */
static void classic_take(redisContext *r, const char *key, const char *token)
{
    redisReply *rep = redisCommand(r, "SET %s %s NX PX %d", key, token, LONG_SEED_TTL_MS);
    ck_assert_ptr_nonnull(rep);
    ck_assert_msg(rep->type == REDIS_REPLY_STATUS && strcmp(rep->str, "OK") == 0,
                  "SET NX PX did not take the free key");
    freeReplyObject(rep);
}

START_TEST(test_classic_unannounced_release)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    char key[256];
    h_lock_key(&f.e, "seed3", key, sizeof key);
    classic_take(f.r, key, SEED_UUID_TOKEN);

    struct classic_release cr = {.e = &f.e, .key = key, .token = SEED_UUID_TOKEN};
    struct h_thread t;
    h_thread_start(&t, classic_release_fn, &cr);
    /* Waits past the key's whole lease would be granted at its end: a wait of
     * 3/4 of it times out instead, and says so. */
    struct rlock_acquire_opts o = {.ttl_ms = 10000, .wait_ms = LONG_SEED_TTL_MS * 3 / 4};
    struct rlock_lock *l = NULL;
    enum rlock_err rc = rlock_acquire(f.c, "seed3", &o, 0, &l);
    int64_t granted = h_now_ms();
    h_thread_join(&t, granted + 10000, "the classic release did not return");
    char msg[320];
    ck_assert_msg(rc == RLOCK_OK, "a waiter behind a key released without a notice: %s",
                  h_rlock_err(f.c, rc, msg, sizeof msg));
    ck_assert_int_eq(cr.deleted, 1);
    double rechecks = h_metric(&f.e, "rlockd_foreign_rechecks_total");
    printf("classic: rlockd waiter granted %lld ms after the classic release without PUBLISH "
           "(the key's lease was %d ms); the daemon tried the key again %.0f times\n",
           (long long)(granted - cr.at_ms), LONG_SEED_TTL_MS, rechecks);
    ck_assert_msg(granted - cr.at_ms < UNANNOUNCED_WITHIN_MS,
                  "granted %lld ms after the classic release (limit %d ms)",
                  (long long)(granted - cr.at_ms), UNANNOUNCED_WITHIN_MS);
    ck_assert_msg(rechecks >= 1, "rlockd_foreign_rechecks_total is %.0f", rechecks);
    /* Nobody waits any more: nothing counts against the daemon's budget of tries. */
    double waits = h_metric(&f.e, "rlockd_foreign_waits");
    ck_assert_msg(waits == 0, "rlockd_foreign_waits is %.0f with no waiter left", waits);
    h_assert_key_token(f.r, key, rlock_lock_token(l));
    h_release_gone(&f, f.c, l);
    rlock_lock_free(l);

    /* A wait behind the copied code's key that times out is not counted either. */
    h_lock_key(&f.e, "seed5", key, sizeof key);
    classic_take(f.r, key, SEED_UUID_TOKEN);
    struct rlock_acquire_opts brief = {.ttl_ms = 10000, .wait_ms = 300};
    rc = rlock_acquire(f.c, "seed5", &brief, 0, &l);
    ck_assert_msg(rc == RLOCK_ERR_TIMEOUT, "a brief wait behind the copied code's key: %s",
                  h_rlock_err(f.c, rc, msg, sizeof msg));
    waits = h_metric(&f.e, "rlockd_foreign_waits");
    ck_assert_msg(waits == 0, "rlockd_foreign_waits is %.0f after a wait timed out", waits);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_classic_own_keys_not_polled)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    char key[256];
    h_lock_key(&f.e, "seed4", key, sizeof key);
    classic_take(f.r, key, RLOCKD_LIKE_TOKEN);
    /* A waiter waits 1.5 s behind it and times out: nothing freed the key. */
    struct rlock_acquire_opts o = {.ttl_ms = 10000, .wait_ms = 1500};
    struct rlock_lock *l = NULL;
    enum rlock_err rc = rlock_acquire(f.c, "seed4", &o, 0, &l);
    char msg[320];
    ck_assert_msg(rc == RLOCK_ERR_TIMEOUT, "a waiter behind another rlockd's key: %s",
                  h_rlock_err(f.c, rc, msg, sizeof msg));
    double rechecks = h_metric(&f.e, "rlockd_foreign_rechecks_total");
    ck_assert_msg(rechecks == 0, "rlockd_foreign_rechecks_total is %.0f: the daemon polled a key "
                  "of the kind rlockd sets (whose release is announced)", rechecks);
    h_assert_key_token(f.r, key, RLOCKD_LIKE_TOKEN);
    ck_assert_int_eq(h_metric(&f.e, "rlockd_foreign_waits"), 0);

    /* Nor is rlockd's tombstone of such a token (lock_delay): it only expires. */
    h_lock_key(&f.e, "seed4t", key, sizeof key);
    classic_take(f.r, key, "tombstone:" RLOCKD_LIKE_TOKEN);
    rc = rlock_acquire(f.c, "seed4t", &o, 0, &l);
    ck_assert_msg(rc == RLOCK_ERR_TIMEOUT, "a waiter behind a tombstone: %s",
                  h_rlock_err(f.c, rc, msg, sizeof msg));
    rechecks = h_metric(&f.e, "rlockd_foreign_rechecks_total");
    ck_assert_msg(rechecks == 0, "rlockd_foreign_rechecks_total is %.0f behind rlockd's "
                  "tombstone", rechecks);
    h_fixture_stop(&f);
}
END_TEST

/*
 * A waiter behind the copied code's key for 4 s has backed off to its cap
 * (200 ms): the unannounced release is still seen within a few hundred ms
 * (bound 1.5 s; a backoff that kept doubling would sleep seconds by then).
 */
#define LATE_HELD_MS 4000
#define LATE_WITHIN_MS 1500

START_TEST(test_classic_late_release)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    char key[256];
    h_lock_key(&f.e, "seed6", key, sizeof key);
    classic_take(f.r, key, SEED_UUID_TOKEN);
    struct classic_release cr = {.e = &f.e, .key = key, .token = SEED_UUID_TOKEN,
                                 .held_ms = LATE_HELD_MS};
    struct h_thread t;
    h_thread_start(&t, classic_release_fn, &cr);
    struct rlock_acquire_opts o = {.ttl_ms = 10000, .wait_ms = LONG_SEED_TTL_MS * 3 / 4};
    struct rlock_lock *l = NULL;
    enum rlock_err rc = rlock_acquire(f.c, "seed6", &o, 0, &l);
    int64_t granted = h_now_ms();
    h_thread_join(&t, granted + 10000, "the classic release did not return");
    char msg[320];
    ck_assert_msg(rc == RLOCK_OK, "a waiter behind a key released late without a notice: %s",
                  h_rlock_err(f.c, rc, msg, sizeof msg));
    ck_assert_int_eq(cr.deleted, 1);
    printf("classic: FIGURE released after %d ms without PUBLISH: granted %lld ms later\n",
           LATE_HELD_MS, (long long)(granted - cr.at_ms));
    ck_assert_msg(granted - cr.at_ms < LATE_WITHIN_MS,
                  "granted %lld ms after a release %d ms into the wait (limit %d ms): the "
                  "backoff is not capped", (long long)(granted - cr.at_ms), LATE_HELD_MS,
                  LATE_WITHIN_MS);
    h_release_gone(&f, f.c, l);
    rlock_lock_free(l);
    h_fixture_stop(&f);
}
END_TEST

/*
 * The copied code's key without an expiry (SET NX with no PX: PTTL -1): a
 * waiter behind it tries again on the same backoff, not at every turn. In
 * 2 s a capped backoff makes about 15 tries; the bound is 200.
 */
#define NO_EXPIRY_WAIT_MS 2000
#define NO_EXPIRY_TRIES_MAX 200

START_TEST(test_classic_no_expiry)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    char key[256];
    h_lock_key(&f.e, "seed7", key, sizeof key);
    redisReply *rep = redisCommand(f.r, "SET %s %s", key, SEED_UUID_TOKEN);
    ck_assert_msg(rep != NULL && rep->type == REDIS_REPLY_STATUS, "SET without PX failed");
    freeReplyObject(rep);
    ck_assert_int_eq(h_pttl(f.r, key), -1);
    struct rlock_acquire_opts o = {.ttl_ms = 10000, .wait_ms = NO_EXPIRY_WAIT_MS};
    struct rlock_lock *l = NULL;
    enum rlock_err rc = rlock_acquire(f.c, "seed7", &o, 0, &l);
    char msg[320];
    ck_assert_msg(rc == RLOCK_ERR_TIMEOUT, "a waiter behind a key without expiry: %s",
                  h_rlock_err(f.c, rc, msg, sizeof msg));
    double rechecks = h_metric(&f.e, "rlockd_foreign_rechecks_total");
    printf("classic: FIGURE %d ms behind a key without expiry: %.0f tries again\n",
           NO_EXPIRY_WAIT_MS, rechecks);
    ck_assert_msg(rechecks >= 1, "never tried again behind a key without expiry");
    ck_assert_msg(rechecks <= NO_EXPIRY_TRIES_MAX,
                  "%.0f tries again in %d ms behind a key without expiry (bound %d)", rechecks,
                  NO_EXPIRY_WAIT_MS, NO_EXPIRY_TRIES_MAX);
    h_fixture_stop(&f);
}
END_TEST

#define BUDGET_RESOURCES 2000
#define BUDGET_WATCH_MS 3000
#define BUDGET_PER_S 1000 /* lock.c FOREIGN_RECHECKS_PER_S */

static int no_foreign_waits(void *arg)
{
    return h_metric(arg, "rlockd_foreign_waits") == 0;
}

START_TEST(test_classic_foreign_budget)
{
    struct h_fixture f;
    h_fixture_start(&f, "[session]\nmax_locks = 4000\n[limits]\nmax_wait = 1m\n");
    char key[256], res[64];
    for (int i = 0; i < BUDGET_RESOURCES; i++) {
        snprintf(res, sizeof res, "budget/%d", i);
        h_lock_key(&f.e, res, key, sizeof key);
        ck_assert_int_eq(redisAppendCommand(f.r, "SET %s %s NX PX 120000", key, SEED_UUID_TOKEN),
                         REDIS_OK);
    }
    for (int i = 0; i < BUDGET_RESOURCES; i++) {
        redisReply *rep = NULL;
        ck_assert_int_eq(redisGetReply(f.r, (void **)&rep), REDIS_OK);
        ck_assert_int_eq(rep->type, REDIS_REPLY_STATUS);
        freeReplyObject(rep);
    }
    struct h_peer s;
    h_peer_open(&s, &f.e, "budget");
    for (int i = 0; i < BUDGET_RESOURCES; i++) {
        snprintf(res, sizeof res, "budget/%d", i);
        struct h_acq a = {.resource = res, .ttl_ms = 10000, .wait_ms = 60000};
        h_peer_acquire(&s, &a);
    }
    int64_t end = h_now_ms() + 10000;
    while (h_metric(&f.e, "rlockd_foreign_waits") < BUDGET_RESOURCES && h_now_ms() < end)
        h_sleep_ms(50);
    double waits = h_metric(&f.e, "rlockd_foreign_waits");
    ck_assert_msg(waits == BUDGET_RESOURCES, "rlockd_foreign_waits is %.0f, want %d", waits,
                  BUDGET_RESOURCES);
    double r0 = h_metric(&f.e, "rlockd_foreign_rechecks_total");
    int64_t t0 = h_now_ms();
    h_sleep_ms(BUDGET_WATCH_MS);
    double r1 = h_metric(&f.e, "rlockd_foreign_rechecks_total");
    int64_t took = h_now_ms() - t0;
    double limit = 2.0 * BUDGET_PER_S * (double)took / 1000 + BUDGET_RESOURCES;
    printf("classic: %d waiters behind the copied code's keys: %.0f tries again in %lld ms "
           "(%.0f a second; limit %.0f in all)\n", BUDGET_RESOURCES, r1 - r0, (long long)took,
           (r1 - r0) * 1000 / (double)took, limit);
    ck_assert_msg(r1 - r0 <= limit, "%.0f tries again in %lld ms: past the budget (%.0f)",
                  r1 - r0, (long long)took, limit);
    ck_assert_msg(r1 - r0 >= 1, "no try again in %lld ms", (long long)took);
    /* Their session ends: nobody waits, nothing counts against the budget. */
    h_raw_close(&s.raw);
    ck_assert_msg(h_wait_for(no_foreign_waits, &f.e, 10000),
                  "rlockd_foreign_waits is %.0f after the waiters' session ended",
                  h_metric(&f.e, "rlockd_foreign_waits"));
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = { test_classic_unlock_steals_rlockd_lock, test_classic_set_nx_blocks_rlockd,
                             test_classic_unannounced_release, test_classic_own_keys_not_polled,
                             test_classic_foreign_budget, test_classic_late_release,
                             test_classic_no_expiry };
    return h_run_tests("classic", 60, tests, H_LEN(tests));
}
