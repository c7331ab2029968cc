/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_reply.c — daemon/redis/reply.c: what each script's answer means, for the
 * replies Redis really sends and for every other shape hiredis can produce.
 * Replies are built by hiredis's own reader from RESP text, as they reach
 * the daemon's callbacks.
 */
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "check_main.h"
#include "resp.h"
#include "reply.h"

static const struct {
    const char *resp;
    enum reply_acquire_kind kind;
    long long value; /* fence or pttl */
    int foreign;     /* BUSY: who holds it (enum reply_held_by) */
} acquires[] = {
    {"*2\r\n:1\r\n:1796116645310293\r\n", REPLY_ACQUIRE_GRANTED, 1796116645310293, 0},
    {"*2\r\n:0\r\n:29950\r\n", REPLY_ACQUIRE_BUSY, 29950, 0},
    {"*3\r\n:0\r\n:29950\r\n:1\r\n", REPLY_ACQUIRE_BUSY, 29950, 1},
    {"*3\r\n:0\r\n:-1\r\n:0\r\n", REPLY_ACQUIRE_BUSY, -1, 0},
    {"*3\r\n:0\r\n:5\r\n$1\r\n1\r\n", REPLY_ACQUIRE_MALFORMED, 0, 0},
    {"*4\r\n:0\r\n:5\r\n:1\r\n:1\r\n", REPLY_ACQUIRE_MALFORMED, 0, 0},
    {"*2\r\n:0\r\n:-1\r\n", REPLY_ACQUIRE_BUSY, -1, 0},
    {"*2\r\n:7\r\n:5\r\n", REPLY_ACQUIRE_BUSY, 5, 0},
    {"*3\r\n:0\r\n:900\r\n:2\r\n", REPLY_ACQUIRE_BUSY, 900, REPLY_HELD_BY_GROUP},
    {"*3\r\n:0\r\n:900\r\n:7\r\n", REPLY_ACQUIRE_BUSY, 900, REPLY_HELD_BY_FOREIGN},
    {"*2\r\n:-1\r\n$11\r\ngroup:sem:3\r\n", REPLY_ACQUIRE_WRONG_KIND, 0, 0},
    {"*3\r\n:-1\r\n$9\r\nexclusive\r\n:0\r\n", REPLY_ACQUIRE_MALFORMED, 0, 0},
    {"*2\r\n:-1\r\n:5\r\n", REPLY_ACQUIRE_BUSY, 5, 0},
    {"-NOSCRIPT No matching script. Please use EVAL.\r\n", REPLY_ACQUIRE_ERROR, 0, 0},
    {"*2\r\n:1\r\n$2\r\n12\r\n", REPLY_ACQUIRE_MALFORMED, 0, 0},
    {"*2\r\n$1\r\n1\r\n:12\r\n", REPLY_ACQUIRE_MALFORMED, 0, 0},
    {"*1\r\n:1\r\n", REPLY_ACQUIRE_MALFORMED, 0, 0},
    {"*0\r\n", REPLY_ACQUIRE_MALFORMED, 0, 0},
    {"*2\r\n*2\r\n:1\r\n:1\r\n:1\r\n", REPLY_ACQUIRE_MALFORMED, 0, 0},
    {"*-1\r\n", REPLY_ACQUIRE_MALFORMED, 0, 0},
    {"$-1\r\n", REPLY_ACQUIRE_MALFORMED, 0, 0},
    {":1\r\n", REPLY_ACQUIRE_MALFORMED, 0, 0},
    {"+OK\r\n", REPLY_ACQUIRE_MALFORMED, 0, 0},
};

START_TEST(test_acquire)
{
    redisReply *r = unit_resp(acquires[_i].resp);
    uint64_t fence = 0;
    long long pttl = 0;
    int foreign = -1;
    ck_assert_int_eq(reply_acquire(r, &fence, &pttl, &foreign), acquires[_i].kind);
    if (acquires[_i].kind == REPLY_ACQUIRE_GRANTED)
        ck_assert_uint_eq(fence, (uint64_t)acquires[_i].value);
    if (acquires[_i].kind == REPLY_ACQUIRE_BUSY) {
        ck_assert_int_eq(pttl, acquires[_i].value);
        ck_assert_int_eq(foreign, acquires[_i].foreign);
    }
    freeReplyObject(r);
}
END_TEST

START_TEST(test_acquire_no_reply)
{
    uint64_t fence = 0;
    long long pttl = 0;
    int foreign = 0;
    ck_assert_int_eq(reply_acquire(NULL, &fence, &pttl, &foreign), REPLY_ACQUIRE_MALFORMED);
}
END_TEST

/* want: one character per key, 'o' OK, 'm' MISSING, 's' STOLEN, '?' UNKNOWN. */
static const struct {
    const char *resp;
    uint32_t n;
    int rc;
    const char *want;
} renews[] = {
    {"*3\r\n:1\r\n:0\r\n:-1\r\n", 3, 0, "oms"},
    {"*1\r\n:-1\r\n", 1, 0, "s"},
    {"*3\r\n:2\r\n$1\r\n1\r\n*1\r\n:1\r\n", 3, 0, "???"},
    {"*2\r\n:1\r\n$-1\r\n", 2, 0, "o?"},
    {"*3\r\n:1\r\n:0\r\n:-1\r\n", 2, -1, "??"},
    {"*3\r\n:1\r\n:0\r\n:-1\r\n", 4, -1, "????"},
    {"*0\r\n", 0, 0, ""},
    {"*0\r\n", 1, -1, "?"},
    {":1\r\n", 1, -1, "?"},
    {"-ERR Error running script\r\n", 2, -1, "??"},
    {"*-1\r\n", 1, -1, "?"},
};

START_TEST(test_renew)
{
    redisReply *r = unit_resp(renews[_i].resp);
    int8_t out[8];
    char got[9] = "";
    ck_assert_int_eq(reply_renew(r, renews[_i].n, out), renews[_i].rc);
    for (uint32_t i = 0; i < renews[_i].n; i++)
        got[i] = out[i] == REPLY_RENEW_OK        ? 'o'
                 : out[i] == REPLY_RENEW_MISSING ? 'm'
                 : out[i] == REPLY_RENEW_STOLEN  ? 's'
                                                 : '?';
    ck_assert_str_eq(got, renews[_i].want);
    freeReplyObject(r);
}
END_TEST

START_TEST(test_renew_no_reply)
{
    int8_t out[2];
    ck_assert_int_eq(reply_renew(NULL, 2, out), -1);
    ck_assert_int_eq(out[0], REPLY_RENEW_UNKNOWN);
    ck_assert_int_eq(out[1], REPLY_RENEW_UNKNOWN);
}
END_TEST

static const struct {
    const char *resp;
    enum reply_delete_kind kind;
    const char *error;
} deletes[] = {
    {":1\r\n", REPLY_DELETE_DONE, NULL},
    {":0\r\n", REPLY_DELETE_ABSENT, NULL},
    {":-3\r\n", REPLY_DELETE_ABSENT, NULL},
    {"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
     REPLY_DELETE_UNKNOWN, "WRONGTYPE Operation against a key holding the wrong kind of value"},
    {"+OK\r\n", REPLY_DELETE_UNKNOWN, NULL},
    {"$1\r\n1\r\n", REPLY_DELETE_UNKNOWN, NULL},
    {"$-1\r\n", REPLY_DELETE_UNKNOWN, NULL},
    /* group_release.lua's answer for one place */
    {"*1\r\n:1\r\n", REPLY_DELETE_DONE, NULL},
    {"*1\r\n:0\r\n", REPLY_DELETE_ABSENT, NULL},
    {"*2\r\n:1\r\n:1\r\n", REPLY_DELETE_UNKNOWN, NULL},
    {"*1\r\n$1\r\n1\r\n", REPLY_DELETE_UNKNOWN, NULL},
};

START_TEST(test_delete)
{
    redisReply *r = unit_resp(deletes[_i].resp);
    ck_assert_int_eq(reply_delete(r), deletes[_i].kind);
    const char *text = reply_error_text(r);
    if (deletes[_i].error == NULL)
        ck_assert_ptr_null(text);
    else
        ck_assert_str_eq(text, deletes[_i].error);
    freeReplyObject(r);
}
END_TEST

START_TEST(test_delete_no_reply)
{
    ck_assert_int_eq(reply_delete(NULL), REPLY_DELETE_UNKNOWN);
    ck_assert_ptr_null(reply_error_text(NULL));
}
END_TEST

static const struct {
    const char *resp;
    int result;
    long long pttl;
    long long limit, permits; /* a group place's: -1 for a key */
} adopts[] = {
    {"*2\r\n:1\r\n:29990\r\n", REPLY_RENEW_OK, 29990, -1, -1},
    {"*2\r\n:1\r\n:1\r\n", REPLY_RENEW_OK, 1, -1, -1},
    {"*2\r\n:0\r\n:0\r\n", REPLY_RENEW_MISSING, 0, -1, -1},
    {"*2\r\n:-1\r\n:0\r\n", REPLY_RENEW_STOLEN, 0, -1, -1},
    {"*2\r\n:1\r\n:0\r\n", REPLY_RENEW_UNKNOWN, 0, -1, -1},   /* adopted, yet no time left? */
    {"*2\r\n:1\r\n:-1\r\n", REPLY_RENEW_UNKNOWN, 0, -1, -1},
    {"*2\r\n:2\r\n:5\r\n", REPLY_RENEW_UNKNOWN, 0, -1, -1},
    {"*2\r\n:-2\r\n:5\r\n", REPLY_RENEW_UNKNOWN, 0, -1, -1},
    {"*2\r\n$1\r\n1\r\n:5\r\n", REPLY_RENEW_UNKNOWN, 0, -1, -1},
    {"*1\r\n:1\r\n", REPLY_RENEW_UNKNOWN, 0, -1, -1},
    {"*3\r\n:1\r\n:5\r\n:5\r\n", REPLY_RENEW_UNKNOWN, 0, -1, -1},
    {":1\r\n", REPLY_RENEW_UNKNOWN, 0, -1, -1},
    {"-NOSCRIPT No matching script. Please use EVAL.\r\n", REPLY_RENEW_UNKNOWN, 0, -1, -1},
    {"*-1\r\n", REPLY_RENEW_UNKNOWN, 0, -1, -1},
    {"$-1\r\n", REPLY_RENEW_UNKNOWN, 0, -1, -1},
    {"*4\r\n:1\r\n:900\r\n$8\r\ngroup:rw\r\n:0\r\n", REPLY_RENEW_OK, 900, 0, 0},
    {"*4\r\n:1\r\n:900\r\n$11\r\ngroup:sem:5\r\n:3\r\n", REPLY_RENEW_OK, 900, 5, 3},
    {"*4\r\n:1\r\n:900\r\n$11\r\ngroup:sem:5\r\n:6\r\n", REPLY_RENEW_UNKNOWN, 0, -1, -1},
    {"*4\r\n:1\r\n:900\r\n$8\r\ngroup:rw\r\n:1\r\n", REPLY_RENEW_UNKNOWN, 0, -1, -1},
    {"*4\r\n:1\r\n:900\r\n$9\r\ngroup:foo\r\n:0\r\n", REPLY_RENEW_UNKNOWN, 0, -1, -1},
    {"*4\r\n:1\r\n:900\r\n$11\r\ngroup:sem:x\r\n:0\r\n", REPLY_RENEW_UNKNOWN, 0, -1, -1},
    {"*4\r\n:0\r\n:0\r\n$8\r\ngroup:rw\r\n:0\r\n", REPLY_RENEW_UNKNOWN, 0, -1, -1},
    /* An election's leader: limit -2 marks it (place.leader, no group). */
    {"*3\r\n:1\r\n:900\r\n$6\r\nleader\r\n", REPLY_RENEW_OK, 900, -2, -1},
    {"*3\r\n:1\r\n:900\r\n$6\r\nleadet\r\n", REPLY_RENEW_UNKNOWN, 0, -1, -1},
    {"*3\r\n:0\r\n:0\r\n$6\r\nleader\r\n", REPLY_RENEW_UNKNOWN, 0, -1, -1},
    {"*3\r\n:1\r\n:0\r\n$6\r\nleader\r\n", REPLY_RENEW_UNKNOWN, 0, -1, -1},
};

START_TEST(test_adopt)
{
    redisReply *r = unit_resp(adopts[_i].resp);
    long long pttl = 0;
    struct reply_place place;
    ck_assert_int_eq(reply_adopt_place(r, &pttl, &place), adopts[_i].result);
    if (adopts[_i].result == REPLY_RENEW_OK) {
        ck_assert_int_eq(pttl, adopts[_i].pttl);
        ck_assert_int_eq(place.group, adopts[_i].limit >= 0);
        ck_assert_int_eq(place.leader, adopts[_i].limit == -2);
        if (place.group) {
            ck_assert_int_eq(place.limit, adopts[_i].limit);
            ck_assert_int_eq(place.permits, adopts[_i].permits);
        }
    }
    freeReplyObject(r);
}
END_TEST

START_TEST(test_adopt_no_reply)
{
    long long pttl = 0;
    struct reply_place place;
    ck_assert_int_eq(reply_adopt_place(NULL, &pttl, &place), REPLY_RENEW_UNKNOWN);
}
END_TEST

static const struct {
    const char *resp;
    int result;
    uint64_t term;
    const char *value;
    long long pttl;
} leaders[] = {
    {"*4\r\n:1\r\n$16\r\n1733212345678901\r\n$9\r\nhost:7000\r\n:2900\r\n", 1,
     1733212345678901ULL, "host:7000", 2900},
    {"*4\r\n:1\r\n$1\r\n7\r\n$0\r\n\r\n:-1\r\n", 1, 7, "", -1},
    {"*1\r\n:0\r\n", 0, 0, NULL, 0},
    {"*1\r\n:1\r\n", -1, 0, NULL, 0},                          /* a leader, but of what? */
    {"*4\r\n:0\r\n$1\r\n7\r\n$0\r\n\r\n:5\r\n", -1, 0, NULL, 0},  /* none, with a term */
    {"*4\r\n:1\r\n$1\r\n0\r\n$0\r\n\r\n:5\r\n", -1, 0, NULL, 0},  /* term 0 is nobody's */
    {"*4\r\n:1\r\n$2\r\n-7\r\n$0\r\n\r\n:5\r\n", -1, 0, NULL, 0},
    {"*4\r\n:1\r\n$2\r\n7x\r\n$0\r\n\r\n:5\r\n", -1, 0, NULL, 0},
    {"*4\r\n:1\r\n$0\r\n\r\n$0\r\n\r\n:5\r\n", -1, 0, NULL, 0},
    {"*4\r\n:1\r\n$21\r\n999999999999999999999\r\n$0\r\n\r\n:5\r\n", -1, 0, NULL, 0},
    {"*4\r\n:1\r\n:7\r\n$0\r\n\r\n:5\r\n", -1, 0, NULL, 0},       /* term not a string */
    {"*4\r\n:1\r\n$1\r\n7\r\n:0\r\n:5\r\n", -1, 0, NULL, 0},       /* value not a string */
    {"*4\r\n:1\r\n$1\r\n7\r\n$0\r\n\r\n$1\r\n5\r\n", -1, 0, NULL, 0},
    {"*2\r\n:0\r\n:0\r\n", -1, 0, NULL, 0},
    {":0\r\n", -1, 0, NULL, 0},
    {"-BUSY Redis is busy running a script.\r\n", -1, 0, NULL, 0},
};

START_TEST(test_leader)
{
    redisReply *r = unit_resp(leaders[_i].resp);
    struct reply_leader ld = {0};
    ck_assert_int_eq(reply_leader(r, &ld), leaders[_i].result);
    if (leaders[_i].result == 1) {
        ck_assert_uint_eq(ld.term, leaders[_i].term);
        ck_assert_uint_eq(ld.value_len, strlen(leaders[_i].value));
        ck_assert(memcmp(ld.value, leaders[_i].value, ld.value_len) == 0);
        ck_assert_int_eq(ld.pttl, leaders[_i].pttl);
    }
    freeReplyObject(r);
}
END_TEST

START_TEST(test_leader_no_reply)
{
    struct reply_leader ld = {0};
    ck_assert_int_eq(reply_leader(NULL, &ld), -1);
}
END_TEST

int main(void)
{
    const struct unit_test tests[] = {
        {"acquire", test_acquire, UNIT_COUNT(acquires)},
        {"acquire", test_acquire_no_reply, 0},
        {"renew", test_renew, UNIT_COUNT(renews)},
        {"renew", test_renew_no_reply, 0},
        {"delete", test_delete, UNIT_COUNT(deletes)},
        {"delete", test_delete_no_reply, 0},
        {"adopt", test_adopt, UNIT_COUNT(adopts)},
        {"adopt", test_adopt_no_reply, 0},
        {"leader", test_leader, UNIT_COUNT(leaders)},
        {"leader", test_leader_no_reply, 0},
    };
    return unit_run("reply", tests, sizeof tests / sizeof tests[0]);
}
