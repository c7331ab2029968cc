/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * minbag.h — a multiset of int64 keys that answers its least key.
 *
 * A count per distinct key in an open-addressing table (linear probing,
 * deletion by backward shift: no tombstones), and the distinct keys in a
 * min-heap (lheap.h). Adding and removing one occurrence of a key already
 * present touches one slot of the table; a key's first occurrence also
 * pushes it on the heap. A key whose count drops to 0 stays on the heap and
 * in the table until it reaches the top, where minbag_min drops it: so the
 * heap's top is always at or below the least key present, and minbag_min
 * drops at most `budget` such keys per call (a bounded cost per question).
 *
 * For orders of many objects over few distinct keys: a session's watchdog
 * leases by the 64 ms bucket their validity ends in (validity.h). Moving an
 * object from one key to another touches the bag only, never the objects
 * ordered before or after it.
 */
#ifndef RLOCKD_MINBAG_H
#define RLOCKD_MINBAG_H

#include <stdint.h>

#include "lheap.h"

struct minbag_slot {
    int64_t key; /* MINBAG_EMPTY when the slot is free */
    uint32_t count;
};

struct minbag {
    struct minbag_slot *slot;
    uint32_t cap;  /* a power of two, or 0 before the first add */
    uint32_t used; /* slots holding a key (its count may be 0) */
    struct lheap order; /* the keys of the used slots, each once */
};

/* An empty bag (no allocation until the first add). */
void minbag_init(struct minbag *m);
/* Free its memory; it is empty and usable again after. */
void minbag_free(struct minbag *m);
/* Empty it, keeping its arrays when they are small (no allocation for the next add). */
void minbag_clear(struct minbag *m);
/* One more occurrence of key. 0, or -1 when out of memory (nothing changed). */
int minbag_add(struct minbag *m, int64_t key) __attribute__((warn_unused_result));
/* One occurrence of key less; key must be present. */
void minbag_remove(struct minbag *m, int64_t key);
/*
 * The least key present into *out: 1, or 0 when the bag is empty. Drops at
 * most budget keys whose count is 0 from the top first; when that budget runs
 * out, *out is the heap's top, a lower bound of the least key present.
 */
int minbag_min(struct minbag *m, uint32_t budget, int64_t *out);
/* key's home slot: Fibonacci hashing (keys are consecutive numbers, and the high
 * bits of the product spread them over the table). m->cap > 0. */
#define MINBAG_HOME(m, key) \
    ((uint32_t)(((uint64_t)(key) * UINT64_C(0x9E3779B97F4A7C15)) >> 32) & ((m)->cap - 1))
/* Start loading key's home slot into the cache (a hint: it changes nothing). */
static inline void minbag_prefetch(const struct minbag *m, int64_t key)
{
    if (m->cap > 0)
        __builtin_prefetch(&m->slot[MINBAG_HOME(m, key)]);
}
/* How many occurrences key has (0 when absent). */
uint32_t minbag_count(const struct minbag *m, int64_t key);
/* Distinct keys kept (those with count 0 not yet dropped included). */
static inline uint32_t minbag_keys(const struct minbag *m)
{
    return m->used;
}

#endif
