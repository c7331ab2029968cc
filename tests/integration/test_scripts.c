/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_scripts.c — the Lua scripts of lua/ on their own, run with EVAL
 * against the env's redis-server, one call at a time, so that each per-key
 * answer and each key left behind can be checked (the daemon's tests see
 * them only through what rlockd makes of them):
 *  - release_many.lua: a mixed batch deletes or tombstones our keys only, and
 *    announces those (with a channel suffix);
 *  - renew.lua: renews our keys only, never shortens one, and a key of
 *    another type does not fail the batch;
 *  - release.lua: deletes (and announces) only on a token match;
 *  - acquire.lua: fences above the last one and the clock, the PXs asked for;
 *  - elections: a campaign's grant writes the leader record (token, term =
 *    fence, value) with the lock's PX; leader.lua reads it only through the
 *    lock key's token; renew.lua with 'L' keeps it alive with the lock (and
 *    without, leaves it); adopt.lua moves it to the new token.
 * The script text is read from the source tree (RLOCK_LUA_DIR), the file
 * rlockd embeds.
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_LEN 160
#define MAX_ENTRIES 16  /* keys of one test */
#define LONG_PX 600000  /* 10 min: no key a test sets expires while it runs */
#define SHORT_PX 100000 /* shorter, but no more likely to expire */
#define RENEW_PX 400000 /* between the two */
#define TOMB_PX 300000  /* the lock_delay a tombstone is asked for with */
#define THEIRS "0ther000-0000-4000-8000-000000000000" /* another holder's token */
#define STR_(x) #x
#define STR(x) STR_(x) /* a number macro as a string */
/* What a loaded machine may take between a script and the PTTL that checks it. */
#define SLACK_MS 60000

/* Run a command given as words (no quoting issues with any value) and return its reply,
 * failing the test on a lost connection. An error reply is returned as such. */
static redisReply *command(redisContext *r, int argc, const char **argv)
{
    redisReply *rep = redisCommandArgv(r, argc, argv, NULL);
    ck_assert_msg(rep != NULL, "%s: %s", argv[0], r->errstr);
    return rep;
}

/* The same with a format, asserted not to be an error. */
static void redis_do(redisContext *r, const char *fmt, const char *key, const char *arg)
{
    redisReply *rep = redisCommand(r, fmt, key, arg);
    ck_assert_msg(rep != NULL && rep->type != REDIS_REPLY_ERROR, "\"%s\" on %s: %s", fmt, key,
                  rep ? rep->str : r->errstr);
    freeReplyObject(rep);
}

/* EVAL text with keys[n] and args[m]. */
static redisReply *eval(redisContext *r, const char *text, const char **keys, int n,
                        const char **args, int m)
{
    ck_assert_int_le(n + m, 3 * MAX_ENTRIES);
    return h_eval(r, text, keys, n, args, m);
}

/* Assert that rep is an array of n integers; copy them to out and free rep. */
static void int_array(redisReply *rep, long long *out, size_t n)
{
    ck_assert_msg(rep->type == REDIS_REPLY_ARRAY, "reply type %d, not an array: %s", rep->type,
                  rep->type == REDIS_REPLY_ERROR ? rep->str : "");
    ck_assert_uint_eq(rep->elements, n);
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(rep->element[i]->type, REDIS_REPLY_INTEGER);
        out[i] = rep->element[i]->integer;
    }
    freeReplyObject(rep);
}

/*
 * One key of a test, the lock key of resource res: for the batch scripts
 * (release_many, renew) KEYS[i] = key, ARGV[2i-1] = token, ARGV[2i] = num (a
 * lock_delay or a ttl).
 */
struct entry {
    char res[32];
    char key[KEY_LEN];
    char token[64];
    const char *num;
};

/* A test's setup: an env (its rlockd stays idle), the script under test, and keys of its own. */
struct st {
    struct h_fixture f;
    char *text;
    struct entry e[MAX_ENTRIES];
};

/* Start the env, read lua/NAME.lua, and name key i "NAME-i". Each key gets a token of its
 * own, so that a script pairing a key with another entry's ARGV is caught. */
static void st_start(struct st *t, const char *name, int n)
{
    ck_assert_int_le(n, MAX_ENTRIES);
    h_fixture_start_env(&t->f, NULL);
    t->text = h_lua_script(name);
    for (int i = 0; i < n; i++) {
        struct entry *e = &t->e[i];
        snprintf(e->res, sizeof e->res, "%s-%d", name, i);
        h_lock_key(&t->f.e, e->res, e->key, sizeof e->key);
        snprintf(e->token, sizeof e->token, "7e57%04d-0000-4000-8000-%012d", i, i);
        e->num = "0";
    }
}

static void st_stop(struct st *t)
{
    free(t->text);
    h_fixture_stop(&t->f);
}

/* Run the batch script on the first n entries: the per-key results in out. */
static void batch(struct st *t, const struct entry *e, int n, long long *out)
{
    const char *keys[MAX_ENTRIES], *args[2 * MAX_ENTRIES];
    for (int i = 0; i < n; i++) {
        keys[i] = e[i].key;
        args[2 * i] = e[i].token;
        args[2 * i + 1] = e[i].num;
    }
    int_array(eval(t->f.r, t->text, keys, n, args, 2 * n), out, (size_t)n);
}

/* The same, asserting the results are want[n]. */
static void batch_expect(struct st *t, const long long *want, int n)
{
    long long got[MAX_ENTRIES];
    batch(t, t->e, n, got);
    for (int i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i], "entry %d (%s): %lld, expected %lld", i, t->e[i].key,
                      got[i], want[i]);
}

/* Assert that key holds val and expires within (min_pttl, max_pttl]. */
static void assert_string(redisContext *r, const char *key, const char *val, long long min_pttl,
                          long long max_pttl)
{
    h_assert_key_token(r, key, val);
    long long pttl = h_pttl(r, key);
    ck_assert_msg(pttl > min_pttl && pttl <= max_pttl, "%s: PTTL %lld, expected in (%lld, %lld]",
                  key, pttl, min_pttl, max_pttl);
}

/* Assert that key is still the two-element list the test made. */
static void assert_list(redisContext *r, const char *key)
{
    ck_assert_int_eq(h_redis_int(r, "LLEN %s", key), 2);
}

static void make_list(redisContext *r, const char *key)
{
    redis_do(r, "RPUSH %s %s x", key, "list-value");
}

START_TEST(test_release_many_mixed_batch)
{
    /* The lists come first: were their errors not contained, the others would not run.
     * Names ending in _T ask for a tombstone. */
    enum { LIST, LIST_T, OURS, THEIRS_K, THEIRS_T, MISSING, MISSING_T, OURS_T, OLD_TOMB, N };
    struct st t;
    st_start(&t, "release_many", N);
    redisContext *r = t.f.r;
    struct entry *e = t.e;
    e[LIST_T].num = e[THEIRS_T].num = e[MISSING_T].num = e[OURS_T].num = STR(TOMB_PX);
    make_list(r, e[LIST].key);
    make_list(r, e[LIST_T].key);
    redis_do(r, "SET %s %s PX " STR(LONG_PX), e[OURS].key, e[OURS].token);
    redis_do(r, "SET %s %s PX " STR(LONG_PX), e[OURS_T].key, e[OURS_T].token);
    redis_do(r, "SET %s %s PX " STR(LONG_PX), e[THEIRS_K].key, THEIRS);
    redis_do(r, "SET %s %s PX " STR(LONG_PX), e[THEIRS_T].key, THEIRS);
    /* What an earlier lock_delay release left: our token's tombstone is nobody's lock. */
    char old_tomb[96];
    snprintf(old_tomb, sizeof old_tomb, "tombstone:%s", e[OLD_TOMB].token);
    redis_do(r, "SET %s %s PX " STR(LONG_PX), e[OLD_TOMB].key, old_tomb);

    const long long want[N] = { [OURS] = 1, [OURS_T] = 1 };
    batch_expect(&t, want, N);

    ck_assert_int_eq(h_key_exists(r, e[OURS].key), 0);
    /* The tombstone replaces the token, with the delay asked for, not the old PTTL. */
    char tomb[96];
    snprintf(tomb, sizeof tomb, "tombstone:%s", e[OURS_T].token);
    assert_string(r, e[OURS_T].key, tomb, TOMB_PX - SLACK_MS, TOMB_PX);
    ck_assert_str_ne(tomb, e[OURS_T].token);
    /* Nobody else's key changed, and no missing key was created (not even a tombstone). */
    assert_list(r, e[LIST].key);
    assert_list(r, e[LIST_T].key);
    assert_string(r, e[THEIRS_K].key, THEIRS, LONG_PX - SLACK_MS, LONG_PX);
    assert_string(r, e[THEIRS_T].key, THEIRS, LONG_PX - SLACK_MS, LONG_PX);
    assert_string(r, e[OLD_TOMB].key, old_tomb, LONG_PX - SLACK_MS, LONG_PX);
    ck_assert_int_eq(h_key_exists(r, e[MISSING].key), 0);
    ck_assert_int_eq(h_key_exists(r, e[MISSING_T].key), 0);

    /* The tombstone is held by no token: releasing it again with ours finds nothing. */
    long long got[1];
    batch(&t, &e[OURS_T], 1, got);
    ck_assert_int_eq(got[0], 0);
    h_assert_key_token(r, e[OURS_T].key, tomb);
    /* An empty batch is an empty answer. */
    batch(&t, e, 0, got);

    st_stop(&t);
}
END_TEST

/* The next pub/sub message on sub: its channel and payload into chan and payload. */
static void next_message(redisContext *sub, char *chan, size_t clen, char *payload, size_t plen)
{
    void *msg = NULL;
    ck_assert_int_eq(redisGetReply(sub, &msg), REDIS_OK);
    redisReply *rep = msg;
    ck_assert_msg(rep->type == REDIS_REPLY_ARRAY && rep->elements == 4 &&
                      strcmp(rep->element[0]->str, "pmessage") == 0,
                  "not a pub/sub message");
    snprintf(chan, clen, "%s", rep->element[2]->str);
    snprintf(payload, plen, "%s", rep->element[3]->str);
    freeReplyObject(rep);
}

/* With a channel suffix, each key deleted or tombstoned is announced on KEY .. suffix, in
 * KEYS order; keys left alone are not. A message of the test's own, published last, is the
 * next one read: nothing else was announced. */
START_TEST(test_release_many_notices)
{
    enum { THEIRS_K, OURS, MISSING, OURS_T, N };
    struct st t;
    st_start(&t, "release_many", N);
    redisContext *r = t.f.r;
    struct entry *e = t.e;
    e[OURS_T].num = STR(TOMB_PX);
    redis_do(r, "SET %s %s PX " STR(LONG_PX), e[OURS].key, e[OURS].token);
    redis_do(r, "SET %s %s PX " STR(LONG_PX), e[OURS_T].key, e[OURS_T].token);
    redis_do(r, "SET %s %s PX " STR(LONG_PX), e[THEIRS_K].key, THEIRS);
    redisContext *sub = h_redis(&t.f.e);
    ck_assert_ptr_nonnull(sub);
    redisReply *rep = redisCommand(sub, "PSUBSCRIBE %s{*}:free", t.f.e.prefix);
    ck_assert_ptr_nonnull(rep);
    freeReplyObject(rep);

    const char *keys[N], *args[2 * N + 1];
    for (int i = 0; i < N; i++) {
        keys[i] = e[i].key;
        args[2 * i] = e[i].token;
        args[2 * i + 1] = e[i].num;
    }
    args[2 * N] = ":free";
    long long got[N];
    int_array(eval(r, t.text, keys, N, args, 2 * N + 1), got, N);
    const long long want[N] = { [OURS] = 1, [OURS_T] = 1 };
    for (int i = 0; i < N; i++)
        ck_assert_msg(got[i] == want[i], "entry %d: %lld, expected %lld", i, got[i], want[i]);
    char end[KEY_LEN];
    snprintf(end, sizeof end, "%s{end}:free", t.f.e.prefix);
    redis_do(r, "PUBLISH %s %s", end, "end");

    char chan[KEY_LEN + 8], payload[KEY_LEN], expect[KEY_LEN + 8];
    const int announced[] = { OURS, OURS_T };
    for (size_t i = 0; i < H_LEN(announced); i++) {
        next_message(sub, chan, sizeof chan, payload, sizeof payload);
        snprintf(expect, sizeof expect, "%s:free", e[announced[i]].key);
        ck_assert_str_eq(chan, expect);
        ck_assert_str_eq(payload, e[announced[i]].key);
    }
    next_message(sub, chan, sizeof chan, payload, sizeof payload);
    ck_assert_str_eq(chan, end);
    redisFree(sub);
    st_stop(&t);
}
END_TEST

START_TEST(test_renew_batch)
{
    /* LONGER has more time left than the renew asks for; SHORTER less. Each ttl differs
     * from the others, so that a script taking another entry's ttl is caught. */
    enum { LIST, LONGER, SHORTER, STOLEN, MISSING, N };
    struct st t;
    st_start(&t, "renew", N);
    redisContext *r = t.f.r;
    struct entry *e = t.e;
    e[LIST].num = e[STOLEN].num = e[MISSING].num = STR(LONG_PX);
    e[LONGER].num = "10000";
    e[SHORTER].num = STR(RENEW_PX);
    make_list(r, e[LIST].key);
    redis_do(r, "SET %s %s PX " STR(LONG_PX), e[LONGER].key, e[LONGER].token);
    redis_do(r, "SET %s %s PX " STR(SHORT_PX), e[SHORTER].key, e[SHORTER].token);
    redis_do(r, "SET %s %s PX " STR(SHORT_PX), e[STOLEN].key, THEIRS);

    const long long want[N] = { [LIST] = -1, [LONGER] = 1, [SHORTER] = 1, [STOLEN] = -1,
                                [MISSING] = 0 };
    batch_expect(&t, want, N);

    /* Never shortened: the 10 s renew left the 10 min key alone. */
    assert_string(r, e[LONGER].key, e[LONGER].token, LONG_PX - SLACK_MS, LONG_PX);
    /* Lengthened to the ttl asked for. */
    assert_string(r, e[SHORTER].key, e[SHORTER].token, RENEW_PX - SLACK_MS, RENEW_PX);
    /* Another holder's key keeps its value and its shorter PTTL. */
    assert_string(r, e[STOLEN].key, THEIRS, 0, SHORT_PX);
    assert_list(r, e[LIST].key);
    ck_assert_int_eq(h_key_exists(r, e[MISSING].key), 0);

    st_stop(&t);
}
END_TEST

/* release.lua on key with token, announcing on channel. */
static long long release(struct st *t, const char *key, const char *token, const char *channel)
{
    const char *args[] = { token, channel };
    redisReply *rep = eval(t->f.r, t->text, &key, 1, args, 2);
    ck_assert_msg(rep->type == REDIS_REPLY_INTEGER, "release.lua on %s: reply type %d %s", key,
                  rep->type, rep->type == REDIS_REPLY_ERROR ? rep->str : "");
    long long v = rep->integer;
    freeReplyObject(rep);
    return v;
}

START_TEST(test_release_token_match)
{
    struct st t;
    st_start(&t, "release", 2);
    redisContext *r = t.f.r;
    const char *key = t.e[0].key, *token = t.e[0].token;

    redis_do(r, "SET %s %s PX " STR(LONG_PX), key, token);
    ck_assert_int_eq(release(&t, key, THEIRS, ""), 0);
    assert_string(r, key, token, LONG_PX - SLACK_MS, LONG_PX);
    ck_assert_int_eq(release(&t, key, token, ""), 1);
    ck_assert_int_eq(h_key_exists(r, key), 0);
    ck_assert_int_eq(release(&t, key, token, ""), 0);

    /* A key of another type stays as it is (the script may answer an error: it is one key). */
    const char *list_key = t.e[1].key, *args[] = { token, "" };
    make_list(r, list_key);
    freeReplyObject(eval(r, t.text, &list_key, 1, args, 2));
    assert_list(r, list_key);

    st_stop(&t);
}
END_TEST

/* A refused release on one key, then a granted one on another: the first message on the
 * channel names the second, so the refused one announced nothing. */
START_TEST(test_release_notice_on_delete_only)
{
    struct st t;
    st_start(&t, "release", 2);
    redisContext *r = t.f.r;
    const char *theirs = t.e[0].key, *ours = t.e[1].key, *token = t.e[1].token;
    char channel[KEY_LEN];
    snprintf(channel, sizeof channel, "%snotices", t.f.e.prefix);
    redisContext *sub = h_redis(&t.f.e);
    ck_assert_ptr_nonnull(sub);
    redisReply *rep = redisCommand(sub, "SUBSCRIBE %s", channel);
    ck_assert_ptr_nonnull(rep);
    freeReplyObject(rep);

    redis_do(r, "SET %s %s PX " STR(LONG_PX), theirs, THEIRS);
    redis_do(r, "SET %s %s PX " STR(LONG_PX), ours, token);
    ck_assert_int_eq(release(&t, theirs, token, channel), 0);
    ck_assert_int_eq(release(&t, ours, token, channel), 1);
    h_assert_key_token(r, theirs, THEIRS);
    void *msg = NULL;
    ck_assert_int_eq(redisGetReply(sub, &msg), REDIS_OK);
    rep = msg;
    ck_assert_msg(rep->type == REDIS_REPLY_ARRAY && rep->elements == 3 &&
                      strcmp(rep->element[0]->str, "message") == 0,
                  "not a pub/sub message");
    ck_assert_str_eq(rep->element[2]->str, ours);
    freeReplyObject(rep);
    redisFree(sub);

    st_stop(&t);
}
END_TEST

/* Redis's clock in microseconds. */
static long long redis_time_us(redisContext *r)
{
    const char *argv[] = { "TIME" };
    redisReply *rep = command(r, 1, argv);
    ck_assert(rep->type == REDIS_REPLY_ARRAY && rep->elements == 2);
    long long us = atoll(rep->element[0]->str) * 1000000 + atoll(rep->element[1]->str);
    freeReplyObject(rep);
    return us;
}

#define FENCE_TTL 3600000 /* fence_ttl of the acquires: 1 h, told apart from LONG_PX */

/* acquire.lua on entry 0's resource for entry i's token (ttl LONG_PX): out[0] granted,
 * out[1] the fence or the PTTL; when busy, out[2] whether the holder's token is foreign. */
static void acquire(struct st *t, const char *fence_key, int i, long long out[3])
{
    const char *keys[] = { t->e[0].key, fence_key };
    const char *args[] = { t->e[i].token, STR(LONG_PX), STR(FENCE_TTL) };
    redisReply *rep = eval(t->f.r, t->text, keys, 2, args, 3);
    ck_assert_msg(rep->type == REDIS_REPLY_ARRAY && rep->elements >= 1 &&
                  rep->element[0]->type == REDIS_REPLY_INTEGER, "acquire.lua: reply type %d",
                  rep->type);
    out[2] = -1;
    int_array(rep, out, rep->element[0]->integer == 1 ? 2 : 3);
}

/* What acquire.lua says of a key holding token: 1 foreign, 0 rlockd's (the key is taken). */
static long long foreign_of(struct st *t, const char *fence_key, const char *token)
{
    redis_do(t->f.r, "SET %s %s PX " STR(LONG_PX), t->e[0].key, token);
    long long got[3];
    acquire(t, fence_key, 1, got);
    ck_assert_int_eq(got[0], 0);
    return got[2];
}

/* Assert that fence_key holds fence, written out in digits, and expires within fence_ttl. */
static void assert_fence_key(redisContext *r, const char *fence_key, long long fence)
{
    char digits[32];
    snprintf(digits, sizeof digits, "%lld", fence);
    assert_string(r, fence_key, digits, FENCE_TTL - SLACK_MS, FENCE_TTL);
}

START_TEST(test_acquire_fence_and_expiry)
{
    struct st t;
    st_start(&t, "acquire", 3);
    redisContext *r = t.f.r;
    const char *key = t.e[0].key;
    char fence_key[KEY_LEN];
    h_fence_key(&t.f.e, t.e[0].res, fence_key, sizeof fence_key);

    /* A first grant: a fence from the clock, the lock key's PX, the fence key's PX. */
    long long before = redis_time_us(r), got[3];
    acquire(&t, fence_key, 0, got);
    ck_assert_int_eq(got[0], 1);
    long long first = got[1];
    ck_assert_msg(first >= before, "fence %lld below the Redis clock %lld", first, before);
    assert_string(r, key, t.e[0].token, LONG_PX - SLACK_MS, LONG_PX);
    assert_fence_key(r, fence_key, first);

    /* Taken: the PTTL of the holder's key, and neither key changes. */
    acquire(&t, fence_key, 1, got);
    ck_assert_int_eq(got[0], 0);
    ck_assert_msg(got[1] > 0 && got[1] <= LONG_PX, "PTTL %lld", got[1]);
    ck_assert_int_eq(got[2], 1); /* a version 4 UUID: not a token rlockd makes */
    h_assert_key_token(r, key, t.e[0].token);
    assert_fence_key(r, fence_key, first);

    /* Free again: above the previous fence. */
    ck_assert_int_eq(h_redis_int(r, "DEL %s", key), 1);
    acquire(&t, fence_key, 1, got);
    ck_assert_int_eq(got[0], 1);
    ck_assert_msg(got[1] > first, "fence %lld not above %lld", got[1], first);
    assert_fence_key(r, fence_key, got[1]);

    /* A stored fence ahead of the clock (by about 11 days, kept without expiry) wins: the
     * grant is one above it, and the fence key gets its PX back. */
    long long ahead = got[1] + 1000000000000LL;
    char ahead_s[32];
    snprintf(ahead_s, sizeof ahead_s, "%lld", ahead);
    redis_do(r, "SET %s %s", fence_key, ahead_s);
    ck_assert_int_eq(h_redis_int(r, "DEL %s", key), 1);
    acquire(&t, fence_key, 2, got);
    ck_assert_int_eq(got[0], 1);
    ck_assert_msg(got[1] == ahead + 1, "fence %lld, expected %lld", got[1], ahead + 1);
    assert_fence_key(r, fence_key, ahead + 1);
    assert_string(r, key, t.e[2].token, LONG_PX - SLACK_MS, LONG_PX);

    /* Only rlockd's kind of token (a version 8 UUID, RFC 4122 variant) is its own. */
    ck_assert_int_eq(foreign_of(&t, fence_key, "6f1c2b3a-4d5e-8f70-9a1b-2c3d4e5f6a7b"), 0);
    ck_assert_int_eq(foreign_of(&t, fence_key, "6f1c2b3a-4d5e-8f70-ca1b-2c3d4e5f6a7b"), 1);
    ck_assert_int_eq(foreign_of(&t, fence_key, "6f1c2b3a-4d5e-4f70-9a1b-2c3d4e5f6a7b"), 1);
    ck_assert_int_eq(foreign_of(&t, fence_key, "6f1c2b3a-4d5e-8f70-9a1b-2c3d4e5f6a7b-x"), 1);
    ck_assert_int_eq(foreign_of(&t, fence_key, "x6f1c2b3a-4d5e-8f70-9a1b-2c3d4e5f6a7b"), 1);
    ck_assert_int_eq(foreign_of(&t, fence_key, "1733212345678-0.8571"), 1);
    /* rlockd's tombstone of its own token (lock_delay) is rlockd's; of another, not. */
    ck_assert_int_eq(foreign_of(&t, fence_key, "tombstone:6f1c2b3a-4d5e-8f70-9a1b-2c3d4e5f6a7b"), 0);
    ck_assert_int_eq(foreign_of(&t, fence_key, "tombstone:6f1c2b3a-4d5e-4f70-9a1b-2c3d4e5f6a7b"), 1);
    ck_assert_int_eq(foreign_of(&t, fence_key, "tombstone:"), 1);

    st_stop(&t);
}
END_TEST

/* Field f of the HASH at key into buf (asserted present). */
static void hash_field(redisContext *r, const char *key, const char *f, char *buf, size_t len)
{
    redisReply *rep = redisCommand(r, "HGET %s %s", key, f);
    ck_assert_msg(rep != NULL && rep->type == REDIS_REPLY_STRING, "HGET %s %s: type %d", key, f,
                  rep ? rep->type : -1);
    snprintf(buf, len, "%s", rep->str);
    freeReplyObject(rep);
}

/* leader.lua on key and its record: 1 with *term, value and *pttl, or 0 (nobody leads). */
static int leader_of(redisContext *r, const char *text, const char *key, const char *rec,
                     long long *term, char *value, size_t len, long long *pttl)
{
    const char *keys[] = { key, rec };
    redisReply *rep = eval(r, text, keys, 2, NULL, 0);
    ck_assert_msg(rep->type == REDIS_REPLY_ARRAY && rep->elements >= 1, "leader.lua: type %d",
                  rep->type);
    int found = (int)rep->element[0]->integer;
    if (found == 1) {
        ck_assert_uint_eq(rep->elements, 4);
        *term = atoll(rep->element[1]->str);
        snprintf(value, len, "%s", rep->element[2]->str);
        *pttl = rep->element[3]->integer;
    } else {
        ck_assert_int_eq(found, 0);
        ck_assert_uint_eq(rep->elements, 1);
    }
    freeReplyObject(rep);
    return found;
}

/* A campaign (acquire.lua with the claim and leader keys) for entry i's token and value. */
static void campaign(struct st *t, const char *fence_key, const char *claim, const char *rec,
                     int i, const char *value, long long out[3])
{
    const char *keys[] = { t->e[0].key, fence_key, claim, rec };
    const char *args[] = { t->e[i].token, STR(LONG_PX), STR(FENCE_TTL), "0", t->e[i].token,
                           value, "" };
    redisReply *rep = eval(t->f.r, t->text, keys, 4, args, 7);
    ck_assert_msg(rep->type == REDIS_REPLY_ARRAY && rep->elements >= 1 &&
                  rep->element[0]->type == REDIS_REPLY_INTEGER, "acquire.lua: reply type %d",
                  rep->type);
    out[2] = -1;
    int_array(rep, out, rep->element[0]->integer == 1 ? 2 : 3);
}

START_TEST(test_leader_record)
{
    struct st t;
    st_start(&t, "acquire", 3);
    redisContext *r = t.f.r;
    const char *key = t.e[0].key;
    char fence_key[KEY_LEN], claim[KEY_LEN + 8], rec[KEY_LEN + 8], buf[128], value[128];
    h_fence_key(&t.f.e, t.e[0].res, fence_key, sizeof fence_key);
    snprintf(claim, sizeof claim, "%s:claim", key);
    snprintf(rec, sizeof rec, "%s:leader", key);
    char *leader = h_lua_script("leader"), *renew = h_lua_script("renew"),
         *adopt = h_lua_script("adopt");
    long long got[3], term, pttl;

    /* Nobody leads a free election. */
    ck_assert_int_eq(leader_of(r, leader, key, rec, &term, value, sizeof value, &pttl), 0);
    /* A grant: the record names the token, the fence as the term, the value, the lock's PX. */
    campaign(&t, fence_key, claim, rec, 0, "10.0.0.1:7000", got);
    ck_assert_int_eq(got[0], 1);
    long long first = got[1];
    hash_field(r, rec, "token", buf, sizeof buf);
    ck_assert_str_eq(buf, t.e[0].token);
    hash_field(r, rec, "value", buf, sizeof buf);
    ck_assert_str_eq(buf, "10.0.0.1:7000");
    hash_field(r, rec, "term", buf, sizeof buf);
    ck_assert_int_eq(atoll(buf), first);
    long long rec_pttl = h_pttl(r, rec);
    ck_assert_msg(rec_pttl > LONG_PX - SLACK_MS && rec_pttl <= LONG_PX, "record PTTL %lld",
                  rec_pttl);
    ck_assert_int_eq(leader_of(r, leader, key, rec, &term, value, sizeof value, &pttl), 1);
    ck_assert_int_eq(term, first);
    ck_assert_str_eq(value, "10.0.0.1:7000");
    ck_assert_msg(pttl > LONG_PX - SLACK_MS && pttl <= LONG_PX, "PTTL %lld", pttl);

    /* Another candidate is refused; the record stays the leader's. */
    campaign(&t, fence_key, claim, rec, 1, "other", got);
    ck_assert_int_eq(got[0], 0);
    hash_field(r, rec, "token", buf, sizeof buf);
    ck_assert_str_eq(buf, t.e[0].token);

    /* A renewal without 'L' leaves the record's expiry; with it, lengthens it with the lock. */
    redis_do(r, "PEXPIRE %s %s", rec, "5000");
    const char *rkeys[] = { key };
    const char *plain[] = { t.e[0].token, STR(LONG_PX) };
    long long one;
    int_array(eval(r, renew, rkeys, 1, plain, 2), &one, 1);
    ck_assert_int_eq(one, 1);
    ck_assert_msg(h_pttl(r, rec) <= 5000, "a plain renewal touched the record");
    const char *lead[] = { t.e[0].token, "L" STR(LONG_PX) };
    int_array(eval(r, renew, rkeys, 1, lead, 2), &one, 1);
    ck_assert_int_eq(one, 1);
    rec_pttl = h_pttl(r, rec);
    ck_assert_msg(rec_pttl > LONG_PX - SLACK_MS, "record PTTL %lld after an 'L' renewal",
                  rec_pttl);
    /* ... but not a record that names another token (a former leader's). */
    redis_do(r, "HSET %s token %s", rec, t.e[1].token);
    redis_do(r, "PEXPIRE %s %s", rec, "5000");
    int_array(eval(r, renew, rkeys, 1, lead, 2), &one, 1);
    ck_assert_msg(h_pttl(r, rec) <= 5000, "an 'L' renewal kept another token's record");
    ck_assert_int_eq(leader_of(r, leader, key, rec, &term, value, sizeof value, &pttl), 0);
    redis_do(r, "HSET %s token %s", rec, t.e[0].token);

    /* An adopt moves the record to the new token and says it leads. */
    const char *akeys[] = { key };
    const char *aargs[] = { t.e[0].token, t.e[2].token, STR(LONG_PX) };
    redisReply *rep = eval(r, adopt, akeys, 1, aargs, 3);
    ck_assert_msg(rep->type == REDIS_REPLY_ARRAY && rep->elements == 3, "adopt.lua: %zu elements",
                  rep->type == REDIS_REPLY_ARRAY ? rep->elements : 0);
    ck_assert_int_eq(rep->element[0]->integer, 1);
    ck_assert_str_eq(rep->element[2]->str, "leader");
    freeReplyObject(rep);
    hash_field(r, rec, "token", buf, sizeof buf);
    ck_assert_str_eq(buf, t.e[2].token);
    ck_assert_int_eq(leader_of(r, leader, key, rec, &term, value, sizeof value, &pttl), 1);
    ck_assert_int_eq(term, first);

    /* The lock gone (or another's), nobody leads, whatever the record says. */
    redis_do(r, "SET %s %s PX " STR(LONG_PX), key, t.e[1].token);
    ck_assert_int_eq(leader_of(r, leader, key, rec, &term, value, sizeof value, &pttl), 0);
    ck_assert_int_eq(h_redis_int(r, "DEL %s", key), 1);
    ck_assert_int_eq(leader_of(r, leader, key, rec, &term, value, sizeof value, &pttl), 0);

    /* The next grant writes a record of its own, a higher term, an empty value allowed. */
    campaign(&t, fence_key, claim, rec, 1, "", got);
    ck_assert_int_eq(got[0], 1);
    ck_assert_msg(got[1] > first, "term %lld not above %lld", got[1], first);
    ck_assert_int_eq(leader_of(r, leader, key, rec, &term, value, sizeof value, &pttl), 1);
    ck_assert_int_eq(term, got[1]);
    ck_assert_str_eq(value, "");

    /* A campaign's first try behind shared holds takes no claim (claim ms '0'). */
    ck_assert_int_eq(h_redis_int(r, "DEL %s", key), 1);
    redis_do(r, "SET %s %s PX " STR(LONG_PX), key, "group:rw");
    campaign(&t, fence_key, claim, rec, 2, "x", got);
    ck_assert_int_eq(got[0], 0);
    ck_assert_int_eq(got[2], 2);
    ck_assert_int_eq(h_redis_int(r, "EXISTS %s", claim), 0);

    /* A record of another type: nobody leads, and an 'L' renewal still renews its lock
     * and the rest of its batch (no WRONGTYPE failing every lock in it). */
    ck_assert_int_eq(h_redis_int(r, "DEL %s", key), 1);
    redis_do(r, "SET %s %s PX " STR(LONG_PX), key, t.e[0].token);
    redis_do(r, "SET %s %s", rec, "not-a-hash");
    ck_assert_int_eq(leader_of(r, leader, key, rec, &term, value, sizeof value, &pttl), 0);
    redis_do(r, "SET %s %s PX 5000", t.e[1].key, t.e[1].token);
    const char *bkeys[] = { key, t.e[1].key };
    const char *bargs[] = { t.e[0].token, "L" STR(LONG_PX), t.e[1].token, STR(LONG_PX) };
    long long two[2];
    int_array(eval(r, renew, bkeys, 2, bargs, 4), two, 2);
    ck_assert_msg(two[0] == 1 && two[1] == 1, "renewals %lld %lld", two[0], two[1]);
    ck_assert_msg(h_pttl(r, t.e[1].key) > LONG_PX - SLACK_MS, "the batch's other key unrenewed");

    free(leader);
    free(renew);
    free(adopt);
    st_stop(&t);
}
END_TEST

int main(void)
{
    const TTest *tests[] = { test_release_many_mixed_batch, test_release_many_notices,
                             test_renew_batch,
                             test_release_token_match, test_release_notice_on_delete_only,
                             test_acquire_fence_and_expiry, test_leader_record };
    return h_run_tests("scripts", 120, tests, H_LEN(tests));
}
