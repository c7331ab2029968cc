/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_max_hold.c — a lock held past its max_hold by a live client (its
 * session sends keepalives, the watchdog renews the lease) is lost with
 * LockLost(MAX_HOLD), never before max_hold − 0.5 s (the figure, max_hold ± 0.5 s
 * when the machine is not loaded, is printed: when the notice reaches the
 * callback thread of a busy machine is not a pass/fail criterion, only that it
 * comes within 3 s and in the order of the max_holds); the daemon stops renewing it, and
 * its key lives out the validity the holder was given: another session gets
 * the lock no earlier than the key's expiry.
 *
 *   ask      Acquire.max_hold_ms = 2000, no [limits] max_hold
 *   limit    [limits] max_hold = 2s: the default for an acquire that asks for
 *            none, a cap for one that asks for more (10 s), and no floor for
 *            one that asks for less (1 s)
 *
 * The lease (4.5 s) is renewed every 1.5 s: no renew is due at the 2 s
 * max_hold, so none is in Redis when the lock is lost, and the key's last
 * renewal sets its expiry at about 6 s.
 *
 *   key_lost the key (ttl 9 s) vanishes from Redis (as in a restart without
 *            persistence) before MAX_HOLD and before any renew: the waiter, tried again at the
 *            loss, must still not get the lock before the validity the
 *            holder was given has ended (a tombstone keeps it taken).
 */
#include "harness.h"

#include <stdio.h>
#include <string.h>

#define TTL_MS 4500u
#define KEY_LOST_TTL_MS 9000u
#define MAX_HOLD_MS 2000
#define TOLERANCE_MS 500 /* never earlier than max_hold minus this */
#define WAIT_MS 20000
#define SAMPLE_MS 20
#define RENEW_JUMP_MS 50 /* a PTTL that grows by more than this was renewed */
#define EXPIRY_SLACK_MS 20 /* Redis and the daemon expire by different clocks */

/* LockLost calls per resource, from the client's callback thread. */
#define NRES 3
struct losses {
    const char *resource[NRES];
    _Atomic int64_t at_ms[NRES];
    atomic_int reason[NRES];
    atomic_int count[NRES];
};

static void lost_cb(struct rlock_client *c, const char *resource, const char *token,
                    uint64_t fence, enum rlock_lost_reason reason, void *arg)
{
    (void)c;
    (void)token;
    (void)fence;
    struct losses *ls = arg;
    for (int i = 0; i < NRES; i++) {
        if (ls->resource[i] != NULL && strcmp(ls->resource[i], resource) == 0) {
            atomic_store(&ls->at_ms[i], h_now_ms());
            atomic_store(&ls->reason[i], (int)reason);
            atomic_fetch_add(&ls->count[i], 1);
        }
    }
}

static int lost_n(void *arg)
{
    struct losses *ls = arg;
    int n = 0;
    for (int i = 0; i < NRES; i++)
        n += ls->resource[i] != NULL && atomic_load(&ls->count[i]) > 0;
    return n;
}

/* 1 once every watched lock was lost. */
static int all_lost(void *arg)
{
    struct losses *ls = arg;
    for (int i = 0; i < NRES; i++)
        if (ls->resource[i] != NULL && atomic_load(&ls->count[i]) == 0)
            return 0;
    return 1;
}

/* The key still keeps the lost lock taken: its token, or the tombstone that replaced it. */
static int holds_lost(const char *val, const char *token)
{
    static const char tomb[] = "tombstone:";
    return strcmp(val, token) == 0 ||
           (strncmp(val, tomb, sizeof tomb - 1) == 0 && strcmp(val + sizeof tomb - 1, token) == 0);
}

/*
 * After the loss of the lock whose token is in key: its PTTL only falls
 * until the token is gone (no renewal), and the waiter gets the lock no
 * earlier than the expiry read first.
 */
static void expect_expires_by_itself(struct h_fixture *f, const char *key, const char *token,
                                     struct h_waiter *w, int64_t t0)
{
    long long first = -1, prev = -1;
    int64_t expiry = 0;
    int samples = 0;
    char val[256];
    for (;;) {
        long long pttl = h_pttl(f->r, key);
        int64_t now = h_now_ms();
        if (h_get(f->r, key, val, sizeof val) != 1 || !holds_lost(val, token))
            break; /* gone, or the waiter's by now: this PTTL may not be about the token */
        /* 0: less than a millisecond left (the GET may still have found it). */
        ck_assert_msg(pttl >= 0, "PTTL %lld after the loss", pttl);
        if (first < 0) {
            first = pttl;
            expiry = now + pttl;
        }
        ck_assert_msg(prev < 0 || pttl <= prev + RENEW_JUMP_MS,
                      "the key was renewed after MAX_HOLD: PTTL %lld ms, %d ms earlier %lld ms",
                      pttl, SAMPLE_MS, prev);
        ck_assert_msg(now - t0 < 20000, "the key is still there 20 s after the acquire");
        prev = pttl;
        samples++;
        h_sleep_ms(SAMPLE_MS);
    }
    enum rlock_err rc = h_waiter_join(w);
    printf("max_hold: FIGURE after the loss the key's PTTL was %lld ms (expiry at +%lld ms), "
           "never rose over %d samples; the waiting session got the lock at +%lld ms\n",
           first, (long long)(expiry - t0), samples, (long long)(w->granted_ms - t0));
    ck_assert_msg(first > 0, "the key was gone right after the loss: not left to expire");
    ck_assert_msg(rc == RLOCK_OK, "the waiting session: %s", rlock_strerror(rc));
    ck_assert_msg(w->granted_ms >= expiry - EXPIRY_SLACK_MS,
                  "the waiting session got the lock %lld ms before the key's validity ended",
                  (long long)(expiry - w->granted_ms));
}

START_TEST(test_max_hold_ask)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct losses ls = {.resource = {"max-hold"}};
    struct rlock_options co = {.on_lost = lost_cb, .on_lost_arg = &ls};
    f.c = h_client_or_fail(&f.e, &co);
    char key[256];
    h_lock_key(&f.e, "max-hold", key, sizeof key);

    struct rlock_acquire_opts o = {.ttl_ms = TTL_MS, .max_hold_ms = MAX_HOLD_MS};
    int64_t t0 = h_now_ms();
    struct rlock_lock *l = h_acquire_ok(f.c, "max-hold", &o);
    char token[64];
    snprintf(token, sizeof token, "%s", rlock_lock_token(l));
    struct h_waiter w;
    h_waiter_start(&w, &f.e, "max-hold", 0, WAIT_MS);

    ck_assert_msg(h_wait_for(all_lost, &ls, MAX_HOLD_MS + 3000), "no LockLost within 5 s");
    int64_t after = atomic_load(&ls.at_ms[0]) - t0;
    printf("max_hold: FIGURE max_hold_ms %d: LockLost(%s) %lld ms after the acquire\n",
           MAX_HOLD_MS, rlock_lost_reason_str(atomic_load(&ls.reason[0])), (long long)after);
    ck_assert_int_eq(atomic_load(&ls.reason[0]), RLOCK_LOST_MAX_HOLD);
    ck_assert_msg(after >= MAX_HOLD_MS - TOLERANCE_MS,
                  "LockLost(MAX_HOLD) %lld ms after the acquire, before %d - %d", (long long)after,
                  MAX_HOLD_MS, TOLERANCE_MS);
    ck_assert_int_eq(rlock_lock_state(l), RLOCK_LOST);
    ck_assert_int_eq(rlock_lock_lost_reason(l), RLOCK_LOST_MAX_HOLD);
    ck_assert_int_eq(rlock_client_alive(f.c), 1);

    expect_expires_by_itself(&f, key, token, &w, t0);
    ck_assert_int_eq(atomic_load(&ls.count[0]), 1);
    h_waiter_close(&w);
    rlock_lock_free(l);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_max_hold_limit)
{
    struct h_fixture f;
    h_fixture_start_env(&f, "[limits]\nmax_hold = 2s\n");
    static const char *const names[NRES] = {"mh-default", "mh-capped", "mh-shorter"};
    static const uint32_t asked[NRES] = {0, 10000, 1000};
    static const int expect[NRES] = {MAX_HOLD_MS, MAX_HOLD_MS, 1000};
    struct losses ls = {.resource = {names[0], names[1], names[2]}};
    struct rlock_options co = {.on_lost = lost_cb, .on_lost_arg = &ls};
    f.c = h_client_or_fail(&f.e, &co);

    struct rlock_lock *l[NRES];
    int64_t t0[NRES];
    for (int i = 0; i < NRES; i++) {
        struct rlock_acquire_opts o = {.ttl_ms = TTL_MS, .max_hold_ms = asked[i]};
        t0[i] = h_now_ms();
        l[i] = h_acquire_ok(f.c, names[i], &o);
    }
    /* The first key is watched to its end, with a waiter. */
    char key[256], token[64];
    snprintf(token, sizeof token, "%s", rlock_lock_token(l[0]));
    h_lock_key(&f.e, names[0], key, sizeof key);
    struct h_waiter w;
    h_waiter_start(&w, &f.e, names[0], 0, WAIT_MS);

    ck_assert_msg(h_wait_for(all_lost, &ls, MAX_HOLD_MS + 3000), "%d of %d locks lost within 5 s",
                  lost_n(&ls), NRES);
    for (int i = 0; i < NRES; i++) {
        int64_t after = atomic_load(&ls.at_ms[i]) - t0[i];
        printf("max_hold: FIGURE [limits] max_hold 2s, max_hold_ms %u asked: LockLost(%s) "
               "%lld ms after the acquire (want %d)\n",
               asked[i], rlock_lost_reason_str(atomic_load(&ls.reason[i])), (long long)after,
               expect[i]);
        ck_assert_int_eq(atomic_load(&ls.reason[i]), RLOCK_LOST_MAX_HOLD);
        ck_assert_msg(after >= expect[i] - TOLERANCE_MS,
                      "%s (max_hold_ms %u asked): LockLost %lld ms after the acquire, before "
                      "%d - %d",
                      names[i], asked[i], (long long)after, expect[i], TOLERANCE_MS);
    }
    /* The 1 s lock went before the 2 s ones (the 10 s one was capped: it went within the 5 s
     * above), whatever the machine's load delays all three by. */
    ck_assert_msg(atomic_load(&ls.at_ms[2]) < atomic_load(&ls.at_ms[0]) &&
                      atomic_load(&ls.at_ms[2]) < atomic_load(&ls.at_ms[1]),
                  "the lock asking max_hold 1 s was not lost before those of 2 s");
    expect_expires_by_itself(&f, key, token, &w, t0[0]);
    for (int i = 0; i < NRES; i++) {
        ck_assert_int_eq(atomic_load(&ls.count[i]), 1);
        rlock_lock_free(l[i]);
    }
    h_waiter_close(&w);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_max_hold_key_lost)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct losses ls = {.resource = {"mh-lost"}};
    struct rlock_options co = {.on_lost = lost_cb, .on_lost_arg = &ls};
    f.c = h_client_or_fail(&f.e, &co);
    char key[256];
    h_lock_key(&f.e, "mh-lost", key, sizeof key);

    /* ttl 9 s: the first renew, due at 3 s, would find the key gone before MAX_HOLD. */
    struct rlock_acquire_opts o = {.ttl_ms = KEY_LOST_TTL_MS, .max_hold_ms = MAX_HOLD_MS};
    int64_t t0 = h_now_ms();
    struct rlock_lock *l = h_acquire_ok(f.c, "mh-lost", &o);
    struct h_waiter w;
    h_waiter_start(&w, &f.e, "mh-lost", 0, WAIT_MS);
    h_sleep_ms(300); /* the waiter is queued, asleep until the key's PTTL or a notice */
    /* Redis loses the key; nobody publishes a release. */
    ck_assert_int_eq(h_redis_int(f.r, "DEL %s", key), 1);
    /* What the holder was promised, read before MAX_HOLD. A later keepalive may vouch
     * for longer; the earliest is enough. */
    int64_t valid_until = rlock_lock_valid_until(l);
    ck_assert_msg(valid_until > t0 + MAX_HOLD_MS, "validity ends before max_hold");

    ck_assert_msg(h_wait_for(all_lost, &ls, MAX_HOLD_MS + 3000), "no LockLost within 5 s");
    ck_assert_int_eq(atomic_load(&ls.reason[0]), RLOCK_LOST_MAX_HOLD);
    enum rlock_err rc = h_waiter_join(&w);
    printf("max_hold: FIGURE key lost: LockLost at +%lld ms, the holder was valid until "
           "+%lld ms, the waiter got the lock at +%lld ms\n",
           (long long)(atomic_load(&ls.at_ms[0]) - t0), (long long)(valid_until - t0),
           (long long)(w.granted_ms - t0));
    ck_assert_msg(rc == RLOCK_OK, "the waiting session: %s", rlock_strerror(rc));
    ck_assert_msg(w.granted_ms >= valid_until,
                  "the waiting session got the lock %lld ms before the holder's validity "
                  "ended (Redis had lost the key)",
                  (long long)(valid_until - w.granted_ms));
    h_waiter_close(&w);
    rlock_lock_free(l);
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_max_hold_ask, test_max_hold_limit, test_max_hold_key_lost};
    return h_run_tests("max_hold", 60, tests, H_LEN(tests));
}
