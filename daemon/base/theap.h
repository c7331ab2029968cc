/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * theap.h — a 4-ary min-heap of timers, keyed by a time in milliseconds.
 *
 * The node is embedded in the object it times (a lease, a cleanup entry), so
 * arming, moving and cancelling cost O(log n) with no allocation but the
 * heap's own array, and the cost of the timers that fire follows the work
 * due, not the number of objects. Times are util_now_ms() values (int64 ms
 * on CLOCK_BOOTTIME): they do not wrap.
 *
 * Four children per node, each slot holding its key next to its node: a
 * level is one cache line of four keys. Lease timers left it for the timing
 * wheel (twheel.h): at a million leases each renewal moved its lease down
 * ten levels, each move writing the index of another lease (a cache miss
 * apiece); a session's validity order left it too (minbag.h). It keeps the
 * cleanup retries.
 */
#ifndef RLOCKD_THEAP_H
#define RLOCKD_THEAP_H

#include <stddef.h>
#include <stdint.h>

struct theap_node {
    int64_t at;  /* when it is due */
    size_t idx;  /* position in the heap + 1; 0 = not armed */
};

struct theap_slot {
    int64_t at; /* == node->at, kept here so a comparison reads no node */
    struct theap_node *node;
};

struct theap {
    struct theap_slot *a;
    size_t n, cap;
};

/* An empty heap (no allocation until the first push). */
void theap_init(struct theap *h);
void theap_free(struct theap *h);
/* Arm node at `at`, or move it there if armed. 0, or -1 when out of memory (not armed). */
int theap_set(struct theap *h, struct theap_node *node, int64_t at) __attribute__((warn_unused_result));
/* Disarm node (no-op when not armed). */
void theap_remove(struct theap *h, struct theap_node *node);
/* The earliest node, or NULL. */
struct theap_node *theap_first(const struct theap *h);
/* The i-th node of the array (0 <= i < h->n), in no particular order: for walks. */
static inline struct theap_node *theap_at(const struct theap *h, size_t i)
{
    return h->a[i].node;
}
/* 1 when node is armed. */
static inline int theap_armed(const struct theap_node *node)
{
    return node->idx != 0;
}

#endif
