/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_protocol.c — the rlock.v1 semantics of docs/protocol.md, checked frame
 * by frame against a real rlockd and redis-server.
 *
 * The client library would hide most of what is checked here (owners of one
 * session, the order of a Cancel's two answers, valid_ms, id 0, how a boolean
 * may be encoded), so these tests speak the protocol themselves through
 * harness_raw. Every read has a deadline; the only timing figures asserted
 * are generous sanity ranges, and every figure printed is marked "FIGURE".
 *
 * Cases:
 *   owners      re-entry per owner; another owner of the session waits or
 *               gets NOT_ACQUIRED without a Redis call; owner 0 is an owner
 *   no_reentry  ALREADY_HELD, at once and from the wait queue
 *   fifo        grants follow the order of the waits, across owners of one
 *               session and another session
 *   cancel      Cancel of a queued, a head-of-queue, an in-Redis and a
 *               granted-in-Redis Acquire; unknown ids
 *   cancel_race Acquire + Cancel against a free or just released resource
 *   extend      Extend.token
 *   valid_ms    AcquireReply, ExtendReply and PingReply.valid_ms
 *   wire        an id-0 response and the encodings of a boolean
 *   extend_during_renew
 *               a renew sent while an Extend is in Redis must not set the
 *               key back below what the ExtendReply's valid_ms promised
 *               (renew.lua never shortens a key)
 *   valid_ms_past_session_timeout
 *               a silent session ends with its timeout: a client bounds
 *               a lock by min(lease, session) and no one else gets it
 *               before that bound
 *   valid_ms_many, valid_ms_renewal_order
 *               Ping's valid_ms over many locks of two ttls, and between two
 *               locks' renewals: the earliest end, never a later one
 */
#include "harness.h"
#include "harness_peer.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEADLINE_MS H_PEER_DEADLINE_MS /* for any answer that must come */
#define QUIET_MS 300     /* how long "no answer (yet)" is watched */
#define LONG_WAIT_MS 20000u
#define TTL_MS 30000u
#define RACE_ROUNDS 200      /* Acquire and Cancel in one write */
#define RACE_LATE_ROUNDS 100 /* the Cancel in a write of its own, a moment later */

#define OWNER_A 1u
#define OWNER_B 2u
#define OWNER_C 3u
#define OWNER_D 4u
#define OWNER_E 5u

#define ST(name) RLOCK__V1__STATUS__STATUS_##name

/* --- Cancel ------------------------------------------------------------------ */

static Rlock__V1__Cancel cancel_msg(uint64_t request_id)
{
    Rlock__V1__Cancel m = RLOCK__V1__CANCEL__INIT;
    m.request_id = request_id;
    return m;
}

static uint64_t send_cancel(struct h_peer *p, uint64_t request_id)
{
    Rlock__V1__Cancel m = cancel_msg(request_id);
    return h_peer_send(p, RLOCK__V1__REQUEST__BODY_CANCEL, &m);
}

/* Append Acquire a (id acq_id) and a Cancel of it (id cancel_id) to b: one write. */
static void add_acquire_and_cancel(struct h_raw_batch *b, uint64_t acq_id, uint64_t cancel_id,
                                   const struct h_acq *a)
{
    Rlock__V1__Acquire m = h_acquire_msg(a);
    Rlock__V1__Cancel c = cancel_msg(acq_id);
    h_raw_batch_add_body(b, acq_id, RLOCK__V1__REQUEST__BODY_ACQUIRE, &m);
    h_raw_batch_add_body(b, cancel_id, RLOCK__V1__REQUEST__BODY_CANCEL, &c);
}

/* The next message must be id's OK CancelReply; returns found. */
static int expect_cancel_reply(struct h_peer *p, uint64_t id, const char *what)
{
    Rlock__V1__ServerMessage *m = h_peer_response(p, id, what);
    const Rlock__V1__Response *r = m->response;
    ck_assert_msg(r->status == ST(OK) && r->body_case == RLOCK__V1__RESPONSE__BODY_CANCEL,
                  "%s: %s: %s, want an OK CancelReply", p->name, what, h_msg_describe(m));
    int found = r->cancel->found;
    h_raw_free(m);
    return found;
}

/* --- Redis ------------------------------------------------------------------ */

/* EVAL + EVALSHA calls the env's redis-server has run so far (INFO commandstats). */
static long long script_calls(redisContext *r)
{
    redisReply *rep = redisCommand(r, "INFO commandstats");
    ck_assert_msg(rep != NULL && rep->type == REDIS_REPLY_STRING, "INFO commandstats failed");
    long long total = 0;
    static const char *const names[] = {"cmdstat_eval:calls=", "cmdstat_evalsha:calls="};
    for (size_t i = 0; i < H_LEN(names); i++) {
        const char *at = strstr(rep->str, names[i]);
        if (at != NULL)
            total += atoll(at + strlen(names[i]));
    }
    freeReplyObject(rep);
    return total;
}

/* Every key of the env but the fence counters must be gone. */
static void expect_only_fence_keys(redisContext *r, const struct h_env *e)
{
    redisReply *rep = redisCommand(r, "KEYS %s*", e->prefix);
    ck_assert_msg(rep != NULL && rep->type == REDIS_REPLY_ARRAY, "KEYS failed");
    for (size_t i = 0; i < rep->elements; i++) {
        const char *k = rep->element[i]->str;
        size_t n = strlen(k);
        ck_assert_msg(n > 6 && strcmp(k + n - 6, ":fence") == 0, "key %s is left in Redis", k);
    }
    freeReplyObject(rep);
}

/* --- owners ----------------------------------------------------------------- */

#define RES_OWNERS "proto/owners"

START_TEST(test_protocol_owners)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct h_peer s;
    h_peer_open(&s, &f.e, "session");
    char key[512];
    h_lock_key(&f.e, RES_OWNERS, key, sizeof key);

    /* Watchdog off: no renew runs a script while Redis calls are counted below. */
    struct h_acq a = {.resource = RES_OWNERS, .ttl_ms = TTL_MS, .owner = OWNER_A,
                    .watchdog_off = 1};
    struct h_grant a1, a2;
    h_peer_acquire_ok(&s, &a, &a1, "owner A's acquire");
    ck_assert_uint_eq(a1.hold_count, 1);
    ck_assert_int_eq(a1.watchdog, 0);
    h_assert_key_token(f.r, key, a1.token);

    long long calls = script_calls(f.r);
    h_peer_acquire_ok(&s, &a, &a2, "owner A's second acquire");
    ck_assert_uint_eq(a2.hold_count, 2);
    ck_assert_str_eq(a2.token, a1.token);
    ck_assert_uint_eq(a2.fence, a1.fence);

    /* Another owner of the same session, not waiting: refused without asking Redis. */
    struct h_acq b = {.resource = RES_OWNERS, .ttl_ms = TTL_MS, .owner = OWNER_B};
    h_peer_expect_status(&s, h_peer_acquire(&s, &b), ST(NOT_ACQUIRED), "owner B's try while A holds");
    long long calls_after = script_calls(f.r);
    printf("protocol: FIGURE owners: Redis script calls for A's re-entry and B's try: %lld\n",
           calls_after - calls);
    ck_assert_msg(calls_after == calls, "%lld Redis script calls for a re-entry and a refusal",
                  calls_after - calls);

    /* B waits: no answer until A has returned both holds. */
    b.wait_ms = 5000;
    uint64_t b_id = h_peer_acquire(&s, &b);
    h_peer_expect_quiet(&s, QUIET_MS, "owner B waiting while A holds twice");
    h_peer_release_ok(&s, RES_OWNERS, a1.token, 1, "A's first release");
    h_peer_expect_quiet(&s, QUIET_MS, "owner B waiting while A holds once");
    h_peer_release_ok(&s, RES_OWNERS, a1.token, 0, "A's last release");
    struct h_grant g;
    h_peer_expect_grant(&s, b_id, &g, "owner B after A's last release");
    printf("protocol: FIGURE owners: A fence %" PRIu64 ", B fence %" PRIu64 ", B hold_count %u\n",
           a1.fence, g.fence, g.hold_count);
    ck_assert_str_ne(g.token, a1.token);
    ck_assert_uint_gt(g.fence, a1.fence);
    ck_assert_uint_eq(g.hold_count, 1);
    ck_assert_int_eq(g.watchdog, 1);
    h_assert_key_token(f.r, key, g.token);

    /* The old grant's token no longer names the lock. */
    h_peer_expect_status(&s, h_peer_release(&s, RES_OWNERS, a1.token), ST(NOT_HELD),
                  "release with A's old token");
    h_peer_release_ok(&s, RES_OWNERS, g.token, 0, "B's release");
    ck_assert_int_eq(h_key_exists(f.r, key), 0);

    /* Owner 0, what an Acquire without an owner carries, is one owner like any other. */
    struct h_acq z = {.resource = RES_OWNERS, .ttl_ms = TTL_MS};
    struct h_grant z1, z2;
    h_peer_acquire_ok(&s, &z, &z1, "owner 0's acquire");
    h_peer_acquire_ok(&s, &z, &z2, "owner 0's second acquire");
    ck_assert_uint_eq(z1.hold_count, 1);
    ck_assert_uint_eq(z2.hold_count, 2);
    ck_assert_str_eq(z2.token, z1.token);
    ck_assert_uint_eq(z2.fence, z1.fence);
    a.watchdog_off = 0;
    h_peer_expect_status(&s, h_peer_acquire(&s, &a), ST(NOT_ACQUIRED), "owner A's try while owner 0 holds");
    h_peer_release_ok(&s, RES_OWNERS, "", 1, "owner 0's first release");
    h_peer_release_ok(&s, RES_OWNERS, "", 0, "owner 0's last release");
    ck_assert_int_eq(h_key_exists(f.r, key), 0);
    h_peer_expect_stats(&s, 0, 0, "owners: at the end");
    fflush(stdout);

    h_raw_close(&s.raw);
    h_fixture_stop(&f);
}
END_TEST

/* --- no_reentry ------------------------------------------------------------- */

#define RES_NOREENTRY "proto/no_reentry"

START_TEST(test_protocol_no_reentry)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct h_peer s;
    h_peer_open(&s, &f.e, "session");
    char key[512];
    h_lock_key(&f.e, RES_NOREENTRY, key, sizeof key);

    /* no_reentry does not stand in the way of a first grant. */
    struct h_acq a = {.resource = RES_NOREENTRY, .ttl_ms = TTL_MS, .owner = OWNER_A,
                    .no_reentry = 1};
    struct h_grant g;
    h_peer_acquire_ok(&s, &a, &g, "A's acquire with no_reentry");
    ck_assert_uint_eq(g.hold_count, 1);
    h_peer_expect_status(&s, h_peer_acquire(&s, &a), ST(ALREADY_HELD), "A's second acquire, no_reentry");

    /* Another owner is not "already holding": it gets what any other owner gets. */
    struct h_acq b = a;
    b.owner = OWNER_B;
    h_peer_expect_status(&s, h_peer_acquire(&s, &b), ST(NOT_ACQUIRED), "B's try with no_reentry");

    /* The refusal left the hold count at 1: one release frees the key. */
    h_assert_key_token(f.r, key, g.token);
    h_peer_release_ok(&s, RES_NOREENTRY, g.token, 0, "A's only release");
    ck_assert_int_eq(h_key_exists(f.r, key), 0);

    /* From the wait queue: the second waits behind the first, which wins; then it is refused. */
    struct h_acq w = {.resource = RES_NOREENTRY, .ttl_ms = TTL_MS, .wait_ms = 5000,
                    .owner = OWNER_A};
    struct h_acq wn = w;
    wn.no_reentry = 1;
    struct h_raw_batch batch = {.len = 0};
    uint64_t first = h_peer_next_id(&s), second = h_peer_next_id(&s);
    Rlock__V1__Acquire m1 = h_acquire_msg(&w), m2 = h_acquire_msg(&wn);
    h_raw_batch_add_body(&batch, first, RLOCK__V1__REQUEST__BODY_ACQUIRE, &m1);
    h_raw_batch_add_body(&batch, second, RLOCK__V1__REQUEST__BODY_ACQUIRE, &m2);
    h_peer_send_batch(&s, &batch);
    h_peer_expect_grant(&s, first, &g, "the first of two pipelined acquires");
    ck_assert_uint_eq(g.hold_count, 1);
    h_peer_expect_status(&s, second, ST(ALREADY_HELD), "the pipelined no_reentry acquire");
    h_peer_release_ok(&s, RES_NOREENTRY, g.token, 0, "release after the pipelined pair");
    ck_assert_int_eq(h_key_exists(f.r, key), 0);
    h_peer_expect_stats(&s, 0, 0, "no_reentry: at the end");

    h_raw_close(&s.raw);
    h_fixture_stop(&f);
}
END_TEST

/* --- FIFO ------------------------------------------------------------------- */

#define RES_FIFO "proto/fifo"

/* One waiter of the FIFO test. */
struct waiter {
    struct h_peer *p;
    uint64_t owner;
    uint64_t id;
    struct h_grant g;
};

START_TEST(test_protocol_fifo)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct h_peer s1, s2;
    h_peer_open(&s1, &f.e, "S1");
    h_peer_open(&s2, &f.e, "S2");

    struct h_acq a = {.resource = RES_FIFO, .ttl_ms = TTL_MS, .owner = OWNER_A};
    struct h_grant held;
    h_peer_acquire_ok(&s1, &a, &held, "S1 owner A's acquire");

    /*
     * Waits in this order; a Ping answered right after each shows that the
     * daemon has queued it (frames of one connection are handled in order),
     * which fixes the order across the two connections too.
     */
    struct waiter w[] = {
        {.p = &s1, .owner = OWNER_B}, {.p = &s2, .owner = 0},       {.p = &s1, .owner = OWNER_C},
        {.p = &s1, .owner = OWNER_D}, {.p = &s2, .owner = OWNER_E},
    };
    for (size_t i = 0; i < H_LEN(w); i++) {
        struct h_acq q = {.resource = RES_FIFO, .ttl_ms = TTL_MS, .wait_ms = LONG_WAIT_MS,
                        .owner = w[i].owner};
        w[i].id = h_peer_acquire(w[i].p, &q);
        h_peer_ping(w[i].p, "queueing a waiter");
    }
    h_peer_expect_stats(&s1, H_LEN(w), 1, "fifo: five waiting");

    /* Each holder's last release hands the lock to the next waiter, and only to it. */
    struct h_peer *holder = &s1;
    const char *token = held.token;
    uint64_t fence = held.fence;
    for (size_t i = 0; i < H_LEN(w); i++) {
        h_peer_release_ok(holder, RES_FIFO, token, 0, "the holder's release");
        char what[96];
        snprintf(what, sizeof what, "waiter #%zu (%s, owner %llu)", i + 1, w[i].p->name,
                 (unsigned long long)w[i].owner);
        h_peer_expect_grant(w[i].p, w[i].id, &w[i].g, what);
        ck_assert_uint_eq(w[i].g.hold_count, 1);
        ck_assert_uint_gt(w[i].g.fence, fence);
        printf("protocol: FIGURE fifo: grant %zu to %s owner %llu, fence %" PRIu64 "\n", i + 1,
               w[i].p->name, (unsigned long long)w[i].owner, w[i].g.fence);
        h_peer_expect_quiet(w[i].p == &s1 ? &s2 : &s1, 50, "the other session after a grant");
        holder = w[i].p;
        token = w[i].g.token;
        fence = w[i].g.fence;
    }
    fflush(stdout);
    h_peer_release_ok(holder, RES_FIFO, token, 0, "the last holder's release");
    h_peer_expect_stats(&s1, 0, 0, "fifo: at the end");

    h_raw_close(&s1.raw);
    h_raw_close(&s2.raw);
    h_fixture_stop(&f);
}
END_TEST

/* --- Cancel ----------------------------------------------------------------- */

#define RES_CANCEL "proto/cancel"
#define RES_CANCEL_FREE "proto/cancel-free"

START_TEST(test_protocol_cancel)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct h_peer s1, s2, s3;
    h_peer_open(&s1, &f.e, "S1");
    h_peer_open(&s2, &f.e, "S2 (holder)");
    h_peer_open(&s3, &f.e, "S3");
    struct h_acq hold = {.resource = RES_CANCEL, .ttl_ms = TTL_MS};
    struct h_grant held;
    h_peer_acquire_ok(&s2, &hold, &held, "S2's acquire");

    /*
     * (a) A waiter behind another waiter never tries Redis: the Cancel finds it
     * queued, answers it CANCELLED at once, and then answers the Cancel.
     */
    struct h_acq wait = {.resource = RES_CANCEL, .ttl_ms = TTL_MS, .wait_ms = LONG_WAIT_MS};
    uint64_t head = h_peer_acquire(&s3, &wait);
    h_peer_ping(&s3, "S3 queued first");
    uint64_t queued = h_peer_acquire(&s1, &wait);
    h_peer_ping(&s1, "S1 queued second");
    h_peer_expect_stats(&s1, 2, 1, "cancel: two waiting");
    uint64_t c = send_cancel(&s1, queued);
    h_peer_expect_status(&s1, queued, ST(CANCELLED), "the cancelled queued acquire");
    ck_assert_int_eq(expect_cancel_reply(&s1, c, "Cancel of a queued acquire"), 1);
    h_peer_expect_stats(&s1, 1, 1, "cancel: one left waiting");

    /* (b) Nothing to withdraw: an unknown id, an answered Acquire, a request that is no Acquire. */
    c = send_cancel(&s1, 999999);
    ck_assert_int_eq(expect_cancel_reply(&s1, c, "Cancel of an unknown id"), 0);
    c = send_cancel(&s1, queued);
    ck_assert_int_eq(expect_cancel_reply(&s1, c, "Cancel of an answered acquire"), 0);
    uint64_t previous = c;
    c = send_cancel(&s1, previous);
    ck_assert_int_eq(expect_cancel_reply(&s1, c, "Cancel naming a Cancel"), 0);

    /*
     * (c) The head of the queue, waiting for its timer. A try of the same key
     * sent after it (wait 0, another owner) comes back after the head's try,
     * so once it is answered the head is waiting, not in Redis.
     */
    struct h_acq probe = {.resource = RES_CANCEL, .ttl_ms = TTL_MS, .owner = OWNER_B};
    h_peer_expect_status(&s3, h_peer_acquire(&s3, &probe), ST(NOT_ACQUIRED), "S3's probe");
    c = send_cancel(&s3, head);
    h_peer_expect_status(&s3, head, ST(CANCELLED), "the cancelled head of the queue");
    ck_assert_int_eq(expect_cancel_reply(&s3, c, "Cancel of the head of the queue"), 1);
    h_peer_expect_stats(&s1, 0, 1, "cancel: nobody waiting");

    /*
     * (d) Acquire and Cancel in one write: the Cancel comes while the try is
     * in Redis, so the Cancel is answered first and the Acquire when Redis
     * has answered (busy here).
     */
    struct h_raw_batch b = {.len = 0};
    uint64_t acq_id = h_peer_next_id(&s1), cancel_id = h_peer_next_id(&s1);
    add_acquire_and_cancel(&b, acq_id, cancel_id, &wait);
    h_peer_send_batch(&s1, &b);
    ck_assert_int_eq(expect_cancel_reply(&s1, cancel_id, "Cancel of an acquire in Redis"), 1);
    h_peer_expect_status(&s1, acq_id, ST(CANCELLED), "the acquire cancelled in Redis");
    h_peer_expect_stats(&s1, 0, 1, "cancel: after the in-Redis cancel");

    /* (e) The same on a free resource: Redis grants it, and the daemon gives it back. */
    char key[512], fence_key[512];
    h_lock_key(&f.e, RES_CANCEL_FREE, key, sizeof key);
    h_fence_key(&f.e, RES_CANCEL_FREE, fence_key, sizeof fence_key);
    struct h_acq free_wait = {.resource = RES_CANCEL_FREE, .ttl_ms = TTL_MS,
                            .wait_ms = LONG_WAIT_MS};
    acq_id = h_peer_next_id(&s1);
    cancel_id = h_peer_next_id(&s1);
    add_acquire_and_cancel(&b, acq_id, cancel_id, &free_wait);
    h_peer_send_batch(&s1, &b);
    ck_assert_int_eq(expect_cancel_reply(&s1, cancel_id, "Cancel of a grant in Redis"), 1);
    h_peer_expect_status(&s1, acq_id, ST(CANCELLED), "the acquire granted in Redis, then cancelled");
    ck_assert_msg(h_key_exists(f.r, fence_key) == 1,
                  "no fence counter: Redis never granted the cancelled acquire");
    ck_assert_msg(h_wait_key_gone(f.r, key, DEADLINE_MS, &f.e) >= 0,
                  "the cancelled grant's key stays in Redis");
    h_peer_expect_stats(&s1, 0, 1, "cancel: after the cancelled grant");

    h_peer_release_ok(&s2, RES_CANCEL, held.token, 0, "S2's release");
    h_peer_expect_stats(&s1, 0, 0, "cancel: at the end");
    expect_only_fence_keys(f.r, &f.e);

    h_raw_close(&s1.raw);
    h_raw_close(&s2.raw);
    h_raw_close(&s3.raw);
    h_fixture_stop(&f);
}
END_TEST

#define RES_RACE "proto/race"

/* Outcomes of the race rounds. */
struct race_tally {
    int granted;         /* the Acquire won: OK, Cancel found nothing */
    int cancelled;       /* CANCELLED, Cancel found it */
    int cancel_answered_first;
};

/* Read the two answers of an Acquire + Cancel pair, in either order, and check they agree. */
static void race_answers(struct h_peer *p, uint64_t acq_id, uint64_t cancel_id,
                         struct race_tally *t, int round)
{
    int acq_status = -1, found = -1, cancel_first = 0;
    struct h_grant g;
    char what[64];
    snprintf(what, sizeof what, "race round %d", round);
    for (int n = 0; n < 2; n++) {
        Rlock__V1__ServerMessage *m = h_peer_next(p, what);
        const Rlock__V1__Response *r = h_raw_response(m);
        ck_assert_msg(r != NULL && (r->id == acq_id || r->id == cancel_id),
                      "%s: unexpected %s", what, h_msg_describe(m));
        if (r->id == cancel_id) {
            ck_assert_msg(found < 0 && r->status == ST(OK) &&
                              r->body_case == RLOCK__V1__RESPONSE__BODY_CANCEL,
                          "%s: Cancel answered %s", what, h_msg_describe(m));
            found = r->cancel->found;
            cancel_first = n == 0;
        } else {
            ck_assert_msg(acq_status < 0 && (r->status == ST(OK) || r->status == ST(CANCELLED)),
                          "%s: Acquire answered %s", what, h_msg_describe(m));
            acq_status = (int)r->status;
            if (r->status == ST(OK))
                h_grant_copy(r->acquire, &g);
        }
        h_raw_free(m);
    }
    if (acq_status == ST(OK)) {
        ck_assert_msg(found == 0, "%s: the Acquire was granted, yet the Cancel found it", what);
        ck_assert_uint_eq(g.hold_count, 1);
        h_peer_release_ok(p, RES_RACE, g.token, 0, "release of a grant that beat its Cancel");
        t->granted++;
    } else {
        ck_assert_msg(found == 1, "%s: the Acquire was CANCELLED, yet the Cancel found nothing",
                      what);
        t->cancelled++;
        t->cancel_answered_first += cancel_first;
    }
}

START_TEST(test_protocol_cancel_race)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct h_peer racer, holder;
    h_peer_open(&racer, &f.e, "racer");
    h_peer_open(&holder, &f.e, "holder");
    char key[512];
    h_lock_key(&f.e, RES_RACE, key, sizeof key);
    struct h_acq wait = {.resource = RES_RACE, .ttl_ms = TTL_MS, .wait_ms = 5000};
    struct race_tally t = {0, 0, 0};

    /*
     * Rounds cycle through: the resource free; the holder's Release written
     * just before the racer's pair; and just after it.
     */
    for (int i = 0; i < RACE_ROUNDS; i++) {
        int mode = i % 3;
        struct h_grant g = {.fence = 0};
        if (mode != 0)
            h_peer_acquire_ok(&holder, &wait, &g, "the holder's acquire");
        struct h_raw_batch b = {.len = 0};
        uint64_t acq_id = h_peer_next_id(&racer), cancel_id = h_peer_next_id(&racer);
        add_acquire_and_cancel(&b, acq_id, cancel_id, &wait);
        uint64_t rel_id = 0;
        if (mode == 1)
            rel_id = h_peer_release(&holder, RES_RACE, g.token);
        h_peer_send_batch(&racer, &b);
        if (mode == 2)
            rel_id = h_peer_release(&holder, RES_RACE, g.token);
        race_answers(&racer, acq_id, cancel_id, &t, i);
        if (mode != 0) {
            Rlock__V1__ServerMessage *m = h_peer_response(&holder, rel_id, "the holder's release");
            ck_assert_msg(m->response->status == ST(OK) &&
                              m->response->body_case == RLOCK__V1__RESPONSE__BODY_RELEASE &&
                              m->response->release->hold_count == 0,
                          "the holder's release: %s", h_msg_describe(m));
            h_raw_free(m);
        }
    }
    printf("protocol: FIGURE cancel_race: one write, %d rounds: %d granted, %d cancelled "
           "(%d with the CancelReply first)\n",
           RACE_ROUNDS, t.granted, t.cancelled, t.cancel_answered_first);
    struct race_tally late = {0, 0, 0};

    /* The Cancel in a write of its own, 0 to 2 ms later: some Acquires win. */
    for (int i = 0; i < RACE_LATE_ROUNDS; i++) {
        uint64_t acq_id = h_peer_acquire(&racer, &wait);
        if (i % 3 != 0)
            h_sleep_ms(i % 3);
        uint64_t cancel_id = send_cancel(&racer, acq_id);
        race_answers(&racer, acq_id, cancel_id, &late, RACE_ROUNDS + i);
    }
    printf("protocol: FIGURE cancel_race: separate writes, %d rounds: %d granted, %d cancelled "
           "(%d with the CancelReply first)\n",
           RACE_LATE_ROUNDS, late.granted, late.cancelled, late.cancel_answered_first);
    fflush(stdout);

    ck_assert_msg(h_wait_key_gone(f.r, key, DEADLINE_MS, &f.e) >= 0,
                  "a lock key is left in Redis after the races");
    expect_only_fence_keys(f.r, &f.e);
    h_peer_expect_stats(&racer, 0, 0, "cancel_race: at the end");

    h_raw_close(&racer.raw);
    h_raw_close(&holder.raw);
    h_fixture_stop(&f);
}
END_TEST

/* --- Extend.token ----------------------------------------------------------- */

#define RES_EXTEND "proto/extend"
#define OTHER_TOKEN "00000000-0000-4000-8000-000000000000"

START_TEST(test_protocol_extend)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct h_peer s;
    h_peer_open(&s, &f.e, "session");
    char key[512];
    h_lock_key(&f.e, RES_EXTEND, key, sizeof key);

    /* Watchdog off: only Extend changes the key's PX. */
    struct h_acq a = {.resource = RES_EXTEND, .ttl_ms = 5000, .watchdog_off = 1};
    struct h_grant g;
    h_peer_acquire_ok(&s, &a, &g, "acquire");

    h_peer_expect_status(&s, h_peer_extend(&s, RES_EXTEND, 20000, OTHER_TOKEN), ST(NOT_HELD),
                  "Extend with another token");
    long long pttl = h_pttl(f.r, key);
    printf("protocol: FIGURE extend: PTTL after the refused Extend: %lld ms (lease 5000)\n", pttl);
    ck_assert_msg(pttl > 0 && pttl <= 5000, "PTTL %lld after a refused Extend", pttl);
    h_assert_key_token(f.r, key, g.token);
    h_peer_expect_stats(&s, 0, 1, "extend: still held after the refusal");

    uint64_t id = h_peer_extend(&s, RES_EXTEND, 20000, g.token);
    Rlock__V1__ServerMessage *m = h_peer_response(&s, id, "Extend with the lock's token");
    ck_assert_msg(m->response->status == ST(OK) &&
                      m->response->body_case == RLOCK__V1__RESPONSE__BODY_EXTEND,
                  "Extend with the lock's token: %s", h_msg_describe(m));
    uint32_t ttl = m->response->extend->ttl_ms, valid = m->response->extend->valid_ms;
    h_raw_free(m);
    pttl = h_pttl(f.r, key);
    printf("protocol: FIGURE extend: ExtendReply ttl_ms %u valid_ms %u, PTTL now %lld ms\n", ttl,
           valid, pttl);
    ck_assert_uint_eq(ttl, 20000);
    ck_assert_msg(valid > 5000 && valid <= 20000, "ExtendReply.valid_ms %u", valid);
    ck_assert_msg(pttl > 5000 && pttl <= 20000, "PTTL %lld after the Extend to 20 s", pttl);

    /* No token: no check, and ttl 0 keeps the lock's (new) ttl. */
    id = h_peer_extend(&s, RES_EXTEND, 0, "");
    m = h_peer_response(&s, id, "Extend without a token");
    ck_assert_msg(m->response->status == ST(OK) &&
                      m->response->body_case == RLOCK__V1__RESPONSE__BODY_EXTEND &&
                      m->response->extend->ttl_ms == 20000,
                  "Extend without a token: %s", h_msg_describe(m));
    h_raw_free(m);

    h_peer_release_ok(&s, RES_EXTEND, g.token, 0, "release");
    ck_assert_int_eq(h_key_exists(f.r, key), 0);
    h_peer_expect_status(&s, h_peer_extend(&s, RES_EXTEND, 0, g.token), ST(NOT_HELD),
                  "Extend after the release");

    h_raw_close(&s.raw);
    h_fixture_stop(&f);
}
END_TEST

/* --- valid_ms --------------------------------------------------------------- */

#define RES_VALID_OFF "proto/valid-off"
#define RES_VALID_ON "proto/valid-on"
#define VALID_TTL_MS 3000u
#define VALID_SLEEP_MS 1000
#define VALID_SLACK_MS 500 /* generous: scheduling on a loaded machine */
/*
 * valid_ms has the daemon's loss margin taken off (docs/protocol.md): 50 ms of
 * loop lateness plus Redis's drift allowance, ttl/100 + 2 ms. So no valid_ms
 * of a 3 s lease goes beyond 3000 - 82 ms.
 */
#define VALID_MARGIN_MS (50 + VALID_TTL_MS / 100 + 2)
/* The script goes out in the same callback that read the frame: a clock tick or two. */
#define VALID_MAX_MS (VALID_TTL_MS - VALID_MARGIN_MS + 5)

START_TEST(test_protocol_valid_ms)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct h_peer s, other;
    h_peer_open(&s, &f.e, "session");
    h_peer_open(&other, &f.e, "other");

    uint32_t v = h_peer_ping(&s, "Ping without locks");
    printf("protocol: FIGURE valid_ms: Ping without locks: %u\n", v);
    ck_assert_uint_eq(v, 0);

    /* A watchdog-off lease, asked twice 1 s apart: the second answer is about 1 s shorter. */
    struct h_acq off = {.resource = RES_VALID_OFF, .ttl_ms = VALID_TTL_MS, .watchdog_off = 1};
    struct h_grant g1, g2;
    int64_t t1 = h_now_ms();
    h_peer_acquire_ok(&s, &off, &g1, "the watchdog-off acquire");
    printf("protocol: FIGURE valid_ms: AcquireReply for ttl %u: %u\n", VALID_TTL_MS,
           g1.valid_ms);
    ck_assert_msg(g1.valid_ms > 0 && g1.valid_ms <= VALID_MAX_MS, "valid_ms %u for ttl %u",
                  g1.valid_ms, VALID_TTL_MS);
    v = h_peer_ping(&s, "Ping with a watchdog-off lock only");
    printf("protocol: FIGURE valid_ms: Ping with a watchdog-off lock only: %u\n", v);
    ck_assert_uint_eq(v, 0);

    h_sleep_ms(VALID_SLEEP_MS);
    int64_t t2 = h_now_ms();
    h_peer_acquire_ok(&s, &off, &g2, "the watchdog-off re-entry");
    int64_t sent_apart = t2 - t1, drop = (int64_t)g1.valid_ms - (int64_t)g2.valid_ms;
    printf("protocol: FIGURE valid_ms: re-entry %lld ms later: %u (%lld less)\n",
           (long long)sent_apart, g2.valid_ms, (long long)drop);
    ck_assert_uint_eq(g2.hold_count, 2);
    ck_assert_msg(drop >= sent_apart - VALID_SLACK_MS && drop <= sent_apart + VALID_SLACK_MS,
                  "valid_ms dropped by %lld ms over %lld ms", (long long)drop,
                  (long long)sent_apart);

    /* An Extend restarts the lease; its valid_ms counts from the Extend's arrival. */
    uint64_t id = h_peer_extend(&s, RES_VALID_OFF, VALID_TTL_MS, g1.token);
    Rlock__V1__ServerMessage *m = h_peer_response(&s, id, "Extend");
    ck_assert_msg(m->response->status == ST(OK) &&
                      m->response->body_case == RLOCK__V1__RESPONSE__BODY_EXTEND,
                  "Extend: %s", h_msg_describe(m));
    uint32_t ev = m->response->extend->valid_ms;
    h_raw_free(m);
    printf("protocol: FIGURE valid_ms: ExtendReply for ttl %u: %u\n", VALID_TTL_MS, ev);
    ck_assert_msg(ev > g2.valid_ms && ev <= VALID_MAX_MS, "ExtendReply.valid_ms %u", ev);

    /* A watchdog lock makes Ping report a bound. */
    struct h_acq on = {.resource = RES_VALID_ON, .ttl_ms = VALID_TTL_MS};
    struct h_grant gw;
    h_peer_acquire_ok(&s, &on, &gw, "the watchdog acquire");
    ck_assert_msg(gw.valid_ms > 0 && gw.valid_ms <= VALID_MAX_MS, "valid_ms %u", gw.valid_ms);
    v = h_peer_ping(&s, "Ping with a watchdog lock");
    printf("protocol: FIGURE valid_ms: Ping with a watchdog lock (ttl %u): %u\n", VALID_TTL_MS, v);
    ck_assert_msg(v > 0 && v <= VALID_MAX_MS, "PingReply.valid_ms %u", v);

    /*
     * A grant after a wait: valid_ms counts from the Acquire's arrival, and the
     * lease from the winning try, so it exceeds the ttl by about the wait.
     */
    struct h_acq w = {.resource = RES_VALID_ON, .ttl_ms = VALID_TTL_MS, .wait_ms = 5000};
    int64_t tw = h_now_ms();
    uint64_t wid = h_peer_acquire(&other, &w);
    h_sleep_ms(VALID_SLEEP_MS);
    h_peer_release_ok(&s, RES_VALID_ON, gw.token, 0, "release of the watchdog lock");
    struct h_grant gwait;
    h_peer_expect_grant(&other, wid, &gwait, "the waiting acquire");
    int64_t waited = h_now_ms() - tw;
    printf("protocol: FIGURE valid_ms: grant after a %lld ms wait, ttl %u: %u\n",
           (long long)waited, VALID_TTL_MS, gwait.valid_ms);
    ck_assert_msg(gwait.valid_ms > VALID_MAX_MS && gwait.valid_ms <= VALID_MAX_MS + waited,
                  "valid_ms %u after a %lld ms wait", gwait.valid_ms, (long long)waited);
    h_peer_release_ok(&other, RES_VALID_ON, gwait.token, 0, "the waiter's release");

    v = h_peer_ping(&s, "Ping after the watchdog lock went");
    ck_assert_uint_eq(v, 0);
    h_peer_release_ok(&s, RES_VALID_OFF, g1.token, 1, "first release of the watchdog-off lock");
    h_peer_release_ok(&s, RES_VALID_OFF, g1.token, 0, "last release of the watchdog-off lock");
    /* Renewals carry the bound along: after more than a ttl it is still about
     * a ttl less one renewal interval, not counting down from the grant. */
    struct h_grant gr;
    h_peer_acquire_ok(&s, &on, &gr, "the watchdog acquire held past its ttl");
    h_sleep_ms(VALID_TTL_MS + VALID_SLEEP_MS);
    v = h_peer_ping(&s, "Ping after the watchdog renewed");
    printf("protocol: FIGURE valid_ms: Ping %u ms after the grant: %u\n",
           VALID_TTL_MS + VALID_SLEEP_MS, v);
    ck_assert_msg(v > VALID_TTL_MS / 3 && v <= VALID_MAX_MS, "PingReply.valid_ms %u", v);
    h_peer_release_ok(&s, RES_VALID_ON, gr.token, 0, "release of the renewed lock");
    fflush(stdout);

    h_raw_close(&s.raw);
    h_raw_close(&other.raw);
    h_fixture_stop(&f);
}
END_TEST

/* --- wire details ----------------------------------------------------------- */

#define RES_BOOL "proto/bool"

START_TEST(test_protocol_wire)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct h_peer s;
    h_peer_open(&s, &f.e, "session");

    /* An empty frame after Hello is a Request with id 0 and no body: INVALID, id 0, no close. */
    ck_assert_int_eq(h_raw_send_body(&s.raw, NULL, 0), 0);
    h_peer_expect_status(&s, 0, ST(INVALID), "an empty frame");
    /* A Ping without an id (Request{ping{}}: 32 00) is answered with id 0, too. */
    static const uint8_t ping_no_id[] = {0x32, 0x00};
    ck_assert_int_eq(h_raw_send_body(&s.raw, ping_no_id, sizeof ping_no_id), 0);
    Rlock__V1__ServerMessage *m = h_peer_response(&s, 0, "a Ping without an id");
    ck_assert_msg(m->response->status == ST(OK), "a Ping without an id: %s", h_msg_describe(m));
    h_raw_free(m);
    h_peer_ping(&s, "a Ping after the id-0 answers");

    /*
     * Request{id 10, acquire{resource "proto/bool", watchdog_off: <byte>}}:
     * 08 0a 1a 0e 0a 0a "proto/bool" 20 <byte>. Any one-byte non-zero value
     * decodes as true; 00 is an explicit default, false, as valid in proto3 as
     * leaving the field out (protobufjs writes it): the watchdog stays on.
     */
    uint8_t body[] = {0x08, 0x0a, 0x1a, 0x0e, 0x0a, 0x0a, 'p', 'r', 'o', 't', 'o',
                      '/',  'b',  'o',  'o',  'l',  0x20, 0x02};
    ck_assert_int_eq(h_raw_send_body(&s.raw, body, sizeof body), 0);
    struct h_grant g;
    h_peer_expect_grant(&s, 10, &g, "an Acquire with watchdog_off encoded as 02");
    ck_assert_int_eq(g.watchdog, 0);
    h_peer_release_ok(&s, RES_BOOL, g.token, 0, "release");
    body[1] = 0x0b;
    body[sizeof body - 1] = 0x00;
    ck_assert_int_eq(h_raw_send_body(&s.raw, body, sizeof body), 0);
    h_peer_expect_grant(&s, 11, &g, "an Acquire with watchdog_off encoded as 00");
    ck_assert_int_eq(g.watchdog, 1);
    h_peer_release_ok(&s, RES_BOOL, g.token, 0, "release of the second grant");
    h_peer_expect_stats(&s, 0, 0, "wire: at the end");

    h_raw_close(&s.raw);
    h_fixture_stop(&f);
}
END_TEST

/* --- a renew sent while an Extend is in flight ------------------------------- */

/*
 * The watchdog does not skip a lease whose Extend is still in Redis, and a
 * renew carries the lease's current ttl, which the Extend only changes when
 * its reply arrives. A renew sent after the Extend runs after it in Redis;
 * if it set the key's PX back to the old, shorter ttl, the ExtendReply's
 * valid_ms (and ttl_ms) would promise what Redis does not keep. renew.lua
 * never shortens a key, so it must not. Redis is
 * stopped for a moment so that the renew falls due while the Extend waits:
 * no timing luck is needed.
 */
#define RES_ER "proto/extend-renew"
#define ER_TTL_MS 6000u        /* renewed 2 s after the grant */
#define ER_EXTEND_TTL_MS 30000u
#define ER_STOP_AT_MS 1700     /* Redis stopped from here ... */
#define ER_CONT_AT_MS 2400     /* ... to here, across the renew at 2000 */
#define ER_SLACK_MS 100

START_TEST(test_protocol_extend_during_renew)
{
    struct h_fixture f;
    /* A 1 s command deadline, so that the 700 ms stop is no Redis failure (3 x 1 s <= min_ttl). */
    h_fixture_start_env(&f, "[redis]\ncommand_timeout = 1s\n[limits]\nmin_ttl = 3s\n");
    struct h_peer s;
    h_peer_open(&s, &f.e, "session");
    char key[512];
    h_lock_key(&f.e, RES_ER, key, sizeof key);

    struct h_acq a = {.resource = RES_ER, .ttl_ms = ER_TTL_MS};
    struct h_grant g;
    int64_t t0 = h_now_ms();
    h_peer_acquire_ok(&s, &a, &g, "the watchdog acquire");

    h_sleep_ms((int)(t0 + ER_STOP_AT_MS - h_now_ms()));
    ck_assert_int_eq(kill(f.e.redis_pid, SIGSTOP), 0);
    int64_t sent = h_now_ms();
    uint64_t id = h_peer_extend(&s, RES_ER, ER_EXTEND_TTL_MS, g.token);
    h_sleep_ms((int)(t0 + ER_CONT_AT_MS - h_now_ms()));
    ck_assert_int_eq(kill(f.e.redis_pid, SIGCONT), 0);

    Rlock__V1__ServerMessage *m = h_peer_response(&s, id, "the Extend across the stop");
    ck_assert_msg(m->response->status == ST(OK) &&
                      m->response->body_case == RLOCK__V1__RESPONSE__BODY_EXTEND,
                  "the Extend across the stop: %s", h_msg_describe(m));
    uint32_t valid = m->response->extend->valid_ms;
    h_raw_free(m);
    uint32_t ping = h_peer_ping(&s, "Ping after the Extend");
    int64_t now = h_now_ms();
    long long pttl = h_pttl(f.r, key);
    int64_t promised = sent + valid, in_redis = now + pttl;
    printf("protocol: FIGURE ExtendReply valid_ms %u (valid until +%lld ms on our clock); "
           "Ping valid_ms right after %u; key PTTL %lld (expires at +%lld ms)\n",
           valid, (long long)(promised - sent), ping, pttl, (long long)(in_redis - sent));
    fflush(stdout);
    ck_assert_msg(in_redis + ER_SLACK_MS >= promised,
                  "the ExtendReply promised validity until %lld ms after the Extend "
                  "was sent, but the key expires after %lld ms: a renew sent while the Extend "
                  "was in Redis set it back to the old ttl",
                  (long long)(promised - sent), (long long)(in_redis - sent));

    h_peer_release_ok(&s, RES_ER, g.token, 0, "release");
    h_raw_close(&s.raw);
    h_fixture_stop(&f);
}
END_TEST

/* --- valid_ms and a silent session ---------------------------------------------- */

/*
 * One session, many watchdog locks of two ttls, most of the short ones let go
 * (their entries in the daemon's validity order die and are dropped), the
 * rest held past several renewals: each Ping reports the shortest remaining
 * validity among the locks still held, carried along by renewals, and never a
 * lock let go of. The daemon corrects its order lazily (lock/validity.c): a
 * bound left at a grant's validity would fall to 0 here; a dead entry counted
 * would keep the short ttl's figure after the last short lock went.
 */
#define MANY_SHORT 200
#define MANY_SHORT_LEFT 50
#define MANY_LONG 100
#define LONG_TTL_MS (2 * VALID_TTL_MS)
#define LONG_MAX_MS (LONG_TTL_MS - (50 + LONG_TTL_MS / 100 + 2) + 5)

START_TEST(test_protocol_valid_ms_many)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct h_peer s;
    h_peer_open(&s, &f.e, "session");
    static struct h_grant shorts[MANY_SHORT], longs[MANY_LONG];
    char name[64];
    for (int i = 0; i < MANY_SHORT; i++) {
        snprintf(name, sizeof name, "proto/vm-short-%d", i);
        struct h_acq a = {.resource = name, .ttl_ms = VALID_TTL_MS};
        h_peer_acquire_ok(&s, &a, &shorts[i], "a short watchdog lock");
    }
    for (int i = 0; i < MANY_LONG; i++) {
        snprintf(name, sizeof name, "proto/vm-long-%d", i);
        struct h_acq a = {.resource = name, .ttl_ms = LONG_TTL_MS};
        h_peer_acquire_ok(&s, &a, &longs[i], "a long watchdog lock");
    }
    for (int i = MANY_SHORT_LEFT; i < MANY_SHORT; i++) {
        snprintf(name, sizeof name, "proto/vm-short-%d", i);
        h_peer_release_ok(&s, name, shorts[i].token, 0, "a short lock let go");
    }
    /* Past the grants' own validity: only renewals keep the bound up. */
    for (int round = 0; round < 5; round++) {
        h_sleep_ms(VALID_SLEEP_MS);
        uint32_t v = h_peer_ping(&s, "Ping while the short locks are renewed");
        printf("protocol: FIGURE valid_ms: many locks, round %d: %u\n", round, v);
        ck_assert_msg(v > VALID_TTL_MS / 3 && v <= VALID_MAX_MS,
                      "PingReply.valid_ms %u with short locks (ttl %u) held", v, VALID_TTL_MS);
    }
    for (int i = 0; i < MANY_SHORT_LEFT; i++) {
        snprintf(name, sizeof name, "proto/vm-short-%d", i);
        h_peer_release_ok(&s, name, shorts[i].token, 0, "the last short locks let go");
    }
    uint32_t v = h_peer_ping(&s, "Ping with the long locks only");
    printf("protocol: FIGURE valid_ms: many locks, the long ones only: %u\n", v);
    ck_assert_msg(v > VALID_MAX_MS && v <= LONG_MAX_MS,
                  "PingReply.valid_ms %u with only long locks (ttl %u) held", v, LONG_TTL_MS);
    for (int i = 0; i < MANY_LONG; i++) {
        snprintf(name, sizeof name, "proto/vm-long-%d", i);
        h_peer_release_ok(&s, name, longs[i].token, 0, "a long lock let go");
    }
    ck_assert_uint_eq(h_peer_ping(&s, "Ping with no lock"), 0);
    fflush(stdout);
    h_raw_close(&s.raw);
    h_fixture_stop(&f);
}
END_TEST

/*
 * Two watchdog locks of one ttl granted ORDER_GAP_MS apart. The first is renewed
 * at a third of its ttl, the second a gap later: between the two renewals the
 * second ends first, and a Ping's valid_ms must not pass its end. The daemon keeps
 * a session's leases of one ttl in a list by the end of their validity and moves
 * a renewed lease to its place (lock/validity.c); a renewed lease left at the head
 * makes Ping report its new end, a gap past the other lock's.
 */
#define ORDER_TTL_MS 9000u
#define ORDER_GAP_MS 2000
#define ORDER_TRIES 3

START_TEST(test_protocol_valid_ms_renewal_order)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct h_peer s;
    h_peer_open(&s, &f.e, "session");
    int measured = 0;
    for (int try = 0; try < ORDER_TRIES && !measured; try++) {
        char first[64], second[64];
        snprintf(first, sizeof first, "proto/order-first-%d", try);
        snprintf(second, sizeof second, "proto/order-second-%d", try);
        struct h_acq a = {.resource = first, .ttl_ms = ORDER_TTL_MS};
        struct h_acq b = {.resource = second, .ttl_ms = ORDER_TTL_MS};
        struct h_grant ga, gb;
        h_peer_acquire_ok(&s, &a, &ga, "the first lock");
        h_sleep_ms(ORDER_GAP_MS);
        int64_t b_sent = h_now_ms();
        h_peer_acquire_ok(&s, &b, &gb, "the second lock");
        /* The daemon's end of the second lock's validity is no later than this. */
        int64_t b_end = h_now_ms() + gb.valid_ms;
        /* The first was renewed about a gap before the second will be: ask halfway. */
        int64_t ask = b_sent + ORDER_TTL_MS / 3 - ORDER_GAP_MS / 2;
        if (ask > h_now_ms())
            h_sleep_ms((int)(ask - h_now_ms()));
        int64_t p_sent = h_now_ms();
        uint32_t v = h_peer_ping(&s, "Ping between the two renewals");
        /* A Ping sent once the second lock may be renewed too proves nothing: again. */
        if (p_sent < b_sent + ORDER_TTL_MS / 3) {
            measured = 1;
            printf("protocol: FIGURE valid_ms between renewals: Ping's bound +%lld ms, the "
                   "second lock's end +%lld ms (from the Ping)\n",
                   (long long)v, (long long)(b_end - p_sent));
            ck_assert_msg(p_sent + v <= b_end,
                          "Ping's valid_ms %u runs %lld ms past the end of the second lock's "
                          "validity: the first lock's renewal left it first in the order",
                          v, (long long)(p_sent + v - b_end));
        }
        h_peer_release_ok(&s, first, ga.token, 0, "release of the first lock");
        h_peer_release_ok(&s, second, gb.token, 0, "release of the second lock");
    }
    ck_assert_msg(measured, "no Ping could be placed between two renewals in %d tries",
                  ORDER_TRIES);
    fflush(stdout);
    h_raw_close(&s.raw);
    h_fixture_stop(&f);
}
END_TEST

/*
 * A session from which the daemon hears nothing for session_timeout ends,
 * and its locks are released at once. valid_ms speaks of the lease only, so
 * a client bounds a lock by min(send + valid_ms, send of the latest answered
 * request + session_timeout) (§6.5): a client cut off (or paused) after a
 * grant holds nothing past that. Here the holder falls silent after its
 * grant, with a 1 s session timeout and a 30 s lease: valid_ms still tells
 * the lease, and another session waiting for the lock gets it after about
 * 1 s — never before the holder's bound by the rule.
 */
#define RES_SILENT "proto/silent-holder"
#define SILENT_SESSION_TIMEOUT_MS 1000u

START_TEST(test_protocol_valid_ms_past_session_timeout)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct h_peer holder, other;
    holder.name = "holder";
    holder.last_id = 1;
    h_raw_open(&holder.raw, &f.e);
    uint32_t timeout = h_raw_hello(&holder.raw, 1, holder.name, SILENT_SESSION_TIMEOUT_MS);
    ck_assert_uint_eq(timeout, SILENT_SESSION_TIMEOUT_MS);
    h_peer_open(&other, &f.e, "other");

    struct h_acq a = {.resource = RES_SILENT, .ttl_ms = TTL_MS, .wait_ms = LONG_WAIT_MS};
    struct h_grant g;
    int64_t sent = h_now_ms();
    h_peer_acquire_ok(&holder, &a, &g, "the holder's acquire");
    ck_assert_msg(g.valid_ms > 20000, "valid_ms %u: the 30 s lease, not the session", g.valid_ms);
    int64_t bound = sent + (g.valid_ms < timeout ? g.valid_ms : timeout);

    /* The holder says nothing more; the other session waits for the lock. */
    uint64_t id = h_peer_acquire(&other, &a);
    struct h_grant og;
    h_peer_expect_grant(&other, id, &og, "the other session's acquire");
    int64_t granted = h_now_ms();
    Rlock__V1__ServerMessage *m;
    int eof = h_raw_read(&holder.raw, h_now_ms() + DEADLINE_MS, &m);
    h_raw_free(m);
    printf("protocol: FIGURE holder's valid_ms %u (bound +%lld ms); session timeout %u ms; "
           "the other session was granted the lock at +%lld ms; holder's connection %s\n",
           g.valid_ms, (long long)(bound - sent), timeout, (long long)(granted - sent),
           eof == 0 ? "closed" : "still open");
    fflush(stdout);
    ck_assert_msg(granted >= bound,
                  "the holder was told its lock stays valid until +%lld ms, but its "
                  "silent session ended after %u ms and another session held the lock at "
                  "+%lld ms, before the bound of the §6.5 rule",
                  (long long)(bound - sent), timeout, (long long)(granted - sent));

    h_peer_release_ok(&other, RES_SILENT, og.token, 0, "the other session's release");
    h_raw_close(&holder.raw);
    h_raw_close(&other.raw);
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {
        test_protocol_owners, test_protocol_no_reentry, test_protocol_fifo,
        test_protocol_cancel, test_protocol_cancel_race, test_protocol_extend,
        test_protocol_valid_ms, test_protocol_wire,
        test_protocol_extend_during_renew, test_protocol_valid_ms_past_session_timeout,
        test_protocol_valid_ms_many, test_protocol_valid_ms_renewal_order,
    };
    return h_run_tests("integration_protocol", 120, tests, H_LEN(tests));
}
