/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_unknown_outcome.c — an Extend whose outcome is unknown: Redis is
 * stopped (SIGSTOP) while the Extend is in it, the daemon answers
 * UNAVAILABLE after its command_timeout (300 ms), and Redis runs the Extend
 * from its socket buffer once it is resumed, after the daemon gave up on it.
 *
 *   shorten_*   A holds a 30 s lease and asks Extend(2000): the late Extend
 *               must not cut the key below what A was promised, so while A
 *               is told HELD nobody else gets the lock — not a session
 *               trying in a loop, not one waiting — and Stats never shows
 *               two holders. With the watchdog off and on.
 *   lengthen_*  Extend(3600000): the late Extend makes the key live an hour.
 *               The daemon must still free the lock when A's session ends
 *               (after Redis resumed, or while it is still stopped) or when
 *               A's lease runs out: the key is deleted by token and a waiting
 *               session gets the lock, without waiting for the hour. When the
 *               lease runs out, the waiter is woken by the loss, a moment
 *               before the key is deleted at the validity's end, and is shown
 *               the hour the late Extend set.
 *
 * librlock is used with a long call timeout, so that the daemon's
 * UNAVAILABLE comes first (on its own deadline the library would close the
 * session).
 */
#include "harness.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#define RES "unknown-outcome"
#define LONG_TTL_MS 30000u
#define SHORT_EXTEND_MS 2000u
#define LONG_EXTEND_MS 3600000u
#define CALL_TIMEOUT_MS 10000u /* far beyond command_timeout: the daemon answers first */
#define ANSWER_WITHIN_MS 5000  /* command_timeout is 300 ms; far below CALL_TIMEOUT_MS */
#define STOPPED_AFTER_MS 200   /* Redis stays stopped this long after the UNAVAILABLE */
#define WATCH_MS 5000          /* past the 2 s a shortened key would have lived, with margin */
#define WATCH_TICK_MS 50
#define GONE_WITHIN_MS 10000   /* "not blocked for an hour", generously */
#define LATE_RAN_WITHIN_MS 3000

/* The Extend of l to ttl_ms while Redis is stopped: UNAVAILABLE, and A still holds the lock. */
static void extend_during_stall(struct h_fixture *f, struct rlock_lock *l, uint32_t ttl_ms)
{
    h_sigstop(f->e.redis_pid, "redis-server");
    int64_t t0 = h_now_ms();
    enum rlock_err err = rlock_extend(l, ttl_ms, CALL_TIMEOUT_MS);
    int64_t took = h_now_ms() - t0;
    char msg[320];
    printf("unknown_outcome: FIGURE Extend(%u) with Redis stopped: %s after %lld ms (%s)\n", ttl_ms,
           rlock_strerror(err), (long long)took, h_rlock_err(f->c, err, msg, sizeof msg));
    ck_assert_msg(err == RLOCK_ERR_UNAVAILABLE, "Extend during a stall: %s", msg);
    ck_assert_msg(took < ANSWER_WITHIN_MS, "the UNAVAILABLE took %lld ms", (long long)took);
    ck_assert_msg(rlock_lock_state(l) == RLOCK_HELD, "A's lock is %d after the UNAVAILABLE",
                  (int)rlock_lock_state(l));
    ck_assert_int_eq(rlock_client_alive(f->c), 1);
}

/* --- shortening ------------------------------------------------------------ */

static void shorten(int watchdog)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    char key[256];
    h_lock_key(&f.e, RES, key, sizeof key);

    struct rlock_acquire_opts o = {.ttl_ms = LONG_TTL_MS, .watchdog_off = !watchdog};
    struct rlock_lock *l = h_acquire_ok(f.c, RES, &o);
    extend_during_stall(&f, l, SHORT_EXTEND_MS);
    h_sleep_ms(STOPPED_AFTER_MS);
    h_sigcont(f.e.redis_pid, "redis-server");
    int64_t t_cont = h_now_ms();

    /* B waits for the lock; C tries for it in a loop and reads Stats. */
    struct h_waiter b;
    h_waiter_start(&b, &f.e, RES, 0, WATCH_MS);
    struct rlock_client *c = h_client_or_fail(&f.e, NULL);
    int tries = 0, refused = 0, unavailable = 0;
    uint64_t most_held = 0;
    long long min_margin = -1; /* key expiry minus what A was promised, lowest seen */
    while (h_now_ms() - t_cont < WATCH_MS) {
        struct rlock_acquire_opts t = {.ttl_ms = LONG_TTL_MS};
        struct rlock_lock *cl = NULL;
        enum rlock_err err = rlock_acquire(c, RES, &t, 0, &cl);
        tries++;
        refused += err == RLOCK_ERR_NOT_ACQUIRED;
        unavailable += err == RLOCK_ERR_UNAVAILABLE;
        ck_assert_msg(err != RLOCK_OK || rlock_lock_state(l) != RLOCK_HELD,
                      "two holders: another session was granted the lock %lld ms after "
                      "Redis resumed while A is still told HELD (no LockLost)",
                      (long long)(h_now_ms() - t_cont));
        ck_assert_msg(err == RLOCK_ERR_NOT_ACQUIRED || err == RLOCK_ERR_UNAVAILABLE,
                      "C's try: %s", rlock_strerror(err));

        struct rlock_stats st;
        h_assert_ok(c, rlock_stats(c, 0, &st));
        if (st.held_locks > most_held)
            most_held = st.held_locks;
        ck_assert_msg(st.held_locks <= 1, "Stats shows %llu held locks for one resource",
                      (unsigned long long)st.held_locks);

        int64_t promised = rlock_lock_valid_until(l);
        long long pttl = h_pttl(f.r, key);
        int64_t expiry = h_now_ms() + pttl; /* the latest it can expire */
        ck_assert_msg(pttl > 0, "A's key has PTTL %lld %lld ms after Redis resumed", pttl,
                      (long long)(h_now_ms() - t_cont));
        if (promised > 0) {
            long long margin = (long long)(expiry - promised);
            if (min_margin < 0 || margin < min_margin)
                min_margin = margin;
            ck_assert_msg(expiry >= promised,
                          "A's key expires %lld ms before the validity A was promised: the "
                          "late Extend(%u) shortened it",
                          -margin, SHORT_EXTEND_MS);
        }
        ck_assert_int_eq(rlock_lock_state(l), RLOCK_HELD);
        h_sleep_ms(WATCH_TICK_MS);
    }
    enum rlock_err berr = h_waiter_join(&b);
    printf("unknown_outcome: FIGURE watchdog %s: over %d ms after Redis resumed: %d tries "
           "(%d NOT_ACQUIRED, %d UNAVAILABLE), most held locks in Stats %llu, lowest key "
           "expiry minus A's promised validity %lld ms; the waiting session: %s\n",
           watchdog ? "on" : "off", WATCH_MS, tries, refused, unavailable,
           (unsigned long long)most_held, min_margin, rlock_strerror(berr));
    ck_assert_msg(berr != RLOCK_OK, "two holders: the waiting session was granted the lock "
                  "%lld ms after Redis resumed while A is still told HELD",
                  (long long)(b.granted_ms - t_cont));
    ck_assert_msg(refused > 0, "C never saw the lock held: Redis did not come back?");
    ck_assert_int_eq(atomic_load(&f.lost.count), 0);

    h_waiter_close(&b);
    rlock_close(c);
    h_release_gone(&f, f.c, l);
    rlock_lock_free(l);
    h_fixture_stop(&f);
}

START_TEST(test_unknown_outcome_shorten_watchdog_off)
{
    shorten(0);
}
END_TEST

START_TEST(test_unknown_outcome_shorten_watchdog_on)
{
    shorten(1);
}
END_TEST

/* --- lengthening ----------------------------------------------------------- */

/* Wait until the Extend Redis ran late has made the key live longer than ttl_ms. */
static long long wait_lengthened(struct h_fixture *f, const char *key, uint32_t ttl_ms)
{
    int64_t deadline = h_now_ms() + LATE_RAN_WITHIN_MS;
    long long pttl;
    while ((pttl = h_pttl(f->r, key)) <= (long long)ttl_ms && h_now_ms() < deadline)
        h_sleep_ms(10);
    printf("unknown_outcome: FIGURE after Redis resumed the key's PTTL is %lld ms (lease %u)\n",
           pttl, ttl_ms);
    ck_assert_msg(pttl > (long long)ttl_ms,
                  "the Extend Redis ran late did not lengthen the key (PTTL %lld): the "
                  "scenario did not happen",
                  pttl);
    return pttl;
}

/*
 * A's token leaves the key, and the waiter gets the lock, within GONE_WITHIN_MS
 * of t0 (the waiter's own token may be in the key by then).
 */
static void expect_freed(struct h_fixture *f, struct h_waiter *b, const char *key,
                         const char *token, int64_t t0, const char *after)
{
    int64_t gone = h_wait_token_gone(f->r, key, token, GONE_WITHIN_MS, NULL);
    enum rlock_err berr = h_waiter_join(b);
    printf("unknown_outcome: FIGURE %s: A's key gone after %lld ms; the waiting session: %s "
           "after %lld ms (%d UNAVAILABLE answers retried)\n",
           after, (long long)gone, rlock_strerror(berr),
           (long long)(berr == RLOCK_OK ? b->granted_ms - t0 : h_now_ms() - t0), b->unavailable);
    ck_assert_msg(gone >= 0, "A's token is still in the key %d ms %s", GONE_WITHIN_MS, after);
    ck_assert_msg(berr == RLOCK_OK && b->granted_ms - t0 <= GONE_WITHIN_MS,
                  "A's token left the key after %lld ms, yet the waiting session did not get "
                  "the lock within %d ms %s (%s): it sleeps until the PTTL it was shown, the "
                  "hour the late Extend set",
                  (long long)gone, GONE_WITHIN_MS, after, rlock_strerror(berr));
}

/* A holds RES with a lease of ttl_ms, watchdog off; its token is copied into token. */
static struct rlock_lock *hold(struct h_fixture *f, char *key, char *token, uint32_t ttl_ms)
{
    h_fixture_start(f, NULL);
    h_lock_key(&f->e, RES, key, 256);
    struct rlock_acquire_opts o = {.ttl_ms = ttl_ms, .watchdog_off = 1};
    struct rlock_lock *l = h_acquire_ok(f->c, RES, &o);
    snprintf(token, 64, "%s", rlock_lock_token(l));
    return l;
}

/* A's session ends (Goodbye) after Redis resumed and ran the late Extend. */
START_TEST(test_unknown_outcome_lengthen_close)
{
    struct h_fixture f;
    char key[256], token[64];
    struct rlock_lock *l = hold(&f, key, token, LONG_TTL_MS);
    extend_during_stall(&f, l, LONG_EXTEND_MS);
    h_sleep_ms(STOPPED_AFTER_MS);
    h_sigcont(f.e.redis_pid, "redis-server");
    wait_lengthened(&f, key, LONG_TTL_MS);

    struct h_waiter b;
    h_waiter_start(&b, &f.e, RES, 0, GONE_WITHIN_MS + 5000);
    h_sleep_ms(300); /* b is queued behind A */
    int64_t t_close = h_now_ms();
    rlock_close(f.c);
    f.c = NULL;
    expect_freed(&f, &b, key, token, t_close, "after A's session ended");
    ck_assert_int_eq(atomic_load(&f.lost.count), 0);
    h_waiter_close(&b);
    h_fixture_stop(&f);
}
END_TEST

/*
 * A's session ends (Goodbye) while Redis is still stopped: the release cannot
 * be sent, and the late Extend runs after it. The cleanup list deletes the
 * key by token once Redis is back.
 */
START_TEST(test_unknown_outcome_lengthen_close_during_stall)
{
    struct h_fixture f;
    char key[256], token[64];
    struct rlock_lock *l = hold(&f, key, token, LONG_TTL_MS);
    extend_during_stall(&f, l, LONG_EXTEND_MS);
    rlock_close(f.c);
    f.c = NULL;
    h_sleep_ms(STOPPED_AFTER_MS);
    h_sigcont(f.e.redis_pid, "redis-server");
    int64_t t_cont = h_now_ms();
    long long pttl = h_pttl(f.r, key);
    int64_t gone = h_wait_token_gone(f.r, key, token, GONE_WITHIN_MS, &f.e);
    /* The key goes when Redis runs the delete; the daemon logs it once it reads the answer. */
    int by_cleanup = gone >= 0 && h_log_wait(&f.e, "cleanup: deleted", 3000, NULL) == 0;
    printf("unknown_outcome: FIGURE A's session ended during the stall: right after Redis "
           "resumed the key's PTTL was %lld ms; the key was gone %lld ms later, deleted by the "
           "cleanup list: %s\n",
           pttl, (long long)(h_now_ms() - t_cont), by_cleanup ? "yes" : "no");
    ck_assert_msg(gone >= 0, "A's token is still in the key %d ms after Redis resumed",
                  GONE_WITHIN_MS);
    ck_assert_msg(by_cleanup, "the key went, but not by the cleanup list");
    ck_assert_int_eq(atomic_load(&f.lost.count), 0);
    h_fixture_stop(&f);
}
END_TEST

/* A keeps its session; its 3 s lease runs out (LockLost EXPIRED) with the key lengthened. */
#define EXPIRING_TTL_MS 3000u

START_TEST(test_unknown_outcome_lengthen_expires)
{
    struct h_fixture f;
    char key[256], token[64];
    int64_t t_acq = h_now_ms();
    struct rlock_lock *l = hold(&f, key, token, EXPIRING_TTL_MS);
    int64_t promised = rlock_lock_valid_until(l);
    struct h_waiter b;
    h_waiter_start(&b, &f.e, RES, 0, GONE_WITHIN_MS + 5000);
    extend_during_stall(&f, l, LONG_EXTEND_MS);
    h_sleep_ms(STOPPED_AFTER_MS);
    h_sigcont(f.e.redis_pid, "redis-server");
    wait_lengthened(&f, key, EXPIRING_TTL_MS);

    expect_freed(&f, &b, key, token, t_acq, "after A's acquire (lease 3 s, A's session open)");
    int64_t lost_at = atomic_load(&f.lost.first_ms);
    printf("unknown_outcome: FIGURE LockLost(%s) at +%lld ms, validity promised until +%lld ms, "
           "the waiting session got the lock at +%lld ms\n",
           rlock_lost_reason_str((enum rlock_lost_reason)atomic_load(&f.lost.reason)),
           (long long)(lost_at - t_acq), (long long)(promised - t_acq),
           (long long)(b.granted_ms - t_acq));
    ck_assert_int_eq(atomic_load(&f.lost.count), 1);
    ck_assert_int_eq(atomic_load(&f.lost.reason), RLOCK_LOST_EXPIRED);
    ck_assert_msg(b.granted_ms >= lost_at && b.granted_ms >= promised,
                  "the waiting session got the lock before A was told it lost it");
    h_waiter_close(&b);
    rlock_lock_free(l);
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {
        test_unknown_outcome_shorten_watchdog_off, test_unknown_outcome_shorten_watchdog_on,
        test_unknown_outcome_lengthen_close, test_unknown_outcome_lengthen_close_during_stall,
        test_unknown_outcome_lengthen_expires,
    };
    return h_run_tests("unknown_outcome", 90, tests, H_LEN(tests));
}
