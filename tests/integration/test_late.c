/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_late.c — late answers, through the fault-injecting proxy
 * (harness_proxy.h) between rlockd and Redis, or between a client and
 * rlockd. No fake clock: the replies really are late.
 *
 *   validity_from_send   Redis's answers reach rlockd 1.5 s late: the validity
 *                        rlockd vouches for (acquire, watchdog renewals,
 *                        Extend; with and without watchdog) never outlasts the
 *                        key, which expires ttl after Redis ran the command,
 *                        not ttl after rlockd read the answer.
 *   client_from_send     rlockd's answers reach the client 1.5 s late: the
 *                        client counts a grant's and a keepalive's validity
 *                        from when it sent the request.
 *   grant_read_late      the answer to an acquire waits in the socket of a
 *                        stopped rlockd until after the key it set has expired
 *                        and someone else took it: no lock is handed out
 *                        (UNAVAILABLE), the other holder's key is untouched.
 *   late_command_settled an acquire that rlockd gave up on (its connection
 *                        timed out and was dropped) reaches Redis a second
 *                        later and sets the key: the cleanup list, which keeps
 *                        deleting by token until Redis has confirmed it for a
 *                        settle time, removes it long before its ttl.
 *   pubsub_probe_missed  the release-notice connection stops answering (its
 *                        probe is not answered): rlockd resets it, resubscribes
 *                        on a new one, and a release through another rlockd
 *                        wakes a waiter at once again (and a connection that
 *                        answers its probes is never reset).
 *   notice_during_try    a release notice that comes while the head's try is in
 *                        Redis, its busy answer late: the head tries again.
 *   silent_session_bound the daemon silent under a client with a short session
 *                        timeout: its long lease stops being vouched for when
 *                        the session would have ended.
 *   cleanup_through_outage a release that never ran, then Redis unreachable for
 *                        a while: the delete by token is retried afterwards.
 *   cleanup_wakes_local_waiter with release notices off, the cleanup list's
 *                        delete of a release that never ran wakes the local
 *                        waiter asleep on the key's ttl.
 *   stalled_past_key_life Redis stopped (SIGSTOP) for longer than the longest
 *                        life of a key an acquire would set, with that acquire
 *                        in its socket: when Redis runs it at last, the delete
 *                        by token, retried past that life (a grace for
 *                        commands stuck in a stalled Redis), removes the key
 *                        long before its ttl.
 *   daemon_stalled_past_lease rlockd itself stopped (SIGSTOP) for longer than a
 *                        lease, and the key taken meanwhile by the copied
 *                        `SET NX` code: the client stops vouching for the lock
 *                        by its own clock; the woken daemon loses it (EXPIRED)
 *                        rather than renew it, says how late it noticed (the
 *                        log line, a warning, rlockd_lease_timers_late_total)
 *                        and leaves the other holder's key alone.
 */
#include "harness.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DELAY_MS 1500
#define TTL_MS 9000u
#define CALL_MS 20000u
/* command_timeout above the delay; min_ttl at least 3 command timeouts (rlockd's rule). */
#define LATE_INI "[redis]\ncommand_timeout = 2s\n[limits]\nmin_ttl = 6s\n"

/*
 * The instant (h_now_ms) by which key expires at the latest, read from its
 * PTTL: Redis measured it somewhere between before and after.
 */
static int64_t key_expiry_bound(redisContext *r, const char *key)
{
    int64_t before = h_now_ms();
    long long pttl = h_pttl(r, key);
    int64_t after = h_now_ms();
    ck_assert_msg(pttl > 0, "%s has no ttl left (%lld)", key, pttl);
    (void)before;
    return after + pttl + 1;
}

/* Assert that l's validity ends no later than its key does. */
static void assert_within_key(struct h_fixture *f, struct rlock_lock *l, const char *when)
{
    char key[256];
    h_lock_key(&f->e, rlock_lock_resource(l), key, sizeof key);
    int64_t valid = rlock_lock_valid_until(l);
    int64_t expiry = key_expiry_bound(f->r, key);
    ck_assert_msg(valid != 0, "%s: %s is not held", when, rlock_lock_resource(l));
    ck_assert_msg(valid <= expiry,
                  "%s: %s vouched for %lld ms past the key's expiry (answers %d ms late: "
                  "validity counted from the answer, not the send?)",
                  when, rlock_lock_resource(l), (long long)(valid - expiry), DELAY_MS);
}

/* Wait (at most 5 s, polling every 5 ms) until key exists; what names the command that sets it. */
static void key_appears(redisContext *r, const char *key, const char *what)
{
    for (int64_t until = h_now_ms() + 5000; h_key_exists(r, key) != 1; h_sleep_ms(5))
        ck_assert_msg(h_now_ms() < until, "%s", what);
}

START_TEST(test_validity_from_send)
{
    struct h_fixture f;
    h_fixture_start_proxied(&f, LATE_INI);

    h_proxy_delay(f.e.proxy, H_PROXY_COMMANDS, H_PROXY_DOWN, DELAY_MS);
    struct rlock_acquire_opts wd = {.ttl_ms = TTL_MS};
    struct rlock_acquire_opts plain = {.ttl_ms = TTL_MS, .watchdog_off = 1};
    struct rlock_lock *a = NULL, *b = NULL;
    int64_t t0 = h_now_ms();
    h_assert_ok(f.c, rlock_acquire(f.c, "renewed", &wd, CALL_MS, &a));
    ck_assert_msg(h_now_ms() - t0 >= DELAY_MS - 50, "the answer was not late");
    assert_within_key(&f, a, "after the grant");
    h_assert_ok(f.c, rlock_acquire(f.c, "plain", &plain, CALL_MS, &b));
    assert_within_key(&f, b, "after the grant (watchdog off)");
    h_assert_ok(f.c, rlock_extend(b, TTL_MS, CALL_MS));
    assert_within_key(&f, b, "after an Extend");

    /* Renewals every ttl/3, each answered late: keepalives carry the watchdog's validity. */
    int64_t until = h_now_ms() + 2 * TTL_MS / 3 + 2 * DELAY_MS;
    while (h_now_ms() < until) {
        h_assert_ok(f.c, rlock_ping(f.c, CALL_MS, NULL));
        assert_within_key(&f, a, "while renewed");
        h_sleep_ms(200);
    }
    ck_assert_int_eq(rlock_lock_state(a), RLOCK_HELD);
    h_assert_ok(f.c, rlock_extend(a, TTL_MS, CALL_MS));
    assert_within_key(&f, a, "after an Extend (watchdog)");

    h_proxy_release(f.e.proxy, H_PROXY_ALL, H_PROXY_DOWN);
    h_release_gone(&f, f.c, a);
    rlock_release(b, CALL_MS); /* it may have run out meanwhile */
    rlock_lock_free(a);
    rlock_lock_free(b);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_client_from_send)
{
    struct h_fixture f;
    h_fixture_start_env(&f, LATE_INI);
    char sock[320], addr[340];
    h_env_path(&f.e, "client-proxy.sock", sock, sizeof sock);
    snprintf(addr, sizeof addr, "unix:%s", sock);
    struct h_proxy *p = h_proxy_start(sock, f.e.rlockd_sock);
    ck_assert_ptr_nonnull(p);
    struct rlock_client *c = NULL;
    char err[256];
    ck_assert_int_eq(rlock_connect(addr, NULL, &c, err, sizeof err), RLOCK_OK);

    h_proxy_delay(p, H_PROXY_ALL, H_PROXY_DOWN, DELAY_MS);
    struct rlock_acquire_opts wd = {.ttl_ms = TTL_MS};
    struct rlock_acquire_opts plain = {.ttl_ms = TTL_MS, .watchdog_off = 1};
    struct rlock_lock *a = NULL, *b = NULL;
    h_assert_ok(c, rlock_acquire(c, "client-plain", &plain, CALL_MS, &b));
    assert_within_key(&f, b, "a grant answered late to the client");
    h_assert_ok(c, rlock_extend(b, TTL_MS, CALL_MS));
    assert_within_key(&f, b, "an Extend answered late to the client");
    h_assert_ok(c, rlock_acquire(c, "client-wd", &wd, CALL_MS, &a));
    assert_within_key(&f, a, "a grant answered late to the client (watchdog)");
    for (int i = 0; i < 4; i++) {
        h_assert_ok(c, rlock_ping(c, CALL_MS, NULL));
        assert_within_key(&f, a, "a keepalive answered late to the client");
    }

    h_proxy_release(p, H_PROXY_ALL, H_PROXY_DOWN);
    h_release_gone(&f, c, a);
    rlock_release(b, CALL_MS); /* it may have run out meanwhile */
    rlock_lock_free(a);
    rlock_lock_free(b);
    rlock_close(c);
    h_proxy_free(p);
    h_fixture_stop(&f);
}
END_TEST

struct late_acquire {
    struct rlock_client *c;
    const char *resource;
    uint32_t ttl_ms;
    enum rlock_err rc;
    struct rlock_lock *l;
    char msg[320];
};

static void *late_acquire_run(void *arg)
{
    struct late_acquire *a = arg;
    struct rlock_acquire_opts o = {.ttl_ms = a->ttl_ms, .watchdog_off = 1};
    a->rc = rlock_acquire(a->c, a->resource, &o, CALL_MS, &a->l);
    if (a->rc != RLOCK_OK)
        h_rlock_err(a->c, a->rc, a->msg, sizeof a->msg);
    return NULL;
}

START_TEST(test_grant_read_late)
{
    struct h_fixture f;
    h_fixture_start_proxied(&f, "[redis]\ncommand_timeout = 300ms\n");
    char key[256];
    h_lock_key(&f.e, "late-grant", key, sizeof key);

    h_proxy_hold(f.e.proxy, H_PROXY_COMMANDS, H_PROXY_DOWN);
    struct late_acquire a = {.c = f.c, .resource = "late-grant", .ttl_ms = 1000};
    struct h_thread th;
    h_thread_start(&th, late_acquire_run, &a);
    key_appears(f.r, key, "the acquire did not reach Redis");
    /* rlockd sleeps; the grant waits in its socket while the key expires and someone else
     * (the classic SET NX) takes the lock. */
    h_rlockd_sigstop(&f.e);
    h_proxy_release(f.e.proxy, H_PROXY_ALL, H_PROXY_DOWN);
    ck_assert_msg(h_wait_key_gone(f.r, key, 5000, NULL) >= 0, "the key did not expire");
    redisReply *rep = redisCommand(f.r, "SET %s someone-else NX PX 30000", key);
    ck_assert(rep != NULL && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    h_rlockd_sigcont(&f.e);
    h_thread_join(&th, h_now_ms() + 30000, "the acquire did not complete");
    ck_assert_msg(a.rc == RLOCK_ERR_UNAVAILABLE,
                  "a grant read after its lease ended gave %s (%s), not UNAVAILABLE: two holders",
                  rlock_strerror(a.rc), a.msg);
    ck_assert_ptr_null(a.l);
    h_assert_key_token(f.r, key, "someone-else");
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_late_command_settled)
{
    struct h_fixture f;
    h_fixture_start_proxied(&f, "[redis]\ncommand_timeout = 300ms\n");
    char key[256];
    h_lock_key(&f.e, "late-cmd", key, sizeof key);

    /* Commands on the connections open now are held; a reconnect gets a clean line. */
    h_proxy_hold(f.e.proxy, H_PROXY_OPEN_COMMANDS, H_PROXY_UP);
    struct rlock_acquire_opts o = {.ttl_ms = 60000};
    struct rlock_lock *l = NULL;
    enum rlock_err rc = rlock_acquire(f.c, "late-cmd", &o, CALL_MS, &l);
    ck_assert_msg(rc == RLOCK_ERR_UNAVAILABLE, "an acquire Redis never saw answered %s",
                  rlock_strerror(rc));
    ck_assert_int_eq(h_key_exists(f.r, key), 0);
    ck_assert_uint_gt(h_proxy_held(f.e.proxy, H_PROXY_ALL, H_PROXY_UP), 0);
    /* rlockd gave up on it and dropped its connection; a second later it runs anyway. */
    h_sleep_ms(1000);
    h_proxy_release(f.e.proxy, H_PROXY_ALL, H_PROXY_UP);
    key_appears(f.r, key, "the held acquire never ran");
    int64_t set_ms = h_now_ms();
    /*
     * Set by a command nobody waits for: the cleanup list keeps deleting by token until
     * Redis has confirmed it for the settle time (2 s), retrying 200, 400, 800, 1600 ms
     * apart meanwhile, so the key goes at the next retry, at most 1.6 s later (measured:
     * about 1.2 s); 3 s is room for a loaded machine, not for retries that wait 5 s or a
     * key left for its 60 s.
     */
    ck_assert_msg(h_wait_key_gone(f.r, key, 3000, &f.e) >= 0,
                  "a late acquire's key is still there 3 s after it ran (ttl 60 s)");
    printf("late_command_settled: the late key was deleted %lld ms after it was set\n",
           (long long)(h_now_ms() - set_ms));
    rlock_lock_free(l);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_pubsub_probe_missed)
{
    struct h_fixture f;
    /* A probe answered within command_timeout, sent every second (pubsub.c). */
    h_fixture_start_proxied(&f, "[redis]\ncommand_timeout = 300ms\n");
    struct h_env peer;
    ck_assert_int_eq(h_env_start_peer(&peer, &f.e, NULL), 0);
    struct rlock_client *pc = h_client_or_fail(&peer, NULL);

    int64_t until = h_now_ms() + 10000;
    while (h_proxy_count(f.e.proxy, H_PROXY_PUBSUB) < 1) {
        ck_assert_msg(h_now_ms() < until, "no pub/sub connection through the proxy");
        h_sleep_ms(20);
    }
    /* Healthy first: probes answered in time (every second) never reset the connection. */
    h_sleep_ms(3500);
    ck_assert_msg(h_log_count(&f.e, "redis pub/sub: resetting connection") == 0,
                  "a pub/sub connection that answered every probe was reset");
    uint64_t accepted = h_proxy_accepted(f.e.proxy);
    size_t log_at = h_log_size(&f.e);
    /* The pub/sub connection hears nothing more: its probe goes unanswered. */
    h_proxy_hold(f.e.proxy, H_PROXY_OPEN_PUBSUB, H_PROXY_DOWN);
    free(h_log_wait_from(&f.e, log_at, "redis pub/sub: resetting connection", 20000));
    until = h_now_ms() + 10000;
    while (h_proxy_accepted(f.e.proxy) == accepted || h_proxy_count(f.e.proxy, H_PROXY_PUBSUB) < 1) {
        ck_assert_msg(h_now_ms() < until, "the pub/sub connection was not made again");
        h_sleep_ms(20);
    }
    h_proxy_drop(f.e.proxy, H_PROXY_OPEN_PUBSUB);

    /* A holder on the peer, a waiter here: the peer's release must wake it at once. */
    struct rlock_lock *held = NULL;
    struct rlock_acquire_opts ho = {.ttl_ms = 60000};
    h_assert_ok(pc, rlock_acquire(pc, "notice", &ho, CALL_MS, &held));
    struct h_waiter wt;
    h_waiter_start(&wt, &f.e, "notice", 60000, 30000);
    ck_assert_int_eq(h_wait_stats(&f.e, 0, 1, 5000, NULL), 0);
    h_sleep_ms(300); /* its head sleeps on the holder's PTTL (60 s), subscribed */
    int64_t rel = h_now_ms();
    h_assert_ok(pc, rlock_release(held, CALL_MS));
    ck_assert_int_eq(h_waiter_join(&wt), RLOCK_OK);
    printf("pubsub_probe_missed: granted %lld ms after the peer's release\n",
           (long long)(wt.granted_ms - rel));
    ck_assert_msg(wt.granted_ms - rel < 5000,
                  "a release through another rlockd woke nobody after the pub/sub connection was "
                  "made again (granted %lld ms later)",
                  (long long)(wt.granted_ms - rel));
    h_waiter_close(&wt);
    rlock_lock_free(held);
    rlock_close(pc);
    h_env_stop(&peer);
    h_fixture_stop(&f);
}
END_TEST

/*
 * A release notice comes while the head's try is in Redis, and that try's busy
 * answer (on a command connection, delayed by the proxy) predates the release:
 * the head tries again at once instead of sleeping on the old holder's ttl.
 */
START_TEST(test_notice_during_try)
{
    struct h_fixture f;
    h_fixture_start_proxied(&f, "[redis]\ncommand_timeout = 2s\n[limits]\nmin_ttl = 6s\n");
    struct h_env peer;
    ck_assert_int_eq(h_env_start_peer(&peer, &f.e, NULL), 0);
    struct rlock_client *pc = h_client_or_fail(&peer, NULL);
    struct rlock_lock *held = NULL;
    struct rlock_acquire_opts ho = {.ttl_ms = 60000};
    h_assert_ok(pc, rlock_acquire(pc, "race", &ho, CALL_MS, &held));
    struct h_waiter w;
    h_waiter_start(&w, &f.e, "race", 60000, 30000);
    ck_assert_int_eq(h_wait_stats(&f.e, 0, 1, 5000, NULL), 0);
    h_sleep_ms(300); /* the head sleeps on the holder's ttl, subscribed */

    /* A notice that frees nothing wakes the head; its try's answer comes 800 ms late. */
    h_proxy_delay(f.e.proxy, H_PROXY_COMMANDS, H_PROXY_DOWN, 800);
    char channel[300];
    snprintf(channel, sizeof channel, "%s{race}:free", f.e.prefix);
    ck_assert_int_ge(h_redis_int(f.r, "PUBLISH %s %s", channel, "nothing"), 1);
    h_sleep_ms(150);
    /* The real release, while that try is in Redis (its busy answer on its way). */
    int64_t rel = h_now_ms();
    h_assert_ok(pc, rlock_release(held, CALL_MS));
    ck_assert_int_eq(h_waiter_join(&w), RLOCK_OK);
    printf("notice_during_try: granted %lld ms after the release\n",
           (long long)(w.granted_ms - rel));
    ck_assert_msg(w.granted_ms - rel < 5000,
                  "a release noticed while the head's try was in Redis was lost: granted %lld ms "
                  "later",
                  (long long)(w.granted_ms - rel));
    h_proxy_release(f.e.proxy, H_PROXY_ALL, H_PROXY_DOWN);
    h_waiter_close(&w);
    rlock_lock_free(held);
    rlock_close(pc);
    h_env_stop(&peer);
    h_fixture_stop(&f);
}
END_TEST

/*
 * The daemon goes silent (SIGSTOP) under a client whose session times out in
 * 2 s and whose lock has a lease of 30 s: the daemon ends the session (and
 * frees the lock) 2 s after the client's last word, so the library stops
 * vouching for the lock then (UNCERTAIN), not at the end of the lease.
 */
START_TEST(test_silent_session_bound)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct rlock_options o = {.session_timeout_ms = 2000};
    struct rlock_client *c = h_client_or_fail(&f.e, &o);
    ck_assert_uint_eq(rlock_session_timeout_ms(c), 2000);
    struct rlock_acquire_opts ao = {.ttl_ms = 30000};
    struct rlock_lock *l = h_acquire_ok(c, "bounded", &ao);
    h_rlockd_sigstop(&f.e);
    int64_t stopped = h_now_ms();
    while (rlock_lock_state(l) == RLOCK_HELD) {
        ck_assert_msg(h_now_ms() - stopped < 10000,
                      "a lock still read HELD 10 s after its daemon went silent (session "
                      "timeout 2 s): vouched for by its lease, not its session?");
        h_sleep_ms(10);
    }
    printf("silent_session_bound: not vouched for %lld ms after the daemon stopped\n",
           (long long)(h_now_ms() - stopped));
    ck_assert_int_le(h_now_ms() - stopped, 2000 + 1000);
    h_rlockd_sigcont(&f.e);
    rlock_lock_free(l);
    rlock_close(c);
    h_fixture_stop(&f);
}
END_TEST

/*
 * A release Redis never ran (its connection was dropped with the command still
 * held in the proxy), then connections that cannot be set up for two seconds:
 * the cleanup list's retries that fall in the outage are kept, and the key is
 * deleted by token once Redis is reachable, not left for its 60 s.
 */
START_TEST(test_cleanup_through_outage)
{
    struct h_fixture f;
    h_fixture_start_proxied(&f, "[redis]\ncommand_timeout = 300ms\n");
    char key[256];
    h_lock_key(&f.e, "outage", key, sizeof key);
    struct rlock_acquire_opts o = {.ttl_ms = 60000, .watchdog_off = 1};
    struct rlock_lock *l = h_acquire_ok(f.c, "outage", &o);

    h_proxy_hold(f.e.proxy, H_PROXY_ALL, H_PROXY_UP); /* new connections too: none gets ready */
    h_assert_ok(f.c, rlock_release(l, CALL_MS));
    h_proxy_drop(f.e.proxy, H_PROXY_ALL); /* the release never reaches Redis */
    h_sleep_ms(2000);
    ck_assert_int_eq(h_key_exists(f.r, key), 1);
    h_proxy_release(f.e.proxy, H_PROXY_ALL, H_PROXY_UP);
    ck_assert_msg(h_wait_key_gone(f.r, key, 10000, &f.e) >= 0,
                  "a release lost in an outage was not retried once Redis was back (ttl 60 s)");
    rlock_lock_free(l);
    h_fixture_stop(&f);
}
END_TEST

/*
 * A release that never reached Redis (held by the proxy until its connection
 * was reset, then dropped) leaves the key to the cleanup list. With release
 * notices off, nothing but this daemon's own wake-up tells its local waiter,
 * asleep on the key's 60 s PTTL, that the cleanup's delete freed the lock.
 */
START_TEST(test_cleanup_wakes_local_waiter)
{
    struct h_fixture f;
    h_fixture_start_proxied(&f, "[redis]\ncommand_timeout = 300ms\nnotify = no\n");
    char key[256];
    h_lock_key(&f.e, "woken", key, sizeof key);
    struct rlock_acquire_opts o = {.ttl_ms = 60000, .watchdog_off = 1};
    struct rlock_lock *l = h_acquire_ok(f.c, "woken", &o);
    struct h_waiter w;
    h_waiter_start(&w, &f.e, "woken", 60000, 30000);
    ck_assert_int_eq(h_wait_stats(&f.e, 1, 1, 5000, NULL), 0);
    h_sleep_ms(300); /* the head sleeps on the key's PTTL */

    h_proxy_hold(f.e.proxy, H_PROXY_OPEN_COMMANDS, H_PROXY_UP);
    int64_t released = h_now_ms();
    h_assert_ok(f.c, rlock_release(l, CALL_MS)); /* unconfirmed: the connection is reset */
    h_proxy_drop(f.e.proxy, H_PROXY_OPEN); /* and the held release never runs */
    ck_assert_int_eq(h_waiter_join(&w), RLOCK_OK);
    printf("cleanup_wakes_local_waiter: granted %lld ms after the release\n",
           (long long)(w.granted_ms - released));
    ck_assert_msg(w.granted_ms - released < 10000,
                  "the local waiter slept %lld ms after the cleanup freed the lock",
                  (long long)(w.granted_ms - released));
    h_waiter_close(&w);
    rlock_lock_free(l);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_stalled_past_key_life)
{
    struct h_fixture f;
    h_fixture_start(&f, "[redis]\ncommand_timeout = 300ms\n");
    char key[256];
    h_lock_key(&f.e, "stalled", key, sizeof key);
    enum { TTL = 8000 };
    h_sigstop(f.e.redis_pid, "redis-server");
    struct rlock_acquire_opts o = {.ttl_ms = TTL};
    struct rlock_lock *l = NULL;
    enum rlock_err rc = rlock_acquire(f.c, "stalled", &o, CALL_MS, &l);
    ck_assert_msg(rc == RLOCK_ERR_UNAVAILABLE, "an acquire a stopped Redis never answered gave %s",
                  rlock_strerror(rc));
    /* Past the longest life of the key the acquire would set (ttl + drift, from the send). */
    h_sleep_ms(TTL + 1500);
    h_sigcont(f.e.redis_pid, "redis-server");
    key_appears(f.r, key, "the acquire in the stopped Redis's socket never ran");
    int64_t set_ms = h_now_ms();
    /* Still retried (the connection is back: at once), the delete takes it well within its
     * 8 s ttl; 4 s is room for a loaded machine, not for a key left to expire. */
    ck_assert_msg(h_wait_key_gone(f.r, key, 4000, &f.e) >= 0,
                  "the key a stalled acquire set at last is still there 4 s later (ttl %d ms)",
                  TTL);
    printf("stalled_past_key_life: the late key was deleted %lld ms after it was set\n",
           (long long)(h_now_ms() - set_ms));
    rlock_lock_free(l);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_daemon_stalled_past_lease)
{
    enum { TTL = 1500, STOP_MS = 3 * TTL };
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    char key[256], val[128];
    h_lock_key(&f.e, "stalled-daemon", key, sizeof key);
    struct rlock_acquire_opts o = {.ttl_ms = TTL};
    struct rlock_lock *l = h_acquire_ok(f.c, "stalled-daemon", &o);
    h_rlockd_sigstop(&f.e);
    int64_t stopped = h_now_ms();
    /* The library's own clock ends its trust, whatever the daemon does. */
    while (rlock_lock_state(l) == RLOCK_HELD) {
        ck_assert_msg(h_now_ms() - stopped < STOP_MS,
                      "a lock still read HELD %d ms into its daemon's stop (ttl %d ms)", STOP_MS,
                      TTL);
        h_sleep_ms(5);
    }
    /* Once the key has expired, the copied code takes the resource. */
    ck_assert_msg(h_wait_key_gone(f.r, key, STOP_MS, &f.e) >= 0,
                  "the key of a lock whose daemon is stopped outlived its ttl");
    char cmd[320];
    snprintf(cmd, sizeof cmd, "SET %s other-holder NX PX 60000", key);
    ck_assert_int_eq(h_redis_ok(f.r, cmd), 0);
    while (h_now_ms() - stopped < STOP_MS)
        h_sleep_ms(10);
    h_rlockd_sigcont(&f.e);
    for (int64_t until = h_now_ms() + 5000; atomic_load(&f.lost.count) == 0; h_sleep_ms(5))
        ck_assert_msg(h_now_ms() < until, "no LockLost 5 s after the stopped daemon woke");
    ck_assert_int_eq(atomic_load(&f.lost.reason), RLOCK_LOST_EXPIRED);
    ck_assert_int_eq(h_log_wait(&f.e, "lost lock stalled-daemon ", 5000, NULL), 0);
    long long late = h_log_number_after(&f.e, "lost lock stalled-daemon ", "; noticed ");
    printf("daemon_stalled_past_lease: the loss noticed %lld ms after it was due\n", late);
    /* Due at most ttl after the stop; noticed after it ended. */
    ck_assert_msg(late >= STOP_MS - TTL - 500, "the woken daemon's loss line says it was "
                  "noticed %lld ms late (-1: not said) after a %d ms stop", late, STOP_MS);
    ck_assert_msg(h_log_find(&f.e, "lease timers ran ", NULL), "no warning that timers ran late");
    ck_assert_msg(h_metric(&f.e, "rlockd_lease_timers_late_total") >= 1,
                  "rlockd_lease_timers_late_total did not count the late firing");
    /* Acting on what it believed would renew or delete a key that is no longer its own. */
    h_sleep_ms(TTL);
    ck_assert_int_eq(h_get(f.r, key, val, sizeof val), 1);
    ck_assert_str_eq(val, "other-holder");
    ck_assert_int_eq(rlock_lock_state(l), RLOCK_LOST);
    rlock_lock_free(l);
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_validity_from_send, test_client_from_send,
                                         test_grant_read_late, test_late_command_settled,
                                         test_pubsub_probe_missed, test_notice_during_try,
                                         test_silent_session_bound, test_cleanup_through_outage,
                                         test_cleanup_wakes_local_waiter,
                                         test_stalled_past_key_life,
                                         test_daemon_stalled_past_lease};
    return h_run_tests("late", 120, tests, H_LEN(tests));
}
