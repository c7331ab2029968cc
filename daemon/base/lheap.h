/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lheap.h — a 4-ary min-heap of (time, object) pairs that knows nothing of
 * its objects: no position is written back into them.
 *
 * For orders whose keys are allowed to go stale low. A session's validity
 * heap (lease.c) is one: a renewal only ever raises a lease's validity, so
 * the heap's key stays a lower bound and is corrected when the entry comes
 * to the top. Every move is then in this array only; theap, which keeps each
 * node's position in the node, writes into another object at every level of
 * a move — a cache miss apiece, and a million renewals every ten seconds.
 * Removing an entry from the middle is not offered: its owner marks it dead
 * and drops it at the top, or filters the array (lheap_heapify after).
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
/* Give the top entry a later time (not earlier: that would need no move) and restore order. */
void lheap_raise_top(struct lheap *h, int64_t at);
/* Remove the top entry. */
void lheap_pop(struct lheap *h);
/* Restore the heap order after the caller edited the array (a filter). O(n). */
void lheap_heapify(struct lheap *h);

#endif
