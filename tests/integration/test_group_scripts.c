/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_group_scripts.c — the group scripts of lua/ (group_acquire, group_renew,
 * group_release: shared holds of a read-write lock and semaphore permits,
 * docs/design-kinds.md) run with EVAL against a real redis-server, one call at
 * a time, so that every answer and every key left behind can be checked:
 *  - shared: any number of holders, fences strictly increasing and above the
 *    exclusive grants' (one fence key), the copied SET NX and compare-and-delete
 *    and rlockd's exclusive acquire.lua kept out, the keys gone with the last;
 *  - semaphore: at most N permits, k at once, a retried grant never counted
 *    twice, a mismatched limit or kind refused with what holds the resource;
 *  - leases: an ended place is dropped and its permit given back, never renewed
 *    back to life; renewals never shorten; a lock_delay keeps the place taken;
 *  - an exclusive waiter's claim holds back new shared holds only.
 * The script text is read from the source tree (RLOCK_LUA_DIR), the file
 * rlockd embeds.
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_LEN 200
#define MARKER_LEN 160 /* the lock key; the others add a suffix to it */
#define LONG_PX 600000L   /* 10 min: nothing a test sets expires while it runs */
#define FENCE_TTL "3600000"
#define SLACK_MS 60000L   /* what a loaded machine may take between a call and its check */
#define RW "group:rw"
#define SEM3 "group:sem:3"

/* The keys of one resource, and the scripts. */
struct g {
    struct h_fixture f;
    char *acquire, *renew, *release, *excl, *copied_release;
    char marker[MARKER_LEN], holders[KEY_LEN], permits[KEY_LEN], fence[KEY_LEN], claim[KEY_LEN];
};

static void g_start(struct g *g, const char *res)
{
    h_fixture_start_env(&g->f, NULL);
    g->acquire = h_lua_script("group_acquire");
    g->renew = h_lua_script("group_renew");
    g->release = h_lua_script("group_release");
    g->excl = h_lua_script("acquire");
    g->copied_release = h_lua_script("release");
    h_lock_key(&g->f.e, res, g->marker, sizeof g->marker);
    h_fence_key(&g->f.e, res, g->fence, sizeof g->fence);
    snprintf(g->holders, sizeof g->holders, "%s:holders", g->marker);
    snprintf(g->permits, sizeof g->permits, "%s:permits", g->marker);
    snprintf(g->claim, sizeof g->claim, "%s:claim", g->marker);
}

static void g_stop(struct g *g)
{
    free(g->acquire);
    free(g->renew);
    free(g->release);
    free(g->excl);
    free(g->copied_release);
    h_fixture_stop(&g->f);
}

/* EVAL text with n keys then m arguments; the reply, never NULL. */
static redisReply *eval(struct g *g, const char *text, const char **keys, int n,
                        const char **args, int m)
{
    redisReply *rep = h_eval(g->f.r, text, keys, n, args, m);
    ck_assert_msg(rep->type != REDIS_REPLY_ERROR, "EVAL: %s", rep->str);
    return rep;
}

/* What group_acquire answered. */
struct answer {
    long long code;     /* 1 granted, 0 busy, -1 another kind */
    long long num;      /* the fence (granted), the PTTL (busy) */
    long long foreign;  /* busy: 1 when the holder is not rlockd */
    char holder[64];    /* another kind: what holds the resource */
};

static struct answer g_acquire(struct g *g, const char *token, long ttl_ms, const char *marker,
                               int k)
{
    char ttl[24], ks[16];
    snprintf(ttl, sizeof ttl, "%ld", ttl_ms);
    snprintf(ks, sizeof ks, "%d", k);
    const char *keys[] = { g->marker, g->holders, g->permits, g->fence, g->claim };
    const char *args[] = { token, ttl, FENCE_TTL, marker, ks };
    redisReply *rep = eval(g, g->acquire, keys, 5, args, 5);
    ck_assert_msg(rep->type == REDIS_REPLY_ARRAY && rep->elements >= 2, "reply type %d",
                  rep->type);
    struct answer a = { .code = rep->element[0]->integer, .foreign = -1 };
    if (a.code == -1) {
        ck_assert_int_eq(rep->element[1]->type, REDIS_REPLY_STRING);
        snprintf(a.holder, sizeof a.holder, "%s", rep->element[1]->str);
    } else {
        a.num = rep->element[1]->integer;
        ck_assert_uint_eq(rep->elements, a.code == 1 ? 2 : 3);
        if (a.code == 0)
            a.foreign = rep->element[2]->integer;
    }
    freeReplyObject(rep);
    return a;
}

/* group_renew or group_release of one place: its per-entry answer. */
static long long g_one(struct g *g, const char *text, const char *token, long num,
                       const char *marker)
{
    char nums[24];
    snprintf(nums, sizeof nums, "%ld", num);
    const char *keys[] = { g->marker, g->holders, g->permits };
    const char *renew_args[] = { token, nums, marker };
    const char *release_args[] = { token, nums, ":free" };
    redisReply *rep = text == g->renew ? eval(g, text, keys, 3, renew_args, 3)
                                       : eval(g, text, keys, 3, release_args, 3);
    ck_assert_msg(rep->type == REDIS_REPLY_ARRAY && rep->elements == 1, "reply type %d",
                  rep->type);
    long long v = rep->element[0]->integer;
    freeReplyObject(rep);
    return v;
}

static long long g_renew(struct g *g, const char *token, long ttl_ms, const char *marker)
{
    return g_one(g, g->renew, token, ttl_ms, marker);
}

static long long g_release(struct g *g, const char *token, long delay_ms)
{
    return g_one(g, g->release, token, delay_ms, "");
}

/* acquire.lua (the exclusive grant) for token: 1 granted, 0 busy (then *fence is the PTTL and
 * *foreign acquire.lua's foreign flag), -1 another kind (*fence 0, *foreign -1). claim_ms > 0:
 * with the claim key and that PX. */
static long long excl_claimant(struct g *g, const char *token, long claim_ms,
                               const char *claimant, long long *fence, long long *foreign)
{
    char cms[24];
    snprintf(cms, sizeof cms, "%ld", claim_ms);
    const char *keys[] = { g->marker, g->fence, g->claim };
    const char *args[] = { token, "600000", FENCE_TTL, cms, claimant };
    int with_claim = claim_ms > 0;
    int nargs = !with_claim ? 3 : claimant ? 5 : 4;
    redisReply *rep = eval(g, g->excl, keys, with_claim ? 3 : 2, args, nargs);
    long long code = rep->element[0]->integer;
    if (code == -1)
        ck_assert_int_eq(rep->element[1]->type, REDIS_REPLY_STRING);
    if (fence)
        *fence = code == -1 ? 0 : rep->element[1]->integer;
    if (foreign)
        *foreign = code == 0 ? rep->element[2]->integer : -1;
    freeReplyObject(rep);
    return code;
}

static long long excl_try(struct g *g, const char *token, long claim_ms, long long *fence,
                          long long *foreign)
{
    return excl_claimant(g, token, claim_ms, NULL, fence, foreign);
}

static long long excl_acquire(struct g *g, const char *token, long long *fence)
{
    return excl_try(g, token, 0, fence, NULL);
}

/* The score (lease end) of token in the holders key; 0 when it has none. */
static long long place_end(struct g *g, const char *token)
{
    redisReply *rep = redisCommand(g->f.r, "ZSCORE %s %s", g->holders, token);
    ck_assert(rep != NULL);
    long long v = rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : 0;
    freeReplyObject(rep);
    return v;
}

static long long used(struct g *g)
{
    redisReply *rep = redisCommand(g->f.r, "HGET %s used", g->permits);
    ck_assert(rep != NULL);
    long long v = rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : 0;
    freeReplyObject(rep);
    return v;
}

static void assert_pttl_in(struct g *g, const char *key, long long lo, long long hi)
{
    long long pttl = h_pttl(g->f.r, key);
    ck_assert_msg(pttl > lo && pttl <= hi, "%s: PTTL %lld, expected in (%lld, %lld]", key, pttl,
                  lo, hi);
}

#define T1 "7e570001-0000-8000-8000-000000000001"
#define T2 "7e570002-0000-8000-8000-000000000002"
#define T3 "7e570003-0000-8000-8000-000000000003"
#define T4 "7e570004-0000-8000-8000-000000000004"
#define COPIED "1733212345678-0.8571" /* the copied scripts' kind of token */

/* Shared holds: many at once, fenced above each other and the exclusive grants, keeping
 * the copied scripts and exclusive grants out until the last is given up. */
START_TEST(test_shared_group)
{
    struct g g;
    g_start(&g, "shared");
    long long xfence;
    ck_assert_int_eq(excl_acquire(&g, T4, &xfence), 1);
    /* Held exclusive (here by rlockd): a shared hold waits, told the holder is rlockd's. */
    struct answer a = g_acquire(&g, T1, LONG_PX, RW, 1);
    ck_assert_int_eq(a.code, 0);
    ck_assert_int_eq(a.foreign, 0);
    ck_assert_msg(a.num > LONG_PX - SLACK_MS, "busy PTTL %lld", a.num);
    /* The exclusive holder's compare-and-delete. */
    const char *rk[] = { g.marker };
    const char *ra[] = { T4, "" };
    freeReplyObject(eval(&g, g.copied_release, rk, 1, ra, 2));

    long long last = xfence;
    const char *tokens[] = { T1, T2, T3 };
    for (int i = 0; i < 3; i++) {
        a = g_acquire(&g, tokens[i], LONG_PX - 1000L * i, RW, 1);
        ck_assert_msg(a.code == 1, "shared hold %d: code %lld", i, a.code);
        ck_assert_msg(a.num > last, "fence %lld not above %lld", a.num, last);
        last = a.num;
    }
    ck_assert_int_eq(h_redis_int(g.f.r, "ZCARD %s", g.holders), 3);
    h_assert_key_token(g.f.r, g.marker, RW);
    assert_pttl_in(&g, g.marker, LONG_PX - SLACK_MS, LONG_PX);
    assert_pttl_in(&g, g.holders, LONG_PX - SLACK_MS, LONG_PX);
    /* No semaphore bookkeeping for shared holds. */
    ck_assert_int_eq(h_redis_int(g.f.r, "EXISTS %s", g.permits), 0);

    /* The copied SET NX fails, their compare-and-delete deletes nothing, rlockd's exclusive
     * acquire is busy (foreign: the marker is no token of rlockd's). */
    ck_assert_int_eq(h_redis_int(g.f.r, "EXISTS %s", g.marker), 1);
    redisReply *rep = redisCommand(g.f.r, "SET %s %s NX PX 10000", g.marker, COPIED);
    ck_assert(rep != NULL && rep->type == REDIS_REPLY_NIL);
    freeReplyObject(rep);
    const char *ca[] = { COPIED, "" };
    rep = eval(&g, g.copied_release, rk, 1, ca, 2);
    ck_assert_int_eq(rep->integer, 0);
    freeReplyObject(rep);
    ck_assert_int_eq(excl_acquire(&g, T4, NULL), 0);
    h_assert_key_token(g.f.r, g.marker, RW);

    /* A semaphore on this name is another kind. */
    a = g_acquire(&g, T4, LONG_PX, SEM3, 1);
    ck_assert_int_eq(a.code, -1);
    ck_assert_str_eq(a.holder, RW);

    /* The first holder (the longest lease) leaves: the keys are cut to the latest end left. */
    ck_assert_int_eq(g_release(&g, T1, 0), 1);
    ck_assert_int_eq(g_release(&g, T1, 0), 0);
    assert_pttl_in(&g, g.marker, LONG_PX - 1000 - SLACK_MS, LONG_PX - 1000);
    ck_assert_int_eq(g_release(&g, T2, 0), 1);
    ck_assert_int_eq(excl_acquire(&g, T4, NULL), 0);
    /* The last one: every key of the group is gone, and an exclusive grant is fenced above
     * every shared one. */
    ck_assert_int_eq(g_release(&g, T3, 0), 1);
    ck_assert_int_eq(h_redis_int(g.f.r, "EXISTS %s %s %s", g.marker, g.holders, g.permits), 0);
    ck_assert_int_eq(excl_acquire(&g, T4, &xfence), 1);
    ck_assert_msg(xfence > last, "exclusive fence %lld not above shared %lld", xfence, last);
    g_stop(&g);
}
END_TEST

/* A semaphore of 3: k permits at once, never more than 3, retries never counted twice. */
START_TEST(test_semaphore_limit)
{
    struct g g;
    g_start(&g, "sem");
    struct answer a = g_acquire(&g, T1, 300000, SEM3, 2);
    ck_assert_int_eq(a.code, 1);
    ck_assert_int_eq(used(&g), 2);
    /* Two more do not fit: busy until the first lease's end at the latest. */
    a = g_acquire(&g, T2, LONG_PX, SEM3, 2);
    ck_assert_int_eq(a.code, 0);
    ck_assert_int_eq(a.foreign, 0);
    ck_assert_msg(a.num > 300000 - SLACK_MS && a.num <= 300000, "busy for %lld ms", a.num);
    ck_assert_int_eq(place_end(&g, T2), 0);
    /* One does. */
    ck_assert_int_eq(g_acquire(&g, T3, LONG_PX, SEM3, 1).code, 1);
    ck_assert_int_eq(used(&g), 3);
    /* A retried grant (its first answer lost) is granted again, counted once. */
    ck_assert_int_eq(g_acquire(&g, T1, 300000, SEM3, 2).code, 1);
    ck_assert_int_eq(used(&g), 3);
    ck_assert_int_eq(h_redis_int(g.f.r, "ZCARD %s", g.holders), 2);
    /* More than the limit can ever fit, another limit, another kind: refused, named. */
    a = g_acquire(&g, T4, LONG_PX, SEM3, 4);
    ck_assert_int_eq(a.code, -1);
    ck_assert_str_eq(a.holder, SEM3);
    a = g_acquire(&g, T4, LONG_PX, "group:sem:5", 1);
    ck_assert_int_eq(a.code, -1);
    ck_assert_str_eq(a.holder, SEM3);
    a = g_acquire(&g, T4, LONG_PX, RW, 1);
    ck_assert_int_eq(a.code, -1);
    ck_assert_str_eq(a.holder, SEM3);
    /* T1 gives its two back: T2 fits. */
    ck_assert_int_eq(g_release(&g, T1, 0), 1);
    ck_assert_int_eq(used(&g), 1);
    ck_assert_int_eq(g_acquire(&g, T2, LONG_PX, SEM3, 2).code, 1);
    ck_assert_int_eq(used(&g), 3);
    assert_pttl_in(&g, g.permits, LONG_PX - SLACK_MS, LONG_PX);
    ck_assert_int_eq(g_release(&g, T2, 0), 1);
    ck_assert_int_eq(g_release(&g, T3, 0), 1);
    ck_assert_int_eq(h_redis_int(g.f.r, "EXISTS %s %s %s", g.marker, g.holders, g.permits), 0);
    /* A semaphore on a name held exclusive (the copied scripts here) is another kind. */
    redisReply *rep = redisCommand(g.f.r, "SET %s %s PX 600000", g.marker, COPIED);
    freeReplyObject(rep);
    a = g_acquire(&g, T4, LONG_PX, SEM3, 1);
    ck_assert_int_eq(a.code, -1);
    ck_assert_str_eq(a.holder, "exclusive");
    g_stop(&g);
}
END_TEST

/* An ended lease: its permit comes back without a release, and it is never renewed back. A
 * renewal never shortens; a lock_delay keeps the place (and its permit) taken. T3's long
 * lease keeps the group's keys while T1's short one ends. */
START_TEST(test_leases)
{
    struct g g;
    g_start(&g, "leases");
    const char *sem2 = "group:sem:2";
    ck_assert_int_eq(g_acquire(&g, T3, LONG_PX, sem2, 1).code, 1);
    ck_assert_int_eq(g_acquire(&g, T1, 300, sem2, 1).code, 1);
    ck_assert_int_eq(g_acquire(&g, T2, LONG_PX, sem2, 1).code, 0);
    h_sleep_ms(400);
    /* Ended, still listed (nobody dropped it yet): not renewed back to life. */
    ck_assert_msg(place_end(&g, T1) != 0, "the ended place was dropped already");
    ck_assert_int_eq(g_renew(&g, T1, LONG_PX, sem2), 0);
    ck_assert_int_eq(g_acquire(&g, T2, LONG_PX, sem2, 1).code, 1);
    ck_assert_int_eq(used(&g), 2);
    ck_assert_int_eq(place_end(&g, T1), 0);
    ck_assert_int_eq(g_renew(&g, T1, LONG_PX, sem2), 0);
    ck_assert_int_eq(g_release(&g, T1, 0), 0);
    ck_assert_int_eq(used(&g), 2);
    ck_assert_int_eq(g_release(&g, T3, 0), 1);

    /* Never shortened: a shorter ttl leaves the end; a longer one moves it and the keys. */
    long long end = place_end(&g, T2);
    ck_assert_int_eq(g_renew(&g, T2, 1000, sem2), 1);
    ck_assert_int_eq(place_end(&g, T2), end);
    ck_assert_int_eq(g_renew(&g, T2, 0, sem2), 1);
    ck_assert_int_eq(place_end(&g, T2), end);
    ck_assert_int_eq(g_renew(&g, T2, 2 * LONG_PX, sem2), 1);
    ck_assert_msg(place_end(&g, T2) > end, "the renewal did not move the lease's end");
    assert_pttl_in(&g, g.marker, 2 * LONG_PX - SLACK_MS, 2 * LONG_PX);
    assert_pttl_in(&g, g.holders, 2 * LONG_PX - SLACK_MS, 2 * LONG_PX);
    assert_pttl_in(&g, g.permits, 2 * LONG_PX - SLACK_MS, 2 * LONG_PX);
    /* Another marker: not this place. */
    ck_assert_int_eq(g_renew(&g, T2, LONG_PX, "group:sem:1"), -1);

    /* A lock_delay: the place stays taken for that long, its permit counted, nobody's —
     * under another name, so that a late renewal of T2 cannot lengthen it, nor a retried
     * acquire or an adopt of T2 take it back. */
    ck_assert_int_eq(g_release(&g, T2, 300000), 1);
    ck_assert_int_eq(used(&g), 1);
    ck_assert_int_eq(g_acquire(&g, T3, LONG_PX, sem2, 2).code, 0);
    assert_pttl_in(&g, g.marker, 300000 - SLACK_MS, 300000);
    ck_assert_int_eq(g_renew(&g, T2, LONG_PX, sem2), 0);
    assert_pttl_in(&g, g.marker, 300000 - SLACK_MS, 300000);
    ck_assert_int_eq(h_redis_int(g.f.r, "HEXISTS %s %s", g.permits, "tombstone:" T2), 1);
    ck_assert_int_eq(g_release(&g, T2, 0), 0);
    ck_assert_int_eq(used(&g), 1);

    /* The keys lost (a flush, a failover): the place is gone, not recreated. */
    ck_assert_int_eq(h_redis_int(g.f.r, "DEL %s %s %s", g.marker, g.holders, g.permits), 3);
    ck_assert_int_eq(g_renew(&g, T2, LONG_PX, sem2), 0);
    ck_assert_int_eq(h_redis_int(g.f.r, "EXISTS %s %s", g.marker, g.holders), 0);
    g_stop(&g);
}
END_TEST

/* An exclusive waiter's claim: new shared holds wait behind it; a holder already in keeps
 * its place (its retry is granted), and semaphores do not look at claims. */
START_TEST(test_claim)
{
    struct g g;
    g_start(&g, "claim");
    ck_assert_int_eq(g_acquire(&g, T1, LONG_PX, RW, 1).code, 1);
    redisReply *rep = redisCommand(g.f.r, "SET %s %s PX 5000", g.claim, T4);
    freeReplyObject(rep);
    struct answer a = g_acquire(&g, T2, LONG_PX, RW, 1);
    ck_assert_int_eq(a.code, 0);
    ck_assert_msg(a.num > 0 && a.num <= 5000, "busy for %lld ms, want the claim's PTTL", a.num);
    ck_assert_int_eq(g_acquire(&g, T1, LONG_PX, RW, 1).code, 1);
    ck_assert_int_eq(g_renew(&g, T1, LONG_PX, RW), 1);
    /* The claim gone: shared holds come in again. */
    ck_assert_int_eq(h_redis_int(g.f.r, "DEL %s", g.claim), 1);
    ck_assert_int_eq(g_acquire(&g, T2, LONG_PX, RW, 1).code, 1);
    g_stop(&g);
}
END_TEST

/* Every release is announced on MARKER:free (a permit may let a waiter in); a release of a
 * place the token does not hold is not. */
START_TEST(test_release_notices)
{
    struct g g;
    g_start(&g, "notices");
    redisContext *sub = h_redis(&g.f.e);
    char chan[KEY_LEN];
    snprintf(chan, sizeof chan, "%s:free", g.marker);
    redisReply *rep = redisCommand(sub, "SUBSCRIBE %s", chan);
    ck_assert(rep != NULL);
    freeReplyObject(rep);
    ck_assert_int_eq(g_acquire(&g, T1, LONG_PX, SEM3, 1).code, 1);
    ck_assert_int_eq(g_acquire(&g, T2, LONG_PX, SEM3, 1).code, 1);
    ck_assert_int_eq(g_release(&g, T3, 0), 0);
    ck_assert_int_eq(g_release(&g, T1, 0), 1);
    ck_assert_int_eq(h_redis_int(g.f.r, "PUBLISH %s end", chan), 1);
    const char *want[] = { g.marker, "end" };
    for (int i = 0; i < 2; i++) {
        void *msg = NULL;
        ck_assert_int_eq(redisGetReply(sub, &msg), REDIS_OK);
        rep = msg;
        ck_assert(rep->type == REDIS_REPLY_ARRAY && rep->elements == 3);
        ck_assert_str_eq(rep->element[2]->str, want[i]);
        freeReplyObject(rep);
    }
    redisFree(sub);
    g_stop(&g);
}
END_TEST

/* acquire.lua on a read-write group: busy and rlockd's (a release notice will come); with
 * the claim key it claims the resource (kept by the first claimant, refreshed by its tries),
 * which holds back new shared holds only; its grant removes its own claim. */
START_TEST(test_exclusive_claims)
{
    struct g g;
    g_start(&g, "xclaim");
    ck_assert_int_eq(g_acquire(&g, T1, LONG_PX, RW, 1).code, 1);
    long long pttl, foreign;
    ck_assert_int_eq(excl_try(&g, T4, 0, &pttl, &foreign), 0);
    ck_assert_int_eq(foreign, 2);
    ck_assert_int_eq(h_redis_int(g.f.r, "EXISTS %s", g.claim), 0);
    ck_assert_int_eq(g_acquire(&g, T2, LONG_PX, RW, 1).code, 1);
    ck_assert_int_eq(g_release(&g, T2, 0), 1);

    ck_assert_int_eq(excl_try(&g, T4, 5000, &pttl, &foreign), 0);
    ck_assert_int_eq(foreign, 2);
    ck_assert_msg(pttl > LONG_PX - SLACK_MS, "busy PTTL %lld: the group's", pttl);
    h_assert_key_token(g.f.r, g.claim, T4);
    assert_pttl_in(&g, g.claim, 0, 5000);
    /* Another exclusive waiter does not take the claim over; T4's next try refreshes it. */
    ck_assert_int_eq(excl_try(&g, T3, 50000, NULL, NULL), 0);
    h_assert_key_token(g.f.r, g.claim, T4);
    ck_assert_int_eq(excl_try(&g, T4, 50000, NULL, NULL), 0);
    assert_pttl_in(&g, g.claim, 5000, 50000);
    /* New shared holds wait; the one in keeps its place. */
    ck_assert_int_eq(g_acquire(&g, T2, LONG_PX, RW, 1).code, 0);
    ck_assert_int_eq(g_acquire(&g, T1, LONG_PX, RW, 1).code, 1);
    /* The group drains; the claimant's grant clears its claim. */
    ck_assert_int_eq(g_release(&g, T1, 0), 1);
    ck_assert_int_eq(excl_try(&g, T4, 50000, NULL, NULL), 1);
    ck_assert_int_eq(h_redis_int(g.f.r, "EXISTS %s", g.claim), 0);
    /* The daemon's tries of one request have fresh tokens and one claimant id: each try
     * refreshes the request's claim, and the grant of any of them clears it. */
    ck_assert_int_eq(h_redis_int(g.f.r, "DEL %s", g.marker), 1);
    ck_assert_int_eq(g_acquire(&g, T1, LONG_PX, RW, 1).code, 1);
    ck_assert_int_eq(excl_claimant(&g, T3, 5000, "request-7", NULL, NULL), 0);
    h_assert_key_token(g.f.r, g.claim, "request-7");
    ck_assert_int_eq(excl_claimant(&g, T4, 50000, "request-7", NULL, NULL), 0);
    assert_pttl_in(&g, g.claim, 5000, 50000);
    ck_assert_int_eq(g_release(&g, T1, 0), 1);
    ck_assert_int_eq(excl_claimant(&g, T2, 50000, "request-7", NULL, NULL), 1);
    ck_assert_int_eq(h_redis_int(g.f.r, "EXISTS %s", g.claim), 0);

    /* A semaphore is not claimed: an exclusive request there is another kind's business,
     * refused as such ({-1, the marker}), not busy. */
    ck_assert_int_eq(h_redis_int(g.f.r, "DEL %s", g.marker), 1);
    ck_assert_int_eq(g_acquire(&g, T1, LONG_PX, SEM3, 1).code, 1);
    ck_assert_int_eq(excl_try(&g, T4, 50000, NULL, &foreign), -1);
    ck_assert_int_eq(foreign, -1);
    ck_assert_int_eq(h_redis_int(g.f.r, "EXISTS %s", g.claim), 0);
    h_assert_key_token(g.f.r, g.marker, SEM3);
    g_stop(&g);
}
END_TEST

/*
 * adopt.lua on a group's place (a session resumed on another daemon): the
 * token's place goes to the new token with its end and its permits; an ended
 * place is gone, never brought back; a place of a token that has none is
 * missing.
 */
/* A string reply read as a number; -1 for nil. */
static long long str_int(redisContext *r, const char *cmd, const char *key, const char *field)
{
    redisReply *rep = redisCommand(r, cmd, key, field);
    ck_assert_ptr_nonnull(rep);
    ck_assert_msg(rep->type == REDIS_REPLY_STRING || rep->type == REDIS_REPLY_NIL, "%s %s %s",
                  cmd, key, field);
    long long v = rep->type == REDIS_REPLY_NIL ? -1 : atoll(rep->str);
    freeReplyObject(rep);
    return v;
}

START_TEST(test_adopt_places)
{
    struct g g;
    g_start(&g, "adopt");
    char *adopt = h_lua_script("adopt");
    const char *keys[] = { g.marker, g.holders, g.permits };
#define N1 "7e5700a1-0000-8000-8000-000000000001"
#define N2 "7e5700a2-0000-8000-8000-000000000002"
    /* A semaphore of 3: T1 holds 2 permits for 10 min, T2 1 permit for 300 ms. */
    ck_assert_int_eq(g_acquire(&g, T1, LONG_PX, SEM3, 2).code, 1);
    ck_assert_int_eq(g_acquire(&g, T2, 300, SEM3, 1).code, 1);
    double t1_end = 0;
    redisReply *sc = redisCommand(g.f.r, "ZSCORE %s %s", g.holders, T1);
    ck_assert_int_eq(sc->type, REDIS_REPLY_STRING);
    t1_end = atof(sc->str);
    freeReplyObject(sc);

    /* T1's place to N1, its lease kept (ttl 0: keep the end). */
    const char *a1[] = { T1, N1, "0" };
    redisReply *rep = eval(&g, adopt, keys, 3, a1, 3);
    ck_assert_int_eq(rep->type, REDIS_REPLY_ARRAY);
    ck_assert_int_eq(rep->elements, 4);
    ck_assert_int_eq(rep->element[0]->integer, 1);
    ck_assert_int_gt(rep->element[1]->integer, LONG_PX - 60000);
    ck_assert_str_eq(rep->element[2]->str, SEM3);
    ck_assert_int_eq(rep->element[3]->integer, 2);
    freeReplyObject(rep);
    sc = redisCommand(g.f.r, "ZSCORE %s %s", g.holders, N1);
    ck_assert_int_eq(sc->type, REDIS_REPLY_STRING);
    ck_assert_double_eq(atof(sc->str), t1_end);
    freeReplyObject(sc);
    ck_assert_int_eq(h_redis_int(g.f.r, "ZCARD %s", g.holders), 2);
    ck_assert_int_eq(h_redis_int(g.f.r, "HEXISTS %s %s", g.permits, T1), 0);
    ck_assert_int_eq(str_int(g.f.r, "HGET %s %s", g.permits, N1), 2);
    ck_assert_int_eq(str_int(g.f.r, "HGET %s %s", g.permits, "used"), 3);

    /* T2's place has ended (300 ms): gone, not adopted, nothing changed. */
    h_sleep_ms(400);
    const char *a2[] = { T2, N2, "30000" };
    rep = eval(&g, adopt, keys, 3, a2, 3);
    ck_assert_int_eq(rep->elements, 2);
    ck_assert_int_eq(rep->element[0]->integer, 0);
    freeReplyObject(rep);
    ck_assert_int_eq(str_int(g.f.r, "ZSCORE %s %s", g.holders, N2), -1);
    ck_assert_int_eq(h_redis_int(g.f.r, "HEXISTS %s %s", g.permits, N2), 0);

    /* A token without a place there (adopted already): missing. */
    rep = eval(&g, adopt, keys, 3, a1, 3);
    ck_assert_int_eq(rep->element[0]->integer, 0);
    freeReplyObject(rep);

    /* The adopted place is released as N1's: its 2 permits come back. */
    ck_assert_int_eq(g_release(&g, N1, 0), 1);
    ck_assert_int_le(str_int(g.f.r, "HGET %s %s", g.permits, "used"), 1);
    free(adopt);
    g_stop(&g);
#undef N1
#undef N2
}
END_TEST

int main(void)
{
    const TTest *tests[] = { test_shared_group, test_semaphore_limit, test_leases, test_claim,
                             test_release_notices, test_exclusive_claims, test_adopt_places };
    return h_run_tests("group_scripts", 120, tests, H_LEN(tests));
}
