/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lheap.h — a 4-ary min-heap of (time, object) pairs that knows nothing of
 * its objects: no position is written back into them, so every move is in
 * this array only (theap, which keeps each node's position in the node,
 * writes into another object at every level of a move).
 *
 * Removing an entry from the middle is not offered: its owner marks it dead
 * and drops it when it reaches the top (minbag.h does so with empty keys).
 */
#ifndef RLOCKD_LHEAP_H
#define RLOCKD_LHEAP_H

#include <stddef.h>
#include <stdint.h>

struct lheap_entry {
    int64_t at;
    void *obj;
};

struct lheap {
    struct lheap_entry *a;
    uint32_t n, cap;
};

/* An empty heap (no allocation until the first push). */
void lheap_init(struct lheap *h);
/* Free the array (the objects are the caller's). */
void lheap_free(struct lheap *h);
/* Add obj at `at`. 0, or -1 when out of memory (not added). */
int lheap_push(struct lheap *h, int64_t at, void *obj) __attribute__((warn_unused_result));
/* The entry with the smallest time, or NULL when empty. */
static inline struct lheap_entry *lheap_top(const struct lheap *h)
{
    return h->n > 0 ? &h->a[0] : NULL;
}
/* Remove the top entry. */
void lheap_pop(struct lheap *h);

#endif
