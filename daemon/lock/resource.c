/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * resource.c — chained hash table of resources, growing by doubling, with a
 * cursor scan for the admin listings.
 *
 * Growing moves the chains a few buckets at a time (on each insert and
 * removal), not all at once: at 600k resources a full rehash held the event
 * loop for 170 ms, long enough to send a LockLost after the key was gone.
 * While it moves, a resource whose old bucket has not moved yet is still in
 * the old table (chain_of says where), and the scan walks the new table's
 * cursor space, filtering an old bucket to the new bucket it stands for.
 */
#include "resource.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "config.h"
#include "pool.h"

/* Old buckets moved per insert or removal while growing: the move ends
 * long before the table is due to grow again (after nbuckets / 2 inserts). */
#define RESTABLE_MOVE_STEP 16

struct restable {
    uint8_t key[UTIL_HASH_KEY_BYTES];
    struct resource **buckets;
    size_t nbuckets; /* power of two */
    struct resource **old; /* the table being emptied into buckets, or NULL */
    size_t nold;
    size_t moved; /* old[0 .. moved) are empty */
    uint64_t count;
};

struct restable *restable_new(const uint8_t key[UTIL_HASH_KEY_BYTES])
{
    struct restable *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    memcpy(t->key, key, UTIL_HASH_KEY_BYTES);
    t->nbuckets = 64;
    t->buckets = calloc(t->nbuckets, sizeof *t->buckets);
    if (t->buckets == NULL) {
        free(t);
        return NULL;
    }
    return t;
}

void restable_free(struct restable *t)
{
    if (t == NULL)
        return;
    free(t->old);
    free(t->buckets);
    free(t);
}

uint64_t restable_count(const struct restable *t)
{
    return t->count;
}

/* The chain a resource of this hash is in (or goes in). */
static struct resource **chain_of(struct restable *t, uint64_t hash)
{
    if (t->old != NULL && (hash & (t->nold - 1)) >= t->moved)
        return &t->old[hash & (t->nold - 1)];
    return &t->buckets[hash & (t->nbuckets - 1)];
}

static uint64_t hash_of(const struct restable *t, const char *name, size_t len)
{
    return util_hash(t->key, name, len);
}

void restable_scan_bucket(const struct restable *t, uint64_t cursor,
                          void (*fn)(struct resource *r, uint64_t hash, void *arg), void *arg)
{
    size_t b = cursor & (t->nbuckets - 1);
    if (t->old != NULL && (b & (t->nold - 1)) >= t->moved) {
        /* Not moved yet: the old bucket holds this bucket's share and its sibling's. */
        for (struct resource *r = t->old[b & (t->nold - 1)]; r != NULL; r = r->next) {
            uint64_t h = hash_of(t, r->name, r->name_len);
            if ((h & (t->nbuckets - 1)) == b)
                fn(r, h, arg);
        }
        return;
    }
    for (struct resource *r = t->buckets[b]; r != NULL; r = r->next)
        fn(r, hash_of(t, r->name, r->name_len), arg);
}

static uint64_t reverse_bits(uint64_t v)
{
    v = ((v >> 1) & 0x5555555555555555u) | ((v & 0x5555555555555555u) << 1);
    v = ((v >> 2) & 0x3333333333333333u) | ((v & 0x3333333333333333u) << 2);
    v = ((v >> 4) & 0x0f0f0f0f0f0f0f0fu) | ((v & 0x0f0f0f0f0f0f0f0fu) << 4);
    v = ((v >> 8) & 0x00ff00ff00ff00ffu) | ((v & 0x00ff00ff00ff00ffu) << 8);
    v = ((v >> 16) & 0x0000ffff0000ffffu) | ((v & 0x0000ffff0000ffffu) << 16);
    return (v >> 32) | (v << 32);
}

uint64_t restable_scan_next(const struct restable *t, uint64_t cursor)
{
    /*
     * Add one to the reversed index: the buckets a grown table split this
     * one into come right after it, and everything before the cursor stays
     * before it, whatever the table's size.
     */
    uint64_t v = cursor | ~(uint64_t)(t->nbuckets - 1);
    v = reverse_bits(v);
    v++;
    return reverse_bits(v);
}

uint64_t restable_buckets(const struct restable *t)
{
    return t->nbuckets;
}

/* Move up to RESTABLE_MOVE_STEP old buckets into the table. */
static void restable_move(struct restable *t)
{
    for (int i = 0; i < RESTABLE_MOVE_STEP && t->old != NULL; i++) {
        struct resource *r = t->old[t->moved], *next;
        for (; r != NULL; r = next) {
            next = r->next;
            size_t k = hash_of(t, r->name, r->name_len) & (t->nbuckets - 1);
            r->next = t->buckets[k];
            t->buckets[k] = r;
        }
        t->old[t->moved] = NULL;
        if (++t->moved == t->nold) {
            free(t->old);
            t->old = NULL;
        }
    }
}

static void restable_grow(struct restable *t)
{
    size_t n = t->nbuckets * 2;
    struct resource **b = calloc(n, sizeof *b);
    if (b == NULL)
        return; /* keep the longer chains; still correct */
    t->old = t->buckets;
    t->nold = t->nbuckets;
    t->moved = 0;
    t->buckets = b;
    t->nbuckets = n;
}

struct resource *resource_find(struct server *srv, const char *name, size_t len)
{
    struct restable *t = srv->resources;
    for (struct resource *r = *chain_of(t, hash_of(t, name, len)); r != NULL; r = r->next)
        if (r->name_len == len && memcmp(r->name, name, len) == 0)
            return r;
    return NULL;
}

size_t resource_fence_key(const struct resource *r, char *buf, size_t cap)
{
    return resource_subkey(r, RESOURCE_FENCE_SUFFIX, buf, cap);
}

size_t resource_subkey(const struct resource *r, const char *suffix, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "%s%s", r->key, suffix);
    return n < 0 ? 0 : (size_t)n;
}

/*
 * One allocation holds the struct, the key "PREFIX{name}" and the name, each
 * NUL-terminated: with a million locks held, every allocation saved is
 * 16 bytes or more per lock. The fence key is built when needed (acquires).
 */
struct resource *resource_get(struct server *srv, const char *name, size_t len)
{
    struct resource *r = resource_find(srv, name, len);
    if (r != NULL) {
        r->refs++;
        return r;
    }
    const char *prefix = srv->cfg->key_prefix;
    size_t key_len = strlen(prefix) + len + 2;
    r = calloc(1, sizeof *r + key_len + 1 + len + 1);
    if (r == NULL)
        return NULL;
    r->srv = srv;
    r->key = (char *)(r + 1);
    r->key_len = (size_t)snprintf(r->key, key_len + 1, "%s{%.*s}", prefix, (int)len, name);
    r->name = r->key + key_len + 1;
    memcpy(r->name, name, len);
    r->name[len] = '\0';
    r->name_len = len;
    r->route = rpool_route(srv->pool, r->key, r->key_len);
    TAILQ_INIT(&r->waiters);
    LIST_INIT(&r->shared);
    r->refs = 1;

    struct restable *t = srv->resources;
    restable_move(t);
    if (t->old == NULL && t->count >= t->nbuckets)
        restable_grow(t);
    struct resource **chain = chain_of(t, hash_of(t, name, len));
    r->next = *chain;
    *chain = r;
    t->count++;
    return r;
}

void resource_ref(struct resource *r)
{
    r->refs++;
}

void resource_unref(struct resource *r)
{
    if (r == NULL || --r->refs > 0)
        return;
    struct restable *t = r->srv->resources;
    restable_move(t);
    struct resource **pp = chain_of(t, hash_of(t, r->name, r->name_len));
    while (*pp != r)
        pp = &(*pp)->next;
    *pp = r->next;
    t->count--;
    if (r->wake_ev != NULL)
        event_free(r->wake_ev);
    free(r);
}
