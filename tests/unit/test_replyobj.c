/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_replyobj.c — replies read with the free-list objects are what
 * hiredis's own reader makes of the same bytes, whatever the objects held
 * before; the free list stays within its bound.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "check_main.h"
#include "replyobj.h"

/* The reply in wire, read by a reader with fn (NULL: hiredis's own functions). */
static redisReply *read_one(redisReader *rd, const char *wire)
{
    ck_assert_int_eq(redisReaderFeed(rd, wire, strlen(wire)), REDIS_OK);
    void *reply = NULL;
    ck_assert_int_eq(redisReaderGetReply(rd, &reply), REDIS_OK);
    ck_assert_ptr_nonnull(reply);
    return reply;
}

/* a and b the same reply, field by field. */
static void same(const redisReply *a, const redisReply *b)
{
    ck_assert_int_eq(a->type, b->type);
    ck_assert_int_eq(a->integer, b->integer);
    ck_assert_uint_eq(a->len, b->len);
    ck_assert_uint_eq(a->elements, b->elements);
    ck_assert_int_eq(a->str == NULL, b->str == NULL);
    if (a->str != NULL)
        ck_assert_mem_eq(a->str, b->str, a->len + 1);
    ck_assert_int_eq(a->element == NULL, b->element == NULL);
    for (size_t i = 0; i < a->elements; i++)
        same(a->element[i], b->element[i]);
}

START_TEST(test_replies_as_hiredis_makes_them)
{
    static const char *const wires[] = {
        "$5\r\nhello\r\n", "$-1\r\n", ":-42\r\n", "+OK\r\n", "-ERR no\r\n",
        "*3\r\n:1\r\n$1\r\na\r\n*2\r\n:0\r\n$-1\r\n", "*0\r\n", "*-1\r\n",
        "$0\r\n\r\n", "*2\r\n$3\r\nabc\r\n+x\r\n", ":7\r\n",
    };
    redisReader *ours = redisReaderCreateWithFunctions(replyobj_functions());
    redisReader *theirs = redisReaderCreate();
    ck_assert_ptr_nonnull(ours);
    ck_assert_ptr_nonnull(theirs);
    /* Twice through, in two orders: objects come back from the list holding whatever
     * their last reply left in them. */
    for (int round = 0; round < 4; round++)
        for (size_t k = 0; k < sizeof wires / sizeof wires[0]; k++) {
            size_t i = round % 2 ? sizeof wires / sizeof wires[0] - 1 - k : k;
            redisReply *a = read_one(ours, wires[i]), *b = read_one(theirs, wires[i]);
            same(a, b);
            replyobj_functions()->freeObject(a);
            freeReplyObject(b);
        }
    redisReaderFree(ours);
    redisReaderFree(theirs);
}
END_TEST

START_TEST(test_free_list_bounded)
{
    enum { N = REPLYOBJ_CACHE_MAX + 1000 };
    redisReader *rd = redisReaderCreateWithFunctions(replyobj_functions());
    ck_assert_ptr_nonnull(rd);
    /* One array of N integers, freed at once: the list keeps its bound, the rest is freed. */
    size_t cap = 32 + (size_t)N * 5, len = 0;
    char *wire = malloc(cap);
    ck_assert_ptr_nonnull(wire);
    len += (size_t)snprintf(wire, cap, "*%d\r\n", N);
    for (int i = 0; i < N; i++)
        len += (size_t)snprintf(wire + len, cap - len, ":%d\r\n", i % 10);
    redisReply *r = read_one(rd, wire);
    ck_assert_uint_eq(r->elements, N);
    ck_assert_int_eq(r->element[N - 1]->integer, (N - 1) % 10);
    replyobj_functions()->freeObject(r);
    ck_assert_uint_eq(replyobj_cached(), REPLYOBJ_CACHE_MAX);
    replyobj_drain();
    ck_assert_uint_eq(replyobj_cached(), 0);
    /* A reply cut off mid-array (the connection dropped) is freed with its reader. */
    ck_assert_int_eq(redisReaderFeed(rd, "*3\r\n:1\r\n", 8), REDIS_OK);
    void *none = NULL;
    ck_assert_int_eq(redisReaderGetReply(rd, &none), REDIS_OK);
    ck_assert_ptr_null(none);
    redisReaderFree(rd);
    ck_assert_uint_eq(replyobj_cached(), 2);
    replyobj_drain();
    free(wire);
}
END_TEST

int main(void)
{
    const struct unit_test tests[] = {
        {"replies", test_replies_as_hiredis_makes_them, 0},
        {"bounded", test_free_list_bounded, 0},
    };
    return unit_run("replyobj", tests, sizeof tests / sizeof tests[0]);
}
