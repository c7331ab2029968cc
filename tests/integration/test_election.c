/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_election.c — leader elections: a campaign (Acquire.campaign with a value,
 * rlock_acquire_opts.campaign_value), Leader, Observe and its LeaderChanged events
 * (docs/protocol.md, docs/design-kinds.md "Leader election"), `rlockctl elect` and
 * `rlockctl leader`. Real redis-server and rlockd processes.
 *
 *  - campaign_term: a campaign's grant has fence = term; Leader (from another client)
 *    says elected, that term, the value and a lease left; ListLocks flags it a leader (an
 *    ordinary lock not); resigning (a release) leaves no leader;
 *  - leader_renewed: a leader with a 1 s lease is still shown, same term, after four
 *    leases (the daemon's renewals keep its record);
 *  - no_leader: Leader of a name nobody ever campaigned for, or held by an ordinary
 *    lock: not elected, term 0, ""; the lock's owner campaigning for it is refused
 *    WRONG_KIND (no re-entry into a plain lock);
 *  - second_candidate: B campaigns with a wait while A leads and is still waiting a
 *    while later; A resigns, B is granted with a higher term, Leader shows B;
 *  - lost_key_no_phantom: Redis loses A's keys (FLUSHALL) while A leads; B's campaign
 *    (1.5 s wait) times out without its leader record ever being written;
 *  - observe: a client observing sees the leader now, then, in order, LeaderChanged
 *    for A's resignation (elected 0), for B (higher term), for B's resignation and
 *    C's election while C waited (terms never going down, C's last); after
 *    rlock_observe_stop no further call; the asynchronous API campaigns, reads and
 *    observes too;
 *  - observe_wire: what the daemon pushes, read on raw sessions (no library filter):
 *    one LeaderChanged per change, none when another session's Observe (or the same
 *    session's again) only reads the election again;
 *  - observe_moves: an observing session moved to another daemon (its own killed)
 *    observes there again (a change made meanwhile reported once, later ones pushed by
 *    the new daemon); a leader whose session moved still leads, same term and value;
 *  - observe_retried: the Observe the library sends after a move is refused (the new
 *    daemon's Redis stopped across the move: UNAVAILABLE, no observer kept); it is sent
 *    again until observed, and a leader elected once Redis is back, and its resignation,
 *    reach on_leader;
 *  - observe_refused: a daemon that lets a session observe one election; the observer
 *    moves there with two: one is refused LIMIT_EXCEEDED for 5 s, then given up (on_leader
 *    with elected 0, term 0 and the reason) and no longer observed; rlock_observe observes
 *    it again once the other is stopped;
 *  - async_stop_race: an Observe answered after the stop sent behind it (its read held by
 *    a proxy) leaves the election unobserved in the library as in the daemon: after a
 *    move a leader of it is not reported (one of a control election is);
 *  - value_limits: a value of RLOCK_VALUE_MAX bytes is the leader's in full; one byte
 *    more is RLOCK_ERR_ARG with a message naming the limit (and nothing is sent); a
 *    shared or semaphore campaign and rlock_acquire_all with a campaign are
 *    RLOCK_ERR_ARG; `rlockctl elect --value` too long exits 64;
 *  - rlockctl_elect: the command runs with RLOCK_TERM = RLOCK_FENCE = the term Leader
 *    shows and RLOCK_RESOURCE, `rlockctl leader` prints the value (and --json), the
 *    command's status is rlockctl's, and it resigned at the end (`rlockctl leader`
 *    exits 66 and says "no leader"); a leadership taken away (release --force) stops
 *    the command and exits 79; `rlockctl leader --watch --json` prints one line per
 *    change, in order, and exits 0 on SIGTERM;
 *  - rlockctl_elect_waits: elect waits past the daemon's max_wait (its TIMEOUT is asked
 *    again) and is elected once the leader resigns; with --wait it gives up (75);
 *  - failover: three `rlockctl elect` candidates whose command writes its term to a
 *    fenced store (a file under flock(1) that refuses a term below the highest it has
 *    seen); the leader's rlockctl is killed with SIGKILL again and again (a new
 *    candidate replaces it): every time a waiting candidate takes over with a higher
 *    term; the store never saw a refused write, its terms never go down, each term's
 *    writes come from one candidate and form one unbroken run (no two leaders at once).
 *
 * No assertion depends on how fast anything happens: "still waiting" is watched for a
 * while, grants and changes have generous deadlines.
 */
#include "harness.h"
#include "harness_proxy.h"
#include "harness_raw.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CALL_MS 5000u
#define WAIT_MS 30000u   /* a candidate's wait: far longer than any step here takes */
#define GRANT_MS 20000   /* deadline for something that must come */
#define QUIET_MS 700     /* how long "nothing happens" is watched */

/* --- recording LeaderChanged calls ---------------------------------------------- */

#define REC_MAX 64
struct rec_ev {
    char resource[64];
    int elected;
    uint64_t term;
    char value[64];
};
struct rec {
    pthread_mutex_t mu;
    int n;
    struct rec_ev ev[REC_MAX];
};

static void rec_cb(struct rlock_client *c, const char *resource, int elected, uint64_t term,
                   const char *value, void *arg);

/* Start recording into r; the options of a client whose changes r records. */
static struct rlock_options rec_init(struct rec *r)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    struct rlock_options o = {.client_name = "observer", .on_leader = rec_cb, .on_leader_arg = r};
    return o;
}

static void rec_cb(struct rlock_client *c, const char *resource, int elected, uint64_t term,
                   const char *value, void *arg)
{
    (void)c;
    struct rec *r = arg;
    pthread_mutex_lock(&r->mu);
    if (r->n < REC_MAX) {
        struct rec_ev *e = &r->ev[r->n];
        snprintf(e->resource, sizeof e->resource, "%s", resource);
        e->elected = elected;
        e->term = term;
        snprintf(e->value, sizeof e->value, "%s", value);
        r->n++;
    }
    pthread_mutex_unlock(&r->mu);
}

static int rec_count(struct rec *r)
{
    pthread_mutex_lock(&r->mu);
    int n = r->n;
    pthread_mutex_unlock(&r->mu);
    return n;
}

static struct rec_ev rec_get(struct rec *r, int i)
{
    pthread_mutex_lock(&r->mu);
    struct rec_ev e = r->ev[i];
    pthread_mutex_unlock(&r->mu);
    return e;
}

/* Wait until r has recorded at least n calls. */
static void rec_wait(struct rec *r, int n, const char *what)
{
    for (int64_t t0 = h_now_ms(); rec_count(r) < n; h_sleep_ms(10))
        ck_assert_msg(h_now_ms() - t0 < GRANT_MS, "%s: %d LeaderChanged calls, not %d, in %d ms",
                      what, rec_count(r), n, GRANT_MS);
}

/* --- candidates ------------------------------------------------------------------ */

/* Campaign for name with value, waiting up to wait_ms; asserted to be granted. */
static struct rlock_lock *campaign(struct rlock_client *c, const char *name, const char *value,
                                   uint32_t wait_ms)
{
    struct rlock_acquire_opts o = {.wait_ms = wait_ms, .campaign_value = value};
    struct rlock_lock *l = NULL;
    h_assert_ok(c, rlock_acquire(c, name, &o, CALL_MS, &l));
    ck_assert_uint_gt(rlock_lock_fence(l), 0);
    return l;
}

/* Assert what Leader says of name (term is checked only when elected). */
static void leader_is(struct rlock_client *c, const char *name, int elected, uint64_t term,
                      const char *value, const char *what)
{
    struct rlock_leader l;
    memset(&l, 0x55, sizeof l);
    h_assert_ok(c, rlock_leader(c, name, CALL_MS, &l));
    ck_assert_msg(l.elected == elected, "%s: Leader says elected %d, not %d", what, l.elected,
                  elected);
    if (elected) {
        ck_assert_msg(l.term == term, "%s: term %" PRIu64 ", not %" PRIu64, what, l.term, term);
        ck_assert_msg(l.ttl_ms > 0, "%s: a leader with no lease left", what);
    } else {
        ck_assert_msg(l.term == 0, "%s: no leader, yet term %" PRIu64, what, l.term);
    }
    ck_assert_msg(strcmp(l.value, value) == 0, "%s: value '%.80s', not '%.80s'", what, l.value,
                  value);
}

/* A candidate campaigning with a wait on a thread of its own, with a client of its own. */
struct cand {
    struct rlock_client *c;
    const char *name, *value;
    enum rlock_err rc;
    struct rlock_lock *l;
    struct h_thread t;
};

static void *cand_main(void *arg)
{
    struct cand *k = arg;
    struct rlock_acquire_opts o = {.wait_ms = WAIT_MS, .campaign_value = k->value};
    k->rc = rlock_acquire(k->c, k->name, &o, CALL_MS, &k->l);
    return NULL;
}

/* Start candidate k and wait until the daemon counts it as a waiter (with held locks held). */
static void cand_start(struct cand *k, struct h_env *e, const char *name, const char *value,
                       uint64_t held)
{
    memset(k, 0, sizeof *k);
    k->c = h_client_or_fail(e, NULL);
    k->name = name;
    k->value = value;
    h_thread_start(&k->t, cand_main, k);
    ck_assert_msg(h_wait_stats(e, held, 1, GRANT_MS, NULL) == 0,
                  "candidate %s never waited on the daemon", value);
    h_sleep_ms(QUIET_MS);
    ck_assert_msg(!h_thread_done(&k->t), "candidate %s was granted while another led (rc %d)",
                  value, (int)k->rc);
}

/* Wait for k's grant; returns its lock. */
static struct rlock_lock *cand_join(struct cand *k)
{
    h_thread_join(&k->t, h_now_ms() + GRANT_MS, "a waiting candidate was never answered");
    char msg[320];
    ck_assert_msg(k->rc == RLOCK_OK, "candidate %s: %s", k->value,
                  h_rlock_err(k->c, k->rc, msg, sizeof msg));
    return k->l;
}

/* --- librlock: campaigns and Leader ---------------------------------------------- */

/* The leader flag ListLocks gives for resource (-1 when it lists no lock of it). */
static int visit_leader(const struct rlock_lock_entry *e, void *arg)
{
    *(int *)arg = e->leader;
    return 0;
}

static int listed_leader(struct rlock_client *c, const char *resource)
{
    struct rlock_lock_filter flt = {.prefix = resource};
    int leader = -1;
    char next[RLOCK_CURSOR_BYTES];
    h_assert_ok(c, rlock_list_locks(c, &flt, NULL, 0, visit_leader, &leader, next, sizeof next,
                                    CALL_MS));
    return leader;
}

START_TEST(test_campaign_term)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rlock_client *b = h_client_or_fail(&f.e, NULL);
    struct rlock_lock *l = campaign(f.c, "el/term", "node-a", WAIT_MS);
    uint64_t term = rlock_lock_fence(l);
    ck_assert_int_eq(rlock_lock_state(l), RLOCK_HELD);
    leader_is(b, "el/term", 1, term, "node-a", "A leads");
    leader_is(f.c, "el/term", 1, term, "node-a", "A leads, asked by A");
    ck_assert_int_eq(listed_leader(b, "el/term"), 1); /* ListLocks: LockInfo.leader */
    struct rlock_lock *plain = h_acquire_ok(b, "el/term-plain", NULL);
    ck_assert_int_eq(listed_leader(b, "el/term-plain"), 0);
    h_assert_ok(b, rlock_release(plain, CALL_MS));
    rlock_lock_free(plain);

    h_assert_ok(f.c, rlock_release(l, CALL_MS)); /* resign */
    ck_assert_int_eq(rlock_lock_state(l), RLOCK_RELEASED);
    leader_is(b, "el/term", 0, 0, "", "after A resigned");

    /* Elected again: a new term, higher; a try (no wait) is a campaign too. */
    struct rlock_lock *l2 = campaign(f.c, "el/term", "node-a2", 0);
    ck_assert_uint_gt(rlock_lock_fence(l2), term);
    leader_is(b, "el/term", 1, rlock_lock_fence(l2), "node-a2", "A again");
    /* While it leads, another candidate's try is not elected. */
    struct rlock_acquire_opts o = {.campaign_value = "node-b"};
    struct rlock_lock *nb = NULL;
    ck_assert_int_eq(rlock_acquire(b, "el/term", &o, CALL_MS, &nb), RLOCK_ERR_NOT_ACQUIRED);
    leader_is(b, "el/term", 1, rlock_lock_fence(l2), "node-a2", "after B's try");
    h_assert_ok(f.c, rlock_release(l2, CALL_MS));
    rlock_lock_free(l);
    rlock_lock_free(l2);
    rlock_close(b);
    h_fixture_stop(&f);
}
END_TEST

/* A leader that stays keeps its record past its lease: the daemon's renewals renew it too. */
START_TEST(test_leader_renewed)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rlock_acquire_opts o = {.ttl_ms = 1000, .campaign_value = "steady"};
    struct rlock_lock *l = NULL;
    h_assert_ok(f.c, rlock_acquire(f.c, "el/renew", &o, CALL_MS, &l));
    for (int i = 0; i < 4; i++) { /* four leases */
        h_sleep_ms(1000);
        ck_assert_int_eq(rlock_lock_state(l), RLOCK_HELD);
        leader_is(f.c, "el/renew", 1, rlock_lock_fence(l), "steady", "a leader renewed");
    }
    h_assert_ok(f.c, rlock_release(l, CALL_MS));
    rlock_lock_free(l);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_no_leader)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    leader_is(f.c, "el/never", 0, 0, "", "a name nobody campaigned for");
    /* An ordinary lock is no leader. */
    struct rlock_lock *plain = h_acquire_ok(f.c, "el/plain", NULL);
    leader_is(f.c, "el/plain", 0, 0, "", "a name held by an ordinary lock");
    /* Its owner's campaign is no re-entry: a campaign needs a grant of its own. */
    struct rlock_acquire_opts co = {.campaign_value = "mine"};
    struct rlock_lock *cl = NULL;
    ck_assert_int_eq(rlock_acquire(f.c, "el/plain", &co, CALL_MS, &cl), RLOCK_ERR_WRONG_KIND);
    ck_assert_ptr_null(cl);
    leader_is(f.c, "el/plain", 0, 0, "", "after the holder's refused campaign");
    ck_assert_uint_eq(rlock_lock_hold_count(plain), 1);
    h_assert_ok(f.c, rlock_release(plain, CALL_MS));
    rlock_lock_free(plain);
    /* Bad arguments never reach the daemon. */
    struct rlock_leader l;
    ck_assert_int_eq(rlock_leader(f.c, "", CALL_MS, &l), RLOCK_ERR_ARG);
    ck_assert_int_eq(rlock_leader(f.c, NULL, CALL_MS, &l), RLOCK_ERR_ARG);
    ck_assert_int_eq(rlock_leader(f.c, "el/x", CALL_MS, NULL), RLOCK_ERR_ARG);
    ck_assert_int_eq(rlock_observe(f.c, "", CALL_MS, NULL), RLOCK_ERR_ARG);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_second_candidate)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rlock_lock *a = campaign(f.c, "el/two", "a", WAIT_MS);
    uint64_t ta = rlock_lock_fence(a);

    struct cand b;
    cand_start(&b, &f.e, "el/two", "b", 1);
    leader_is(f.c, "el/two", 1, ta, "a", "A leads while B waits");
    h_assert_ok(f.c, rlock_release(a, CALL_MS)); /* A resigns: B is next */
    struct rlock_lock *lb = cand_join(&b);
    uint64_t tb = rlock_lock_fence(lb);
    ck_assert_msg(tb > ta, "B's term %" PRIu64 " not above A's %" PRIu64, tb, ta);
    leader_is(f.c, "el/two", 1, tb, "b", "B leads");

    /* B's session ends while C waits: C is elected. */
    struct cand c;
    cand_start(&c, &f.e, "el/two", "c", 1);
    rlock_lock_free(lb);
    rlock_close(b.c);
    struct rlock_lock *lc = cand_join(&c);
    uint64_t tc = rlock_lock_fence(lc);
    ck_assert_msg(tc > tb, "C's term %" PRIu64 " not above B's %" PRIu64, tc, tb);
    leader_is(f.c, "el/two", 1, tc, "c", "C leads");
    h_assert_ok(c.c, rlock_release(lc, CALL_MS));
    leader_is(f.c, "el/two", 0, 0, "", "C resigned");
    rlock_lock_free(lc);
    rlock_close(c.c);
    rlock_lock_free(a);
    h_fixture_stop(&f);
}
END_TEST

/*
 * Redis loses a leader's keys (FLUSHALL, as a restart without persistence) while its lease
 * is still promised here; another candidate then campaigns with a wait. It must wait for the
 * old lease's renewal to find the key gone (and its promise to end), not be granted by Redis
 * and have its record written and published at once, to be held back by the daemon a moment
 * later: observers would be shown a leader, with a term, that is never granted.
 */
START_TEST(test_lost_key_no_phantom)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rlock_lock *a = campaign(f.c, "el/lostkey", "a", WAIT_MS);
    ck_assert_msg(h_redis_ok(f.r, "FLUSHALL") == 0, "FLUSHALL");
    struct rlock_client *b = h_client_or_fail(&f.e, NULL);
    struct rlock_acquire_opts o = {.wait_ms = 1500, .campaign_value = "b"};
    struct rlock_lock *lb = NULL;
    enum rlock_err rc = rlock_acquire(b, "el/lostkey", &o, CALL_MS, &lb);
    ck_assert_msg(rc == RLOCK_ERR_TIMEOUT, "B's campaign behind A's promise: %s, not TIMEOUT",
                  rlock_strerror(rc));
    char key[160], rec[200], value[64] = "";
    snprintf(rec, sizeof rec, "%s:leader", h_lock_key(&f.e, "el/lostkey", key, sizeof key));
    redisReply *r = redisCommand(f.r, "HGET %s value", rec);
    ck_assert_ptr_nonnull(r);
    if (r->type == REDIS_REPLY_STRING)
        snprintf(value, sizeof value, "%s", r->str);
    freeReplyObject(r);
    ck_assert_msg(strcmp(value, "b") != 0,
                  "the leader record names B, whose campaign was never granted");
    rlock_close(b);
    rlock_lock_free(a);
    h_fixture_stop(&f);
}
END_TEST

/* --- Observe ------------------------------------------------------------------- */

START_TEST(test_observe)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rec rec;
    struct rlock_options oo = rec_init(&rec);
    struct rlock_client *o = h_client_or_fail(&f.e, &oo);
    struct rlock_client *b = h_client_or_fail(&f.e, NULL);

    struct rlock_lock *a = campaign(f.c, "el/obs", "a", WAIT_MS);
    uint64_t ta = rlock_lock_fence(a);
    struct rlock_leader now;
    h_assert_ok(o, rlock_observe(o, "el/obs", CALL_MS, &now));
    ck_assert_msg(now.elected && now.term == ta && strcmp(now.value, "a") == 0,
                  "Observe's leader: elected %d term %" PRIu64 " value '%s'", now.elected,
                  now.term, now.value);
    h_sleep_ms(QUIET_MS);
    ck_assert_msg(rec_count(&rec) == 0, "a change reported while nothing changed");

    /* A resigns with nobody waiting: no leader, with A's term. */
    h_assert_ok(f.c, rlock_release(a, CALL_MS));
    rec_wait(&rec, 1, "A's resignation");
    struct rec_ev e0 = rec_get(&rec, 0);
    ck_assert_str_eq(e0.resource, "el/obs");
    ck_assert_msg(!e0.elected && e0.term == ta,
                  "after A resigned: elected %d term %" PRIu64 " (A's term %" PRIu64 ")",
                  e0.elected, e0.term, ta);

    /* B is elected. */
    struct rlock_lock *lb = campaign(b, "el/obs", "b", WAIT_MS);
    uint64_t tb = rlock_lock_fence(lb);
    ck_assert_uint_gt(tb, ta);
    rec_wait(&rec, 2, "B's election");
    struct rec_ev e1 = rec_get(&rec, 1);
    ck_assert_msg(e1.elected && e1.term == tb && strcmp(e1.value, "b") == 0,
                  "B's election: elected %d term %" PRIu64 " value '%s'", e1.elected, e1.term,
                  e1.value);

    /* B resigns while C waits: C is elected (the moment without a leader may be skipped). */
    struct cand c;
    cand_start(&c, &f.e, "el/obs", "c", 1);
    h_assert_ok(b, rlock_release(lb, CALL_MS));
    struct rlock_lock *lc = cand_join(&c);
    uint64_t tc = rlock_lock_fence(lc);
    ck_assert_uint_gt(tc, tb);
    for (int64_t t0 = h_now_ms();; h_sleep_ms(10)) {
        int n = rec_count(&rec);
        struct rec_ev last = rec_get(&rec, n - 1);
        if (last.elected && last.term == tc)
            break;
        ck_assert_msg(h_now_ms() - t0 < GRANT_MS, "C's election (term %" PRIu64 ") not reported",
                      tc);
    }
    int n = rec_count(&rec);
    ck_assert_msg(n == 3 || n == 4, "%d changes reported for B's resignation and C's election",
                  n - 2);
    if (n == 4) {
        struct rec_ev mid = rec_get(&rec, 2);
        ck_assert_msg(!mid.elected && mid.term == tb, "between B and C: elected %d term %" PRIu64,
                      mid.elected, mid.term);
    }
    struct rec_ev last = rec_get(&rec, n - 1);
    ck_assert_str_eq(last.value, "c");
    for (int i = 1; i < n; i++) {
        struct rec_ev p = rec_get(&rec, i - 1), q = rec_get(&rec, i);
        ck_assert_msg(q.term > p.term || (q.term == p.term && p.elected && !q.elected),
                      "change %d (elected %d term %" PRIu64 ") after (elected %d term %" PRIu64
                      ")",
                      i, q.elected, q.term, p.elected, p.term);
    }

    /* A second election observed by the same client: its changes name it. */
    h_assert_ok(o, rlock_observe(o, "el/obs2", CALL_MS, &now));
    ck_assert_msg(!now.elected && now.term == 0 && now.value[0] == '\0',
                  "el/obs2 has a leader: term %" PRIu64, now.term);
    struct rlock_lock *l2 = campaign(b, "el/obs2", "other", WAIT_MS);
    rec_wait(&rec, n + 1, "el/obs2's election");
    struct rec_ev e2 = rec_get(&rec, n);
    ck_assert_str_eq(e2.resource, "el/obs2");
    ck_assert_msg(e2.elected && e2.term == rlock_lock_fence(l2), "el/obs2: elected %d",
                  e2.elected);

    /* Stopped: no further call, for either change. */
    h_assert_ok(o, rlock_observe_stop(o, "el/obs", CALL_MS));
    h_assert_ok(o, rlock_observe_stop(o, "el/obs2", CALL_MS));
    int stopped = rec_count(&rec);
    h_assert_ok(c.c, rlock_release(lc, CALL_MS));
    h_assert_ok(b, rlock_release(l2, CALL_MS));
    h_sleep_ms(QUIET_MS);
    ck_assert_msg(rec_count(&rec) == stopped, "%d changes reported after rlock_observe_stop",
                  rec_count(&rec) - stopped);

    rlock_lock_free(a);
    rlock_lock_free(lb);
    rlock_lock_free(lc);
    rlock_lock_free(l2);
    rlock_close(c.c);
    rlock_close(b);
    rlock_close(o);
    h_fixture_stop(&f);
}
END_TEST

/*
 * An observing session that moves to another daemon (its daemon killed; both share the
 * Redis and a resume key) observes there again: a change made while it moved is reported
 * once, and later changes come from the new daemon.
 */
START_TEST(test_observe_moves)
{
    struct h_keydir k;
    struct h_env a, b;
    h_keydir_make(&k, NULL);
    h_env_start_or_fail(&a, k.ini);
    ck_assert_msg(h_env_start_peer(&b, &a, k.ini) == 0, "could not start daemon B");
    ck_assert_int_eq(h_rlockd_signal(&b, SIGTERM), 0); /* down: the observer goes to A */
    char list[700], err[512];
    snprintf(list, sizeof list, "%s,%s", a.rlockd_addr, b.rlockd_addr);
    struct rec rec;
    struct rlock_options oo = rec_init(&rec);
    struct rlock_client *o = NULL;
    ck_assert_msg(rlock_connect(list, &oo, &o, err, sizeof err) == RLOCK_OK, "connect: %s", err);
    struct rlock_client *x = h_client_or_fail(&a, NULL);
    struct rlock_lock *l1 = campaign(x, "el/move", "x", WAIT_MS);
    uint64_t t1 = rlock_lock_fence(l1);
    struct rlock_leader now;
    h_assert_ok(o, rlock_observe(o, "el/move", CALL_MS, &now));
    ck_assert_msg(now.elected && now.term == t1, "Observe on A: elected %d", now.elected);
    h_assert_ok(x, rlock_release(l1, CALL_MS));
    rec_wait(&rec, 1, "x's resignation, seen through A");
    rlock_lock_free(l1);
    rlock_close(x);

    /* A leader of another election, whose session moves with the observer's. */
    struct rlock_options lo = {.client_name = "mover"};
    struct rlock_client *m = NULL;
    ck_assert_msg(rlock_connect(list, &lo, &m, err, sizeof err) == RLOCK_OK, "connect: %s", err);
    struct rlock_lock *lm = campaign(m, "el/moving-leader", "m", WAIT_MS);
    uint64_t tm = rlock_lock_fence(lm);

    ck_assert_int_eq(h_rlockd_start(&b), 0);
    ck_assert_int_eq(kill(a.rlockd_pid, SIGKILL), 0);
    int status;
    ck_assert_msg(h_wait_exit(a.rlockd_pid, 10000, &status) == 0, "A did not die");
    a.rlockd_pid = 0;
    /* Elected through B while the observer may still be moving. */
    struct rlock_client *y = h_client_or_fail(&b, NULL);
    struct rlock_lock *l2 = campaign(y, "el/move", "y", WAIT_MS);
    uint64_t t2 = rlock_lock_fence(l2);
    ck_assert_uint_gt(t2, t1);
    for (int64_t t0 = h_now_ms(); rlock_session_resumes(o) < 1; h_sleep_ms(10))
        ck_assert_msg(h_now_ms() - t0 < GRANT_MS, "the observer's session never resumed on B");
    rec_wait(&rec, 2, "y's election, after the move");
    struct rec_ev e1 = rec_get(&rec, 1);
    ck_assert_msg(e1.elected && e1.term == t2 && strcmp(e1.value, "y") == 0,
                  "after the move: elected %d term %" PRIu64 " value '%s'", e1.elected, e1.term,
                  e1.value);
    /* B now pushes the changes. */
    h_assert_ok(y, rlock_release(l2, CALL_MS));
    rec_wait(&rec, 3, "y's resignation, seen through B");
    struct rec_ev e2 = rec_get(&rec, 2);
    ck_assert_msg(!e2.elected && e2.term == t2, "after y resigned: elected %d term %" PRIu64,
                  e2.elected, e2.term);
    h_sleep_ms(QUIET_MS);
    ck_assert_int_eq(rec_count(&rec), 3);

    /* The moved leader still leads, with its term, as B sees it. */
    for (int64_t t0 = h_now_ms(); rlock_session_resumes(m) < 1; h_sleep_ms(10))
        ck_assert_msg(h_now_ms() - t0 < GRANT_MS, "the leader's session never resumed on B");
    ck_assert_int_eq(rlock_lock_state(lm), RLOCK_HELD);
    ck_assert_uint_eq(rlock_lock_fence(lm), tm);
    leader_is(y, "el/moving-leader", 1, tm, "m", "a leader whose session moved");
    h_assert_ok(m, rlock_release(lm, CALL_MS));
    leader_is(y, "el/moving-leader", 0, 0, "", "the moved leader resigned");
    rlock_lock_free(lm);
    rlock_close(m);
    rlock_lock_free(l2);
    rlock_close(y);
    rlock_close(o);
    h_env_stop(&b);
    h_env_stop(&a);
    h_keydir_remove(&k);
}
END_TEST

/* --- Observe on the wire ---------------------------------------------------------- */

/* Send Observe{name, stop} as request id on raw session r and return its LeaderReply's term. */
static uint64_t raw_observe(struct h_raw *r, uint64_t id, const char *name, int stop)
{
    Rlock__V1__Observe ob = RLOCK__V1__OBSERVE__INIT;
    ob.resource = (char *)name;
    ob.stop = stop;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.id = id;
    req.body_case = RLOCK__V1__REQUEST__BODY_OBSERVE;
    req.observe = &ob;
    ck_assert_int_eq(h_raw_send(r, &req), 0);
    Rlock__V1__ServerMessage *m = NULL;
    ck_assert_int_eq(h_raw_read(r, h_now_ms() + GRANT_MS, &m), 1);
    const Rlock__V1__Response *resp = h_raw_response(m);
    ck_assert_msg(resp != NULL && resp->id == id && resp->status == RLOCK__V1__STATUS__STATUS_OK &&
                      resp->body_case == RLOCK__V1__RESPONSE__BODY_LEADER,
                  "Observe %" PRIu64 ": not an OK LeaderReply", id);
    uint64_t term = resp->leader->term;
    h_raw_free(m);
    return term;
}

/* The next LeaderChanged on r: 1 with its fields, or 0 when none came within ms. */
static int raw_changed(struct h_raw *r, int ms, int *elected, uint64_t *term)
{
    Rlock__V1__ServerMessage *m = NULL;
    int got = h_raw_read(r, h_now_ms() + ms, &m);
    if (got != 1)
        return 0;
    ck_assert_msg(m->body_case == RLOCK__V1__SERVER_MESSAGE__BODY_EVENT &&
                      m->event->body_case == RLOCK__V1__EVENT__BODY_LEADER_CHANGED,
                  "something else than a LeaderChanged came");
    ck_assert_str_eq(m->event->leader_changed->resource, "el/raw");
    *elected = m->event->leader_changed->elected;
    *term = m->event->leader_changed->term;
    h_raw_free(m);
    return 1;
}

/*
 * What the daemon pushes, without the library's filter: one LeaderChanged per change,
 * none for a change already told (another session's Observe, or the daemon's own reads
 * of a leader with a short lease, read the election again).
 */
START_TEST(test_observe_wire)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct h_raw r1, r2;
    h_raw_session(&r1, &f.e, "raw-observer-1");
    h_raw_session(&r2, &f.e, "raw-observer-2");
    ck_assert_uint_eq(raw_observe(&r1, 2, "el/raw", 0), 0);
    /* A short lease: the daemon reads the election again about once a lease. */
    struct rlock_acquire_opts ao = {.ttl_ms = 1000, .campaign_value = "a"};
    struct rlock_lock *a = NULL;
    h_assert_ok(f.c, rlock_acquire(f.c, "el/raw", &ao, CALL_MS, &a));
    int elected;
    uint64_t term;
    ck_assert_msg(raw_changed(&r1, GRANT_MS, &elected, &term), "no LeaderChanged for A");
    ck_assert_msg(elected && term == rlock_lock_fence(a), "A's election: elected %d", elected);
    /* A second observer, and the first observing again: reads, no news. */
    ck_assert_uint_eq(raw_observe(&r2, 2, "el/raw", 0), term);
    ck_assert_uint_eq(raw_observe(&r1, 3, "el/raw", 0), term);
    ck_assert_msg(!raw_changed(&r1, 3000, &elected, &term), /* three leases */
                  "a LeaderChanged with nothing changed (elected %d term %" PRIu64 ")", elected,
                  term);
    ck_assert_msg(!raw_changed(&r2, 1, &elected, &term), "r2 told of a change after its Observe");
    h_assert_ok(f.c, rlock_release(a, CALL_MS));
    ck_assert_msg(raw_changed(&r1, GRANT_MS, &elected, &term), "no LeaderChanged for A's leave");
    ck_assert_msg(!elected && term == rlock_lock_fence(a), "A left: elected %d", elected);
    ck_assert_msg(raw_changed(&r2, GRANT_MS, &elected, &term), "r2: no LeaderChanged");
    ck_assert_msg(!raw_changed(&r1, QUIET_MS, &elected, &term), "A's leave told twice");
    raw_observe(&r1, 4, "el/raw", 1); /* stop */
    rlock_lock_free(a);
    h_raw_close(&r1);
    h_raw_close(&r2);
    h_fixture_stop(&f);
}
END_TEST

/*
 * Observers are told by the election's notices (a campaign's grant, a release), not by
 * the daemon's fallback reads: with a 30 s lease those come only every 10 s, so each
 * change must arrive well before (PROMPT_MS: generous on a loaded machine, half that).
 */
#define PROMPT_MS 5000
START_TEST(test_observe_prompt)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct h_raw r;
    h_raw_session(&r, &f.e, "raw-observer-prompt");
    ck_assert_uint_eq(raw_observe(&r, 2, "el/raw", 0), 0);
    struct rlock_acquire_opts ao = {.ttl_ms = 30000, .campaign_value = "a"};
    int elected;
    uint64_t term;
    for (int round = 0; round < 2; round++) {
        struct rlock_lock *a = NULL;
        h_assert_ok(f.c, rlock_acquire(f.c, "el/raw", &ao, CALL_MS, &a));
        ck_assert_msg(raw_changed(&r, PROMPT_MS, &elected, &term),
                      "round %d: the grant not told within %d ms", round, PROMPT_MS);
        ck_assert_msg(elected && term == rlock_lock_fence(a), "round %d: elected %d", round,
                      elected);
        h_assert_ok(f.c, rlock_release(a, CALL_MS));
        ck_assert_msg(raw_changed(&r, PROMPT_MS, &elected, &term),
                      "round %d: the resignation not told within %d ms", round, PROMPT_MS);
        ck_assert_msg(!elected && term == rlock_lock_fence(a), "round %d: left: elected %d",
                      round, elected);
        rlock_lock_free(a);
    }
    h_raw_close(&r);
    h_fixture_stop(&f);
}
END_TEST

/* Send a Leader or Observe (stop or not) for name on r with id, without reading the answer. */
static void raw_send_read(struct h_raw *r, uint64_t id, const char *name, int observe, int stop)
{
    Rlock__V1__Leader ld = RLOCK__V1__LEADER__INIT;
    Rlock__V1__Observe ob = RLOCK__V1__OBSERVE__INIT;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.id = id;
    if (observe) {
        ob.resource = (char *)name;
        ob.stop = stop;
        req.body_case = RLOCK__V1__REQUEST__BODY_OBSERVE;
        req.observe = &ob;
    } else {
        ld.resource = (char *)name;
        req.body_case = RLOCK__V1__REQUEST__BODY_LEADER;
        req.leader = &ld;
    }
    ck_assert_int_eq(h_raw_send(r, &req), 0);
}

/* The status of the next response on r (events in between are skipped). */
static Rlock__V1__Status raw_status(struct h_raw *r, uint64_t *id)
{
    for (;;) {
        Rlock__V1__ServerMessage *m = NULL;
        ck_assert_int_eq(h_raw_read(r, h_now_ms() + GRANT_MS, &m), 1);
        const Rlock__V1__Response *resp = h_raw_response(m);
        if (resp != NULL) {
            Rlock__V1__Status st = resp->status;
            *id = resp->id;
            h_raw_free(m);
            return st;
        }
        h_raw_free(m);
    }
}

/*
 * Reads while Redis does not answer (SIGSTOP): each Leader or Observe counts against the
 * session's [session] max_locks while it is in Redis, like an acquire (LIMIT_EXCEEDED
 * past it, so one client cannot fill the connection's queue and starve renewals); an
 * Observe whose read failed (UNAVAILABLE) leaves no observer behind (a stop is NOT_HELD).
 */
START_TEST(test_observe_bounded)
{
    struct h_fixture f;
    h_fixture_start(&f, "[session]\nmax_locks = 4\n");
    struct h_raw r;
    h_raw_session(&r, &f.e, "raw-bounded");
    h_sigstop(f.e.redis_pid, "redis-server");
    raw_send_read(&r, 10, "el/b", 1, 0);
    for (uint64_t id = 11; id < 16; id++)
        raw_send_read(&r, id, "el/b", 0, 0);
    int limited = 0, unavailable = 0, observe_failed = 0;
    for (int i = 0; i < 6; i++) {
        uint64_t id;
        Rlock__V1__Status st = raw_status(&r, &id);
        limited += st == RLOCK__V1__STATUS__STATUS_LIMIT_EXCEEDED;
        unavailable += st == RLOCK__V1__STATUS__STATUS_UNAVAILABLE;
        observe_failed += id == 10 && st == RLOCK__V1__STATUS__STATUS_UNAVAILABLE;
    }
    h_sigcont(f.e.redis_pid, "redis-server");
    ck_assert_msg(limited == 2 && unavailable == 4,
                  "6 reads with max_locks 4 and Redis stopped: %d LIMIT_EXCEEDED, %d UNAVAILABLE",
                  limited, unavailable);
    ck_assert_msg(observe_failed, "the Observe was not answered UNAVAILABLE");
    /* Redis back (once the daemon has reconnected): the failed Observe left nothing. */
    int64_t end = h_now_ms() + GRANT_MS;
    struct rlock_leader ld;
    while (rlock_leader(f.c, "el/b", CALL_MS, &ld) != RLOCK_OK && h_now_ms() < end)
        h_sleep_ms(50);
    h_assert_ok(f.c, rlock_leader(f.c, "el/b", CALL_MS, &ld));
    raw_send_read(&r, 20, "el/b", 1, 1);
    uint64_t id;
    ck_assert_int_eq(raw_status(&r, &id), RLOCK__V1__STATUS__STATUS_NOT_HELD);
    h_raw_close(&r);
    h_fixture_stop(&f);
}
END_TEST

/*
 * A read that misses the leader's record (here deleted, as a slot migration or another
 * program might) tells observers the leader left; when the record is back in the same
 * term, they are told it leads again (not left believing nobody leads for its term).
 */
START_TEST(test_observe_same_term_back)
{
    struct h_fixture f;
    /* The raw session sends no keepalive: it must outlive the daemon's 10 s reads. */
    h_fixture_start(&f, "[session]\ntimeout = 60s\n");
    struct h_raw r;
    h_raw_session(&r, &f.e, "raw-back");
    ck_assert_uint_eq(raw_observe(&r, 2, "el/raw", 0), 0);
    /* A short lease: the daemon reads the election again about once a lease. */
    struct rlock_acquire_opts ao = {.ttl_ms = 1000, .campaign_value = "a"};
    struct rlock_lock *a = NULL;
    h_assert_ok(f.c, rlock_acquire(f.c, "el/raw", &ao, CALL_MS, &a));
    int elected;
    uint64_t term;
    ck_assert_msg(raw_changed(&r, GRANT_MS, &elected, &term) && elected, "no LeaderChanged");
    char key[300], rec[320], fence[32];
    h_lock_key(&f.e, "el/raw", key, sizeof key);
    snprintf(rec, sizeof rec, "%s:leader", key);
    ck_assert_int_eq(h_redis_int(f.r, "DEL %s", rec), 1);
    ck_assert_msg(raw_changed(&r, GRANT_MS, &elected, &term), "the record's loss not told");
    ck_assert_msg(!elected && term == rlock_lock_fence(a), "gone: elected %d", elected);
    snprintf(fence, sizeof fence, "%" PRIu64, rlock_lock_fence(a));
    redisReply *rep = redisCommand(f.r, "HSET %s token %s term %s value a", rec,
                                   rlock_lock_token(a), fence);
    ck_assert_ptr_nonnull(rep);
    freeReplyObject(rep);
    ck_assert_msg(raw_changed(&r, GRANT_MS, &elected, &term), "the leader's return not told");
    ck_assert_msg(elected && term == rlock_lock_fence(a), "back: elected %d", elected);
    h_assert_ok(f.c, rlock_release(a, CALL_MS));
    rlock_lock_free(a);
    h_raw_close(&r);
    h_fixture_stop(&f);
}
END_TEST

/* --- Observe refused after a move --------------------------------------------- */

/*
 * Two daemons on one Redis with a resume key, B's [session] with b_session lines more, and
 * B down (start it again with h_rlockd_start): an observer (its changes recorded in rec)
 * connected to the list "A,B", which gets A.
 */
static struct rlock_client *moving_observer(struct h_keydir *k, struct h_env *a, struct h_env *b,
                                            const char *b_session, struct rec *rec)
{
    h_keydir_make(k, NULL);
    h_env_start_or_fail(a, k->ini);
    char b_ini[sizeof k->ini + 200];
    snprintf(b_ini, sizeof b_ini, "%s%s", k->ini, b_session); /* k->ini ends in [session] */
    ck_assert_msg(h_env_start_peer(b, a, b_ini) == 0, "could not start daemon B");
    ck_assert_int_eq(h_rlockd_signal(b, SIGTERM), 0); /* down: the observer goes to A */
    char list[700], err[512];
    snprintf(list, sizeof list, "%s,%s", a->rlockd_addr, b->rlockd_addr);
    struct rlock_options oo = rec_init(rec);
    struct rlock_client *o = NULL;
    ck_assert_msg(rlock_connect(list, &oo, &o, err, sizeof err) == RLOCK_OK, "connect: %s", err);
    return o;
}

/* Kill A (SIGKILL) and wait until o's session resumed on B. */
static void move_to_b(struct h_env *a, struct rlock_client *o)
{
    ck_assert_int_eq(kill(a->rlockd_pid, SIGKILL), 0);
    int status;
    ck_assert_msg(h_wait_exit(a->rlockd_pid, 10000, &status) == 0, "A did not die");
    a->rlockd_pid = 0;
    for (int64_t t0 = h_now_ms(); rlock_session_resumes(o) < 1; h_sleep_ms(10))
        ck_assert_msg(h_now_ms() - t0 < GRANT_MS, "the observer's session never resumed on B");
}

/* Campaign for name through c, asking again while the daemon answers UNAVAILABLE. */
static struct rlock_lock *campaign_when_up(struct rlock_client *c, const char *name,
                                           const char *value)
{
    struct rlock_acquire_opts ao = {.wait_ms = WAIT_MS, .campaign_value = value};
    struct rlock_lock *l = NULL;
    for (int64_t t0 = h_now_ms();; h_sleep_ms(50)) {
        enum rlock_err e = rlock_acquire(c, name, &ao, CALL_MS, &l);
        if (e == RLOCK_OK)
            return l;
        ck_assert_msg(e == RLOCK_ERR_UNAVAILABLE && h_now_ms() - t0 < GRANT_MS,
                      "campaign for %s: %s", name, rlock_last_error()->message);
    }
}

/*
 * The Observe the library sends after a move is refused: B's Redis is stopped (SIGSTOP)
 * across the move, so B answers it UNAVAILABLE (its read times out, then Redis is out of
 * reach) and keeps no observer. The library sends it again until B observes the election:
 * a leader elected once Redis is back, and its resignation, reach on_leader.
 */
START_TEST(test_observe_retried)
{
    struct h_keydir k;
    struct h_env a, b;
    struct rec rec;
    struct rlock_client *o = moving_observer(&k, &a, &b, "", &rec);
    struct rlock_leader now;
    h_assert_ok(o, rlock_observe(o, "el/retry", CALL_MS, &now));
    ck_assert_int_eq(now.elected, 0);
    ck_assert_int_eq(h_rlockd_start(&b), 0);

    h_sigstop(a.redis_pid, "redis-server");
    move_to_b(&a, o);
    /* Past B's command timeout (300 ms) the Observe sent there has been refused, and B
     * keeps no observer of it (while Redis stays stopped, none of the library's tries
     * gets one either). */
    h_sleep_ms(1000);
    for (int64_t t0 = h_now_ms(); h_metric(&b, "rlockd_elections_observed") != 0; h_sleep_ms(20))
        ck_assert_msg(h_now_ms() - t0 < GRANT_MS, "B observes the election with Redis stopped");
    h_sigcont(a.redis_pid, "redis-server");
    ck_assert_int_eq(rec_count(&rec), 0);

    struct rlock_client *y = h_client_or_fail(&b, NULL);
    struct rlock_lock *l = campaign_when_up(y, "el/retry", "y");
    uint64_t t = rlock_lock_fence(l);
    rec_wait(&rec, 1, "the leader elected after the refused Observe");
    struct rec_ev e0 = rec_get(&rec, 0);
    ck_assert_msg(e0.elected && e0.term == t && strcmp(e0.value, "y") == 0,
                  "elected %d term %" PRIu64 " value '%s'", e0.elected, e0.term, e0.value);
    h_assert_ok(y, rlock_release(l, CALL_MS));
    rec_wait(&rec, 2, "its resignation, pushed by B");
    struct rec_ev e1 = rec_get(&rec, 1);
    ck_assert_msg(!e1.elected && e1.term == t, "resigned: elected %d term %" PRIu64, e1.elected,
                  e1.term);
    ck_assert_msg(h_metric(&b, "rlockd_elections_observed") == 1, "B does not observe it");
    rlock_lock_free(l);
    rlock_close(y);
    rlock_close(o);
    h_env_stop(&b);
    h_env_stop(&a);
    h_keydir_remove(&k);
}
END_TEST

/*
 * A refusal that trying again does not cure: B lets a session observe one election
 * ([session] max_locks = 1), the observer moves there with two. One is observed there; the
 * other is refused LIMIT_EXCEEDED for 5 s, then given up: on_leader is told (elected 0,
 * term 0, the daemon's reason as the value) and the election is no longer observed, so that
 * rlock_observe observes it again once the other one is stopped.
 */
START_TEST(test_observe_refused)
{
    struct h_keydir k;
    struct h_env a, b;
    struct rec rec;
    struct rlock_client *o = moving_observer(&k, &a, &b, "max_locks = 1\n", &rec);
    struct rlock_leader now;
    h_assert_ok(o, rlock_observe(o, "el/one", CALL_MS, &now));
    h_assert_ok(o, rlock_observe(o, "el/two", CALL_MS, &now));
    ck_assert_int_eq(h_rlockd_start(&b), 0);
    move_to_b(&a, o);

    int64_t t0 = h_now_ms();
    rec_wait(&rec, 1, "the election given up");
    int64_t took = h_now_ms() - t0;
    struct rec_ev e0 = rec_get(&rec, 0);
    ck_assert_msg(!e0.elected && e0.term == 0 && strstr(e0.value, "LIMIT_EXCEEDED") != NULL,
                  "given up: elected %d term %" PRIu64 " value '%s'", e0.elected, e0.term,
                  e0.value);
    ck_assert_msg(took > 3000, "given up after %lld ms, not after 5 s of tries", (long long)took);
    const char *lost = e0.resource, *kept = strcmp(lost, "el/one") == 0 ? "el/two" : "el/one";
    ck_assert_msg(strcmp(lost, "el/one") == 0 || strcmp(lost, "el/two") == 0, "given up: %s",
                  lost);

    /* B still refuses it while the other is observed; stopping that one makes room. */
    ck_assert_int_eq(rlock_observe(o, lost, CALL_MS, &now), RLOCK_ERR_LIMIT_EXCEEDED);
    h_assert_ok(o, rlock_observe_stop(o, kept, CALL_MS));
    h_assert_ok(o, rlock_observe(o, lost, CALL_MS, &now));
    struct rlock_client *y = h_client_or_fail(&b, NULL);
    struct rlock_lock *l = campaign(y, lost, "y", WAIT_MS);
    rec_wait(&rec, 2, "a leader of the election observed again");
    struct rec_ev e1 = rec_get(&rec, 1);
    ck_assert_msg(e1.elected && e1.term == rlock_lock_fence(l) && strcmp(e1.resource, lost) == 0,
                  "observed again: %s elected %d", e1.resource, e1.elected);
    h_assert_ok(y, rlock_release(l, CALL_MS));
    rlock_lock_free(l);
    rlock_close(y);
    rlock_close(o);
    h_env_stop(&b);
    h_env_stop(&a);
    h_keydir_remove(&k);
}
END_TEST

/* --- the asynchronous API ------------------------------------------------------- */

struct adone {
    int n;                   /* completions so far */
    enum rlock_err err;      /* of the latest */
    struct rlock_leader leader;
    int had_leader;
    struct rlock_lock *lock;
};

static void adone_cb(struct rlock_client *c, const struct rlock_result *r, void *arg)
{
    (void)c;
    struct adone *d = arg;
    d->n++;
    d->err = r->err;
    d->had_leader = r->leader != NULL;
    if (r->leader != NULL)
        d->leader = *r->leader;
    if (r->lock != NULL)
        d->lock = r->lock;
}

/* Drive c until *count reaches want. */
static void pump(struct rlock_client *c, const int *count, int want, const char *what)
{
    int64_t t0 = h_now_ms();
    while (*count < want) {
        ck_assert_msg(h_now_ms() - t0 < GRANT_MS, "%s: not done in %d ms", what, GRANT_MS);
        struct pollfd p = {.fd = rlock_async_fd(c), .events = (short)rlock_async_events(c)};
        int64_t t = rlock_async_timeout_ms(c);
        int n = poll(&p, 1, t < 0 || t > 50 ? 50 : (int)t);
        ck_assert_int_eq(rlock_async_process(c, n > 0 ? p.revents : 0), RLOCK_OK);
    }
}

START_TEST(test_async)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rec rec;
    struct rlock_options oo = rec_init(&rec);
    struct rlock_client *ac = NULL;
    char err[512];
    ck_assert_msg(rlock_async_connect(f.e.rlockd_addr, &oo, NULL, NULL, &ac, err, sizeof err) ==
                      RLOCK_OK,
                  "async connect: %s", err);
    struct adone d = {0};
    struct rlock_acquire_opts o = {.wait_ms = WAIT_MS, .campaign_value = "async-a"};
    h_assert_ok(ac, rlock_async_acquire(ac, "el/async", &o, adone_cb, &d, NULL));
    pump(ac, &d.n, 1, "the asynchronous campaign");
    ck_assert_int_eq(d.err, RLOCK_OK);
    ck_assert_ptr_nonnull(d.lock);
    uint64_t term = rlock_lock_fence(d.lock);
    leader_is(f.c, "el/async", 1, term, "async-a", "the asynchronous candidate leads");

    h_assert_ok(ac, rlock_async_leader(ac, "el/async", adone_cb, &d, NULL));
    pump(ac, &d.n, 2, "rlock_async_leader");
    ck_assert_int_eq(d.err, RLOCK_OK);
    ck_assert_msg(d.had_leader && d.leader.elected && d.leader.term == term &&
                      strcmp(d.leader.value, "async-a") == 0,
                  "rlock_async_leader: elected %d term %" PRIu64, d.leader.elected,
                  d.leader.term);

    h_assert_ok(ac, rlock_async_observe(ac, "el/async", adone_cb, &d, NULL));
    pump(ac, &d.n, 3, "rlock_async_observe");
    ck_assert_msg(d.err == RLOCK_OK && d.had_leader && d.leader.term == term,
                  "rlock_async_observe: err %d", (int)d.err);

    /* The leader resigns; the change is reported inside rlock_async_process. */
    struct rlock_lock *l = d.lock;
    h_assert_ok(ac, rlock_async_release(l, adone_cb, &d, NULL));
    pump(ac, &d.n, 4, "the asynchronous resignation");
    ck_assert_int_eq(d.err, RLOCK_OK);
    pump(ac, &rec.n, 1, "the change after the resignation");
    struct rec_ev e0 = rec_get(&rec, 0);
    ck_assert_msg(!e0.elected && e0.term == term, "after resigning: elected %d term %" PRIu64,
                  e0.elected, e0.term);

    h_assert_ok(ac, rlock_async_observe_stop(ac, "el/async", adone_cb, &d, NULL));
    pump(ac, &d.n, 5, "rlock_async_observe_stop");
    ck_assert_int_eq(d.err, RLOCK_OK);

    /* A value too long is refused at once; no completion will come. */
    char big[RLOCK_VALUE_MAX + 2];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    o.campaign_value = big;
    ck_assert_int_eq(rlock_async_acquire(ac, "el/async", &o, adone_cb, &d, NULL), RLOCK_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(rlock_last_error()->message, "1024"));
    rlock_lock_free(l);
    rlock_close(ac);
    h_fixture_stop(&f);
}
END_TEST

/*
 * An Observe's answer that comes after the stop sent behind it (the daemon answers a stop
 * at once, an Observe after its read in Redis, held here by the proxy): the daemon does not
 * observe the election, and neither does the library. After a move nothing observes it
 * again: a leader elected then is not reported (a control election observed all along is).
 */
/* Drive c for ms. */
static void spin(struct rlock_client *c, int ms)
{
    for (int64_t t0 = h_now_ms(); h_now_ms() - t0 < ms;) {
        struct pollfd p = {.fd = rlock_async_fd(c), .events = (short)rlock_async_events(c)};
        int n = poll(&p, 1, 10);
        ck_assert_int_eq(rlock_async_process(c, n > 0 ? p.revents : 0), RLOCK_OK);
    }
}

START_TEST(test_async_stop_race)
{
    struct h_keydir k;
    h_keydir_make(&k, NULL);
    struct h_env e;
    ck_assert_msg(h_env_start_proxied(&e, k.ini) == 0, "could not start the proxied env");
    struct rec rec;
    struct rlock_options oo = rec_init(&rec);
    struct rlock_client *ac = NULL;
    char err[512];
    ck_assert_msg(rlock_async_connect(e.rlockd_addr, &oo, NULL, NULL, &ac, err, sizeof err) ==
                      RLOCK_OK,
                  "async connect: %s", err);
    struct adone ctl = {0}, obs = {0}, stop = {0};
    h_assert_ok(ac, rlock_async_observe(ac, "el/control", adone_cb, &ctl, NULL));
    pump(ac, &ctl.n, 1, "the control's Observe");
    ck_assert_int_eq(ctl.err, RLOCK_OK);

    h_proxy_hold(e.proxy, H_PROXY_COMMANDS, H_PROXY_DOWN);
    h_assert_ok(ac, rlock_async_observe(ac, "el/race", adone_cb, &obs, NULL));
    h_assert_ok(ac, rlock_async_observe_stop(ac, "el/race", adone_cb, &stop, NULL));
    pump(ac, &stop.n, 1, "the stop");
    ck_assert_int_eq(stop.err, RLOCK_OK);
    ck_assert_msg(obs.n == 0, "the Observe was answered before the stop");
    h_proxy_release(e.proxy, H_PROXY_COMMANDS, H_PROXY_DOWN);
    pump(ac, &obs.n, 1, "the Observe, after the stop");
    ck_assert_int_eq(obs.err, RLOCK_OK);
    ck_assert_msg(h_metric(&e, "rlockd_elections_observed") == 1, "the daemon observes el/race");

    /* The session moves (its daemon killed and started again): it observes what it did. */
    ck_assert_int_eq(h_rlockd_signal(&e, SIGKILL), 0);
    ck_assert_int_eq(h_rlockd_start(&e), 0);
    for (int64_t t0 = h_now_ms(); rlock_session_resumes(ac) < 1; spin(ac, 20))
        ck_assert_msg(h_now_ms() - t0 < GRANT_MS, "the session never resumed");
    struct rlock_client *y = h_client_or_fail(&e, NULL);
    struct rlock_lock *lr = campaign(y, "el/race", "r", WAIT_MS);
    struct rlock_lock *lc = campaign(y, "el/control", "c", WAIT_MS);
    pump(ac, &rec.n, 1, "the control's leader");
    spin(ac, QUIET_MS);
    for (int i = 0; i < rec.n; i++) {
        struct rec_ev ev = rec_get(&rec, i);
        ck_assert_msg(strcmp(ev.resource, "el/control") == 0,
                      "a change of %s reported after its observation was stopped", ev.resource);
    }
    struct rec_ev c0 = rec_get(&rec, 0);
    ck_assert_msg(c0.elected && c0.term == rlock_lock_fence(lc), "the control: elected %d",
                  c0.elected);
    ck_assert_msg(h_metric(&e, "rlockd_elections_observed") == 1,
                  "the daemon observes %g elections, not the control only",
                  h_metric(&e, "rlockd_elections_observed"));
    h_assert_ok(y, rlock_release(lr, CALL_MS));
    h_assert_ok(y, rlock_release(lc, CALL_MS));
    rlock_lock_free(lr);
    rlock_lock_free(lc);
    rlock_close(y);
    rlock_close(ac);
    h_env_stop(&e);
    h_keydir_remove(&k);
}
END_TEST

/* --- values -------------------------------------------------------------------- */

/* Run rlockctl with args (NULL-terminated, after the binary), stdout to out and stderr to
 * errpath (may be NULL); its exit status, within GRANT_MS. */
static int ctl_run_to(const struct h_env *e, const char *out, const char *errpath,
                      const char *const *args)
{
    (void)e;
    char bin[512];
    h_bin("rlockctl", bin, sizeof bin);
    char *argv[32];
    int n = 0;
    argv[n++] = bin;
    for (; *args != NULL; args++)
        argv[n++] = (char *)*args;
    argv[n] = NULL;
    if (out != NULL)
        unlink(out);
    pid_t pid = h_spawn_io(argv, out, errpath);
    ck_assert_int_gt(pid, 0);
    int status;
    ck_assert_msg(h_wait_exit(pid, GRANT_MS, &status) == 0, "rlockctl %s did not exit",
                  argv[1]);
    ck_assert_msg(WIFEXITED(status), "rlockctl %s killed", argv[1]);
    return WEXITSTATUS(status);
}

START_TEST(test_value_limits)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    char big[RLOCK_VALUE_MAX + 2];
    memset(big, 'v', RLOCK_VALUE_MAX + 1);
    big[RLOCK_VALUE_MAX + 1] = '\0'; /* one byte too long */
    struct rlock_acquire_opts o = {.wait_ms = 1000, .campaign_value = big};
    struct rlock_lock *l = NULL;
    ck_assert_int_eq(rlock_acquire(f.c, "el/big", &o, CALL_MS, &l), RLOCK_ERR_ARG);
    ck_assert_ptr_null(l);
    const char *msg = rlock_last_error()->message;
    ck_assert_msg(strstr(msg, "1025") != NULL && strstr(msg, "1024") != NULL,
                  "the message does not say why: %s", msg);
    leader_is(f.c, "el/big", 0, 0, "", "after a refused campaign");

    big[RLOCK_VALUE_MAX] = '\0'; /* exactly the limit */
    l = campaign(f.c, "el/big", big, 0);
    struct rlock_leader ld;
    h_assert_ok(f.c, rlock_leader(f.c, "el/big", CALL_MS, &ld));
    ck_assert_uint_eq(strlen(ld.value), RLOCK_VALUE_MAX);
    ck_assert_int_eq(memcmp(ld.value, big, RLOCK_VALUE_MAX), 0);
    h_assert_ok(f.c, rlock_release(l, CALL_MS));
    rlock_lock_free(l);

    /* "" is a value. */
    l = campaign(f.c, "el/empty", "", 0);
    leader_is(f.c, "el/empty", 1, rlock_lock_fence(l), "", "a leader with an empty value");
    h_assert_ok(f.c, rlock_release(l, CALL_MS));
    rlock_lock_free(l);

    /* A campaign is exclusive, and on its own. */
    struct rlock_acquire_opts s = {.campaign_value = "x", .shared = 1};
    ck_assert_int_eq(rlock_acquire(f.c, "el/kind", &s, CALL_MS, &l), RLOCK_ERR_ARG);
    struct rlock_acquire_opts m = {.campaign_value = "x", .limit = 2};
    ck_assert_int_eq(rlock_acquire(f.c, "el/kind", &m, CALL_MS, &l), RLOCK_ERR_ARG);
    const char *names[] = {"el/all1", "el/all2"};
    struct rlock_lock *outs[2];
    struct rlock_acquire_opts x = {.campaign_value = "x"};
    ck_assert_int_eq(rlock_acquire_all(f.c, names, 2, &x, CALL_MS, outs), RLOCK_ERR_ARG);
    ck_assert_ptr_null(outs[0]);

    /* rlockctl elect --value too long: a usage error, before anything is sent. */
    char errp[320], longv[RLOCK_VALUE_MAX + 2];
    memset(longv, 'v', RLOCK_VALUE_MAX + 1);
    longv[RLOCK_VALUE_MAX + 1] = '\0';
    h_env_path(&f.e, "elect.err", errp, sizeof errp);
    const char *args[] = {"elect", "--server", f.e.rlockd_addr, "--value", longv,
                          "el/big", "--", "true", NULL};
    ck_assert_int_eq(ctl_run_to(&f.e, NULL, errp, args), 64);
    char *text = h_read_file(errp);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(strstr(text, "1024") != NULL, "rlockctl elect said: %s", text);
    free(text);
    leader_is(f.c, "el/big", 0, 0, "", "after rlockctl elect refused its value");
    h_fixture_stop(&f);
}
END_TEST

/* --- rlockctl elect and leader --------------------------------------------------- */

/* Wait until the file at path has at least n complete lines; returns its text (malloc'd). */
static char *wait_lines(const char *path, int n, pid_t pid, const char *what)
{
    for (int64_t t0 = h_now_ms();; h_sleep_ms(10)) {
        char *text = h_read_file(path);
        int lines = 0;
        for (const char *p = text; p != NULL && (p = strchr(p, '\n')) != NULL; p++)
            lines++;
        if (lines >= n)
            return text;
        int late = h_now_ms() - t0 >= GRANT_MS;
        int gone = pid > 0 && !h_alive(pid);
        if (late || gone)
            ck_abort_msg("%s: %d lines, not %d (%s); so far:\n%s", what, lines, n,
                         gone ? "the process exited" : "deadline", text ? text : "");
        free(text);
    }
}

/* The n-th line (from 0) of text, copied into buf. */
static const char *nth_line(const char *text, int n, char *buf, size_t len)
{
    const char *p = text;
    for (int i = 0; i < n && p != NULL; i++)
        p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL;
    ck_assert_ptr_nonnull(p);
    size_t k = strcspn(p, "\n");
    snprintf(buf, len, "%.*s", (int)k, p);
    return buf;
}

/* Wait until the file at path has its n-th line (from 0), and assert that it contains want. */
static void line_has(const char *path, int n, pid_t pid, const char *want, const char *what)
{
    char line[512];
    char *text = wait_lines(path, n + 1, pid, what);
    nth_line(text, n, line, sizeof line);
    free(text);
    ck_assert_msg(strstr(line, want) != NULL, "%s: line %d is '%s', without '%s'", what, n + 1,
                  line, want);
}

/* Wait until Leader of name says elected with a term above above; returns it into *out. */
static void wait_elected(struct rlock_client *c, const char *name, uint64_t above,
                         struct rlock_leader *out, const char *what)
{
    for (int64_t t0 = h_now_ms();; h_sleep_ms(20)) {
        h_assert_ok(c, rlock_leader(c, name, CALL_MS, out));
        if (out->elected && out->term > above)
            return;
        ck_assert_msg(h_now_ms() - t0 < GRANT_MS, "%s: no new leader of %s in %d ms", what, name,
                      GRANT_MS);
    }
}

START_TEST(test_rlockctl_elect)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    char bin[512], envout[320], go[320], out[320], errp[320];
    h_bin("rlockctl", bin, sizeof bin);
    h_env_path(&f.e, "env.out", envout, sizeof envout);
    h_env_path(&f.e, "go", go, sizeof go);
    h_env_path(&f.e, "leader.out", out, sizeof out);
    h_env_path(&f.e, "elect.err", errp, sizeof errp);

    /* The command sees its term, runs while leader, and its status is rlockctl's. */
    const char *script = "echo \"$RLOCK_TERM $RLOCK_FENCE $RLOCK_RESOURCE\" > \"$1\"\n"
                         "while [ ! -e \"$2\" ]; do sleep 0.02; done\n"
                         "exit 3\n";
    char *argv[] = {bin,  "elect", "--server", f.e.rlockd_addr, "--value", "ctl-1",
                    "el/ctl", "--",  "/bin/sh", "-c", (char *)script, "sh", envout, go, NULL};
    pid_t pid = h_spawn_io(argv, NULL, errp);
    ck_assert_int_gt(pid, 0);
    char *text = wait_lines(envout, 1, pid, "the elected command's environment");
    unsigned long long term = 0, fence = 0;
    char res[64] = "";
    ck_assert_msg(sscanf(text, "%llu %llu %63s", &term, &fence, res) == 3,
                  "the command saw: %s", text);
    free(text);
    ck_assert_msg(term > 0 && term == fence, "RLOCK_TERM %llu, RLOCK_FENCE %llu", term, fence);
    ck_assert_str_eq(res, "el/ctl");
    leader_is(f.c, "el/ctl", 1, term, "ctl-1", "rlockctl elect leads");

    const char *lead[] = {"leader", "--server", f.e.rlockd_addr, "el/ctl", NULL};
    ck_assert_int_eq(ctl_run_to(&f.e, out, NULL, lead), 0);
    text = h_read_file(out);
    char want[128];
    snprintf(want, sizeof want, "el/ctl: leader \"ctl-1\" (term %llu, lease ", term);
    ck_assert_msg(text != NULL && strncmp(text, want, strlen(want)) == 0,
                  "rlockctl leader printed: %s", text ? text : "(nothing)");
    free(text);
    const char *lead_json[] = {"leader", "--json", "--server", f.e.rlockd_addr, "el/ctl", NULL};
    ck_assert_int_eq(ctl_run_to(&f.e, out, NULL, lead_json), 0);
    text = h_read_file(out);
    snprintf(want, sizeof want,
             "{\"resource\": \"el/ctl\", \"elected\": true, \"term\": %llu, \"value\": "
             "\"ctl-1\", \"ttl_ms\": ",
             term);
    ck_assert_msg(text != NULL && strncmp(text, want, strlen(want)) == 0,
                  "rlockctl leader --json printed: %s", text ? text : "(nothing)");
    free(text);

    const char *locks[] = {"locks", "--json", "--prefix", "el/ctl", "--server",
                           f.e.rlockd_addr, NULL};
    ck_assert_int_eq(ctl_run_to(&f.e, out, NULL, locks), 0);
    text = h_read_file(out);
    ck_assert_msg(text != NULL && strstr(text, "\"kind\": \"leader\"") != NULL,
                  "rlockctl locks --json printed: %s", text ? text : "(nothing)");
    free(text);

    /* The command ends: rlockctl exits with its status, having resigned. */
    FILE *g = fopen(go, "w");
    ck_assert_ptr_nonnull(g);
    fclose(g);
    int status;
    ck_assert_msg(h_wait_exit(pid, GRANT_MS, &status) == 0, "rlockctl elect did not exit");
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 3, "rlockctl elect: status %d",
                  status);
    ck_assert_int_eq(ctl_run_to(&f.e, out, NULL, lead), 66);
    text = h_read_file(out);
    ck_assert_msg(text != NULL && strcmp(text, "el/ctl: no leader\n") == 0,
                  "rlockctl leader printed: %s", text ? text : "(nothing)");
    free(text);
    ck_assert_int_eq(ctl_run_to(&f.e, out, NULL, lead_json), 66);
    text = h_read_file(out);
    ck_assert_msg(text != NULL && strstr(text, "\"elected\": false") != NULL,
                  "rlockctl leader --json printed: %s", text ? text : "(nothing)");
    free(text);

    /* A leadership taken away stops the command: exit 79. */
    char *argv2[] = {bin,      "elect", "--server", f.e.rlockd_addr, "--grace", "1s",
                     "el/lost", "--",   "sleep",    "60",            NULL};
    pid = h_spawn_io(argv2, NULL, errp);
    ck_assert_int_gt(pid, 0);
    struct rlock_leader l;
    wait_elected(f.c, "el/lost", 0, &l, "rlockctl elect el/lost");
    h_assert_ok(f.c, rlock_force_release(f.c, "el/lost", CALL_MS, NULL));
    ck_assert_msg(h_wait_exit(pid, GRANT_MS, &status) == 0,
                  "rlockctl elect did not exit after losing the leadership");
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 79, "rlockctl elect: status %d",
                  status);

    /* leader --watch --json: the leader now, then each change, one line each. */
    char watch[320];
    h_env_path(&f.e, "watch.out", watch, sizeof watch);
    char *argv3[] = {bin, "leader", "--watch", "--json", "--server", f.e.rlockd_addr,
                     "el/w", NULL};
    pid = h_spawn_io(argv3, watch, errp);
    ck_assert_int_gt(pid, 0);
    line_has(watch, 0, pid, "\"resource\": \"el/w\", \"elected\": false, \"term\": 0, "
                            "\"value\": \"\"}",
             "leader --watch: the leader now");
    line_has(watch, 0, pid, "{\"time\": \"", "leader --watch: the time first");
    struct rlock_lock *w1 = campaign(f.c, "el/w", "w1", 0);
    snprintf(want, sizeof want, "\"elected\": true, \"term\": %" PRIu64 ", \"value\": \"w1\"}",
             rlock_lock_fence(w1));
    line_has(watch, 1, pid, want, "leader --watch: w1 elected");
    h_assert_ok(f.c, rlock_release(w1, CALL_MS));
    snprintf(want, sizeof want, "\"elected\": false, \"term\": %" PRIu64 ", ",
             rlock_lock_fence(w1));
    line_has(watch, 2, pid, want, "leader --watch: w1 resigned");
    rlock_lock_free(w1);
    kill(pid, SIGTERM);
    ck_assert_msg(h_wait_exit(pid, GRANT_MS, &status) == 0, "leader --watch ignored SIGTERM");
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "leader --watch: status %d",
                  status);
    h_fixture_stop(&f);
}
END_TEST

/*
 * `rlockctl elect` waits for ever by default: past the daemon's max_wait (which answers
 * TIMEOUT at its cap) it campaigns again, and is elected once the leader resigns.
 */
START_TEST(test_rlockctl_elect_waits)
{
    struct h_fixture f;
    h_fixture_start(&f, "[limits]\nmax_wait = 300ms\n");
    struct rlock_lock *a = campaign(f.c, "el/mw", "a", 0);
    char bin[512], errp[320];
    h_bin("rlockctl", bin, sizeof bin);
    h_env_path(&f.e, "elect.err", errp, sizeof errp);
    char *argv[] = {bin, "elect", "--server", f.e.rlockd_addr, "--value", "patient", "el/mw",
                    "--", "true", NULL};
    pid_t pid = h_spawn_io(argv, NULL, errp);
    ck_assert_int_gt(pid, 0);
    for (int i = 0; i < 10; i++) { /* ten times max_wait */
        h_sleep_ms(300);
        ck_assert_msg(h_alive(pid), "rlockctl elect gave up while another led");
    }
    h_assert_ok(f.c, rlock_release(a, CALL_MS));
    int status;
    ck_assert_msg(h_wait_exit(pid, GRANT_MS, &status) == 0, "rlockctl elect never elected");
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "rlockctl elect: status %d",
                  status);
    /* With --wait it gives up: 75. */
    struct rlock_lock *b = campaign(f.c, "el/mw", "b", 0);
    char *argv2[] = {bin, "elect", "--server", f.e.rlockd_addr, "--wait", "200ms", "el/mw",
                     "--", "true", NULL};
    pid = h_spawn_io(argv2, NULL, errp);
    ck_assert_msg(h_wait_exit(pid, GRANT_MS, &status) == 0, "rlockctl elect --wait never ended");
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 75, "rlockctl elect --wait: "
                  "status %d", status);
    h_assert_ok(f.c, rlock_release(b, CALL_MS));
    rlock_lock_free(a);
    rlock_lock_free(b);
    h_fixture_stop(&f);
}
END_TEST

/* --- failover: kill -9 the leader, again and again -------------------------------- */

#define FO_CANDS 3
#define FO_ROUNDS 6
#define FO_WRITES 3 /* writes the leader makes before it is killed */

/*
 * A fenced store: $1 the directory (store.lock, max, log), $2 the candidate. Every write
 * takes the lock (flock(1) on a descriptor of this shell, so that the shell itself holds it
 * and nothing of it outlives the shell), reads the highest term accepted so far, accepts
 * RLOCK_TERM when not below it ("W term candidate n") and refuses it otherwise ("R ...").
 * The new highest term replaces max by rename, never by rewriting it in place: a leader
 * killed (PR_SET_PDEATHSIG) between the truncating open and the write left max empty, and
 * every later leader was refused ("[: Illegal number"), its job running but never writing.
 */
static const char store_sh[] = "exec 9>>\"$1/store.lock\"\n"
                               "n=0\n"
                               "while :; do\n"
                               "    flock 9\n"
                               "    read max < \"$1/max\"\n"
                               "    if [ \"$RLOCK_TERM\" -ge \"$max\" ]; then\n"
                               "        echo \"$RLOCK_TERM\" > \"$1/max.new\"\n"
                               "        mv -f \"$1/max.new\" \"$1/max\"\n"
                               "        echo \"W $RLOCK_TERM $2 $n\" >> \"$1/log\"\n"
                               "    else\n"
                               "        echo \"R $RLOCK_TERM $2 $n\" >> \"$1/log\"\n"
                               "    fi\n"
                               "    flock -u 9\n"
                               "    n=$((n + 1))\n"
                               "    sleep 0.01\n"
                               "done\n";

struct fo_cand {
    pid_t pid;
    char id[32];
};

static void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    ck_assert_msg(fp != NULL, "%s: %s", path, strerror(errno));
    ck_assert_int_ge(fputs(text, fp), 0);
    ck_assert_int_eq(fclose(fp), 0);
}

static void fo_spawn(struct fo_cand *k, struct h_env *e, const char *script, int gen)
{
    char bin[512], errp[320], name[48];
    h_bin("rlockctl", bin, sizeof bin);
    snprintf(k->id, sizeof k->id, "cand-%d", gen);
    snprintf(name, sizeof name, "%s.err", k->id);
    h_env_path(e, name, errp, sizeof errp);
    char *argv[] = {bin,   "elect",        "--server", e->rlockd_addr, "--value", k->id,
                    "--grace", "1s",       "el/fo",    "--",           "/bin/sh", (char *)script,
                    e->dir, k->id,         NULL};
    k->pid = h_spawn_io(argv, NULL, errp);
    ck_assert_int_gt(k->pid, 0);
}

/* The number of "KIND term " lines in the store's log (KIND: W written, R refused). */
static int fo_lines(const char *log, char kind, uint64_t term)
{
    char *text = h_read_file(log);
    char pat[40];
    snprintf(pat, sizeof pat, "%c %" PRIu64 " ", kind, term);
    int n = 0;
    for (const char *p = text; p != NULL && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, pat, strlen(pat)) == 0)
            n++;
    free(text);
    return n;
}

/* Wait until the leader with term has written FO_WRITES times to the store. */
static void fo_wait_writes(const char *log, uint64_t term)
{
    for (int64_t t0 = h_now_ms(); fo_lines(log, 'W', term) < FO_WRITES; h_sleep_ms(10))
        ck_assert_msg(h_now_ms() - t0 < GRANT_MS, "the leader of term %" PRIu64
                      " wrote %d times in %d ms (%d writes refused by the store)", term,
                      fo_lines(log, 'W', term), GRANT_MS, fo_lines(log, 'R', term));
}

/* Check the store's log: nothing refused, terms never down, one candidate per term. */
static int fo_check_log(const char *log, const uint64_t *terms, char ids[][32], int nterms)
{
    char *text = h_read_file(log);
    ck_assert_ptr_nonnull(text);
    uint64_t last = 0;
    char last_id[32] = "";
    int runs = 0, lines = 0;
    for (char *p = text; *p;) {
        char *end = strchr(p, '\n');
        ck_assert_ptr_nonnull(end);
        *end = '\0';
        char kind;
        unsigned long long term;
        char id[32];
        int n;
        ck_assert_msg(sscanf(p, "%c %llu %31s %d", &kind, &term, id, &n) == 4,
                      "store log line %d: '%s'", lines + 1, p);
        ck_assert_msg(kind == 'W', "store log line %d: a write refused (a deposed leader "
                      "wrote after its successor): '%s'", lines + 1, p);
        ck_assert_msg(term >= last, "store log line %d: term %llu after %" PRIu64, lines + 1,
                      term, last);
        if (term != last) {
            runs++;
            snprintf(last_id, sizeof last_id, "%s", id);
            last = term;
            for (int i = 0; i < nterms; i++)
                if (terms[i] == term)
                    ck_assert_msg(strcmp(ids[i], id) == 0,
                                  "term %llu written by %s, but Leader named %s", term, id,
                                  ids[i]);
        } else {
            ck_assert_msg(strcmp(id, last_id) == 0, "store log line %d: term %llu written by "
                          "%s and by %s", lines + 1, term, last_id, id);
        }
        lines++;
        p = end + 1;
    }
    free(text);
    printf("failover: %d writes in %d terms\n", lines, runs);
    return runs;
}

START_TEST(test_failover)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    char script[320], maxp[320], log[320];
    h_env_path(&f.e, "store.sh", script, sizeof script);
    h_env_path(&f.e, "max", maxp, sizeof maxp);
    h_env_path(&f.e, "log", log, sizeof log);
    write_file(script, store_sh);
    write_file(maxp, "0\n");
    write_file(log, "");

    struct fo_cand k[FO_CANDS];
    int gen = 0;
    for (int i = 0; i < FO_CANDS; i++)
        fo_spawn(&k[i], &f.e, script, gen++);
    uint64_t terms[FO_ROUNDS + 1];
    char ids[FO_ROUNDS + 1][32];
    uint64_t last = 0;
    for (int round = 0; round <= FO_ROUNDS; round++) {
        struct rlock_leader l;
        wait_elected(f.c, "el/fo", last, &l, "a candidate's election");
        int who = -1;
        for (int i = 0; i < FO_CANDS; i++)
            if (strcmp(k[i].id, l.value) == 0)
                who = i;
        ck_assert_msg(who >= 0, "round %d: the leader '%s' is none of the candidates", round,
                      l.value);
        terms[round] = l.term;
        snprintf(ids[round], sizeof ids[round], "%.31s", l.value);
        last = l.term;
        fo_wait_writes(log, l.term);
        /* The two others wait: one of them takes over. */
        ck_assert_msg(h_wait_stats(&f.e, 1, FO_CANDS - 1, GRANT_MS, NULL) == 0,
                      "round %d: the other candidates are not waiting", round);
        if (round == FO_ROUNDS)
            break;
        int64_t t_kill = h_now_ms();
        kill(k[who].pid, SIGKILL);
        int status;
        ck_assert_msg(h_wait_exit(k[who].pid, 5000, &status) == 0, "a killed rlockctl stays");
        struct rlock_leader next;
        wait_elected(f.c, "el/fo", last, &next, "the takeover");
        printf("failover: round %d: %s (term %" PRIu64 ") killed, %s (term %" PRIu64
               ") leads %lld ms later\n",
               round, k[who].id, last, next.value, next.term, (long long)(h_now_ms() - t_kill));
        ck_assert_msg(strcmp(next.value, k[who].id) != 0, "the killed candidate leads again");
        fo_spawn(&k[who], &f.e, script, gen++);
    }
    for (int i = 0; i < FO_CANDS; i++)
        h_stop_pid(k[i].pid, SIGKILL, 2000, "an rlockctl elect candidate", NULL);
    h_sleep_ms(200); /* the commands follow their rlockctl (PR_SET_PDEATHSIG) */
    int runs = fo_check_log(log, terms, ids, FO_ROUNDS + 1);
    ck_assert_int_ge(runs, FO_ROUNDS + 1);
    for (int i = 1; i <= FO_ROUNDS; i++)
        ck_assert_msg(terms[i] > terms[i - 1], "term %" PRIu64 " after %" PRIu64, terms[i],
                      terms[i - 1]);
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_campaign_term,  test_leader_renewed,       test_no_leader,
                            test_second_candidate, test_observe,            test_observe_moves,
                            test_observe_wire,   test_observe_prompt,       test_observe_bounded,
                            test_observe_same_term_back,                    test_observe_retried,
                            test_observe_refused, test_async,               test_async_stop_race,
                            test_value_limits,   test_rlockctl_elect,       test_rlockctl_elect_waits,
                            test_failover,       test_lost_key_no_phantom};
    size_t n = H_LEN(tests);
    return h_run_tests("election", 180, tests, n);
}
