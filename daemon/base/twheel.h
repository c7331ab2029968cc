/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * twheel.h — a timing wheel: timers keyed by a time in milliseconds, where
 * arming, moving and cancelling cost O(1) whatever the number of timers.
 *
 * Why not the heap (theap.h) for every lock: with a million leases, each
 * renewal moves its lease from the top of the heap to near the bottom, ten
 * levels of cache misses, and those moves were half of rlockd's CPU while it
 * held a million locks. Here a timer is on the list of the slot its time
 * falls in: one slot per millisecond, TWHEEL_SLOTS of them (16.4 s: a
 * renewal of the default 30 s lease is 10 s away) in a circle, a bit per
 * slot saying whether it is empty. The slots' 128 kB are touched when the
 * wheel is made: filled as time goes round, they grew the daemon's memory
 * for a whole turn after its start, which is what a leak looks like.
 *
 * A timer further away than the circle stays in its slot and is passed over
 * while its time has not come (its slot comes round every 16.4 s): its cost
 * is one look per turn, not a walk of every timer. Time moves on only in
 * twheel_due, slot by slot (the bitmap skips empty runs); a timer armed at or
 * before the wheel's present is due at once. Times are util_now_ms() values
 * (int64 ms on CLOCK_BOOTTIME): they do not wrap.
 *
 * The node is embedded in the object it times. Like theap, a due node stays
 * armed until its owner moves or removes it.
 */
#ifndef RLOCKD_TWHEEL_H
#define RLOCKD_TWHEEL_H

#include <stddef.h>
#include <stdint.h>

#define TWHEEL_BITS 14
#define TWHEEL_SLOTS ((int64_t)1 << TWHEEL_BITS)

struct twheel_node {
    int64_t at;                  /* when it is due */
    struct twheel_node *next;    /* in its slot, or on the due list */
    struct twheel_node **pprev;  /* what points at it; NULL = not armed */
};

struct twheel {
    struct twheel_node **slot; /* TWHEEL_SLOTS list heads */
    uint64_t *bits;            /* bit t % TWHEEL_SLOTS set: that slot's list is not empty */
    struct twheel_node *due;   /* armed nodes whose time has come */
    int64_t now;               /* every slot up to this time has been looked at */
    int64_t hint;              /* no node in a slot is due before this (may be stale-early) */
    size_t n;                  /* armed nodes */
};

/* An empty wheel whose present is `now`. 0, or -1 when out of memory. */
int twheel_init(struct twheel *w, int64_t now) __attribute__((warn_unused_result));
/* Disarm every node and free the wheel. */
void twheel_free(struct twheel *w);
/* Arm node at `at`, or move it there if armed. Never fails (no allocation). */
void twheel_set(struct twheel *w, struct twheel_node *node, int64_t at);
/* Disarm node (no-op when not armed). */
void twheel_remove(struct twheel *w, struct twheel_node *node);
/*
 * A node whose time is at or before `now`, still armed (its owner moves or
 * removes it), or NULL when none is. Moves the wheel's present on to `now`.
 */
struct twheel_node *twheel_due(struct twheel *w, int64_t now);
/*
 * A time no later than the earliest armed node's (the wheel's present when
 * one is due already), or -1 when none is armed. It may be early, after a
 * removal: waking then finds nothing due and asks again.
 */
int64_t twheel_next(struct twheel *w);
/* 1 when node is armed. */
static inline int twheel_armed(const struct twheel_node *node)
{
    return node->pprev != NULL;
}

#endif
