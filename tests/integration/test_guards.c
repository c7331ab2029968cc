/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_guards.c — the checks that keep rlockd from touching keys that are
 * not its own, and from forgetting keys that are.
 *
 *   foreign_*   another application SETs a held lock's key to its own token
 *               (the lease was replaced behind the daemon's back). Every way
 *               the daemon deletes a key by token must leave that key alone:
 *               Release, a clean session end (Goodbye), an unclean one with
 *               and without lock_delay (tombstone.lua / release.lua), and the
 *               cleanup after a loss (EXPIRED, MAX_HOLD).
 *   stolen / missing
 *               a renew (watchdog on) or an Extend that finds another token
 *               reports LockLost(STOLEN) and leaves the key; one that finds no
 *               key reports MISSING and does not recreate it.
 *   cleanup_*   a Release Redis never answers, and never runs: Redis pauses
 *               its clients (CLIENT PAUSE), so the daemon's command times out
 *               and Redis drops it with the connection the daemon resets. The
 *               key must still be deleted, by the cleanup list's retries, long
 *               before its 30 s lease — also when the first retries fail too
 *               (the scripts are denied by ACL, so Redis answers NOPERM). The
 *               daemon's log line "cleanup: deleted ..." proves who deleted it.
 *               (A SIGSTOP would not do: Redis runs the stalled Release from
 *               its socket buffer when it resumes, retries or not.)
 */
#include "harness.h"
#include "harness_peer.h"

#include <stdio.h>
#include <string.h>

#define FOREIGN "foreign-application-token"
#define TTL_MS 30000u
#define SETTLE_MS 600      /* time for a release or tombstone to reach Redis */
#define CLEANUP_SETTLE 2500 /* cleanup.h's 2 s settle rule, and some */

/* Another application takes key over: its token, its own expiry. */
static void set_foreign(redisContext *r, const char *key)
{
    redisReply *rep = redisCommand(r, "SET %s %s PX 60000", key, FOREIGN);
    ck_assert_msg(rep != NULL && rep->type == REDIS_REPLY_STATUS, "SET %s failed", key);
    freeReplyObject(rep);
}

static void expect_foreign(redisContext *r, const char *key, const char *after)
{
    char val[256] = "";
    int got = h_get(r, key, val, sizeof val);
    printf("guards: FIGURE %s: the key holds \"%s\"\n", after, got == 1 ? val : "(nothing)");
    ck_assert_msg(got == 1 && strcmp(val, FOREIGN) == 0,
                  "%s: the other application's key was %s", after,
                  got == 1 ? "overwritten" : "deleted");
}

START_TEST(test_guards_foreign_release)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    char key[256];
    h_lock_key(&f.e, "foreign/release", key, sizeof key);
    struct rlock_acquire_opts o = {.ttl_ms = TTL_MS};
    struct rlock_lock *l = h_acquire_ok(f.c, "foreign/release", &o);
    set_foreign(f.r, key);
    h_assert_ok(f.c, rlock_release(l, 0));
    ck_assert_int_eq(rlock_lock_state(l), RLOCK_RELEASED);
    expect_foreign(f.r, key, "after the holder's Release");
    rlock_lock_free(l);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_guards_foreign_session_end)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    static const struct {
        const char *resource;
        uint32_t lock_delay_ms;
        int goodbye;
        const char *what;
    } cases[] = {
        {"foreign/goodbye", 0, 1, "after a clean session end (Goodbye)"},
        {"foreign/reset", 0, 0, "after an unclean session end"},
        {"foreign/tombstone", 1000, 0, "after an unclean session end with lock_delay"},
    };
    for (size_t i = 0; i < H_LEN(cases); i++) {
        char key[256];
        h_lock_key(&f.e, cases[i].resource, key, sizeof key);
        struct h_peer p;
        h_peer_open(&p, &f.e, "holder");
        struct h_acq a = {.resource = cases[i].resource, .ttl_ms = TTL_MS,
                          .lock_delay_ms = cases[i].lock_delay_ms};
        struct h_grant g;
        h_peer_acquire_ok(&p, &a, &g, "acquire");
        set_foreign(f.r, key);
        if (cases[i].goodbye) {
            Rlock__V1__Goodbye bye = RLOCK__V1__GOODBYE__INIT;
            uint64_t id = h_peer_send(&p, RLOCK__V1__REQUEST__BODY_GOODBYE, &bye);
            h_peer_expect_status(&p, id, H_ST(OK), "Goodbye");
            h_peer_expect_eof(&p, "after Goodbye");
        }
        h_raw_close(&p.raw);
        h_sleep_ms(SETTLE_MS);
        expect_foreign(f.r, key, cases[i].what);
    }
    ck_assert_int_eq(h_log_count(&f.e, "releasing 1 lock"), (int)H_LEN(cases));
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_guards_foreign_after_loss)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    char expired[256], maxhold[256];
    h_lock_key(&f.e, "foreign/expired", expired, sizeof expired);
    h_lock_key(&f.e, "foreign/max-hold", maxhold, sizeof maxhold);
    /* EXPIRED: a watchdog-off lease runs out; its key is deleted by token at its end. */
    struct rlock_acquire_opts eo = {.ttl_ms = 1000, .watchdog_off = 1};
    struct rlock_lock *le = h_acquire_ok(f.c, "foreign/expired", &eo);
    set_foreign(f.r, expired);
    /* MAX_HOLD: the key is taken over right after the loss, before its validity ends. */
    struct rlock_acquire_opts mo = {.ttl_ms = 3000, .max_hold_ms = 500};
    struct rlock_lock *lm = h_acquire_ok(f.c, "foreign/max-hold", &mo);
    int64_t deadline = h_now_ms() + 3000;
    while (rlock_lock_state(lm) != RLOCK_LOST && h_now_ms() < deadline)
        h_sleep_ms(2);
    ck_assert_int_eq(rlock_lock_lost_reason(lm), RLOCK_LOST_MAX_HOLD);
    set_foreign(f.r, maxhold);
    /* Both cleanups are due within 3 s; they end 2 s after Redis first answers. */
    h_sleep_ms(3000 + CLEANUP_SETTLE);
    ck_assert_int_eq(rlock_lock_lost_reason(le), RLOCK_LOST_EXPIRED);
    expect_foreign(f.r, expired, "after the EXPIRED loss and its cleanup");
    expect_foreign(f.r, maxhold, "after the MAX_HOLD loss and its cleanup");
    ck_assert_int_eq(atomic_load(&f.lost.count), 2);
    rlock_lock_free(le);
    rlock_lock_free(lm);
    h_fixture_stop(&f);
}
END_TEST

/* --- STOLEN and MISSING ----------------------------------------------------------------- */

#define WD_TTL_MS 1000u
/* ttl/3 + the 50 ms tick + a renew round trip (at most command_timeout), generously. */
#define NOTICE_WITHIN_MS 1500

static int64_t wait_lost(struct h_fixture *f, int count)
{
    int64_t t = h_now_ms(), deadline = t + NOTICE_WITHIN_MS;
    while (atomic_load(&f->lost.count) < count && h_now_ms() < deadline)
        h_sleep_ms(2);
    return h_now_ms() - t;
}

START_TEST(test_guards_stolen_missing_renew)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    char stolen[256], missing[256];
    h_lock_key(&f.e, "renew/stolen", stolen, sizeof stolen);
    h_lock_key(&f.e, "renew/missing", missing, sizeof missing);
    struct rlock_acquire_opts o = {.ttl_ms = WD_TTL_MS};

    struct rlock_lock *ls = h_acquire_ok(f.c, "renew/stolen", &o);
    set_foreign(f.r, stolen);
    int64_t took = wait_lost(&f, 1);
    printf("guards: FIGURE key overwritten: LockLost(%s) after %lld ms (ttl %u)\n",
           rlock_lost_reason_str((enum rlock_lost_reason)atomic_load(&f.lost.reason)),
           (long long)took, WD_TTL_MS);
    ck_assert_int_eq(atomic_load(&f.lost.count), 1);
    ck_assert_int_eq(atomic_load(&f.lost.reason), RLOCK_LOST_STOLEN);
    ck_assert_int_eq(rlock_lock_lost_reason(ls), RLOCK_LOST_STOLEN);
    h_sleep_ms(2 * WD_TTL_MS);
    expect_foreign(f.r, stolen, "after STOLEN");

    struct rlock_lock *lm = h_acquire_ok(f.c, "renew/missing", &o);
    ck_assert_int_eq(h_redis_int(f.r, "DEL %s", missing), 1);
    took = wait_lost(&f, 2);
    printf("guards: FIGURE key deleted: LockLost(%s) after %lld ms (ttl %u)\n",
           rlock_lost_reason_str((enum rlock_lost_reason)atomic_load(&f.lost.reason)),
           (long long)took, WD_TTL_MS);
    ck_assert_int_eq(atomic_load(&f.lost.count), 2);
    ck_assert_int_eq(atomic_load(&f.lost.reason), RLOCK_LOST_MISSING);
    h_sleep_ms(2 * WD_TTL_MS);
    ck_assert_msg(h_key_exists(f.r, missing) == 0, "a renew recreated the deleted key");
    rlock_lock_free(ls);
    rlock_lock_free(lm);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_guards_stolen_missing_extend)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct h_peer p;
    h_peer_open(&p, &f.e, "holder");
    char key[256];
    h_lock_key(&f.e, "extend/stolen", key, sizeof key);
    struct h_acq a = {.resource = "extend/stolen", .ttl_ms = TTL_MS, .watchdog_off = 1};
    struct h_grant g;
    h_peer_acquire_ok(&p, &a, &g, "acquire");
    set_foreign(f.r, key);
    uint64_t id = h_peer_extend(&p, a.resource, TTL_MS, "");
    h_peer_expect_lost(&p, a.resource, RLOCK__V1__LOST_REASON__LOST_STOLEN, "Extend of a taken key");
    h_peer_expect_status(&p, id, H_ST(NOT_HELD), "Extend of a taken key");
    expect_foreign(f.r, key, "after the Extend found it taken");

    h_lock_key(&f.e, "extend/missing", key, sizeof key);
    a.resource = "extend/missing";
    h_peer_acquire_ok(&p, &a, &g, "acquire");
    ck_assert_int_eq(h_redis_int(f.r, "DEL %s", key), 1);
    id = h_peer_extend(&p, a.resource, TTL_MS, "");
    h_peer_expect_lost(&p, a.resource, RLOCK__V1__LOST_REASON__LOST_MISSING,
                       "Extend of a deleted key");
    h_peer_expect_status(&p, id, H_ST(NOT_HELD), "Extend of a deleted key");
    /* At most a tombstone holds it until the holder's promise is over: never our token. */
    char val[128] = "";
    int got = h_get(f.r, key, val, sizeof val);
    ck_assert_msg(got == 0 || (got == 1 && strncmp(val, "tombstone:", 10) == 0),
                  "the Extend recreated the deleted key (value %s)", val);
    h_peer_expect_stats(&p, 0, 0, "after both losses");
    h_raw_close(&p.raw);
    h_fixture_stop(&f);
}
END_TEST

/*
 * Redis loses a held key (a restart without persistence, FLUSHALL, eviction;
 * here a DEL). The next renew finds it MISSING and the holder is told, but it
 * was promised the lock until its valid-until, and a notice can be late:
 * from the loss on, until that promise ends, neither a waiter of this daemon
 * nor an application using Redis directly may have the lock. (Between the
 * DEL and the renew that notices it, anyone may take the free key: only
 * fences protect against Redis losing data.)
 */
#define MISSING_TTL_MS 3000u
#define MISSING_RES "missing/waited"

START_TEST(test_guards_missing_holds_off_others)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rlock_acquire_opts o = {.ttl_ms = MISSING_TTL_MS};
    struct rlock_lock *l = h_acquire_ok(f.c, MISSING_RES, &o);
    int64_t promised = rlock_lock_valid_until(l);
    struct h_waiter w;
    h_waiter_start(&w, &f.e, MISSING_RES, 0, 20000);
    char key[256];
    h_lock_key(&f.e, MISSING_RES, key, sizeof key);
    h_sleep_ms(100); /* the waiter is queued and has tried */
    ck_assert_int_eq(h_redis_int(f.r, "DEL %s", key), 1);

    int64_t deadline = h_now_ms() + MISSING_TTL_MS;
    while (atomic_load(&f.lost.count) == 0 && h_now_ms() < deadline)
        h_sleep_ms(1);
    ck_assert_int_eq(atomic_load(&f.lost.count), 1);
    ck_assert_int_eq(atomic_load(&f.lost.reason), RLOCK_LOST_MISSING);
    int64_t told = h_now_ms();
    h_sleep_ms(20); /* the tombstone went out before the LockLost's write */
    redisReply *rep = redisCommand(f.r, "SET %s app NX PX 100", key);
    ck_assert_ptr_nonnull(rep);
    int app_won = rep->type == REDIS_REPLY_STATUS;
    freeReplyObject(rep);
    long long pttl = h_pttl(f.r, key);

    ck_assert_int_eq(h_waiter_join(&w), RLOCK_OK);
    printf("guards: FIGURE key deleted under a holder promised until +%lld ms: told at +%lld "
           "ms, tombstone PTTL %lld ms, waiter granted at +%lld ms\n",
           (long long)(promised - w.start_ms), (long long)(told - w.start_ms), pttl,
           (long long)(w.granted_ms - w.start_ms));
    ck_assert_msg(!app_won, "an application took the key after the loss was noticed, while "
                  "the holder was still promised %lld ms", (long long)(promised - told));
    ck_assert_msg(w.granted_ms >= promised,
                  "the waiter got the lock %lld ms before the holder's promised validity ended",
                  (long long)(promised - w.granted_ms));
    h_waiter_close(&w);
    rlock_lock_free(l);
    h_fixture_stop(&f);
}
END_TEST

/*
 * Redis loses a held key and another client's try finds it free before any
 * renew noticed: Redis grants it. The old holder, promised the lock until its
 * valid-until, is told MISSING at once; the try is answered as if the lock
 * were still held (NOT_ACQUIRED), and nobody gets the lock before that
 * promise is over.
 */
START_TEST(test_guards_lost_key_found_free)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rlock_acquire_opts o = {.ttl_ms = MISSING_TTL_MS};
    struct rlock_lock *l = h_acquire_ok(f.c, "missing/tried", &o);
    int64_t promised = rlock_lock_valid_until(l);
    char key[256];
    h_lock_key(&f.e, "missing/tried", key, sizeof key);
    struct rlock_client *b = h_client_or_fail(&f.e, NULL);
    ck_assert_int_eq(h_redis_int(f.r, "DEL %s", key), 1);
    struct rlock_lock *lb = NULL;
    /* The try asks for a long lease: its grant, if Redis gives it, must become a
     * tombstone that lasts only until the old holder's promise ends, not 30 s. */
    struct rlock_acquire_opts long_try = {.ttl_ms = 30000};
    enum rlock_err rc = rlock_acquire(b, "missing/tried", &long_try, 10000, &lb);
    int64_t tried = h_now_ms();
    ck_assert_msg(rc == RLOCK_ERR_NOT_ACQUIRED || tried >= promised,
                  "a try was granted %lld ms before the old holder's promised validity ended",
                  (long long)(promised - tried));
    rlock_lock_free(lb);
    lb = NULL;
    int64_t deadline = h_now_ms() + 2000;
    while ((rlock_lock_state(l) == RLOCK_HELD || rlock_lock_state(l) == RLOCK_UNCERTAIN) &&
           h_now_ms() < deadline)
        h_sleep_ms(2);
    ck_assert_int_eq(rlock_lock_lost_reason(l), RLOCK_LOST_MISSING);

    o.wait_ms = 20000;
    h_assert_ok(b, rlock_acquire(b, "missing/tried", &o, 30000, &lb));
    int64_t granted = h_now_ms();
    printf("guards: FIGURE key deleted, another client's try found it free: %s; its waiting "
           "acquire granted %lld ms after the old holder's promise ended\n",
           rlock_strerror(rc), (long long)(granted - promised));
    ck_assert_msg(granted >= promised, "the new holder was answered %lld ms before the old "
                  "holder's promised validity ended", (long long)(promised - granted));
    ck_assert_msg(rc != RLOCK_ERR_NOT_ACQUIRED || granted - promised < 3000,
                  "the waiting acquire was granted %lld ms after the old holder's promise "
                  "ended: the try's grant kept the key for its own lease",
                  (long long)(granted - promised));
    h_assert_key_token(f.r, key, rlock_lock_token(lb));
    h_assert_ok(b, rlock_release(lb, 5000));
    rlock_lock_free(lb);
    rlock_close(b);
    rlock_lock_free(l);
    h_fixture_stop(&f);
}
END_TEST

/*
 * Redis loses a held key, and the holder's renew (here its Extend) and
 * another client's try go to Redis together, the renew first: the renew's
 * answer (MISSING) ends the lease, and the try's answer (granted: the key
 * was free) comes next, when the daemon no longer has a lease there to
 * compare with. The grant must still become the tombstone the old holder's
 * promise needs: the try answered NOT_ACQUIRED, the key holding a tombstone.
 * Redis is stopped while both are sent so that they meet in one batch.
 * (Found by the chaos test: a waiter granted 20 µs after LockLost(MISSING),
 * its holder still promised 1125 ms.)
 */
#define INFLIGHT_RES "missing/inflight"
#define INFLIGHT_INI "[redis]\ncommand_timeout = 2s\n[limits]\nmin_ttl = 6s\n"

START_TEST(test_guards_lost_key_answers_cross)
{
    struct h_fixture f;
    h_fixture_start_env(&f, INFLIGHT_INI);
    struct h_peer holder, other;
    h_peer_open(&holder, &f.e, "holder");
    h_peer_open(&other, &f.e, "other");
    char key[256];
    h_lock_key(&f.e, INFLIGHT_RES, key, sizeof key);
    struct h_acq a = {.resource = INFLIGHT_RES, .ttl_ms = TTL_MS, .watchdog_off = 1};
    struct h_grant g;
    h_peer_acquire_ok(&holder, &a, &g, "acquire");
    int64_t promised = h_now_ms() + g.valid_ms;
    ck_assert_int_eq(h_redis_int(f.r, "DEL %s", key), 1);

    h_sigstop(f.e.redis_pid, "redis-server");
    uint64_t ext = h_peer_extend(&holder, INFLIGHT_RES, TTL_MS, "");
    h_peer_ping(&holder, "the Extend was handled"); /* sent to Redis, or queued to be */
    struct h_acq b = {.resource = INFLIGHT_RES, .ttl_ms = TTL_MS};
    uint64_t try_id = h_peer_acquire(&other, &b);
    h_peer_ping(&other, "the try was handled");
    h_sleep_ms(50); /* both written to the stopped Redis's socket */
    h_sigcont(f.e.redis_pid, "redis-server");

    h_peer_expect_lost(&holder, INFLIGHT_RES, RLOCK__V1__LOST_REASON__LOST_MISSING,
                       "Extend of a deleted key");
    h_peer_expect_status(&holder, ext, H_ST(NOT_HELD), "Extend of a deleted key");
    h_peer_expect_status(&other, try_id, H_ST(NOT_ACQUIRED),
                         "a try that found the lost key free, answered after the loss");
    char val[128] = "";
    int64_t until = h_now_ms() + 5000;
    while ((h_get(f.r, key, val, sizeof val) != 1 || strncmp(val, "tombstone:", 10) != 0) &&
           h_now_ms() < until)
        h_sleep_ms(2);
    long long pttl = h_pttl(f.r, key);
    printf("guards: FIGURE renew and try crossing over a lost key: the key holds \"%s\", "
           "PTTL %lld ms, the old holder promised %lld ms more\n",
           val, pttl, (long long)(promised - h_now_ms()));
    ck_assert_msg(strncmp(val, "tombstone:", 10) == 0, "the key holds \"%s\", not a tombstone",
                  val);
    ck_assert_msg(pttl > 0 && h_now_ms() + pttl >= promised - 50,
                  "the tombstone ends %lld ms before the old holder's promise",
                  (long long)(promised - h_now_ms() - pttl));
    h_raw_close(&holder.raw);
    h_raw_close(&other.raw);
    h_fixture_stop(&f);
}
END_TEST

/*
 * The tombstone that replaces a grant over a lost key lasts at least as long
 * as the promise it keeps: rlockd logs how long the old lease was still valid,
 * and the key's PTTL, read right after and corrected for the time between,
 * must cover it (Redis's clock may run a little fast: the tombstone asks for
 * the drift allowance on top, 302 ms of a 30 s lease, never less).
 */
START_TEST(test_guards_tombstone_covers_promise)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rlock_acquire_opts o = {.ttl_ms = 30000};
    struct rlock_lock *l = h_acquire_ok(f.c, "missing/covered", &o);
    char key[256], path[320];
    h_lock_key(&f.e, "missing/covered", key, sizeof key);
    struct rlock_client *b = h_client_or_fail(&f.e, NULL);
    ck_assert_int_eq(h_redis_int(f.r, "DEL %s", key), 1);
    struct rlock_lock *lb = NULL;
    ck_assert_int_eq(rlock_acquire(b, "missing/covered", &o, 10000, &lb), RLOCK_ERR_NOT_ACQUIRED);
    int64_t logged_wall = 0;
    ck_assert_int_eq(h_log_wait(&f.e, "kept as a tombstone until then", 5000, &logged_wall), 0);
    char *log = h_read_file(h_env_path(&f.e, "rlockd.log", path, sizeof path));
    const char *at = log != NULL ? strstr(log, "still valid for ") : NULL;
    ck_assert_ptr_nonnull(at);
    long long left = atoll(at + strlen("still valid for "));
    free(log);
    int64_t until = h_now_ms() + 5000;
    char value[128];
    while ((h_get(f.r, key, value, sizeof value) != 1 || strncmp(value, "tombstone:", 10) != 0) &&
           h_now_ms() < until)
        h_sleep_ms(1);
    long long pttl = h_pttl(f.r, key);
    int64_t read_wall = h_wall_ms();
    long long covered = pttl + (read_wall - logged_wall);
    printf("guards: FIGURE a tombstone covers %lld ms of a promise of %lld ms\n", covered, left);
    ck_assert_msg(covered >= left,
                  "the tombstone expires %lld ms before the old holder's promise ends",
                  left - covered);
    rlock_lock_free(l);
    rlock_close(b);
    h_fixture_stop(&f);
}
END_TEST

/* --- the cleanup list ------------------------------------------------------------------ */

#define PAUSE_MS 1500
#define DENIED_MS 2000
#define GONE_WITHIN_MS 10000 /* a third of the lease */
#define RES_CLEANUP "cleanup/release"

/*
 * Take RES_CLEANUP (30 s, watchdog off: no renew traffic) and release it while
 * Redis is paused: Redis never runs the Release (the daemon drops the
 * connection). Returns when the Release was sent; *l gets the lock.
 */
static int64_t release_during_pause(struct h_fixture *f, char *key, struct rlock_lock **l)
{
    h_fixture_start(f, NULL);
    h_lock_key(&f->e, RES_CLEANUP, key, 256);
    struct rlock_acquire_opts o = {.ttl_ms = TTL_MS, .watchdog_off = 1};
    *l = h_acquire_ok(f->c, RES_CLEANUP, &o);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "CLIENT PAUSE %d ALL", PAUSE_MS);
    ck_assert_int_eq(h_redis_ok(f->r, cmd), 0);
    int64_t t = h_now_ms();
    h_assert_ok(f->c, rlock_release(*l, 10000));
    printf("guards: FIGURE the Release with Redis paused was answered after %lld ms\n",
           (long long)(h_now_ms() - t));
    ck_assert_int_eq(rlock_lock_state(*l), RLOCK_RELEASED);
    return t;
}

static void expect_cleaned(struct h_fixture *f, const char *key, int64_t t, const char *what)
{
    int64_t gone = h_wait_key_gone(f->r, key, GONE_WITHIN_MS, &f->e);
    int64_t after = h_now_ms() - t;
    /* The daemon logs the delete once Redis's answer is in: after the key went. */
    int by_cleanup = gone >= 0 && h_log_wait(&f->e, "cleanup: deleted", 5000, NULL) == 0;
    printf("guards: FIGURE %s: the key was gone %lld ms after the Release (lease %u ms); "
           "deleted by the cleanup list: %s\n",
           what, (long long)after, TTL_MS, by_cleanup ? "yes" : "no");
    ck_assert_msg(gone >= 0, "%s: the key is still there %lld ms after the Release", what,
                  (long long)after);
    ck_assert_msg(by_cleanup, "%s: the key went, but not by the cleanup list", what);
}

START_TEST(test_guards_cleanup_release_timeout)
{
    struct h_fixture f;
    char key[256];
    struct rlock_lock *l;
    int64_t t = release_during_pause(&f, key, &l);
    expect_cleaned(&f, key, t, "Release timed out");
    ck_assert_int_ge(h_log_count(&f.e, "release of " RES_CLEANUP " not confirmed"), 1);
    rlock_lock_free(l);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_guards_cleanup_retry_fails)
{
    struct h_fixture f;
    char key[256];
    struct rlock_lock *l;
    int64_t t = release_during_pause(&f, key, &l);
    /* Runs when the pause ends, before the daemon has its connection back: retries fail. */
    ck_assert_int_eq(h_redis_ok(f.r, "ACL SETUSER default -eval -evalsha"), 0);
    h_sleep_ms(DENIED_MS);
    /* Only the cleanup list sends scripts here: every NOPERM is one of its retries. */
    long long denied = h_redis_info_num(f.r, "errorstats", "errorstat_NOPERM:count=");
    ck_assert_int_eq(h_key_exists(f.r, key), 1);
    ck_assert_int_eq(h_redis_ok(f.r, "ACL SETUSER default +eval +evalsha"), 0);
    printf("guards: FIGURE %lld cleanup retries refused (NOPERM) in %d ms\n", denied, DENIED_MS);
    expect_cleaned(&f, key, t, "Release timed out, then retries refused");
    ck_assert_msg(denied >= 2, "only %lld retries failed while the scripts were denied: the "
                  "scenario needs a retry after a failed retry", denied);
    rlock_lock_free(l);
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {
        test_guards_foreign_release,         test_guards_foreign_session_end,
        test_guards_foreign_after_loss,      test_guards_stolen_missing_renew,
        test_guards_stolen_missing_extend,   test_guards_cleanup_release_timeout,
        test_guards_cleanup_retry_fails,     test_guards_missing_holds_off_others,
        test_guards_lost_key_found_free,     test_guards_tombstone_covers_promise,
        test_guards_lost_key_answers_cross,
    };
    return h_run_tests("guards", 60, tests, H_LEN(tests));
}
