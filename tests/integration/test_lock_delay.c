/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_lock_delay.c — [limits] lock_delay (4 s here): after a session ends
 * uncleanly its locks stay taken for the delay, so that a holder that was
 * only paused has that long to notice before the next holder starts.
 *
 *   keepalive_timeout  the holder (rlock-holder) is stopped (SIGSTOP) past its
 *                      1 s session timeout: a waiting session gets the lock no
 *                      earlier than 4 s after the daemon's log says the session
 *                      ended, and meanwhile the key holds a tombstone
 *   kill9              the holder dies (connection reset, no Goodbye): no
 *                      earlier than 4 s after the kill
 *   release            an explicit Release frees the lock at once
 *   clean_close        rlock_close and rlock_shutdown say Goodbye: at once
 *   override           Acquire.lock_delay_ms replaces the default (500 ms) and
 *                      is capped by [limits] max_lock_delay (6 s for 10 s asked)
 *
 * "At once" is asserted as well under the delay (below 1 s); the delays are
 * asserted from below exactly (the next grant cannot come before them) and
 * from above generously.
 */
#include "harness.h"
#include "harness_peer.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#define RES "lock-delay"
#define DELAY_MS 4000
#define MAX_DELAY_MS 6000
#define CONF "[limits]\nlock_delay = 4s\nmax_lock_delay = 6s\n"
#define HOLDER_SESSION_MS 1000u
#define WAIT_MS 20000
#define QUEUED_MS 300      /* time for the waiter to queue behind the holder */
#define AT_ONCE_MS 2500    /* "at once": well under the 4 s delay, generous for a loaded machine */
#define LATE_SLACK_MS 3000 /* how much later than its delay a grant may come, generously (the
                            * 10 s asked, capped at 6 s, is still told apart) */
#define STAMP_SLACK_MS 2   /* log stamps and our wall clock are both cut to whole ms */

/* The waiter's grant came delay_ms (or, generously, a little more) after `from`. */
static void expect_delayed(const struct h_waiter *w, enum rlock_err rc, int64_t from,
                           int delay_ms, const char *what)
{
    int64_t after = w->granted_ms - from;
    printf("lock_delay: FIGURE %s: the waiting session got the lock %lld ms later "
           "(lock_delay %d ms)\n",
           what, (long long)after, delay_ms);
    ck_assert_msg(rc == RLOCK_OK, "%s: the waiting session did not get the lock: %s", what,
                  rlock_strerror(rc));
    ck_assert_msg(after >= delay_ms - STAMP_SLACK_MS,
                  "%s: the waiting session got the lock %lld ms later, before the %d ms "
                  "lock_delay was over",
                  what, (long long)after, delay_ms);
    ck_assert_msg(after < delay_ms + LATE_SLACK_MS, "%s: the lock came only %lld ms later", what,
                  (long long)after);
}

/* The key comes to hold the tombstone of token (the daemon writes it right after the end). */
static void expect_tombstone(redisContext *r, const char *key, const char *token)
{
    char val[256] = "", want[160];
    snprintf(want, sizeof want, "tombstone:%s", token);
    int64_t deadline = h_now_ms() + 500;
    int got;
    while ((got = h_get(r, key, val, sizeof val)) == 1 && strcmp(val, token) == 0 &&
           h_now_ms() < deadline)
        h_sleep_ms(2);
    long long pttl = h_pttl(r, key);
    printf("lock_delay: FIGURE during the delay the key holds \"%s\", PTTL %lld ms\n",
           got == 1 ? val : "(nothing)", pttl);
    ck_assert_msg(got == 1 && strcmp(val, want) == 0, "the key holds \"%s\", not %s", val, want);
    ck_assert_msg(pttl > 0 && pttl <= DELAY_MS, "the tombstone's PTTL is %lld", pttl);
}

START_TEST(test_lock_delay_keepalive_timeout)
{
    struct h_fixture f;
    h_fixture_start_env(&f, CONF);
    char key[256];
    h_lock_key(&f.e, RES, key, sizeof key);
    struct h_holder h;
    h_holder_start_session(&h, &f.e, RES, 0, HOLDER_SESSION_MS, 5000);
    struct h_waiter w;
    h_waiter_start(&w, &f.e, RES, 0, WAIT_MS);
    h_sleep_ms(QUEUED_MS);

    h_sigstop(h.pid, "rlock-holder");
    int64_t t_stop_wall = h_wall_ms();
    int64_t end_wall;
    ck_assert_int_eq(h_log_wait(&f.e, "closed: session timed out (no keepalive)", 5000, &end_wall),
                     0);
    expect_tombstone(f.r, key, h.token);
    enum rlock_err rc = h_waiter_join(&w);
    printf("lock_delay: FIGURE the stopped holder's session ended %lld ms after SIGSTOP "
           "(session timeout %u ms)\n",
           (long long)(end_wall - t_stop_wall), HOLDER_SESSION_MS);
    /* Measured on the wall clock, that of the log's stamp: from the session's end. */
    struct h_waiter wall = w;
    wall.granted_ms = w.granted_wall_ms;
    expect_delayed(&wall, rc, end_wall, DELAY_MS, "after the keepalive timeout");
    h_assert_key_token(f.r, key, rlock_lock_token(w.l));

    h_holder_kill9(&h);
    h_waiter_close(&w);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_lock_delay_kill9)
{
    struct h_fixture f;
    h_fixture_start_env(&f, CONF);
    char key[256];
    h_lock_key(&f.e, RES, key, sizeof key);
    struct h_holder h;
    h_holder_start(&h, &f.e, RES, 0, 5000);
    struct h_waiter w;
    h_waiter_start(&w, &f.e, RES, 0, WAIT_MS);
    h_sleep_ms(QUEUED_MS);

    int64_t t_kill = h_holder_kill9(&h);
    ck_assert_int_eq(h_log_wait(&f.e, "closed: connection closed by client; releasing 1 lock",
                                5000, NULL),
                     0);
    expect_tombstone(f.r, key, h.token);
    expect_delayed(&w, h_waiter_join(&w), t_kill, DELAY_MS, "after kill -9 of the holder");
    h_waiter_close(&w);
    h_fixture_stop(&f);
}
END_TEST

/* The waiter got the lock within AT_ONCE_MS of `from`. */
static void expect_at_once(const struct h_waiter *w, enum rlock_err rc, int64_t from,
                           const char *what)
{
    int64_t after = w->granted_ms - from;
    printf("lock_delay: FIGURE %s: the waiting session got the lock %lld ms later\n", what,
           (long long)after);
    ck_assert_msg(rc == RLOCK_OK, "%s: the waiting session did not get the lock: %s", what,
                  rlock_strerror(rc));
    ck_assert_msg(after < AT_ONCE_MS, "%s: the lock came only %lld ms later (lock_delay %d ms "
                  "applies to unclean ends only)", what, (long long)after, DELAY_MS);
}

START_TEST(test_lock_delay_release)
{
    struct h_fixture f;
    h_fixture_start(&f, CONF);
    struct rlock_lock *l = h_acquire_ok(f.c, RES, NULL);
    struct h_waiter w;
    h_waiter_start(&w, &f.e, RES, 0, WAIT_MS);
    h_sleep_ms(QUEUED_MS);
    int64_t t = h_now_ms();
    h_assert_ok(f.c, rlock_release(l, 0));
    expect_at_once(&w, h_waiter_join(&w), t, "after an explicit release");
    rlock_lock_free(l);
    h_waiter_close(&w);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_lock_delay_clean_close)
{
    struct h_fixture f;
    h_fixture_start_env(&f, CONF);
    static const char *const how[2] = {"after rlock_close", "after rlock_shutdown"};
    for (int i = 0; i < 2; i++) {
        struct rlock_client *a = h_client_or_fail(&f.e, NULL);
        struct rlock_lock *l = h_acquire_ok(a, RES, NULL);
        (void)l; /* freed with its client */
        struct h_waiter w;
        h_waiter_start(&w, &f.e, RES, 0, WAIT_MS);
        h_sleep_ms(QUEUED_MS);
        int64_t t = h_now_ms();
        if (i == 1)
            rlock_shutdown(a);
        rlock_close(a);
        expect_at_once(&w, h_waiter_join(&w), t, how[i]);
        h_waiter_close(&w);
    }
    ck_assert_int_eq(h_log_count(&f.e, "closed: goodbye; releasing 1 lock"), 2);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_lock_delay_override)
{
    struct h_fixture f;
    h_fixture_start_env(&f, CONF);
    static const struct {
        uint32_t asked;
        int delay;
        const char *what;
    } cases[] = {
        {500, 500, "Acquire.lock_delay_ms 500, connection closed"},
        {10000, MAX_DELAY_MS, "Acquire.lock_delay_ms 10000 (max_lock_delay 6 s), connection "
                              "closed"},
    };
    for (size_t i = 0; i < H_LEN(cases); i++) {
        struct h_peer p;
        h_peer_open(&p, &f.e, "holder");
        struct h_acq a = {.resource = RES, .lock_delay_ms = cases[i].asked};
        struct h_grant g;
        h_peer_acquire_ok(&p, &a, &g, "the holder's acquire");
        struct h_waiter w;
        h_waiter_start(&w, &f.e, RES, 0, WAIT_MS);
        h_sleep_ms(QUEUED_MS);
        /* The connection ends without Goodbye, as when the holder's process dies. */
        int64_t t = h_now_ms();
        h_raw_close(&p.raw);
        expect_delayed(&w, h_waiter_join(&w), t, cases[i].delay, cases[i].what);
        h_waiter_close(&w);
    }
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {
        test_lock_delay_keepalive_timeout, test_lock_delay_kill9, test_lock_delay_release,
        test_lock_delay_clean_close, test_lock_delay_override,
    };
    return h_run_tests("lock_delay", 60, tests, H_LEN(tests));
}
