/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_redis_errors.c — Redis answers with an error, not silence, on each of
 * rlockd's call paths. Real error replies from a real Redis: its ACLs deny a
 * command or the pub/sub channels for a moment (NOPERM), or its memory limit
 * refuses writes (OOM). An error is never taken for the success it replaces,
 * nor for a lost key:
 *
 *   renew_refused      renewals refused (NOPERM) for less than a lease: the lock
 *                      stays held, renewed again once Redis accepts them;
 *                      refused for longer: lost as EXPIRED, not MISSING.
 *   release_refused    a Release refused (NOPERM): the key is deleted by
 *                      token by the cleanup list once Redis accepts scripts,
 *                      long before its ttl; that delete wakes a waiter of
 *                      another rlockd, and leaves the list once confirmed.
 *   lock_delay_refused the release at an unclean session end (lock_delay)
 *                      refused: the delete that replaces it still waits for
 *                      the delay.
 *   session_end_refused the releases of a session's end refused (NOPERM): the
 *                      same, through the release queue.
 *   acquire_refused    an acquire refused (NOPERM, OOM): a prompt error, never
 *                      a lock; acquires work again afterwards.
 *   tombstone_refused  a lock's key vanishes (DEL): its holder is told MISSING
 *                      and a tombstone keeps the lock taken for the validity
 *                      it was promised; while Redis refuses the tombstone (SET
 *                      denied) it is retried, so nobody gets the lock before
 *                      that validity ends.
 *   notices_refused    the pub/sub channels denied (NOPERM) while a lock held
 *                      through another rlockd is released: once they are
 *                      allowed again, the waiter here is woken (the
 *                      resubscription), not left asleep on the holder's ttl.
 *
 * The harness's own connection is Redis's default user too: the denials touch
 * only what it does not use (scripts, SET, channels). OOM refuses only the
 * scripts that may add data (a renewal's PEXPIRE and a release's DEL pass).
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CALL_MS 5000u
#define LONG_TTL_MS 60000u
#define CLEANED_WITHIN_MS 15000

static void deny(redisContext *r, const char *what)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "ACL SETUSER default %s", what);
    ck_assert_int_eq(h_redis_ok(r, cmd), 0);
}

static void oom(redisContext *r, int on)
{
    ck_assert_int_eq(h_redis_ok(r, on ? "CONFIG SET maxmemory 1" : "CONFIG SET maxmemory 0"), 0);
}

START_TEST(test_renew_refused)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    char key[256];
    h_lock_key(&f.e, "renewed", key, sizeof key);
    struct rlock_acquire_opts o = {.ttl_ms = 3000};
    struct rlock_lock *l = h_acquire_ok(f.c, "renewed", &o);
    h_sleep_ms(200);

    /* Two renewals (every second) refused, then accepted again within the lease. */
    deny(f.r, "-eval -evalsha");
    h_sleep_ms(1800);
    deny(f.r, "+eval +evalsha");
    h_sleep_ms(1500);
    ck_assert_msg(rlock_lock_state(l) == RLOCK_HELD,
                  "a lock whose renewals Redis refused for 1.8 s of a 3 s lease was lost (%s)",
                  rlock_lost_reason_str(rlock_lock_lost_reason(l)));
    ck_assert_int_eq(atomic_load(&f.lost.count), 0);
    h_assert_key_token(f.r, key, rlock_lock_token(l));
    ck_assert_int_ge(h_pttl(f.r, key), 1000);

    /* Refused for longer than the lease: lost because its validity ran out. The client's
     * own bound (valid_ms, which may be a little short) can end first: UNCERTAIN until
     * the LockLost arrives. */
    deny(f.r, "-eval -evalsha");
    int64_t until = h_now_ms() + 10000;
    while (rlock_lock_state(l) == RLOCK_HELD || rlock_lock_state(l) == RLOCK_UNCERTAIN) {
        ck_assert_msg(h_now_ms() < until, "still held 10 s into refused renewals");
        h_sleep_ms(20);
    }
    deny(f.r, "+eval +evalsha");
    ck_assert_int_eq(rlock_lock_state(l), RLOCK_LOST);
    ck_assert_msg(rlock_lock_lost_reason(l) == RLOCK_LOST_EXPIRED,
                  "refused renewals ended the lock as %s, not EXPIRED",
                  rlock_lost_reason_str(rlock_lock_lost_reason(l)));
    rlock_lock_free(l);
    h_fixture_stop(&f);
}
END_TEST

/* The value of an unlabelled metric of e's /metrics. */
static long long metric(const struct h_env *e, const char *name)
{
    double v = h_metric(e, name);
    ck_assert_msg(v >= 0, "no sample %s in /metrics", name);
    return (long long)v;
}

START_TEST(test_release_refused)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    char key[256];
    h_lock_key(&f.e, "released", key, sizeof key);
    struct rlock_acquire_opts o = {.ttl_ms = LONG_TTL_MS, .watchdog_off = 1};
    struct rlock_lock *l = h_acquire_ok(f.c, "released", &o);
    /* Waiting for it through another rlockd: woken by the release notice, whoever deletes. */
    struct h_env peer;
    ck_assert_int_eq(h_env_start_peer(&peer, &f.e, NULL), 0);
    struct h_waiter w;
    h_waiter_start(&w, &peer, "released", LONG_TTL_MS, 30000);
    ck_assert_int_eq(h_wait_stats(&peer, 0, 1, 5000, NULL), 0);
    h_sleep_ms(300);

    deny(f.r, "-eval -evalsha");
    enum rlock_err rc = rlock_release(l, CALL_MS);
    ck_assert_msg(rc == RLOCK_OK, "a Release Redis refused answered %s", rlock_strerror(rc));
    ck_assert_int_eq(rlock_lock_state(l), RLOCK_RELEASED);
    h_sleep_ms(500);
    ck_assert_int_eq(h_key_exists(f.r, key), 1);
    ck_assert_int_ge(metric(&f.e, "rlockd_cleanup_pending"), 1);
    deny(f.r, "+eval +evalsha");
    /* The other daemon's waiter takes the key the moment it is free: watch our token. */
    ck_assert_msg(h_wait_token_gone(f.r, key, rlock_lock_token(l), CLEANED_WITHIN_MS, &f.e) >= 0,
                  "the key of a refused Release is still there %d ms after Redis accepted "
                  "scripts again (an error taken for a confirmed release?)",
                  CLEANED_WITHIN_MS);
    int64_t gone = h_now_ms();
    ck_assert_int_eq(h_waiter_join(&w), RLOCK_OK);
    printf("release_refused: the other daemon's waiter got the lock %lld ms after the cleanup "
           "deleted the key\n",
           (long long)(w.granted_ms - gone));
    ck_assert_msg(w.granted_ms - gone < 3000,
                  "the cleanup's delete woke no waiter of another daemon (granted %lld ms later)",
                  (long long)(w.granted_ms - gone));
    /* Confirmed for its settle time, the delete leaves the list. */
    int64_t until = h_now_ms() + 10000;
    while (metric(&f.e, "rlockd_cleanup_pending") != 0) {
        ck_assert_msg(h_now_ms() < until, "a confirmed delete is still retried 10 s later");
        h_sleep_ms(100);
    }
    h_waiter_close(&w);
    h_env_stop(&peer);
    rlock_lock_free(l);
    h_fixture_stop(&f);
}
END_TEST

/*
 * A holder with lock_delay 3 s dies (kill -9) while Redis refuses scripts: the
 * release that should turn its key into a tombstone is refused, so its key
 * keeps the old token; once scripts are allowed again, the delete by token
 * that replaces it must still wait for the delay: nobody gets the lock before
 * it is over.
 */
START_TEST(test_lock_delay_refused)
{
    struct h_fixture f;
    h_fixture_start(&f, "[limits]\nlock_delay = 3s\n");
    struct h_holder h;
    h_holder_start(&h, &f.e, "delayed", LONG_TTL_MS, 5000);
    deny(f.r, "-eval -evalsha");
    int64_t killed = h_holder_kill9(&h);
    ck_assert_int_eq(h_log_wait(&f.e, "closed: connection closed by client; releasing 1 lock",
                                5000, NULL),
                     0);
    h_sleep_ms(300);
    deny(f.r, "+eval +evalsha");
    struct rlock_lock *l = NULL;
    int64_t until = h_now_ms() + 15000;
    while (rlock_acquire(f.c, "delayed", NULL, CALL_MS, &l) != RLOCK_OK) {
        ck_assert_msg(h_now_ms() < until, "the lock never became free");
        h_sleep_ms(20);
    }
    int64_t granted = h_now_ms();
    printf("lock_delay_refused: granted %lld ms after the holder died (lock_delay 3000 ms)\n",
           (long long)(granted - killed));
    ck_assert_msg(granted - killed >= 3000,
                  "granted %lld ms after its holder died, inside its lock_delay of 3 s",
                  (long long)(granted - killed));
    h_release_gone(&f, f.c, l);
    rlock_lock_free(l);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_session_end_refused)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rlock_client *c = h_client_or_fail(&f.e, NULL);
    struct rlock_acquire_opts o = {.ttl_ms = LONG_TTL_MS};
    char keys[3][256];
    for (int i = 0; i < 3; i++) {
        char res[32];
        snprintf(res, sizeof res, "ended-%d", i);
        h_lock_key(&f.e, res, keys[i], sizeof keys[i]);
        struct rlock_lock *l = h_acquire_ok(c, res, &o);
        rlock_lock_free(l);
    }
    deny(f.r, "-eval -evalsha");
    rlock_close(c);
    ck_assert_int_eq(h_wait_stats(&f.e, 0, 0, 5000, NULL), 0);
    h_sleep_ms(500);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(h_key_exists(f.r, keys[i]), 1);
    deny(f.r, "+eval +evalsha");
    for (int i = 0; i < 3; i++)
        ck_assert_msg(h_wait_key_gone(f.r, keys[i], CLEANED_WITHIN_MS, &f.e) >= 0,
                      "%s of a session that ended while Redis refused scripts is still there "
                      "%d ms after it accepted them again",
                      keys[i], CLEANED_WITHIN_MS);
    h_fixture_stop(&f);
}
END_TEST

/* An acquire Redis refuses: a prompt error, no lock, no key. */
static void expect_refused(struct h_fixture *f, const char *res, const char *why)
{
    char key[256];
    h_lock_key(&f->e, res, key, sizeof key);
    struct rlock_lock *l = NULL;
    int64_t t = h_now_ms();
    enum rlock_err rc = rlock_acquire(f->c, res, NULL, CALL_MS, &l);
    char msg[320];
    ck_assert_msg(rc != RLOCK_OK, "an acquire refused by Redis (%s) was granted", why);
    ck_assert_msg(rc == RLOCK_ERR_UNAVAILABLE || rc == RLOCK_ERR_INTERNAL,
                  "an acquire refused by Redis (%s) answered %s", why,
                  h_rlock_err(f->c, rc, msg, sizeof msg));
    ck_assert_msg(h_now_ms() - t < 2000, "the refusal (%s) took %lld ms", why,
                  (long long)(h_now_ms() - t));
    ck_assert_ptr_null(l);
    ck_assert_int_eq(h_key_exists(f->r, key), 0);
}

START_TEST(test_acquire_refused)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    deny(f.r, "-eval -evalsha");
    expect_refused(&f, "denied", "NOPERM");
    deny(f.r, "+eval +evalsha");
    oom(f.r, 1);
    expect_refused(&f, "full", "OOM");
    oom(f.r, 0);
    struct rlock_lock *l = h_acquire_ok(f.c, "denied", NULL);
    h_release_gone(&f, f.c, l);
    rlock_lock_free(l);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_tombstone_refused)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    char key[256];
    h_lock_key(&f.e, "vanished", key, sizeof key);
    struct rlock_acquire_opts o = {.ttl_ms = 3000};
    struct rlock_lock *l = h_acquire_ok(f.c, "vanished", &o);
    struct rlock_client *other = h_client_or_fail(&f.e, NULL);

    /* The key vanishes; the tombstone that should replace it (acquire.lua: SET) is refused. */
    deny(f.r, "-set");
    int64_t promised = rlock_lock_valid_until(l);
    ck_assert_int_eq(h_redis_int(f.r, "DEL %s", key), 1);
    int64_t until = h_now_ms() + 5000;
    while (rlock_lock_state(l) == RLOCK_HELD || rlock_lock_state(l) == RLOCK_UNCERTAIN) {
        ck_assert_msg(h_now_ms() < until, "the vanished key was not noticed");
        promised = rlock_lock_valid_until(l) > promised ? rlock_lock_valid_until(l) : promised;
        h_sleep_ms(5);
    }
    ck_assert_int_eq(rlock_lock_lost_reason(l), RLOCK_LOST_MISSING);
    h_sleep_ms(300); /* a few tombstone attempts refused */
    deny(f.r, "+set");

    /* Nobody gets the lock before the validity its holder was promised has ended. */
    struct rlock_lock *got = NULL;
    until = h_now_ms() + 10000;
    for (;;) {
        enum rlock_err rc = rlock_acquire(other, "vanished", NULL, CALL_MS, &got);
        if (rc == RLOCK_OK)
            break;
        ck_assert_msg(h_now_ms() < until, "the lock never became free again");
        h_sleep_ms(20);
    }
    int64_t granted = h_now_ms();
    printf("tombstone_refused: granted %lld ms after the promised validity ended\n",
           (long long)(granted - promised));
    ck_assert_msg(granted >= promised,
                  "the lock was granted %lld ms before the validity its lost holder was promised "
                  "ended (the tombstone Redis refused at first was given up?)",
                  (long long)(promised - granted));
    h_assert_ok(other, rlock_release(got, CALL_MS));
    rlock_lock_free(got);
    rlock_lock_free(l);
    rlock_close(other);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_notices_refused)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct h_env peer;
    ck_assert_int_eq(h_env_start_peer(&peer, &f.e, NULL), 0);
    struct rlock_client *pc = h_client_or_fail(&peer, NULL);
    struct rlock_lock *held = NULL;
    struct rlock_acquire_opts ho = {.ttl_ms = LONG_TTL_MS};
    h_assert_ok(pc, rlock_acquire(pc, "notice", &ho, CALL_MS, &held));
    struct h_waiter w;
    h_waiter_start(&w, &f.e, "notice", LONG_TTL_MS, 40000);
    ck_assert_int_eq(h_wait_stats(&f.e, 0, 1, 5000, NULL), 0);
    h_sleep_ms(300); /* the waiter sleeps on the holder's ttl, subscribed to its channel */

    deny(f.r, "resetchannels");
    ck_assert_int_eq(h_redis_ok(f.r, "CLIENT KILL TYPE pubsub"), 0);
    h_sleep_ms(500); /* rlockd's pub/sub connection is refused its channels */
    h_assert_ok(pc, rlock_release(held, CALL_MS)); /* its notice cannot be published */
    h_sleep_ms(500);
    ck_assert_msg(w.granted_ms == 0, "granted while no notice could be sent or heard");
    int64_t allowed = h_now_ms();
    deny(f.r, "allchannels");
    ck_assert_int_eq(h_waiter_join(&w), RLOCK_OK);
    printf("notices_refused: granted %lld ms after the channels were allowed again\n",
           (long long)(w.granted_ms - allowed));
    ck_assert_msg(w.granted_ms - allowed < 10000,
                  "the waiter slept %lld ms after the channels were allowed again (ttl %u ms): "
                  "no resubscription, or its confirmation woke nobody",
                  (long long)(w.granted_ms - allowed), LONG_TTL_MS);
    h_waiter_close(&w);
    rlock_lock_free(held);
    rlock_close(pc);
    h_env_stop(&peer);
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_renew_refused,     test_release_refused,  test_lock_delay_refused,
                            test_session_end_refused, test_acquire_refused, test_tombstone_refused,
                            test_notices_refused};
    return h_run_tests("redis_errors", 120, tests, H_LEN(tests));
}
