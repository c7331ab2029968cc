/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topk.c — weighted Space-Saving (topk.h): K counters in one array, a binary
 * min-heap of their indexes by count (the counter to take over is the top),
 * and an open-addressing table from names to counters (linear probing,
 * deletion by backward shift, as minbag.c).
 */
#include "topk.h"

#include <stdlib.h>
#include <string.h>

#define TOPK_NONE UINT32_MAX

struct topk {
    unsigned char *entries; /* k counters of `stride` bytes */
    size_t stride;
    size_t payload_size;
    uint32_t k, n;
    uint32_t *heap;  /* counter indexes, least count at 0 */
    uint32_t *slot;  /* counter index, or TOPK_NONE */
    uint32_t cap;    /* table slots: a power of two >= 2k */
    uint64_t total;
    size_t name_bytes;
    uint8_t key[UTIL_HASH_KEY_BYTES];
};

struct topk_entry *topk_at(const struct topk *t, uint32_t i)
{
    return (struct topk_entry *)(void *)(t->entries + (size_t)i * t->stride);
}

static uint64_t entry_count(const struct topk *t, uint32_t heap_pos)
{
    return topk_at(t, t->heap[heap_pos])->count;
}

static void heap_place(struct topk *t, uint32_t pos, uint32_t idx)
{
    t->heap[pos] = idx;
    topk_at(t, idx)->heap_pos = pos;
}

static void sift_up(struct topk *t, uint32_t pos)
{
    uint32_t idx = t->heap[pos];
    uint64_t c = topk_at(t, idx)->count;
    while (pos > 0) {
        uint32_t parent = (pos - 1) / 2;
        if (entry_count(t, parent) <= c)
            break;
        heap_place(t, pos, t->heap[parent]);
        pos = parent;
    }
    heap_place(t, pos, idx);
}

/* The counter at pos grew: move it down below the smaller of its children. */
static void sift_down(struct topk *t, uint32_t pos)
{
    uint32_t idx = t->heap[pos];
    uint64_t c = topk_at(t, idx)->count;
    for (;;) {
        uint32_t child = 2 * pos + 1;
        if (child >= t->n)
            break;
        if (child + 1 < t->n && entry_count(t, child + 1) < entry_count(t, child))
            child++;
        if (entry_count(t, child) >= c)
            break;
        heap_place(t, pos, t->heap[child]);
        pos = child;
    }
    heap_place(t, pos, idx);
}

static uint32_t home(const struct topk *t, uint64_t hash)
{
    return (uint32_t)hash & (t->cap - 1);
}

/* The table slot holding name's counter, or the free slot where it would go. */
static uint32_t table_probe(const struct topk *t, uint64_t hash, const char *name, size_t len)
{
    uint32_t i = home(t, hash);
    while (t->slot[i] != TOPK_NONE) {
        const struct topk_entry *e = topk_at(t, t->slot[i]);
        if (e->hash == hash && e->name_len == len && memcmp(e->name, name, len) == 0)
            return i;
        i = (i + 1) & (t->cap - 1);
    }
    return i;
}

/* Take the slot i out of the table, shifting back the run after it (no tombstones). */
static void table_delete(struct topk *t, uint32_t i)
{
    uint32_t mask = t->cap - 1;
    uint32_t hole = i;
    for (uint32_t j = (i + 1) & mask; t->slot[j] != TOPK_NONE; j = (j + 1) & mask) {
        uint32_t h = home(t, topk_at(t, t->slot[j])->hash);
        /* j's entry may move back to the hole if its home is not in (hole, j]. */
        if (((j - h) & mask) >= ((j - hole) & mask)) {
            t->slot[hole] = t->slot[j];
            hole = j;
        }
    }
    t->slot[hole] = TOPK_NONE;
}

struct topk *topk_new(uint32_t k, size_t payload_size, const uint8_t key[UTIL_HASH_KEY_BYTES])
{
    if (k == 0 || k > (UINT32_MAX >> 3))
        return NULL;
    struct topk *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    size_t align = _Alignof(struct topk_entry);
    t->stride = (sizeof(struct topk_entry) + payload_size + align - 1) / align * align;
    t->payload_size = payload_size;
    t->k = k;
    t->cap = 1;
    while (t->cap < 2 * k)
        t->cap <<= 1;
    t->entries = calloc(k, t->stride);
    t->heap = calloc(k, sizeof *t->heap);
    t->slot = malloc((size_t)t->cap * sizeof *t->slot);
    if (t->entries == NULL || t->heap == NULL || t->slot == NULL) {
        topk_free(t);
        return NULL;
    }
    memset(t->slot, 0xff, (size_t)t->cap * sizeof *t->slot); /* TOPK_NONE */
    memcpy(t->key, key, UTIL_HASH_KEY_BYTES);
    return t;
}

void topk_free(struct topk *t)
{
    if (t == NULL)
        return;
    for (uint32_t i = 0; t->entries != NULL && i < t->n; i++)
        free(topk_at(t, i)->name);
    free(t->entries);
    free(t->heap);
    free(t->slot);
    free(t);
}

struct topk_entry *topk_find(const struct topk *t, const char *name, size_t len)
{
    uint32_t i = table_probe(t, util_hash(t->key, name, len), name, len);
    return t->slot[i] == TOPK_NONE ? NULL : topk_at(t, t->slot[i]);
}

struct topk_entry *topk_add(struct topk *t, const char *name, size_t len, uint64_t weight)
{
    uint64_t hash = util_hash(t->key, name, len);
    uint32_t i = table_probe(t, hash, name, len);
    struct topk_entry *e;
    if (t->slot[i] != TOPK_NONE) {
        e = topk_at(t, t->slot[i]);
        e->count += weight;
        t->total += weight;
        sift_down(t, e->heap_pos);
        return e;
    }
    if (weight == 0 || len >= UINT32_MAX)
        return NULL;
    char *copy = malloc(len + 1);
    if (copy == NULL)
        return NULL;
    memcpy(copy, name, len);
    copy[len] = '\0';
    uint32_t idx;
    uint64_t base = 0;
    if (t->n < t->k) {
        idx = t->n++;
        e = topk_at(t, idx);
        e->heap_pos = idx;
        t->heap[idx] = idx;
    } else {
        /* Take over the least counter: its name leaves the table first (the probe
         * for the new name is redone: the shift may have moved its free slot). */
        idx = t->heap[0];
        e = topk_at(t, idx);
        table_delete(t, table_probe(t, e->hash, e->name, e->name_len));
        t->name_bytes -= (size_t)e->name_len + 1;
        free(e->name);
        base = e->count;
        i = table_probe(t, hash, name, len);
    }
    e->name = copy;
    e->name_len = (uint32_t)len;
    t->name_bytes += len + 1;
    e->hash = hash;
    e->count = base + weight;
    e->error = base;
    memset(e->payload, 0, t->payload_size);
    t->slot[i] = idx;
    t->total += weight;
    sift_up(t, e->heap_pos); /* a new counter, last in the heap */
    sift_down(t, e->heap_pos); /* a counter taken over, at the top */
    return e;
}

uint32_t topk_size(const struct topk *t)
{
    return t->n;
}

uint32_t topk_capacity(const struct topk *t)
{
    return t->k;
}

uint64_t topk_total(const struct topk *t)
{
    return t->total;
}

uint64_t topk_min(const struct topk *t)
{
    return t->n < t->k ? 0 : entry_count(t, 0);
}

size_t topk_bytes(const struct topk *t)
{
    return sizeof *t + (size_t)t->k * (t->stride + sizeof *t->heap) +
           (size_t)t->cap * sizeof *t->slot + t->name_bytes;
}
