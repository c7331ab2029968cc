/* SPDX-License-Identifier: BSD-3-Clause */
/* reply.c — see reply.h. */
#include "reply.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Element i of array r if it is an integer, else NULL (r is an array of more than i). */
static const redisReply *int_element(const redisReply *r, size_t i)
{
    const redisReply *e = r->element[i];
    return e != NULL && e->type == REDIS_REPLY_INTEGER ? e : NULL;
}

enum reply_acquire_kind reply_acquire(const redisReply *r, uint64_t *fence, long long *pttl,
                                      int *held_by)
{
    if (r == NULL)
        return REPLY_ACQUIRE_MALFORMED;
    if (r->type == REDIS_REPLY_ERROR)
        return REPLY_ACQUIRE_ERROR;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 || r->elements > 3)
        return REPLY_ACQUIRE_MALFORMED;
    const redisReply *granted = int_element(r, 0);
    if (granted != NULL && granted->integer == -1 && r->elements == 2 &&
        r->element[1] != NULL && r->element[1]->type == REDIS_REPLY_STRING)
        return REPLY_ACQUIRE_WRONG_KIND;
    const redisReply *value = int_element(r, 1);
    const redisReply *kind = r->elements == 3 ? int_element(r, 2) : NULL;
    if (granted == NULL || value == NULL || (r->elements == 3 && kind == NULL))
        return REPLY_ACQUIRE_MALFORMED;
    if (granted->integer == 1) {
        *fence = (uint64_t)value->integer;
        return REPLY_ACQUIRE_GRANTED;
    }
    *pttl = value->integer;
    *held_by = kind == NULL ? REPLY_HELD_BY_RLOCKD
               : kind->integer == REPLY_HELD_BY_RLOCKD || kind->integer == REPLY_HELD_BY_GROUP
                   ? (int)kind->integer
                   : REPLY_HELD_BY_FOREIGN;
    return REPLY_ACQUIRE_BUSY;
}

int reply_renew(const redisReply *r, uint32_t n, int8_t out[])
{
    int whole = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == n;
    for (uint32_t i = 0; i < n; i++) {
        const redisReply *e = whole ? int_element(r, i) : NULL;
        out[i] = REPLY_RENEW_UNKNOWN;
        if (e != NULL && e->integer >= REPLY_RENEW_STOLEN && e->integer <= REPLY_RENEW_OK)
            out[i] = (int8_t)e->integer;
    }
    return whole ? 0 : -1;
}

/* The limit of a group marker: 0 for "group:rw", N for "group:sem:N"; -1 for another. */
static long long marker_limit(const redisReply *m)
{
    if (m == NULL || m->type != REDIS_REPLY_STRING)
        return -1;
    if (m->len == 8 && memcmp(m->str, "group:rw", 8) == 0)
        return 0;
    if (m->len <= 10 || m->len > 17 || memcmp(m->str, "group:sem:", 10) != 0)
        return -1;
    long long n = 0;
    for (size_t i = 10; i < m->len; i++) {
        if (m->str[i] < '0' || m->str[i] > '9')
            return -1;
        n = n * 10 + (m->str[i] - '0');
    }
    return n >= 1 && n <= UINT32_MAX ? n : -1;
}

int reply_adopt_place(const redisReply *r, long long *pttl, struct reply_place *place)
{
    place->group = 0;
    place->limit = place->permits = 0;
    place->leader = 0;
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 2 || r->elements > 4)
        return REPLY_RENEW_UNKNOWN;
    const redisReply *code = int_element(r, 0), *value = int_element(r, 1);
    if (code == NULL || value == NULL)
        return REPLY_RENEW_UNKNOWN;
    if (code->integer == 1) {
        if (value->integer < 1)
            return REPLY_RENEW_UNKNOWN;
        if (r->elements == 4) {
            long long limit = marker_limit(r->element[2]);
            const redisReply *k = int_element(r, 3);
            if (limit < 0 || k == NULL || k->integer < 0 || k->integer > limit)
                return REPLY_RENEW_UNKNOWN;
            place->group = 1;
            place->limit = (uint32_t)limit;
            place->permits = (uint32_t)k->integer;
        } else if (r->elements == 3) {
            const redisReply *tag = r->element[2];
            if (tag->type != REDIS_REPLY_STRING || strcmp(tag->str, "leader") != 0)
                return REPLY_RENEW_UNKNOWN;
            place->leader = 1;
        }
        *pttl = value->integer;
        return REPLY_RENEW_OK;
    }
    if (r->elements != 2)
        return REPLY_RENEW_UNKNOWN;
    if (code->integer == 0)
        return REPLY_RENEW_MISSING;
    return code->integer == -1 ? REPLY_RENEW_STOLEN : REPLY_RENEW_UNKNOWN;
}

int reply_leader(const redisReply *r, struct reply_leader *out)
{
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || (r->elements != 1 && r->elements != 4))
        return -1;
    const redisReply *code = int_element(r, 0);
    if (code == NULL || code->integer != (r->elements == 4 ? 1 : 0))
        return -1;
    if (r->elements == 1)
        return 0;
    const redisReply *term = r->element[1], *value = r->element[2], *pttl = int_element(r, 3);
    if (term->type != REDIS_REPLY_STRING || value->type != REDIS_REPLY_STRING || pttl == NULL)
        return -1;
    char *end;
    errno = 0;
    unsigned long long t = strtoull(term->str, &end, 10);
    if (term->len == 0 || *end != '\0' || errno != 0 || t == 0 || term->str[0] == '-')
        return -1;
    out->term = t;
    out->value = value->str;
    out->value_len = value->len;
    out->pttl = pttl->integer;
    return 1;
}

enum reply_delete_kind reply_delete(const redisReply *r)
{
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 1)
        r = r->element[0]; /* group_release.lua's answer for one place */
    if (r == NULL || r->type != REDIS_REPLY_INTEGER)
        return REPLY_DELETE_UNKNOWN;
    return r->integer == 1 ? REPLY_DELETE_DONE : REPLY_DELETE_ABSENT;
}

const char *reply_error_text(const redisReply *r)
{
    return r != NULL && r->type == REDIS_REPLY_ERROR ? r->str : NULL;
}
