/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sessidx.c — see sessidx.h. A sorted array of (serial, session) with holes
 * where sessions left, compacted once holes outnumber the live sessions; and
 * a chained hash table of the live sessions by id (chained through
 * session.id_next), doubling as it fills.
 */
#include "sessidx.h"

#include <stdlib.h>
#include <string.h>

#include "session.h"

#define SESSIDX_INITIAL 64

struct sessidx_slot {
    uint64_t serial;
    struct session *s; /* NULL: a hole */
};

struct sessidx {
    uint8_t key[UTIL_HASH_KEY_BYTES];
    struct sessidx_slot *slots; /* ascending serials */
    size_t nslots, cap, live;
    struct session **ids;       /* hash buckets */
    size_t nbuckets;            /* power of two */
    uint64_t last_serial;
};

struct sessidx *sessidx_new(const uint8_t key[UTIL_HASH_KEY_BYTES])
{
    struct sessidx *x = calloc(1, sizeof *x);
    if (x == NULL)
        return NULL;
    memcpy(x->key, key, UTIL_HASH_KEY_BYTES);
    x->nbuckets = SESSIDX_INITIAL;
    x->ids = calloc(x->nbuckets, sizeof *x->ids);
    if (x->ids == NULL) {
        free(x);
        return NULL;
    }
    return x;
}

void sessidx_free(struct sessidx *x)
{
    if (x == NULL)
        return;
    free(x->slots);
    free(x->ids);
    free(x);
}

static size_t bucket_of(const struct sessidx *x, const char *id, size_t nbuckets)
{
    return (size_t)util_hash(x->key, id, strlen(id)) & (nbuckets - 1);
}

static void ids_grow(struct sessidx *x)
{
    size_t n = x->nbuckets * 2;
    struct session **b = calloc(n, sizeof *b);
    if (b == NULL)
        return; /* longer chains, still correct */
    for (size_t i = 0; i < x->nbuckets; i++) {
        struct session *s = x->ids[i], *next;
        for (; s != NULL; s = next) {
            next = s->id_next;
            size_t k = bucket_of(x, s->id, n);
            s->id_next = b[k];
            b[k] = s;
        }
    }
    free(x->ids);
    x->ids = b;
    x->nbuckets = n;
}

/* Drop the holes of the serial array. */
static void slots_compact(struct sessidx *x)
{
    size_t to = 0;
    for (size_t i = 0; i < x->nslots; i++)
        if (x->slots[i].s != NULL)
            x->slots[to++] = x->slots[i];
    x->nslots = to;
}

int sessidx_add(struct sessidx *x, struct session *s)
{
    s->serial = ++x->last_serial;
    if (x->nslots == x->cap) {
        if (x->live < x->nslots / 2) {
            slots_compact(x);
        } else {
            size_t cap = x->cap ? x->cap * 2 : SESSIDX_INITIAL;
            struct sessidx_slot *n = realloc(x->slots, cap * sizeof *n);
            if (n == NULL)
                return -1;
            x->slots = n;
            x->cap = cap;
        }
    }
    x->slots[x->nslots].serial = s->serial;
    x->slots[x->nslots].s = s;
    x->nslots++;
    x->live++;
    if (x->live > x->nbuckets)
        ids_grow(x);
    size_t b = bucket_of(x, s->id, x->nbuckets);
    s->id_next = x->ids[b];
    x->ids[b] = s;
    s->indexed = 1;
    return 0;
}

size_t sessidx_seek(const struct sessidx *x, uint64_t after)
{
    size_t lo = 0, hi = x->nslots;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (x->slots[mid].serial <= after)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void sessidx_remove(struct sessidx *x, struct session *s)
{
    if (!s->indexed)
        return;
    s->indexed = 0;
    size_t i = sessidx_seek(x, s->serial - 1);
    if (i < x->nslots && x->slots[i].s == s) {
        x->slots[i].s = NULL;
        x->live--;
    }
    if (x->nslots > SESSIDX_INITIAL && x->live < x->nslots / 4)
        slots_compact(x);
    struct session **pp = &x->ids[bucket_of(x, s->id, x->nbuckets)];
    while (*pp != NULL && *pp != s)
        pp = &(*pp)->id_next;
    if (*pp == s)
        *pp = s->id_next;
    s->id_next = NULL;
}

struct session *sessidx_find(const struct sessidx *x, const char *id)
{
    for (struct session *s = x->ids[bucket_of(x, id, x->nbuckets)]; s != NULL; s = s->id_next)
        if (strcmp(s->id, id) == 0)
            return s;
    return NULL;
}

struct session *sessidx_at(const struct sessidx *x, size_t *pos)
{
    while (*pos < x->nslots) {
        struct session *s = x->slots[(*pos)++].s;
        if (s != NULL)
            return s;
    }
    return NULL;
}
