/*
 * resource.c — chained hash table of resources, growing by doubling, with a
 * cursor scan for the admin listings.
 */
#include "resource.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "config.h"
#include "redis_pool.h"

struct restable {
    uint8_t key[UTIL_HASH_KEY_BYTES];
    struct resource **buckets;
    size_t nbuckets; /* power of two */
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
    free(t->buckets);
    free(t);
}

uint64_t restable_count(const struct restable *t)
{
    return t->count;
}

static size_t bucket_of(const struct restable *t, const char *name, size_t len)
{
    return (size_t)util_hash(t->key, name, len) & (t->nbuckets - 1);
}

void restable_scan_bucket(const struct restable *t, uint64_t cursor,
                          void (*fn)(struct resource *r, uint64_t hash, void *arg), void *arg)
{
    for (struct resource *r = t->buckets[cursor & (t->nbuckets - 1)]; r != NULL; r = r->next)
        fn(r, util_hash(t->key, r->name, r->name_len), arg);
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

static void restable_grow(struct restable *t)
{
    size_t n = t->nbuckets * 2;
    struct resource **b = calloc(n, sizeof *b);
    if (b == NULL)
        return; /* keep the longer chains; still correct */
    for (size_t i = 0; i < t->nbuckets; i++) {
        struct resource *r = t->buckets[i], *next;
        for (; r != NULL; r = next) {
            next = r->next;
            size_t k = (size_t)util_hash(t->key, r->name, r->name_len) & (n - 1);
            r->next = b[k];
            b[k] = r;
        }
    }
    free(t->buckets);
    t->buckets = b;
    t->nbuckets = n;
}

struct resource *resource_find(struct server *srv, const char *name, size_t len)
{
    struct restable *t = srv->resources;
    for (struct resource *r = t->buckets[bucket_of(t, name, len)]; r != NULL; r = r->next)
        if (r->name_len == len && memcmp(r->name, name, len) == 0)
            return r;
    return NULL;
}

size_t resource_fence_key(const struct resource *r, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "%s" RESOURCE_FENCE_SUFFIX, r->key);
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
    r->refs = 1;

    struct restable *t = srv->resources;
    if (t->count >= t->nbuckets)
        restable_grow(t);
    size_t b = bucket_of(t, name, len);
    r->next = t->buckets[b];
    t->buckets[b] = r;
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
    struct resource **pp = &t->buckets[bucket_of(t, r->name, r->name_len)];
    while (*pp != r)
        pp = &(*pp)->next;
    *pp = r->next;
    t->count--;
    if (r->wake_ev != NULL)
        event_free(r->wake_ev);
    free(r);
}
