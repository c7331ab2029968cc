/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_rwlock.c — shared (read) holds: rlock_acquire_opts.shared, Acquire.mode
 * (docs/design-kinds.md, "Redis layout" and "Waiting: FIFO across modes").
 * Real redis-server and rlockd processes.
 *
 *  - together: two clients hold R shared at once, with different tokens and
 *    fences; a third client's exclusive try is NOT_ACQUIRED (its shared try is
 *    granted); the key holds "group:rw" and the holders ZSET every token; the
 *    copied SET NX fails and a compare-and-delete with a foreign token deletes
 *    nothing; the last release deletes the key and the ZSET, and an exclusive
 *    try is granted then;
 *  - writer after readers: an exclusive waiter is granted only once both shared
 *    holders have released (not after the first), with a fence above both;
 *  - FIFO across modes: A holds shared, B waits exclusive, C asks shared with a
 *    wait: C is not granted while B waits (though it fits with A), nor while B
 *    holds, and a shared try meanwhile is refused; C and C2 (shared, both
 *    behind B) are let in together once B leaves; fences A < B < C;
 *  - one session, one lock: shared twice by one owner (hold count 2, same
 *    token and fence), shared by another owner of the session adds a hold
 *    too; exclusive by an owner holding it shared is WRONG_KIND; exclusive
 *    then shared by the same owner re-enters the exclusive hold (the key keeps
 *    the token, AcquireReply.mode says EXCLUSIVE on a raw session), while a
 *    shared try by another owner or client is refused;
 *  - renewal: two shared holds with a 1.5 s ttl live 5 s (the key keeps
 *    "group:rw", the ZSET both tokens, their lease ends move on); a token
 *    removed from the ZSET is reported lost (LockLost) to its holder only;
 *  - an unclean end frees the place: `rlockctl run --shared` killed with
 *    SIGKILL lets an exclusive waiter in; a raw session that asked for a
 *    lock_delay and closes its socket without Goodbye lets it in no earlier
 *    than the delay, while a clean close (Goodbye) applies none;
 *  - two daemons on one Redis: shared on daemon 1, an exclusive waiter on
 *    daemon 2 sets the claim key, and a new shared request on daemon 1 waits
 *    for the exclusive grant and its release;
 *  - rlockctl run --shared: two shared jobs are inside at once, an exclusive
 *    job waits for both, shared jobs started after it wait for it, and are
 *    then inside at once again; fences grow along;
 *  - eight processes (fork, a client each) take one resource round after round, five
 *    mostly shared and three exclusive, logging their holds on CLOCK_MONOTONIC: no hold
 *    overlaps an exclusive one, shared holds overlap, a request sent once an exclusive
 *    one was seen in the daemon's wait queue is granted after it (fences), and fences
 *    follow the order of the holds around every exclusive one.
 *
 * No assertion depends on how fast anything happens: "not granted" is checked
 * by waiting a while and "granted" with generous deadlines.
 */
#include "harness.h"
#include "harness_peer.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CALL_MS 5000u
#define WAIT_MS 30000u      /* a waiter's wait: far longer than any step here takes */
#define GRANT_MS 20000      /* deadline for a grant that must come */
#define QUIET_MS 700        /* how long "still not granted" is watched */
#define GROUP_MARKER "group:rw"

/* --- keys ------------------------------------------------------------------ */

struct keys {
    char lock[256];    /* PREFIX{r} */
    char holders[272]; /* PREFIX{r}:holders */
    char claim[272];   /* PREFIX{r}:claim */
};

static void keys_of(const struct h_env *e, const char *resource, struct keys *k)
{
    h_lock_key(e, resource, k->lock, sizeof k->lock);
    snprintf(k->holders, sizeof k->holders, "%s:holders", k->lock);
    snprintf(k->claim, sizeof k->claim, "%s:claim", k->lock);
}

/* Assert that key holds the group marker. */
static void assert_marker(redisContext *r, const char *key, const char *what)
{
    char val[256] = "";
    int got = h_get(r, key, val, sizeof val);
    ck_assert_msg(got == 1 && strcmp(val, GROUP_MARKER) == 0,
                  "%s: key %s holds \"%s\" (GET returned %d), not \"" GROUP_MARKER "\"", what,
                  key, val, got);
}

/* The score of member in the ZSET key: 1 and *score, 0 when absent; fails on errors. */
static int zscore(redisContext *r, const char *key, const char *member, double *score)
{
    redisReply *rep = redisCommand(r, "ZSCORE %s %s", key, member);
    ck_assert_msg(rep != NULL, "ZSCORE %s: %s", key, r->errstr);
    int found = 0;
    if (rep->type == REDIS_REPLY_STRING) {
        found = 1;
        if (score)
            *score = strtod(rep->str, NULL);
    } else {
        ck_assert_msg(rep->type == REDIS_REPLY_NIL, "ZSCORE %s %s: %s", key, member,
                      rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
    }
    freeReplyObject(rep);
    return found;
}

static void assert_holder(redisContext *r, const struct keys *k, const char *token,
                          const char *what)
{
    ck_assert_msg(zscore(r, k->holders, token, NULL) == 1,
                  "%s: token %s is not in %s (ZCARD %lld)", what, token, k->holders,
                  h_redis_int(r, "ZCARD %s", k->holders));
}

/* --- acquiring --------------------------------------------------------------- */

static enum rlock_err acq(struct rlock_client *c, const char *resource, int shared,
                          uint32_t wait_ms, uint32_t ttl_ms, uint64_t owner,
                          struct rlock_lock **out)
{
    struct rlock_acquire_opts o = {.ttl_ms = ttl_ms, .wait_ms = wait_ms, .owner = owner,
                                   .shared = shared};
    *out = NULL;
    return rlock_acquire(c, resource, &o, CALL_MS, out);
}

static struct rlock_lock *acq_ok(struct rlock_client *c, const char *resource, int shared,
                                 uint64_t owner, const char *what)
{
    struct rlock_lock *l;
    enum rlock_err rc = acq(c, resource, shared, 0, 0, owner, &l);
    char msg[320];
    ck_assert_msg(rc == RLOCK_OK, "%s: %s acquire of %s: %s", what,
                  shared ? "shared" : "exclusive", resource, h_rlock_err(c, rc, msg, sizeof msg));
    ck_assert_ptr_nonnull(l);
    return l;
}

/* A try (no wait) that must fail with want. */
static void acq_refused(struct rlock_client *c, const char *resource, int shared, uint64_t owner,
                        enum rlock_err want, const char *what)
{
    struct rlock_lock *l;
    enum rlock_err rc = acq(c, resource, shared, 0, 0, owner, &l);
    char msg[320];
    ck_assert_msg(rc == want, "%s: %s try of %s: %s, want %s", what,
                  shared ? "shared" : "exclusive", resource, h_rlock_err(c, rc, msg, sizeof msg),
                  rlock_strerror(want));
    ck_assert_ptr_null(l);
}

static void release_ok(struct rlock_client *c, struct rlock_lock *l, const char *what)
{
    enum rlock_err rc = rlock_release(l, CALL_MS);
    char msg[320];
    ck_assert_msg(rc == RLOCK_OK, "%s: release of %s: %s", what, rlock_lock_resource(l),
                  h_rlock_err(c, rc, msg, sizeof msg));
}

/* --- a waiting acquire on a thread of its own, of either mode ------------------ */

struct rw_waiter {
    const char *name;
    struct rlock_client *c;
    const char *resource;
    int shared;
    enum rlock_err rc;
    struct rlock_lock *l;
    struct h_thread t;
};

static void *rw_waiter_main(void *arg)
{
    struct rw_waiter *w = arg;
    struct rlock_acquire_opts o = {.wait_ms = WAIT_MS, .shared = w->shared};
    w->rc = rlock_acquire(w->c, w->resource, &o, CALL_MS, &w->l);
    return NULL;
}

/* Connect a client to e and start its acquire. */
static void rw_waiter_start(struct rw_waiter *w, struct h_env *e, const char *name,
                            const char *resource, int shared)
{
    memset(w, 0, sizeof *w);
    struct rlock_options o = {.client_name = name};
    w->name = name;
    w->c = h_client_or_fail(e, &o);
    w->resource = resource;
    w->shared = shared;
    h_thread_start(&w->t, rw_waiter_main, w);
}

/* Wait (GRANT_MS at most) for its acquire to return, and assert it got the lock. */
static void rw_waiter_granted(struct rw_waiter *w)
{
    char fail[160];
    snprintf(fail, sizeof fail, "%s: not granted within %d ms", w->name, GRANT_MS);
    h_thread_join(&w->t, h_now_ms() + GRANT_MS, fail);
    w->t.fn = NULL; /* joined */
    ck_assert_msg(w->rc == RLOCK_OK, "%s: acquire returned %s", w->name, rlock_strerror(w->rc));
    ck_assert_ptr_nonnull(w->l);
}

/* Assert that its acquire has not returned, for QUIET_MS. */
static void rw_waiter_still_waits(struct rw_waiter *w, const char *why)
{
    int64_t end = h_now_ms() + QUIET_MS;
    do {
        ck_assert_msg(!h_thread_done(&w->t), "%s: acquire returned (%s) %s", w->name,
                      rlock_strerror(w->rc), why);
        h_sleep_ms(20);
    } while (h_now_ms() < end);
}

static void rw_waiter_close(struct rw_waiter *w)
{
    if (w->t.fn != NULL) { /* not joined yet: close ends its acquire */
        rlock_shutdown(w->c);
        h_thread_join(&w->t, h_now_ms() + 10000, "a waiter did not stop");
        w->t.fn = NULL;
    }
    if (w->l != NULL && rlock_lock_state(w->l) == RLOCK_HELD)
        rlock_release(w->l, CALL_MS);
    rlock_lock_free(w->l);
    w->l = NULL;
    rlock_close(w->c);
    w->c = NULL;
}

/* Poll the Stats of e until waiters == n (timeout_ms at most); fails the test otherwise. */
static void wait_waiters(struct h_env *e, uint64_t n, int timeout_ms, const char *what)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    struct rlock_stats st;
    for (;;) {
        memset(&st, 0, sizeof st);
        h_stats_or_fail(e, &st);
        if (st.waiters == n)
            return;
        ck_assert_msg(h_now_ms() < deadline, "%s: %" PRIu64 " waiters after %d ms, want %" PRIu64,
                      what, st.waiters, timeout_ms, n);
        h_sleep_ms(20);
    }
}

/* Poll until GET key is want, timeout_ms at most. */
static void wait_value(redisContext *r, const char *key, const char *want, int timeout_ms,
                       const char *what)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    char val[256];
    for (;;) {
        val[0] = '\0';
        if (h_get(r, key, val, sizeof val) == 1 && strcmp(val, want) == 0)
            return;
        ck_assert_msg(h_now_ms() < deadline, "%s: key %s holds \"%s\" after %d ms, want \"%s\"",
                      what, key, val, timeout_ms, want);
        h_sleep_ms(20);
    }
}

/* --- (a) shared holders together ---------------------------------------------- */

START_TEST(test_together)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    const char *res = "rw/together";
    struct keys k;
    keys_of(&f.e, res, &k);
    struct rlock_client *c2 = h_client_or_fail(&f.e, NULL);
    struct rlock_client *c3 = h_client_or_fail(&f.e, NULL);

    struct rlock_lock *l1 = acq_ok(f.c, res, 1, 0, "client 1");
    struct rlock_lock *l2 = acq_ok(c2, res, 1, 0, "client 2, while client 1 holds it shared");
    printf("together: fences %" PRIu64 " %" PRIu64 ", tokens %s %s\n", rlock_lock_fence(l1),
           rlock_lock_fence(l2), rlock_lock_token(l1), rlock_lock_token(l2));
    fflush(stdout);
    ck_assert_int_eq(rlock_lock_state(l1), RLOCK_HELD);
    ck_assert_int_eq(rlock_lock_state(l2), RLOCK_HELD);
    ck_assert_uint_eq(rlock_lock_hold_count(l1), 1);
    ck_assert_uint_eq(rlock_lock_hold_count(l2), 1);
    ck_assert_msg(strcmp(rlock_lock_token(l1), rlock_lock_token(l2)) != 0,
                  "two sessions' shared holds have one token %s", rlock_lock_token(l1));
    ck_assert_msg(rlock_lock_fence(l2) > rlock_lock_fence(l1),
                  "fences %" PRIu64 " then %" PRIu64 ": not increasing", rlock_lock_fence(l1),
                  rlock_lock_fence(l2));

    /* Redis: the marker at the lock key, each token in the holders ZSET. */
    assert_marker(f.r, k.lock, "two shared holders");
    assert_holder(f.r, &k, rlock_lock_token(l1), "two shared holders");
    assert_holder(f.r, &k, rlock_lock_token(l2), "two shared holders");
    ck_assert_int_eq(h_redis_int(f.r, "ZCARD %s", k.holders), 2);
    ck_assert_msg(h_pttl(f.r, k.lock) > 0, "the marker has no lease (PTTL %lld)",
                  h_pttl(f.r, k.lock));

    /* A third client: exclusive refused. */
    acq_refused(c3, res, 0, 0, RLOCK_ERR_NOT_ACQUIRED, "client 3 while two hold it shared");

    /* The copied scripts: SET NX fails, compare-and-delete with a foreign token deletes
     * nothing. */
    redisReply *rep = redisCommand(f.r, "SET %s app-token NX PX 10000", k.lock);
    ck_assert_ptr_nonnull(rep);
    ck_assert_msg(rep->type == REDIS_REPLY_NIL, "SET NX on a key held shared: reply type %d (%s)",
                  rep->type, rep->type == REDIS_REPLY_STATUS ? rep->str : "");
    freeReplyObject(rep);
    static const char cad[] =
        "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) "
        "else return 0 end";
    const char *keys1[] = {k.lock};
    const char *args1[] = {"app-token"};
    rep = h_eval(f.r, cad, keys1, 1, args1, 1);
    ck_assert_msg(rep->type == REDIS_REPLY_INTEGER && rep->integer == 0,
                  "compare-and-delete with a foreign token: type %d integer %lld", rep->type,
                  rep->integer);
    freeReplyObject(rep);
    args1[0] = rlock_lock_token(l1); /* a holder's token is not the key's value either */
    rep = h_eval(f.r, cad, keys1, 1, args1, 1);
    ck_assert_msg(rep->type == REDIS_REPLY_INTEGER && rep->integer == 0,
                  "compare-and-delete with a shared holder's token: type %d integer %lld",
                  rep->type, rep->integer);
    freeReplyObject(rep);
    assert_marker(f.r, k.lock, "after the copied scripts");

    /* A third shared holder joins. */
    struct rlock_lock *l3 = acq_ok(c3, res, 1, 0, "client 3 shared, with two shared holders");
    ck_assert_int_eq(h_redis_int(f.r, "ZCARD %s", k.holders), 3);
    ck_assert_msg(rlock_lock_fence(l3) > rlock_lock_fence(l2), "fence %" PRIu64 " after %" PRIu64,
                  rlock_lock_fence(l3), rlock_lock_fence(l2));

    /* Releases: the group stays until the last one, which deletes its keys. */
    release_ok(f.c, l1, "client 1");
    assert_marker(f.r, k.lock, "two of three left");
    ck_assert_int_eq(zscore(f.r, k.holders, rlock_lock_token(l1), NULL), 0);
    ck_assert_int_eq(h_redis_int(f.r, "ZCARD %s", k.holders), 2);
    acq_refused(f.c, res, 0, 0, RLOCK_ERR_NOT_ACQUIRED, "client 1 exclusive, two still shared");
    release_ok(c3, l3, "client 3");
    assert_marker(f.r, k.lock, "one of three left");
    release_ok(c2, l2, "client 2");
    ck_assert_msg(h_key_exists(f.r, k.lock) == 0, "%s still exists after the last release",
                  k.lock);
    ck_assert_msg(h_key_exists(f.r, k.holders) == 0, "%s still exists after the last release",
                  k.holders);

    /* Free: an exclusive try is granted, with the token at the key and a higher fence. */
    struct rlock_lock *x = acq_ok(c3, res, 0, 0, "client 3 exclusive once all left");
    h_assert_key_token(f.r, k.lock, rlock_lock_token(x));
    ck_assert_msg(rlock_lock_fence(x) > rlock_lock_fence(l3), "exclusive fence %" PRIu64
                  " not above the shared %" PRIu64, rlock_lock_fence(x), rlock_lock_fence(l3));
    acq_refused(c2, res, 1, 0, RLOCK_ERR_NOT_ACQUIRED, "client 2 shared while held exclusive");
    release_ok(c3, x, "client 3 exclusive");
    ck_assert_int_eq(h_key_exists(f.r, k.lock), 0);

    rlock_lock_free(l1);
    rlock_lock_free(l2);
    rlock_lock_free(l3);
    rlock_lock_free(x);
    rlock_close(c2);
    rlock_close(c3);
    h_fixture_stop(&f);
}
END_TEST

/* --- (b) an exclusive waiter after two shared holders --------------------------- */

START_TEST(test_writer_after_readers)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    const char *res = "rw/writer";
    struct keys k;
    keys_of(&f.e, res, &k);
    struct rlock_client *c2 = h_client_or_fail(&f.e, NULL);
    struct rlock_lock *s1 = acq_ok(f.c, res, 1, 0, "reader 1");
    struct rlock_lock *s2 = acq_ok(c2, res, 1, 0, "reader 2");

    struct rw_waiter w;
    rw_waiter_start(&w, &f.e, "writer", res, 0);
    wait_waiters(&f.e, 1, GRANT_MS, "the writer queued");
    rw_waiter_still_waits(&w, "while two readers hold the lock");

    release_ok(f.c, s1, "reader 1");
    rw_waiter_still_waits(&w, "while reader 2 still holds the lock");
    assert_marker(f.r, k.lock, "reader 2 still in");

    release_ok(c2, s2, "reader 2");
    rw_waiter_granted(&w);
    uint64_t fx = rlock_lock_fence(w.l);
    printf("writer: fences readers %" PRIu64 " %" PRIu64 ", writer %" PRIu64 "\n",
           rlock_lock_fence(s1), rlock_lock_fence(s2), fx);
    fflush(stdout);
    ck_assert_msg(fx > rlock_lock_fence(s1) && fx > rlock_lock_fence(s2),
                  "writer's fence %" PRIu64 " not above the readers' %" PRIu64 " and %" PRIu64, fx,
                  rlock_lock_fence(s1), rlock_lock_fence(s2));
    h_assert_key_token(f.r, k.lock, rlock_lock_token(w.l));
    ck_assert_int_eq(h_key_exists(f.r, k.holders), 0);

    rw_waiter_close(&w);
    ck_assert_int_eq(h_key_exists(f.r, k.lock), 0);
    rlock_lock_free(s1);
    rlock_lock_free(s2);
    rlock_close(c2);
    h_fixture_stop(&f);
}
END_TEST

/* --- (c) FIFO across modes: a later reader waits for an earlier writer --------- */

START_TEST(test_fifo)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    const char *res = "rw/fifo";
    struct keys k;
    keys_of(&f.e, res, &k);
    struct rlock_lock *a = acq_ok(f.c, res, 1, 0, "A");

    struct rw_waiter b, c, c2;
    rw_waiter_start(&b, &f.e, "B (exclusive)", res, 0);
    wait_waiters(&f.e, 1, GRANT_MS, "B queued");
    rw_waiter_start(&c, &f.e, "C (shared)", res, 1);
    wait_waiters(&f.e, 2, GRANT_MS, "C queued behind B");
    rw_waiter_start(&c2, &f.e, "C2 (shared)", res, 1);
    wait_waiters(&f.e, 3, GRANT_MS, "C2 queued behind C");
    rw_waiter_still_waits(&c, "while B, an exclusive request before it, waits");
    rw_waiter_still_waits(&c2, "while B, an exclusive request before it, waits");
    rw_waiter_still_waits(&b, "while A holds the lock shared");
    ck_assert_int_eq(h_redis_int(f.r, "ZCARD %s", k.holders), 1);
    /* A shared try (no wait) that arrives now does not pass B either. */
    struct rlock_client *d = h_client_or_fail(&f.e, NULL);
    acq_refused(d, res, 1, 0, RLOCK_ERR_NOT_ACQUIRED, "a shared try while B waits");
    ck_assert_int_eq(h_redis_int(f.r, "ZCARD %s", k.holders), 1);

    release_ok(f.c, a, "A");
    rw_waiter_granted(&b);
    h_assert_key_token(f.r, k.lock, rlock_lock_token(b.l));
    rw_waiter_still_waits(&c, "while B holds the lock exclusive");
    ck_assert_msg(!h_thread_done(&c2.t), "C2 granted while B holds the lock exclusive");

    /* B leaves: C and C2, consecutive shared requests, are both let in (neither leaves). */
    release_ok(b.c, b.l, "B");
    rw_waiter_granted(&c);
    rw_waiter_granted(&c2);
    assert_marker(f.r, k.lock, "C and C2 granted");
    assert_holder(f.r, &k, rlock_lock_token(c.l), "C granted");
    assert_holder(f.r, &k, rlock_lock_token(c2.l), "C2 granted");
    ck_assert_int_eq(h_redis_int(f.r, "ZCARD %s", k.holders), 2);
    uint64_t fa = rlock_lock_fence(a), fb = rlock_lock_fence(b.l), fc = rlock_lock_fence(c.l);
    printf("fifo: fences A %" PRIu64 ", B %" PRIu64 ", C %" PRIu64 "\n", fa, fb, fc);
    fflush(stdout);
    ck_assert_msg(fa < fb && fb < fc, "fences A %" PRIu64 ", B %" PRIu64 ", C %" PRIu64
                  ": not in grant order", fa, fb, fc);
    ck_assert_msg(rlock_lock_fence(c2.l) > fb, "C2's fence %" PRIu64 " not above B's %" PRIu64,
                  rlock_lock_fence(c2.l), fb);

    rw_waiter_close(&c2);
    rw_waiter_close(&c);
    rw_waiter_close(&b);
    ck_assert_int_eq(h_key_exists(f.r, k.lock), 0);
    rlock_lock_free(a);
    rlock_close(d);
    h_fixture_stop(&f);
}
END_TEST

/* --- (d) one session, one lock --------------------------------------------------- */

/* A raw Acquire with mode; returns the reply's mode after asserting an OK grant. */
static Rlock__V1__LockMode raw_acquire(struct h_peer *p, const char *resource,
                                       Rlock__V1__LockMode mode, uint64_t owner,
                                       struct h_grant *g, const char *what)
{
    struct h_acq a = {.resource = resource, .owner = owner};
    Rlock__V1__Acquire m = h_acquire_msg(&a);
    m.mode = mode;
    uint64_t id = h_peer_send(p, RLOCK__V1__REQUEST__BODY_ACQUIRE, &m);
    Rlock__V1__ServerMessage *msg = h_peer_response(p, id, what);
    const Rlock__V1__Response *r = msg->response;
    ck_assert_msg(r->status == H_ST(OK) && r->body_case == RLOCK__V1__RESPONSE__BODY_ACQUIRE,
                  "%s: %s, want an OK AcquireReply", what, h_msg_describe(msg));
    h_grant_copy(r->acquire, g);
    Rlock__V1__LockMode got = r->acquire->mode;
    h_raw_free(msg);
    return got;
}

START_TEST(test_one_session)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rlock_client *other = h_client_or_fail(&f.e, NULL);
    struct keys k;

    /* Shared twice by the same owner (the test thread), then by another owner. */
    const char *res = "rw/session-shared";
    keys_of(&f.e, res, &k);
    struct rlock_lock *s1 = acq_ok(f.c, res, 1, 0, "shared #1");
    struct rlock_lock *s2 = acq_ok(f.c, res, 1, 0, "shared #2, same owner");
    ck_assert_uint_eq(rlock_lock_hold_count(s2), 2);
    ck_assert_str_eq(rlock_lock_token(s2), rlock_lock_token(s1));
    ck_assert_uint_eq(rlock_lock_fence(s2), rlock_lock_fence(s1));
    struct rlock_lock *s3 = acq_ok(f.c, res, 1, 42, "shared #3, another owner of the session");
    ck_assert_uint_eq(rlock_lock_hold_count(s3), 3);
    ck_assert_str_eq(rlock_lock_token(s3), rlock_lock_token(s1));
    /* One lease in Redis for the session. */
    ck_assert_int_eq(h_redis_int(f.r, "ZCARD %s", k.holders), 1);
    assert_holder(f.r, &k, rlock_lock_token(s1), "the session's shared lock");

    /* No upgrade: exclusive by an owner holding it shared. */
    acq_refused(f.c, res, 0, 0, RLOCK_ERR_WRONG_KIND, "exclusive by the owner holding it shared");
    {
        /* Owner 42 added a hold to the session's shared lock: refused too (WRONG_KIND as a
         * holder, or NOT_ACQUIRED as another owner; never granted, never queued). */
        struct rlock_lock *l;
        enum rlock_err rc = acq(f.c, res, 0, 0, 0, 42, &l);
        printf("one session: exclusive by owner 42 (a shared hold of the session): %s\n",
               rlock_strerror(rc));
        fflush(stdout);
        ck_assert_msg(rc == RLOCK_ERR_WRONG_KIND || rc == RLOCK_ERR_NOT_ACQUIRED,
                      "exclusive by owner 42, which added a shared hold: %s", rlock_strerror(rc));
    }
    {
        struct rlock_lock *l;
        struct rlock_acquire_opts o = {.wait_ms = 1000};
        enum rlock_err rc = rlock_acquire(f.c, res, &o, CALL_MS, &l);
        ck_assert_msg(rc == RLOCK_ERR_WRONG_KIND,
                      "exclusive with a wait by the owner holding it shared: %s, want %s",
                      rlock_strerror(rc), rlock_strerror(RLOCK_ERR_WRONG_KIND));
    }
    ck_assert_uint_eq(rlock_lock_hold_count(s1), 3);
    assert_marker(f.r, k.lock, "after the refused upgrades");
    /* Another client still joins shared and is refused exclusive. */
    struct rlock_lock *o1 = acq_ok(other, res, 1, 0, "another client shared");
    release_ok(other, o1, "another client shared");
    rlock_lock_free(o1);
    acq_refused(other, res, 0, 0, RLOCK_ERR_NOT_ACQUIRED, "another client exclusive");

    release_ok(f.c, s3, "hold 3");
    ck_assert_uint_eq(rlock_lock_hold_count(s1), 2);
    release_ok(f.c, s2, "hold 2");
    assert_marker(f.r, k.lock, "one hold left");
    release_ok(f.c, s1, "hold 1");
    ck_assert_msg(h_key_exists(f.r, k.lock) == 0, "%s exists after the last hold's release",
                  k.lock);
    rlock_lock_free(s1);
    rlock_lock_free(s2);
    rlock_lock_free(s3);

    /* Exclusive, then shared by the same owner: re-entry of the exclusive hold. */
    res = "rw/session-exclusive";
    keys_of(&f.e, res, &k);
    struct rlock_lock *x = acq_ok(f.c, res, 0, 0, "exclusive");
    struct rlock_lock *xs = acq_ok(f.c, res, 1, 0, "shared by the exclusive owner");
    ck_assert_uint_eq(rlock_lock_hold_count(xs), 2);
    ck_assert_str_eq(rlock_lock_token(xs), rlock_lock_token(x));
    ck_assert_uint_eq(rlock_lock_fence(xs), rlock_lock_fence(x));
    h_assert_key_token(f.r, k.lock, rlock_lock_token(x)); /* still exclusive */
    ck_assert_int_eq(h_key_exists(f.r, k.holders), 0);
    acq_refused(other, res, 1, 0, RLOCK_ERR_NOT_ACQUIRED, "another client shared");
    acq_refused(f.c, res, 1, 42, RLOCK_ERR_NOT_ACQUIRED,
                "shared by another owner of the session holding it exclusive");
    release_ok(f.c, xs, "the re-entered hold");
    h_assert_key_token(f.r, k.lock, rlock_lock_token(x));
    release_ok(f.c, x, "the exclusive hold");
    ck_assert_int_eq(h_key_exists(f.r, k.lock), 0);
    rlock_lock_free(x);
    rlock_lock_free(xs);

    /* The reply's mode, on a raw session. */
    struct h_peer p;
    h_peer_open(&p, &f.e, "rw-raw");
    struct h_grant g1, g2;
    res = "rw/session-raw";
    keys_of(&f.e, res, &k);
    Rlock__V1__LockMode m = raw_acquire(&p, res, RLOCK__V1__LOCK_MODE__MODE_SHARED, 7, &g1,
                                        "raw shared acquire");
    ck_assert_msg(m == RLOCK__V1__LOCK_MODE__MODE_SHARED, "a shared grant says mode %d", (int)m);
    assert_marker(f.r, k.lock, "raw shared");
    h_peer_release_ok(&p, res, g1.token, 0, "raw shared release");
    ck_assert_int_eq(h_key_exists(f.r, k.lock), 0);
    m = raw_acquire(&p, res, RLOCK__V1__LOCK_MODE__MODE_EXCLUSIVE, 7, &g1, "raw exclusive");
    ck_assert_msg(m == RLOCK__V1__LOCK_MODE__MODE_EXCLUSIVE, "an exclusive grant says mode %d",
                  (int)m);
    m = raw_acquire(&p, res, RLOCK__V1__LOCK_MODE__MODE_SHARED, 7, &g2,
                    "raw shared by the exclusive owner");
    ck_assert_msg(m == RLOCK__V1__LOCK_MODE__MODE_EXCLUSIVE,
                  "shared re-entering an exclusive hold says mode %d, want EXCLUSIVE", (int)m);
    ck_assert_uint_eq(g2.hold_count, 2);
    ck_assert_str_eq(g2.token, g1.token);
    ck_assert_uint_eq(g2.fence, g1.fence);
    h_assert_key_token(f.r, k.lock, g1.token);
    h_peer_release_ok(&p, res, g1.token, 1, "raw release 1");
    h_peer_release_ok(&p, res, g1.token, 0, "raw release 2");
    ck_assert_int_eq(h_key_exists(f.r, k.lock), 0);
    h_raw_close(&p.raw);

    rlock_close(other);
    h_fixture_stop(&f);
}
END_TEST

/* --- (e) the daemon renews shared leases; a lost place is reported ---------------- */

START_TEST(test_renewal_and_loss)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    const char *res = "rw/renew";
    struct keys k;
    keys_of(&f.e, res, &k);
    struct h_lost lost2 = {0};
    struct rlock_options o2 = {.on_lost = h_lost_cb, .on_lost_arg = &lost2};
    struct rlock_client *c2 = h_client_or_fail(&f.e, &o2);
    struct rlock_lock *l1, *l2;
    enum rlock_err rc = acq(f.c, res, 1, 0, 1500, 0, &l1);
    ck_assert_msg(rc == RLOCK_OK, "shared, ttl 1.5 s: %s", rlock_strerror(rc));
    rc = acq(c2, res, 1, 0, 1500, 0, &l2);
    ck_assert_msg(rc == RLOCK_OK, "second shared, ttl 1.5 s: %s", rlock_strerror(rc));
    ck_assert_uint_eq(rlock_lock_ttl_ms(l1), 1500);
    double first1 = 0, first2 = 0, last1 = 0, last2 = 0;
    ck_assert_int_eq(zscore(f.r, k.holders, rlock_lock_token(l1), &first1), 1);
    ck_assert_int_eq(zscore(f.r, k.holders, rlock_lock_token(l2), &first2), 1);

    /* 5 s: more than three leases. Every look finds both places. */
    int64_t end = h_now_ms() + 5000;
    int looks = 0;
    while (h_now_ms() < end) {
        assert_marker(f.r, k.lock, "held shared with a 1.5 s ttl");
        assert_holder(f.r, &k, rlock_lock_token(l1), "holder 1, renewed");
        assert_holder(f.r, &k, rlock_lock_token(l2), "holder 2, renewed");
        looks++;
        h_sleep_ms(100);
    }
    ck_assert_int_eq(zscore(f.r, k.holders, rlock_lock_token(l1), &last1), 1);
    ck_assert_int_eq(zscore(f.r, k.holders, rlock_lock_token(l2), &last2), 1);
    printf("renew: %d looks; lease ends moved %.0f and %.0f ms\n", looks, last1 - first1,
           last2 - first2);
    fflush(stdout);
    ck_assert_msg(last1 > first1 && last2 > first2,
                  "lease ends not moved: %.0f -> %.0f, %.0f -> %.0f", first1, last1, first2, last2);
    ck_assert_msg(h_pttl(f.r, k.lock) > 0, "the marker has no lease (PTTL %lld)",
                  h_pttl(f.r, k.lock));
    ck_assert_int_eq(rlock_lock_state(l1), RLOCK_HELD);
    ck_assert_int_eq(rlock_lock_state(l2), RLOCK_HELD);
    ck_assert_int_eq(atomic_load(&f.lost.count), 0);
    ck_assert_int_eq(atomic_load(&lost2.count), 0);

    /* Holder 1's place removed behind the daemon's back: holder 1, only, is told. */
    ck_assert_int_eq(h_redis_int(f.r, "ZREM %s %s", k.holders, rlock_lock_token(l1)), 1);
    int64_t deadline = h_now_ms() + GRANT_MS;
    while (rlock_lock_state(l1) != RLOCK_LOST && h_now_ms() < deadline)
        h_sleep_ms(20);
    ck_assert_msg(rlock_lock_state(l1) == RLOCK_LOST,
                  "holder 1 not told its place was lost within %d ms (state %d)", GRANT_MS,
                  (int)rlock_lock_state(l1));
    enum rlock_lost_reason why = rlock_lock_lost_reason(l1);
    ck_assert_msg(why == RLOCK_LOST_MISSING || why == RLOCK_LOST_STOLEN,
                  "holder 1 lost for %s, want missing (or stolen)", rlock_lost_reason_str(why));
    deadline = h_now_ms() + 5000;
    while (atomic_load(&f.lost.count) == 0 && h_now_ms() < deadline)
        h_sleep_ms(20);
    ck_assert_int_eq(atomic_load(&f.lost.count), 1);
    /* Holder 2 keeps its place through further renewals. */
    h_sleep_ms(2000);
    ck_assert_int_eq(rlock_lock_state(l2), RLOCK_HELD);
    ck_assert_int_eq(atomic_load(&lost2.count), 0);
    assert_marker(f.r, k.lock, "holder 2 left");
    assert_holder(f.r, &k, rlock_lock_token(l2), "holder 2 left");
    ck_assert_int_eq(zscore(f.r, k.holders, rlock_lock_token(l1), NULL), 0);

    release_ok(c2, l2, "holder 2");
    ck_assert_int_eq(h_key_exists(f.r, k.lock), 0);
    rlock_lock_free(l1);
    rlock_lock_free(l2);
    rlock_close(c2);
    h_fixture_stop(&f);
}
END_TEST

/* --- (f) an unclean end frees the place ------------------------------------------- */

START_TEST(test_unclean_end)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    const char *res = "rw/killed";
    struct keys k;
    keys_of(&f.e, res, &k);

    /* rlockctl run --shared, killed with SIGKILL while an exclusive waiter queues. */
    char ctl[512], err[400];
    h_bin("rlockctl", ctl, sizeof ctl);
    h_env_path(&f.e, "killed.err", err, sizeof err);
    char *argv[] = {ctl, "--server", f.e.rlockd_addr, "run", "--shared", (char *)res,
                    "--", "sleep", "60", NULL};
    pid_t pid = h_spawn_io(argv, NULL, err);
    ck_assert_int_gt(pid, 0);
    wait_value(f.r, k.lock, GROUP_MARKER, GRANT_MS, "rlockctl run --shared");
    ck_assert_int_eq(h_redis_int(f.r, "ZCARD %s", k.holders), 1);
    struct rw_waiter w;
    rw_waiter_start(&w, &f.e, "writer", res, 0);
    wait_waiters(&f.e, 1, GRANT_MS, "the writer queued");
    rw_waiter_still_waits(&w, "while rlockctl holds the lock shared");
    ck_assert_msg(h_alive(pid), "rlockctl run --shared exited early");
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    int status;
    ck_assert_msg(h_wait_exit(pid, 5000, &status) == 0, "rlockctl not reaped after SIGKILL");
    rw_waiter_granted(&w);
    h_assert_key_token(f.r, k.lock, rlock_lock_token(w.l));
    ck_assert_int_eq(h_key_exists(f.r, k.holders), 0);
    rw_waiter_close(&w);

    /* A raw session with a lock_delay closes its socket without Goodbye. */
    res = "rw/dropped";
    keys_of(&f.e, res, &k);
    struct h_peer p;
    h_peer_open(&p, &f.e, "rw-raw");
    struct h_acq a = {.resource = res, .lock_delay_ms = 1500};
    Rlock__V1__Acquire m = h_acquire_msg(&a);
    m.mode = RLOCK__V1__LOCK_MODE__MODE_SHARED;
    struct h_grant g;
    h_peer_expect_grant(&p, h_peer_send(&p, RLOCK__V1__REQUEST__BODY_ACQUIRE, &m), &g,
                        "raw shared with lock_delay");
    assert_marker(f.r, k.lock, "raw shared");
    ck_assert_uint_eq(g.lock_delay_ms, 1500);
    rw_waiter_start(&w, &f.e, "writer 2", res, 0);
    wait_waiters(&f.e, 1, GRANT_MS, "writer 2 queued");
    int64_t t_close = h_now_ms();
    h_raw_close(&p.raw);
    rw_waiter_granted(&w);
    int64_t after = h_now_ms() - t_close;
    printf("unclean: writer 2 granted %lld ms after the socket closed (lock_delay 1500)\n",
           (long long)after);
    fflush(stdout);
    /* A lower bound only: the delay starts when the daemon sees the end, after the close. */
    ck_assert_msg(after >= 1500 - 20, "granted %lld ms after an unclean end with lock_delay 1500",
                  (long long)after);
    h_assert_key_token(f.r, k.lock, rlock_lock_token(w.l));
    rw_waiter_close(&w);

    /* A clean end (rlock_close says Goodbye) applies no lock_delay, however long: with 60 s
     * asked, the writer, which waits 30 s at most, is let in. */
    res = "rw/closed";
    keys_of(&f.e, res, &k);
    struct rlock_client *cl = h_client_or_fail(&f.e, NULL);
    struct rlock_acquire_opts od = {.shared = 1, .lock_delay_ms = 60000};
    struct rlock_lock *ls = NULL;
    h_assert_ok(cl, rlock_acquire(cl, res, &od, CALL_MS, &ls));
    assert_marker(f.r, k.lock, "shared with lock_delay 60 s");
    rw_waiter_start(&w, &f.e, "writer 3", res, 0);
    wait_waiters(&f.e, 1, GRANT_MS, "writer 3 queued");
    rlock_close(cl); /* frees ls too */
    rw_waiter_granted(&w);
    h_assert_key_token(f.r, k.lock, rlock_lock_token(w.l));
    rw_waiter_close(&w);
    h_fixture_stop(&f);
}
END_TEST

/* --- (g) two daemons: the claim ----------------------------------------------------- */

START_TEST(test_two_daemons)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct h_env peer;
    ck_assert_msg(h_env_start_peer(&peer, &f.e, NULL) == 0, "could not start the second rlockd");
    const char *res = "rw/claim";
    struct keys k;
    keys_of(&f.e, res, &k);

    struct rlock_lock *a = acq_ok(f.c, res, 1, 0, "A shared on daemon 1");
    struct rw_waiter b, c;
    rw_waiter_start(&b, &peer, "B (exclusive, daemon 2)", res, 0);
    wait_waiters(&peer, 1, GRANT_MS, "B queued on daemon 2");
    /* B's claim: no new shared holds anywhere. */
    int64_t deadline = h_now_ms() + GRANT_MS;
    while (h_key_exists(f.r, k.claim) != 1 && h_now_ms() < deadline)
        h_sleep_ms(20);
    ck_assert_msg(h_key_exists(f.r, k.claim) == 1, "no claim key %s while B waits", k.claim);

    rw_waiter_start(&c, &f.e, "C (shared, daemon 1)", res, 1);
    wait_waiters(&f.e, 1, GRANT_MS, "C queued on daemon 1");
    rw_waiter_still_waits(&c, "while B, an exclusive request on daemon 2, has its claim");
    rw_waiter_still_waits(&b, "while A holds the lock shared");
    ck_assert_int_eq(h_redis_int(f.r, "ZCARD %s", k.holders), 1);
    /* A try on daemon 1 is refused as well. */
    struct rlock_client *d = h_client_or_fail(&f.e, NULL);
    acq_refused(d, res, 1, 0, RLOCK_ERR_NOT_ACQUIRED, "a shared try on daemon 1 under a claim");

    release_ok(f.c, a, "A");
    rw_waiter_granted(&b);
    h_assert_key_token(f.r, k.lock, rlock_lock_token(b.l));
    ck_assert_msg(h_key_exists(f.r, k.claim) == 0, "B's claim outlived its grant");
    rw_waiter_still_waits(&c, "while B holds the lock exclusive");

    release_ok(b.c, b.l, "B");
    rw_waiter_granted(&c);
    assert_marker(f.r, k.lock, "C granted");
    uint64_t fa = rlock_lock_fence(a), fb = rlock_lock_fence(b.l), fc = rlock_lock_fence(c.l);
    printf("two daemons: fences A %" PRIu64 ", B %" PRIu64 ", C %" PRIu64 "\n", fa, fb, fc);
    fflush(stdout);
    ck_assert_msg(fa < fb && fb < fc, "fences A %" PRIu64 ", B %" PRIu64 ", C %" PRIu64
                  ": not in grant order", fa, fb, fc);

    rw_waiter_close(&c);
    rw_waiter_close(&b);
    ck_assert_int_eq(h_key_exists(f.r, k.lock), 0);
    rlock_lock_free(a);
    rlock_close(d);
    h_assert_env_alive(&peer);
    h_env_stop(&peer);
    h_fixture_stop(&f);
}
END_TEST

/* --- rlockctl run --shared ------------------------------------------------------------ */

/*
 * Each job: append "<kind>+ NAME FENCE" to DIR/rw.log, create DIR/in.NAME, wait (60 s at
 * most, else exit 3) until DIR/go.NAME exists, append "<kind>- NAME", exit 0.
 */
static const char job_script[] =
    "d=$1; n=$2; kind=$3\n"
    "echo \"$kind+ $n $RLOCK_FENCE\" >> \"$d/rw.log\"\n"
    "touch \"$d/in.$n\"\n"
    "i=0\n"
    "while [ ! -e \"$d/go.$n\" ]; do\n"
    "  i=$((i+1)); if [ $i -gt 1200 ]; then echo \"$kind? $n\" >> \"$d/rw.log\"; exit 3; fi\n"
    "  sleep 0.05\n"
    "done\n"
    "echo \"$kind- $n\" >> \"$d/rw.log\"\n";

struct job {
    const char *name;
    int shared;
    pid_t pid;
    char err[400];
};

static void job_start(struct h_fixture *f, struct job *j, const char *res)
{
    char ctl[512];
    h_bin("rlockctl", ctl, sizeof ctl);
    snprintf(j->err, sizeof j->err, "%s/%s.err", f->e.dir, j->name);
    char *argv[20];
    int n = 0;
    argv[n++] = ctl;
    argv[n++] = "--server";
    argv[n++] = f->e.rlockd_addr;
    argv[n++] = "run";
    if (j->shared)
        argv[n++] = "--shared";
    argv[n++] = "--wait";
    argv[n++] = "60s";
    argv[n++] = (char *)res;
    argv[n++] = "--";
    argv[n++] = "/bin/sh";
    argv[n++] = "-c";
    argv[n++] = (char *)job_script;
    argv[n++] = "sh";
    argv[n++] = f->e.dir;
    argv[n++] = (char *)j->name;
    argv[n++] = j->shared ? "S" : "X";
    argv[n] = NULL;
    j->pid = h_spawn_io(argv, NULL, j->err);
    ck_assert_int_gt(j->pid, 0);
}

static int job_in(struct h_fixture *f, const struct job *j)
{
    char path[400];
    struct stat st;
    snprintf(path, sizeof path, "%s/in.%s", f->e.dir, j->name);
    return stat(path, &st) == 0;
}

/* Wait until job j is inside its section (its rlockctl must stay alive). */
static void job_wait_in(struct h_fixture *f, const struct job *j)
{
    int64_t deadline = h_now_ms() + GRANT_MS;
    while (!job_in(f, j)) {
        if (!h_alive(j->pid) || h_now_ms() > deadline) {
            h_print_tail(j->err, 10);
            ck_abort_msg("job %s not inside within %d ms (rlockctl %s)", j->name, GRANT_MS,
                         h_alive(j->pid) ? "still waiting" : "exited");
        }
        h_sleep_ms(20);
    }
}

/* Job j must not be inside, for QUIET_MS. */
static void job_still_out(struct h_fixture *f, const struct job *j, const char *why)
{
    int64_t end = h_now_ms() + QUIET_MS;
    do {
        ck_assert_msg(!job_in(f, j), "job %s got inside %s", j->name, why);
        ck_assert_msg(h_alive(j->pid), "job %s's rlockctl exited while waiting %s", j->name, why);
        h_sleep_ms(20);
    } while (h_now_ms() < end);
}

/* Let job j leave its section, and assert its rlockctl exits 0. */
static void job_finish(struct h_fixture *f, const struct job *j)
{
    char path[400];
    snprintf(path, sizeof path, "%s/go.%s", f->e.dir, j->name);
    FILE *fp = fopen(path, "w");
    ck_assert_ptr_nonnull(fp);
    fclose(fp);
    int status = 0;
    int waited = h_wait_exit(j->pid, GRANT_MS, &status);
    if (waited != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        h_print_tail(j->err, 10);
    ck_assert_msg(waited == 0, "job %s's rlockctl did not exit", j->name);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "job %s: status 0x%x", j->name,
                  status);
}

START_TEST(test_rlockctl_shared)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    const char *res = "rw/ctl";
    struct keys k;
    keys_of(&f.e, res, &k);
    struct job s1 = {.name = "s1", .shared = 1}, s2 = {.name = "s2", .shared = 1};
    struct job x1 = {.name = "x1"}, s3 = {.name = "s3", .shared = 1}, s4 = {.name = "s4", .shared = 1};

    /* Two shared jobs: both inside at once (neither leaves before the test says so). */
    job_start(&f, &s1, res);
    job_start(&f, &s2, res);
    job_wait_in(&f, &s1);
    job_wait_in(&f, &s2);
    assert_marker(f.r, k.lock, "two rlockctl run --shared");
    ck_assert_int_eq(h_redis_int(f.r, "ZCARD %s", k.holders), 2);

    /* An exclusive job waits for both. */
    job_start(&f, &x1, res);
    wait_waiters(&f.e, 1, GRANT_MS, "the exclusive rlockctl run queued");
    job_still_out(&f, &x1, "while two shared jobs run");
    job_finish(&f, &s1);
    job_still_out(&f, &x1, "while one shared job runs");
    /* A shared job started now queues behind the exclusive one. */
    job_start(&f, &s3, res);
    wait_waiters(&f.e, 2, GRANT_MS, "a shared rlockctl run queued behind the exclusive one");
    job_still_out(&f, &s3, "while an exclusive job waits before it");
    job_finish(&f, &s2);
    job_wait_in(&f, &x1);
    job_start(&f, &s4, res);
    wait_waiters(&f.e, 2, GRANT_MS, "two shared rlockctl run queued behind the exclusive one");
    job_still_out(&f, &s3, "while the exclusive job runs");
    ck_assert_msg(!job_in(&f, &s4), "job s4 got inside while the exclusive job runs");
    job_finish(&f, &x1);
    /* Both shared jobs queued behind it are let in together. */
    job_wait_in(&f, &s3);
    job_wait_in(&f, &s4);
    job_finish(&f, &s3);
    job_finish(&f, &s4);
    ck_assert_int_eq(h_key_exists(f.r, k.lock), 0);

    /* The log: sections never overlap an exclusive one; fences grow along the grants. */
    char path[400];
    snprintf(path, sizeof path, "%s/rw.log", f.e.dir);
    char *log = h_read_file(path);
    ck_assert_ptr_nonnull(log);
    printf("rlockctl --shared log:\n%s", log);
    fflush(stdout);
    int shared_in = 0, excl_in = 0, lines = 0;
    uint64_t fence_of[5] = {0};
    const char *names[5] = {"s1", "s2", "x1", "s3", "s4"};
    for (char *line = strtok(log, "\n"); line != NULL; line = strtok(NULL, "\n"), lines++) {
        char kind, sign, name[16] = "";
        unsigned long long fence = 0;
        int n = sscanf(line, "%c%c %15s %llu", &kind, &sign, name, &fence);
        ck_assert_msg(n >= 3 && (kind == 'S' || kind == 'X') && (sign == '+' || sign == '-'),
                      "log line \"%s\"", line);
        if (sign == '+') {
            ck_assert_msg(n == 4 && fence > 0, "log line \"%s\": no fence", line);
            for (int i = 0; i < 5; i++)
                if (strcmp(name, names[i]) == 0)
                    fence_of[i] = fence;
            if (kind == 'S') {
                ck_assert_msg(excl_in == 0, "\"%s\" while the exclusive job ran", line);
                shared_in++;
            } else {
                ck_assert_msg(shared_in == 0 && excl_in == 0, "\"%s\" while %d shared ran", line,
                              shared_in);
                excl_in++;
            }
        } else {
            if (kind == 'S')
                shared_in--;
            else
                excl_in--;
        }
    }
    free(log);
    ck_assert_int_eq(lines, 10);
    for (int i = 0; i < 5; i++)
        ck_assert_msg(fence_of[i] > 0, "no fence logged for %s", names[i]);
    ck_assert_msg(fence_of[2] > fence_of[0] && fence_of[2] > fence_of[1] &&
                      fence_of[3] > fence_of[2] && fence_of[4] > fence_of[2],
                  "fences s1 %" PRIu64 " s2 %" PRIu64 " x1 %" PRIu64 " s3 %" PRIu64 " s4 %" PRIu64,
                  fence_of[0], fence_of[1], fence_of[2], fence_of[3], fence_of[4]);

    /* --help names the option. */
    char ctl[512], out[400];
    h_bin("rlockctl", ctl, sizeof ctl);
    h_env_path(&f.e, "help.out", out, sizeof out);
    char *help_argv[] = {ctl, "run", "--help", NULL};
    pid_t hp = h_spawn(help_argv, out);
    int status;
    ck_assert_msg(h_wait_exit(hp, 10000, &status) == 0 && WIFEXITED(status) &&
                      WEXITSTATUS(status) == 0, "rlockctl run --help failed");
    char *help = h_read_file(out);
    ck_assert_msg(help != NULL && strstr(help, "--shared") != NULL,
                  "rlockctl run --help does not name --shared");
    free(help);
    h_fixture_stop(&f);
}
END_TEST

/* --- eight processes mix shared and exclusive holds ------------------------------------ */

/*
 * Eight forked processes, each with a librlock client of its own, take one resource
 * round after round: five readers (shared, but every fifth round exclusive) and three
 * writers (exclusive). Each hold lasts some tens of ms. Each process logs, per round,
 * on CLOCK_MONOTONIC (one clock for all processes of the machine), in microseconds:
 *   sent     read right before rlock_acquire (so before the request leaves);
 *   queued   exclusive rounds only: read right after a listing of the daemon's sessions,
 *            made by a second client of the process while the acquire is out, showed the
 *            acquire's session with an Acquire in the resource's wait queue (0: never seen
 *            so, e.g. granted before a listing came back);
 *   granted  read right after rlock_acquire returned;
 *   exited   read right before rlock_release;
 * and the grant's fence. [granted, exited] lies within the real hold, so two such
 * intervals that intersect are holds that overlapped.
 *
 * Why "queued" rather than "sent plus a margin" for the starvation check: a request sent
 * a little after another may reach the daemon first, and how long "a little" can be
 * depends on the load of the machine. Once the daemon has been seen with X in its queue,
 * any request sent later arrives behind X, whatever the load: the FIFO (docs/protocol.md
 * §6.1, §6.2) must then grant X first, which Redis's fence sequence shows.
 */
#define MIX_PROCS 8
#define MIX_READERS 5 /* processes 0-4; 5-7 are writers */
#define MIX_READER_ROUNDS 10
#define MIX_WRITER_ROUNDS 6
#define MIX_WAIT_MS 20000u /* each acquire's wait: far longer than the whole run takes */
#define MIX_DEADLINE_MS 60000

struct mix_rec {
    int proc, round, shared;
    long long sent, queued, granted, exited; /* us, CLOCK_MONOTONIC */
    unsigned long long fence;
};

static long long mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int mix_round_shared(int proc, int round)
{
    return proc < MIX_READERS && round % 5 != proc % 5;
}

static int mix_rounds(int proc)
{
    return proc < MIX_READERS ? MIX_READER_ROUNDS : MIX_WRITER_ROUNDS;
}

/* The second client of a process, watching the daemon's sessions while an exclusive
 * acquire of the first one is out. */
struct mix_watch {
    pthread_mutex_t mu;
    pthread_cond_t cv;  /* round or stop changed */
    int round;          /* the exclusive round whose acquire is out; -1: none */
    long long queued;   /* when that acquire was seen queued (0: not yet) */
    int stop;
    int errors;
    struct rlock_client *c;
    char session[64];   /* the session of the acquires */
};

struct mix_seen {
    const char *id;
    uint32_t waiting;
};

static int mix_visit(const struct rlock_session_entry *se, void *arg)
{
    struct mix_seen *s = arg;
    if (strcmp(se->id, s->id) != 0)
        return 0;
    s->waiting = se->waiting;
    return 1;
}

static void *mix_watch_main(void *arg)
{
    struct mix_watch *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->stop && (w->round < 0 || w->queued != 0))
            pthread_cond_wait(&w->cv, &w->mu);
        if (w->stop)
            break;
        int round = w->round;
        pthread_mutex_unlock(&w->mu);
        struct mix_seen seen = {.id = w->session};
        char next[RLOCK_CURSOR_BYTES];
        enum rlock_err rc = rlock_list_sessions(w->c, "", RLOCK_LIST_LIMIT_MAX, mix_visit, &seen,
                                                next, sizeof next, CALL_MS);
        long long t = mono_us();
        pthread_mutex_lock(&w->mu);
        if (rc != RLOCK_OK)
            w->errors++;
        /* The round is still the same: only its acquire was out through the whole listing. */
        if (rc == RLOCK_OK && seen.waiting > 0 && w->round == round && w->queued == 0)
            w->queued = t;
        if (w->queued == 0 && !w->stop) {
            pthread_mutex_unlock(&w->mu);
            h_sleep_ms(2);
            pthread_mutex_lock(&w->mu);
        }
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* A forked process: connect both clients, say so on ready_fd, wait until go_fd ends, do
 * the rounds, write them to out_path; exit 0, or 2 (why on stderr and in the file). */
static void mix_child(struct h_env *e, int proc, const char *res, int ready_fd, int go_fd,
                      const char *out_path)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    FILE *out = fopen(out_path, "w");
    if (out == NULL)
        _exit(2);
    char name[32], wname[32];
    snprintf(name, sizeof name, "mix-%d", proc);
    snprintf(wname, sizeof wname, "mix-%d-watch", proc);
    struct rlock_options o = {.client_name = name}, ow = {.client_name = wname};
    struct rlock_client *c = NULL;
    struct mix_watch w = {.round = -1};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    char err[256] = "";
    enum rlock_err rc = rlock_connect(e->rlockd_addr, &o, &c, err, sizeof err);
    if (rc == RLOCK_OK)
        rc = rlock_connect(e->rlockd_addr, &ow, &w.c, err, sizeof err);
    if (rc != RLOCK_OK) {
        fprintf(out, "FAIL connect: %s (%s)\n", rlock_strerror(rc), err);
        fprintf(stderr, "mix %d: connect: %s (%s)\n", proc, rlock_strerror(rc), err);
        fclose(out);
        _exit(2);
    }
    snprintf(w.session, sizeof w.session, "%s", rlock_session_id(c));
    pthread_t watcher;
    if (pthread_create(&watcher, NULL, mix_watch_main, &w) != 0)
        _exit(2);
    char b = 'r';
    if (write(ready_fd, &b, 1) != 1)
        _exit(2);
    close(ready_fd);
    while (read(go_fd, &b, 1) > 0) /* the parent closes its end: go */
        ;
    close(go_fd);

    unsigned rng = 2463534242u ^ (unsigned)(proc * 7919 + 1);
#define MIX_RAND(n) (rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5, (int)(rng % (n)))
    int failed = 0;
    for (int i = 0; i < mix_rounds(proc) && !failed; i++) {
        int shared = mix_round_shared(proc, i);
        h_sleep_ms(MIX_RAND(15)); /* think */
        if (!shared) {
            pthread_mutex_lock(&w.mu);
            w.round = i;
            w.queued = 0;
            pthread_cond_signal(&w.cv);
            pthread_mutex_unlock(&w.mu);
        }
        struct rlock_acquire_opts ao = {.wait_ms = MIX_WAIT_MS, .shared = shared};
        struct rlock_lock *l = NULL;
        long long sent = mono_us();
        rc = rlock_acquire(c, res, &ao, CALL_MS, &l);
        long long granted = mono_us(), queued = 0;
        if (!shared) {
            pthread_mutex_lock(&w.mu);
            queued = w.queued;
            w.round = -1;
            pthread_mutex_unlock(&w.mu);
        }
        if (rc != RLOCK_OK) {
            char msg[256];
            rlock_errmsg(c, msg, sizeof msg);
            fprintf(out, "FAIL round %d: %s acquire: %s (%s)\n", i,
                    shared ? "shared" : "exclusive", rlock_strerror(rc), msg);
            fprintf(stderr, "mix %d: round %d: acquire: %s (%s)\n", proc, i, rlock_strerror(rc),
                    msg);
            failed = 1;
            break;
        }
        h_sleep_ms(shared ? 30 + MIX_RAND(41) : 20 + MIX_RAND(21)); /* the hold */
        long long exited = mono_us();
        unsigned long long fence = rlock_lock_fence(l);
        rc = rlock_release(l, CALL_MS);
        rlock_lock_free(l);
        if (rc != RLOCK_OK) {
            fprintf(out, "FAIL round %d: release: %s\n", i, rlock_strerror(rc));
            fprintf(stderr, "mix %d: round %d: release: %s\n", proc, i, rlock_strerror(rc));
            failed = 1;
            break;
        }
        fprintf(out, "%d %d %c %lld %lld %lld %lld %llu\n", proc, i, shared ? 'S' : 'X', sent,
                queued, granted, exited, fence);
    }
#undef MIX_RAND
    pthread_mutex_lock(&w.mu);
    w.stop = 1;
    pthread_cond_signal(&w.cv);
    int werr = w.errors;
    pthread_mutex_unlock(&w.mu);
    pthread_join(watcher, NULL);
    if (werr > 0) {
        fprintf(out, "FAIL %d session listings failed\n", werr);
        fprintf(stderr, "mix %d: %d session listings failed\n", proc, werr);
        failed = 1;
    }
    rlock_close(w.c);
    rlock_close(c);
    if (fclose(out) != 0)
        failed = 1;
    _exit(failed ? 2 : 0);
}

/* Read every process's records into recs (MIX_PROCS * MIX_READER_ROUNDS room); their count. */
static int mix_read(struct h_fixture *f, struct mix_rec *recs)
{
    int n = 0;
    for (int p = 0; p < MIX_PROCS; p++) {
        char path[400];
        snprintf(path, sizeof path, "%s/mix.%d", f->e.dir, p);
        char *text = h_read_file(path);
        ck_assert_msg(text != NULL, "process %d wrote no %s", p, path);
        int mine = 0;
        char *save = NULL;
        for (char *line = strtok_r(text, "\n", &save); line != NULL;
             line = strtok_r(NULL, "\n", &save)) {
            struct mix_rec *r = &recs[n];
            char mode = 0;
            ck_assert_msg(n < MIX_PROCS * MIX_READER_ROUNDS, "too many records");
            int got = sscanf(line, "%d %d %c %lld %lld %lld %lld %llu", &r->proc, &r->round,
                             &mode, &r->sent, &r->queued, &r->granted, &r->exited, &r->fence);
            ck_assert_msg(got == 8 && r->proc == p && (mode == 'S' || mode == 'X'),
                          "process %d: record \"%s\"", p, line);
            r->shared = mode == 'S';
            ck_assert_msg(r->fence > 0 && r->sent <= r->granted && r->granted <= r->exited,
                          "process %d: record \"%s\"", p, line);
            n++;
            mine++;
        }
        free(text);
        ck_assert_msg(mine == mix_rounds(p), "process %d logged %d rounds, want %d", p, mine,
                      mix_rounds(p));
    }
    return n;
}

static void mix_print(const char *what, const struct mix_rec *r, long long t0)
{
    printf("  %s: process %d round %d %s: sent %+.1f ms, queued %s%.1f, granted %+.1f, "
           "exited %+.1f, fence %llu\n",
           what, r->proc, r->round, r->shared ? "shared" : "exclusive", (r->sent - t0) / 1e3,
           r->queued ? "+" : "(not seen) ", r->queued ? (r->queued - t0) / 1e3 : 0.0,
           (r->granted - t0) / 1e3, (r->exited - t0) / 1e3, r->fence);
}

START_TEST(test_mixed_processes)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL); /* no client here: the processes fork from this one */
    const char *res = "rw/mixed";
    int ready[2], go[2];
    ck_assert_int_eq(pipe(ready), 0);
    ck_assert_int_eq(pipe(go), 0);
    pid_t pids[MIX_PROCS];
    fflush(NULL);
    for (int p = 0; p < MIX_PROCS; p++) {
        char path[400];
        snprintf(path, sizeof path, "%s/mix.%d", f.e.dir, p);
        pids[p] = fork();
        ck_assert_msg(pids[p] >= 0, "fork: %s", strerror(errno));
        if (pids[p] == 0) {
            close(ready[0]);
            close(go[1]);
            mix_child(&f.e, p, res, ready[1], go[0], path);
        }
    }
    close(ready[1]);
    close(go[0]);
    /* All connected, then all start at once. */
    int64_t deadline = h_now_ms() + GRANT_MS;
    for (int got = 0; got < MIX_PROCS;) {
        struct pollfd pfd = {.fd = ready[0], .events = POLLIN};
        int left = (int)(deadline - h_now_ms());
        ck_assert_msg(left > 0 && poll(&pfd, 1, left) == 1,
                      "%d of %d processes connected within %d ms", got, MIX_PROCS, GRANT_MS);
        char buf[MIX_PROCS];
        ssize_t r = read(ready[0], buf, sizeof buf);
        ck_assert_msg(r > 0, "%d of %d processes connected (the others exited)", got, MIX_PROCS);
        got += (int)r;
    }
    close(ready[0]);
    int64_t t_start = h_now_ms();
    close(go[1]);
    int statuses[MIX_PROCS];
    if (h_wait_all(pids, MIX_PROCS, MIX_DEADLINE_MS, statuses, &f.e) != 0) {
        for (int p = 0; p < MIX_PROCS; p++)
            if (h_alive(pids[p]))
                h_stop_pid(pids[p], SIGKILL, 1000, "a mixed-holds process", NULL);
        ck_abort_msg("the processes did not all finish within %d ms", MIX_DEADLINE_MS);
    }
    int64_t took = h_now_ms() - t_start;
    for (int p = 0; p < MIX_PROCS; p++) {
        char st[64];
        ck_assert_msg(WIFEXITED(statuses[p]) && WEXITSTATUS(statuses[p]) == 0,
                      "process %d: %s", p, h_status_str(statuses[p], st, sizeof st));
    }
    char key[256];
    ck_assert_int_eq(h_key_exists(f.r, h_lock_key(&f.e, res, key, sizeof key)), 0);

    static struct mix_rec recs[MIX_PROCS * MIX_READER_ROUNDS];
    int n = mix_read(&f, recs);
    long long t0 = recs[0].sent;
    for (int i = 0; i < n; i++)
        if (recs[i].sent < t0)
            t0 = recs[i].sent;

    /* Fences: one sequence, a fresh one for every grant. */
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            ck_assert_msg(recs[i].fence != recs[j].fence, "two grants with fence %llu",
                          recs[i].fence);

    int nx = 0, pairs_shared = 0, pairs_excl = 0, queued_seen = 0;
    long long longest_wait = 0;
    for (int i = 0; i < n; i++) {
        const struct mix_rec *x = &recs[i];
        if (x->shared)
            continue;
        nx++;
        if (x->granted - x->sent > longest_wait)
            longest_wait = x->granted - x->sent;
        queued_seen += x->queued != 0;
        for (int j = 0; j < n; j++) {
            const struct mix_rec *h = &recs[j];
            if (j == i)
                continue;
            /* (1) No hold overlaps an exclusive one. */
            if (h->granted < x->exited && x->granted < h->exited) {
                mix_print("exclusive", x, t0);
                mix_print("overlapping", h, t0);
                ck_abort_msg("a %s hold overlaps an exclusive one",
                             h->shared ? "shared" : "exclusive");
            }
            /* (4) Fences follow the order of the holds around an exclusive one: as
             * [granted, exited] lies within each hold, one logged as ended before x began
             * was granted before x, and one logged as begun after x ended was granted after
             * x (x excludes everyone while it holds). */
            if ((h->exited < x->granted && h->fence > x->fence) ||
                (h->granted > x->exited && h->fence < x->fence)) {
                mix_print("exclusive", x, t0);
                mix_print(h->exited < x->granted ? "held before it" : "held after it", h, t0);
                ck_abort_msg("fence %llu of an exclusive hold and %llu of one %s it", x->fence,
                             h->fence, h->exited < x->granted ? "before" : "after");
            }
            /* (3) Sent after the daemon was seen holding x in its queue: granted after x. */
            if (x->queued != 0 && h->sent > x->queued) {
                if (h->sent < x->granted) /* while x waited: not after it anyway */
                    *(h->shared ? &pairs_shared : &pairs_excl) += 1;
                if (h->fence < x->fence) {
                    mix_print("exclusive, queued", x, t0);
                    mix_print("sent after it was seen queued, granted before it", h, t0);
                    ck_abort_msg("a %s request overtook a waiting exclusive one (fence %llu < "
                                 "%llu)", h->shared ? "shared" : "exclusive", h->fence,
                                 x->fence);
                }
            }
        }
    }

    /* (2) Shared holds overlapped: the most at once. */
    int most = 0;
    for (int i = 0; i < n; i++) {
        if (!recs[i].shared)
            continue;
        int at_once = 0; /* the shared holds in at recs[i]'s grant */
        for (int j = 0; j < n; j++)
            at_once += recs[j].shared && recs[j].granted <= recs[i].granted &&
                       recs[i].granted < recs[j].exited;
        if (at_once > most)
            most = at_once;
    }
    printf("mixed: %d holds (%d exclusive) by %d processes in %lld ms; at most %d shared at "
           "once; longest exclusive wait %.1f ms; %d exclusive acquires seen queued; requests "
           "sent while they waited so: %d shared, %d exclusive\n",
           n, nx, MIX_PROCS, (long long)took, most, longest_wait / 1e3, queued_seen, pairs_shared,
           pairs_excl);
    fflush(stdout);
    ck_assert_msg(most > 1, "shared holds never overlapped (at most %d at once)", most);
    /* The starvation check must have had something to check. */
    ck_assert_msg(pairs_shared > 0,
                  "no shared request was sent while an exclusive one was seen waiting in the "
                  "queue (%d exclusive acquires seen queued)", queued_seen);
    h_fixture_stop(&f);
}
END_TEST

/* --- no upgrade for a lone owner; renewals of both kinds in one client ------------------ */

/*
 * The owner holding a resource shared, alone (no other owner joined), asks for
 * it exclusive: WRONG_KIND, not a wait for itself. Another owner of the same
 * session asking exclusive waits for the holder (a try: NOT_ACQUIRED).
 */
START_TEST(test_upgrade_lone_owner)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rlock_lock *l = acq_ok(f.c, "rw/lone", 1, 7, "shared by owner 7");
    acq_refused(f.c, "rw/lone", 0, 7, RLOCK_ERR_WRONG_KIND, "exclusive by owner 7, holding shared");
    acq_refused(f.c, "rw/lone", 0, 8, RLOCK_ERR_NOT_ACQUIRED,
                "exclusive by owner 8 while owner 7 alone holds it shared");
    /* The refusals changed nothing: one hold, still shared. */
    ck_assert_uint_eq(rlock_lock_hold_count(l), 1);
    release_ok(f.c, l, "the shared hold");
    rlock_lock_free(l);
    h_fixture_stop(&f);
}
END_TEST

/*
 * One client holds exclusive and shared locks together, all renewed by the
 * daemon with a short ttl: the renewals of the two kinds (renew.lua and
 * group_renew.lua, a batch of one kind each) keep every one of them past
 * several ttls, and none is lost.
 */
#define MIXED_N 8

/* Counts the listed locks of each kind (arg: int[2], exclusive then shared). */
static int count_kinds(const struct rlock_lock_entry *e, void *arg)
{
    int *n = arg;
    ck_assert_uint_eq(e->limit, 0);
    n[e->shared ? 1 : 0]++;
    return 0;
}

START_TEST(test_renew_both_kinds)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rlock_lock *x[MIXED_N], *sh[MIXED_N];
    char name[64];
    for (int i = 0; i < MIXED_N; i++) {
        snprintf(name, sizeof name, "rw/both-x%d", i);
        ck_assert_int_eq(acq(f.c, name, 0, 0, 1500, 0, &x[i]), RLOCK_OK);
        snprintf(name, sizeof name, "rw/both-s%d", i);
        ck_assert_int_eq(acq(f.c, name, 1, 0, 1500, 0, &sh[i]), RLOCK_OK);
    }
    h_sleep_ms(5000); /* more than three ttls: only renewals keep them */
    ck_assert_msg(atomic_load(&f.lost.count) == 0, "%d locks lost (reason of the latest: %d)",
                  atomic_load(&f.lost.count), atomic_load(&f.lost.reason));
    for (int i = 0; i < MIXED_N; i++) {
        ck_assert_int_eq(rlock_lock_state(x[i]), RLOCK_HELD);
        ck_assert_int_eq(rlock_lock_state(sh[i]), RLOCK_HELD);
        struct keys k;
        keys_of(&f.e, rlock_lock_resource(x[i]), &k);
        h_assert_key_token(f.r, k.lock, rlock_lock_token(x[i]));
        keys_of(&f.e, rlock_lock_resource(sh[i]), &k);
        assert_holder(f.r, &k, rlock_lock_token(sh[i]), "shared, renewed with exclusive ones");
    }
    /* The listing tells the kinds apart. */
    int kinds[2] = {0, 0};
    char next[128];
    ck_assert_int_eq(rlock_list_locks(f.c, NULL, NULL, 100, count_kinds, kinds, next,
                                      sizeof next, CALL_MS),
                     RLOCK_OK);
    ck_assert_int_eq(kinds[0], MIXED_N);
    ck_assert_int_eq(kinds[1], MIXED_N);
    /* And so do the metrics. */
    ck_assert_double_eq(h_metric(&f.e, "rlockd_locks_held_by_kind{kind=\"exclusive\"}"), MIXED_N);
    ck_assert_double_eq(h_metric(&f.e, "rlockd_locks_held_by_kind{kind=\"shared\"}"), MIXED_N);
    ck_assert_double_eq(h_metric(&f.e, "rlockd_locks_held_by_kind{kind=\"semaphore\"}"), 0);
    for (int i = 0; i < MIXED_N; i++) {
        release_ok(f.c, x[i], "exclusive");
        release_ok(f.c, sh[i], "shared");
        rlock_lock_free(x[i]);
        rlock_lock_free(sh[i]);
    }
    h_fixture_stop(&f);
}
END_TEST

/* f's client holds res (shared or not, ttl 60 s); then Redis loses every key (FLUSHALL). */
static struct rlock_lock *hold_then_flush(struct h_fixture *f, const char *res, int shared)
{
    struct rlock_lock *l;
    ck_assert_int_eq(acq(f->c, res, shared, 0, 60000, 0, &l), RLOCK_OK);
    redisReply *rep = redisCommand(f->r, "FLUSHALL");
    ck_assert_ptr_nonnull(rep);
    freeReplyObject(rep);
    return l;
}

/* f's client is told, soon, that a lock is gone: MISSING. */
static void told_missing(struct h_fixture *f, const char *what)
{
    for (int64_t t0 = h_now_ms(); atomic_load(&f->lost.count) == 0; h_sleep_ms(20))
        ck_assert_msg(h_now_ms() - t0 < 5000, "%s", what);
    ck_assert_int_eq(atomic_load(&f->lost.reason), RLOCK_LOST_MISSING);
}

/*
 * Redis loses a shared holder's keys (FLUSHALL) and an exclusive try through
 * the same daemon finds the key free: the reader is told at once (MISSING),
 * not at its next renewal a third of its 60 s ttl later, and the writer is
 * refused while the reader's promise runs (the tombstone keeps it).
 */
START_TEST(test_lost_group_told_at_grant)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rlock_lock *l = hold_then_flush(&f, "rw/flushed", 1);
    struct rlock_client *c2 = h_client_or_fail(&f.e, NULL);
    acq_refused(c2, "rw/flushed", 0, 0, RLOCK_ERR_NOT_ACQUIRED,
                "exclusive while the lost reader's promise runs");
    told_missing(&f, "the reader was not told its place was gone when the key was found free");
    ck_assert_int_eq(rlock_lock_state(l), RLOCK_LOST);
    rlock_lock_free(l);
    rlock_close(c2);
    h_fixture_stop(&f);
}
END_TEST

/*
 * Redis loses an exclusive holder's key (FLUSHALL) and a shared try through the
 * same daemon finds the resource free: the holder is told (MISSING), the
 * reader is refused, and the reader's place stays in Redis as the tombstone of
 * the holder's promise (the group's marker keeps the key taken: a tombstone
 * could not be set over it) — an exclusive try on any daemon is refused
 * meanwhile, instead of finding the key free once the place was given back.
 */
START_TEST(test_lost_exclusive_shared_grant)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rlock_lock *a = hold_then_flush(&f, "rw/flushed-x", 0);
    struct rlock_client *b = h_client_or_fail(&f.e, NULL), *c = h_client_or_fail(&f.e, NULL);
    acq_refused(b, "rw/flushed-x", 1, 0, RLOCK_ERR_NOT_ACQUIRED,
                "shared while the lost writer's promise runs");
    told_missing(&f, "the writer was not told its key was gone");
    h_sleep_ms(500); /* whatever the daemon sends about it has run */
    struct keys k;
    keys_of(&f.e, "rw/flushed-x", &k);
    ck_assert_msg(h_key_exists(f.r, k.lock) == 1,
                  "the key is free while the lost writer was promised it for a minute");
    acq_refused(c, "rw/flushed-x", 0, 0, RLOCK_ERR_NOT_ACQUIRED,
                "exclusive while the lost writer's promise runs");
    rlock_lock_free(a);
    rlock_close(b);
    rlock_close(c);
    h_fixture_stop(&f);
}
END_TEST

/*
 * An exclusive waiter that claimed the resource gives up (its wait runs out):
 * its claim goes with it, so a reader asking right after is let in — not held
 * back until the claim lapses by itself seconds later.
 */
START_TEST(test_claim_dropped)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct keys k;
    keys_of(&f.e, "rw/claim-drop", &k);
    struct rlock_lock *a = acq_ok(f.c, "rw/claim-drop", 1, 0, "reader A");
    struct rlock_client *w = h_client_or_fail(&f.e, NULL), *c = h_client_or_fail(&f.e, NULL);
    struct rlock_lock *l;
    /* The writer waits past a second try (the one that claims) and gives up. */
    enum rlock_err rc = acq(w, "rw/claim-drop", 0, 2500, 0, 0, &l);
    ck_assert_msg(rc == RLOCK_ERR_TIMEOUT, "the writer behind a reader: %s", rlock_strerror(rc));
    struct rlock_lock *b = acq_ok(c, "rw/claim-drop", 1, 0,
                                  "reader B right after the writer gave up its wait");
    ck_assert_int_eq(h_key_exists(f.r, k.claim), 0);
    release_ok(c, b, "reader B");
    release_ok(f.c, a, "reader A");
    rlock_lock_free(b);
    rlock_lock_free(a);
    rlock_close(w);
    rlock_close(c);
    h_fixture_stop(&f);
}
END_TEST

/* --- a daemon restart: shared jobs and semaphore jobs go on ----------------------------- */

/*
 * `rlockctl run --shared` and `rlockctl run --limit 2` jobs across a restart
 * of their daemon (SIGTERM: handover, with a resume key): the sessions resume
 * on the new daemon, which adopts their places among the holders; the jobs are
 * never signalled and exit 0, and the places stay while the daemon is down.
 */
START_TEST(test_restart_keeps_groups)
{
    struct h_keydir kd;
    h_keydir_make(&kd, NULL);
    struct h_env e;
    h_env_start_or_fail(&e, kd.ini);
    char bin[512], marks[320], job[900];
    h_bin("rlockctl", bin, sizeof bin);
    h_env_path(&e, "marks", marks, sizeof marks);
    snprintf(job, sizeof job,
             "trap 'echo signalled >> %s; exit 3' TERM INT HUP; sleep 7; echo end >> %s", marks,
             marks);
    char *shared_argv[] = {bin, "run", "--server", e.rlockd_addr, "--ttl", "4s", "--shared",
                           "rw/restart-s", "--", "/bin/sh", "-c", job, NULL};
    char *sem_argv[] = {bin, "run", "--server", e.rlockd_addr, "--ttl", "4s", "--limit", "2",
                        "rw/restart-m", "--", "/bin/sh", "-c", job, NULL};
    char out[320], errs[320], errm[320];
    h_env_path(&e, "run.out", out, sizeof out);
    h_env_path(&e, "shared.err", errs, sizeof errs);
    h_env_path(&e, "sem.err", errm, sizeof errm);
    pid_t js = h_spawn_io(shared_argv, out, errs), jm = h_spawn_io(sem_argv, out, errm);
    ck_assert_int_gt(js, 0);
    ck_assert_int_gt(jm, 0);
    redisContext *r = h_redis(&e);
    struct keys ks, km;
    keys_of(&e, "rw/restart-s", &ks);
    keys_of(&e, "rw/restart-m", &km);
    wait_value(r, ks.lock, GROUP_MARKER, 10000, "the shared job's hold");
    wait_value(r, km.lock, "group:sem:2", 10000, "the semaphore job's permit");

    pid_t old = e.rlockd_pid;
    ck_assert_int_eq(kill(old, SIGTERM), 0);
    int status;
    ck_assert_msg(h_wait_exit(old, 10000, &status) == 0, "rlockd did not exit once its clients left");
    e.rlockd_pid = 0;
    ck_assert_int_eq(h_redis_int(r, "ZCARD %s", ks.holders), 1);
    ck_assert_int_eq(h_redis_int(r, "ZCARD %s", km.holders), 1);
    h_sleep_ms(1000);
    ck_assert_int_eq(h_rlockd_start(&e), 0);

    ck_assert_msg(h_wait_exit(js, 30000, &status) == 0, "the shared rlockctl run did not end");
    h_print_tail(errs, 20);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "shared run: %s",
                  h_status_str(status, (char[64]){0}, 64));
    ck_assert_msg(h_wait_exit(jm, 30000, &status) == 0, "the semaphore rlockctl run did not end");
    h_print_tail(errm, 20);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "semaphore run: %s",
                  h_status_str(status, (char[64]){0}, 64));
    char *text = h_read_file(marks);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(strstr(text, "signalled") == NULL, "a job was signalled: %s", text);
    ck_assert_msg(strstr(text, "end\nend\n") != NULL, "both jobs should have ended: %s", text);
    free(text);
    /* Released on the new daemon: no place is left behind. */
    ck_assert_int_eq(h_key_exists(r, ks.lock), 0);
    ck_assert_int_eq(h_key_exists(r, km.lock), 0);
    redisFree(r);
    h_env_stop(&e);
    h_keydir_remove(&kd);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_together,         test_writer_after_readers, test_fifo,
                            test_one_session,      test_renewal_and_loss,     test_unclean_end,
                            test_two_daemons,      test_rlockctl_shared,
                            test_mixed_processes,  test_upgrade_lone_owner,   test_renew_both_kinds,
                            test_lost_group_told_at_grant, test_restart_keeps_groups,
                            test_claim_dropped,    test_lost_exclusive_shared_grant};
    return h_run_tests("rwlock", 120, tests, H_LEN(tests));
}
