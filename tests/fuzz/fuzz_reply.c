/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_reply.c — bytes as Redis might send them, read by hiredis's own reply
 * reader into the redisReply trees the daemon's callbacks receive, then
 * interpreted by every reply_* function as each script's answer, and by
 * rpool_version_check as the text of INFO server.
 *
 * hiredis 0.14 allocates a declared array length up front (up to INT_MAX
 * pointers) before any element arrives. That is the reader's business, not
 * the interpretation's, so arrays longer than FUZZ_ARRAY_MAX are refused
 * here (the reader then reports out of memory) instead of being reported as
 * an allocation failure of hiredis.
 */
#include <ctype.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "fuzz.h"
#include "pool.h"
#include "reply.h"
#include "watchdog.h"

#define FUZZ_ARRAY_MAX 1024

/* The reader's object functions, with createArray bounded. */
struct bounded_fns {
    redisReplyObjectFunctions fns;
    void *(*create_array)(const redisReadTask *task, int elements);
};

static void *bounded_array(const redisReadTask *task, int elements)
{
    const struct bounded_fns *b = task->privdata;
    return elements > FUZZ_ARRAY_MAX ? NULL : b->create_array(task, elements);
}

static int is_int(const redisReply *r, size_t i)
{
    return r->element[i] != NULL && r->element[i]->type == REDIS_REPLY_INTEGER;
}

static void check_acquire(const redisReply *r)
{
    uint64_t fence = 0;
    long long pttl = 0;
    int foreign = -1;
    enum reply_acquire_kind k = reply_acquire(r, &fence, &pttl, &foreign);
    FUZZ_CHECK((k == REPLY_ACQUIRE_ERROR) == (r->type == REDIS_REPLY_ERROR));
    if (k == REPLY_ACQUIRE_GRANTED || k == REPLY_ACQUIRE_BUSY) {
        FUZZ_CHECK(r->type == REDIS_REPLY_ARRAY && (r->elements == 2 || r->elements == 3));
        FUZZ_CHECK(is_int(r, 0) && is_int(r, 1) && (r->elements == 2 || is_int(r, 2)));
        FUZZ_CHECK((k == REPLY_ACQUIRE_GRANTED) == (r->element[0]->integer == 1));
        long long held = r->elements == 3 ? r->element[2]->integer : 0;
        FUZZ_CHECK(k != REPLY_ACQUIRE_BUSY || foreign == (held == 0 || held == 2 ? held : 1));
    }
    if (k == REPLY_ACQUIRE_WRONG_KIND)
        FUZZ_CHECK(r->type == REDIS_REPLY_ARRAY && r->elements == 2 && is_int(r, 0) &&
                   r->element[0]->integer == -1 && r->element[1]->type == REDIS_REPLY_STRING);
}

/* Interpret r as the answer for n keys. */
static void check_renew(const redisReply *r, uint32_t n)
{
    int8_t out[WATCHDOG_BATCH_MAX];
    int rc = reply_renew(r, n, out);
    FUZZ_CHECK((rc == 0) == (r->type == REDIS_REPLY_ARRAY && r->elements == n));
    for (uint32_t i = 0; i < n; i++) {
        FUZZ_CHECK(out[i] >= REPLY_RENEW_STOLEN && out[i] <= REPLY_RENEW_UNKNOWN);
        FUZZ_CHECK(rc == 0 || out[i] == REPLY_RENEW_UNKNOWN);
    }
}

/*
 * The version check accepts a text only when "redis_version:" is followed by
 * a decimal major version of at least RPOOL_MIN_REDIS_MAJOR.
 */
static void check_version(const char *text)
{
    char why[128];
    if (rpool_version_check(text, why, sizeof why) != 0) {
        FUZZ_CHECK(why[0] != '\0');
        return;
    }
    const char *v = strstr(text, "redis_version:");
    FUZZ_CHECK(v != NULL);
    v += strlen("redis_version:");
    FUZZ_CHECK(isdigit((unsigned char)v[0]));
    FUZZ_CHECK(strtoull(v, NULL, 10) >= RPOOL_MIN_REDIS_MAJOR);
}

static void check_reply(const redisReply *r)
{
    check_acquire(r);
    /* Batches of every size the watchdog sends, around this reply's own length. */
    uint32_t len = r->type == REDIS_REPLY_ARRAY ? (uint32_t)r->elements : 1;
    check_renew(r, 1);
    if (len <= WATCHDOG_BATCH_MAX)
        check_renew(r, len);
    if (len + 1 <= WATCHDOG_BATCH_MAX)
        check_renew(r, len + 1);
    long long pttl = 0;
    struct reply_place place;
    int a = reply_adopt_place(r, &pttl, &place);
    FUZZ_CHECK(a >= REPLY_RENEW_STOLEN && a <= REPLY_RENEW_UNKNOWN);
    if (a == REPLY_RENEW_OK)
        FUZZ_CHECK(r->type == REDIS_REPLY_ARRAY && pttl >= 1 &&
                   (r->elements == 2 || (r->elements == 3 && place.leader && !place.group) ||
                    (r->elements == 4 && place.group && place.permits <= place.limit)));
    if (a != REPLY_RENEW_UNKNOWN)
        FUZZ_CHECK(r->type == REDIS_REPLY_ARRAY && is_int(r, 0) && is_int(r, 1) &&
                   (r->elements == 4) == (place.group != 0) &&
                   (r->elements == 3) == (place.leader != 0));
    struct reply_leader ld;
    int lr = reply_leader(r, &ld);
    FUZZ_CHECK(lr >= -1 && lr <= 1);
    if (lr == 1)
        FUZZ_CHECK(r->type == REDIS_REPLY_ARRAY && r->elements == 4 && ld.term > 0 &&
                   ld.value == r->element[2]->str && ld.value_len == r->element[2]->len);
    if (lr == 0)
        FUZZ_CHECK(r->type == REDIS_REPLY_ARRAY && r->elements == 1);
    enum reply_delete_kind d = reply_delete(r);
    const redisReply *one = r->type == REDIS_REPLY_ARRAY && r->elements == 1 ? r->element[0] : r;
    FUZZ_CHECK(d != REPLY_DELETE_DONE ||
               (one != NULL && one->type == REDIS_REPLY_INTEGER && one->integer == 1));
    const char *text = reply_error_text(r);
    FUZZ_CHECK((text != NULL) == (r->type == REDIS_REPLY_ERROR));
    if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS ||
        r->type == REDIS_REPLY_ERROR)
        check_version(r->str);
    if (r->type == REDIS_REPLY_ARRAY)
        for (size_t i = 0; i < r->elements; i++)
            if (r->element[i] != NULL)
                check_reply(r->element[i]); /* nested at most 7 deep (hiredis) */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The whole input as INFO text too: a bulk string's length is hard to mutate in step. */
    char *text = malloc(size + 1);
    FUZZ_CHECK(text != NULL);
    memcpy(text, data, size);
    text[size] = '\0';
    check_version(text);
    free(text);

    redisReader *reader = redisReaderCreate();
    FUZZ_CHECK(reader != NULL);
    struct bounded_fns b = {*reader->fn, reader->fn->createArray};
    b.fns.createArray = bounded_array;
    reader->fn = &b.fns;
    reader->privdata = &b; /* every read task carries it */
    if (redisReaderFeed(reader, (const char *)data, size) == REDIS_OK) {
        void *reply;
        while (redisReaderGetReply(reader, &reply) == REDIS_OK && reply != NULL) {
            check_reply(reply);
            freeReplyObject(reply);
        }
    }
    redisReaderFree(reader);
    return 0;
}
