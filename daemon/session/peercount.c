/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * peercount.c — see peercount.h. Chained buckets: entries exist only for
 * addresses with a connection before its Hello, so there are at most
 * max_pending of them; the bucket array doubles when they outnumber it.
 */
#include "peercount.h"

#include <stdlib.h>
#include <string.h>

#define PEERCOUNT_FIRST 64 /* buckets at start; a power of two */

struct entry {
    uint8_t ip[16];
    uint32_t n;
    struct entry *next;
};

struct peercount {
    uint8_t key[UTIL_HASH_KEY_BYTES];
    struct entry **b;
    size_t nb; /* buckets, a power of two */
    size_t n;  /* entries */
};

static size_t slot(const struct peercount *t, const uint8_t ip[16])
{
    return (size_t)util_hash(t->key, ip, 16) & (t->nb - 1);
}

struct peercount *peercount_new(const uint8_t key[UTIL_HASH_KEY_BYTES])
{
    struct peercount *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    memcpy(t->key, key, sizeof t->key);
    t->nb = PEERCOUNT_FIRST;
    t->b = calloc(t->nb, sizeof *t->b);
    if (t->b == NULL) {
        free(t);
        return NULL;
    }
    return t;
}

void peercount_free(struct peercount *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->nb; i++)
        for (struct entry *e = t->b[i], *next; e != NULL; e = next) {
            next = e->next;
            free(e);
        }
    free(t->b);
    free(t);
}

static struct entry **find(const struct peercount *t, const uint8_t ip[16])
{
    struct entry **p = &t->b[slot(t, ip)];
    while (*p != NULL && memcmp((*p)->ip, ip, 16) != 0)
        p = &(*p)->next;
    return p;
}

uint32_t peercount_get(const struct peercount *t, const uint8_t ip[16])
{
    const struct entry *e = *find(t, ip);
    return e != NULL ? e->n : 0;
}

/* Twice the buckets; kept as it is when out of memory (chains just grow longer). */
static void grow(struct peercount *t)
{
    size_t nb = t->nb * 2;
    struct entry **b = calloc(nb, sizeof *b);
    if (b == NULL)
        return;
    struct entry **old = t->b;
    size_t onb = t->nb;
    t->b = b;
    t->nb = nb;
    for (size_t i = 0; i < onb; i++)
        for (struct entry *e = old[i], *next; e != NULL; e = next) {
            next = e->next;
            size_t s = slot(t, e->ip);
            e->next = b[s];
            b[s] = e;
        }
    free(old);
}

int peercount_add(struct peercount *t, const uint8_t ip[16])
{
    struct entry **p = find(t, ip);
    if (*p != NULL) {
        (*p)->n++;
        return 0;
    }
    struct entry *e = calloc(1, sizeof *e);
    if (e == NULL)
        return -1;
    memcpy(e->ip, ip, 16);
    e->n = 1;
    *p = e;
    if (++t->n > t->nb)
        grow(t);
    return 0;
}

void peercount_remove(struct peercount *t, const uint8_t ip[16])
{
    struct entry **p = find(t, ip);
    struct entry *e = *p;
    if (e == NULL)
        return;
    if (--e->n == 0) {
        *p = e->next;
        free(e);
        t->n--;
    }
}
