/* SPDX-License-Identifier: BSD-3-Clause */
/* replyobj.c — see replyobj.h. The objects are hiredis's redisReply, filled
 * as hiredis's own reader functions fill them, so every reader of a reply
 * (reply.c, the callbacks) sees what it always saw. */
#include "replyobj.h"

#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

union slot {
    union slot *next; /* while free */
    redisReply r;
};

static union slot *free_list;
static uint32_t nfree;

static redisReply *obj_new(int type)
{
    union slot *s = free_list;
    if (s != NULL) {
        free_list = s->next;
        nfree--;
    } else if ((s = malloc(sizeof *s)) == NULL) {
        return NULL;
    }
    memset(&s->r, 0, sizeof s->r);
    s->r.type = type;
    return &s->r;
}

static void obj_put(redisReply *r)
{
    union slot *s = (union slot *)r;
    if (nfree >= REPLYOBJ_CACHE_MAX) {
        free(s);
        return;
    }
    s->next = free_list;
    free_list = s;
    nfree++;
}

static void free_object(void *obj)
{
    redisReply *r = obj;
    if (r == NULL)
        return;
    if (r->type == REDIS_REPLY_ARRAY) {
        /* A reply freed half-read (the connection dropped) has NULL elements left. */
        for (size_t i = 0; r->element != NULL && i < r->elements; i++)
            free_object(r->element[i]);
        free(r->element);
    } else if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS ||
               r->type == REDIS_REPLY_ERROR) {
        free(r->str);
    }
    obj_put(r);
}

/* r, made for task, hung in its parent array when it has one. */
static void *placed(const redisReadTask *task, redisReply *r)
{
    if (r != NULL && task->parent != NULL)
        ((redisReply *)task->parent->obj)->element[task->idx] = r;
    return r;
}

static void *create_string(const redisReadTask *task, char *str, size_t len)
{
    redisReply *r = obj_new(task->type); /* STRING, STATUS or ERROR */
    if (r == NULL)
        return NULL;
    if ((r->str = malloc(len + 1)) == NULL) {
        obj_put(r);
        return NULL;
    }
    memcpy(r->str, str, len);
    r->str[len] = '\0';
    r->len = len;
    return placed(task, r);
}

static void *create_array(const redisReadTask *task, int elements)
{
    redisReply *r = obj_new(REDIS_REPLY_ARRAY);
    if (r == NULL)
        return NULL;
    if (elements > 0 && (r->element = calloc((size_t)elements, sizeof *r->element)) == NULL) {
        obj_put(r);
        return NULL;
    }
    r->elements = elements > 0 ? (size_t)elements : 0;
    return placed(task, r);
}

static void *create_integer(const redisReadTask *task, long long value)
{
    redisReply *r = obj_new(REDIS_REPLY_INTEGER);
    if (r != NULL)
        r->integer = value;
    return placed(task, r);
}

static void *create_nil(const redisReadTask *task)
{
    return placed(task, obj_new(REDIS_REPLY_NIL));
}

static redisReplyObjectFunctions functions = {
    .createString = create_string,
    .createArray = create_array,
    .createInteger = create_integer,
    .createNil = create_nil,
    .freeObject = free_object,
};

void replyobj_use(redisAsyncContext *ac)
{
    ac->c.reader->fn = &functions;
}

redisReplyObjectFunctions *replyobj_functions(void)
{
    return &functions;
}

uint32_t replyobj_cached(void)
{
    return nfree;
}

void replyobj_drain(void)
{
    while (free_list != NULL) {
        union slot *s = free_list;
        free_list = s->next;
        free(s);
    }
    nfree = 0;
}
