/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * twheel.c — see twheel.h.
 *
 * Invariant: a node is in a slot exactly when its time is after the wheel's
 * present (w->now), and on the due list otherwise. The present moves on only
 * slot by slot, taking the nodes of each slot whose time it reaches onto the
 * due list; the nodes left in that slot are a whole turn or more away.
 */
#include "twheel.h"

#include <stdlib.h>

#define MASK ((uint64_t)TWHEEL_SLOTS - 1)
#define WORDS ((size_t)TWHEEL_SLOTS / 64)

static size_t slot_of(int64_t at)
{
    return (size_t)((uint64_t)at & MASK);
}

int twheel_init(struct twheel *w, int64_t now)
{
    w->slot = calloc((size_t)TWHEEL_SLOTS, sizeof *w->slot);
    w->bits = calloc(WORDS, sizeof *w->bits);
    w->due = NULL;
    w->now = now;
    w->hint = INT64_MAX;
    w->n = 0;
    if (w->slot == NULL || w->bits == NULL) {
        free(w->slot);
        free(w->bits);
        w->slot = NULL;
        w->bits = NULL;
        return -1;
    }
    /* A write to each page now (calloc's fresh pages are not resident yet): see twheel.h. */
    volatile char *page = (volatile char *)w->slot;
    for (size_t off = 0; off < (size_t)TWHEEL_SLOTS * sizeof *w->slot; off += 4096)
        page[off] = 0;
    return 0;
}

static void disarm_list(struct twheel_node *node)
{
    while (node != NULL) {
        struct twheel_node *next = node->next;
        node->next = NULL;
        node->pprev = NULL;
        node = next;
    }
}

void twheel_free(struct twheel *w)
{
    if (w->slot != NULL)
        for (size_t i = 0; i < (size_t)TWHEEL_SLOTS; i++)
            disarm_list(w->slot[i]);
    disarm_list(w->due);
    free(w->slot);
    free(w->bits);
    w->slot = NULL;
    w->bits = NULL;
    w->due = NULL;
    w->n = 0;
}

static void push(struct twheel_node **head, struct twheel_node *node)
{
    node->next = *head;
    if (*head != NULL)
        (*head)->pprev = &node->next;
    node->pprev = head;
    *head = node;
}

static void unlink_node(struct twheel *w, struct twheel_node *node)
{
    if (node->next != NULL)
        node->next->pprev = node->pprev;
    *node->pprev = node->next;
    if (node->at > w->now) {
        size_t i = slot_of(node->at);
        if (w->slot[i] == NULL)
            w->bits[i / 64] &= ~((uint64_t)1 << (i % 64));
    }
    node->next = NULL;
    node->pprev = NULL;
    w->n--;
}

void twheel_remove(struct twheel *w, struct twheel_node *node)
{
    if (twheel_armed(node))
        unlink_node(w, node);
}

void twheel_set(struct twheel *w, struct twheel_node *node, int64_t at)
{
    twheel_remove(w, node);
    node->at = at;
    w->n++;
    if (at <= w->now) {
        push(&w->due, node);
        return;
    }
    size_t i = slot_of(at);
    push(&w->slot[i], node);
    w->bits[i / 64] |= (uint64_t)1 << (i % 64);
    if (at < w->hint)
        w->hint = at;
}

/* The first time in [from, to] (to - from < TWHEEL_SLOTS) whose slot is not empty, or -1. */
static int64_t scan(const struct twheel *w, int64_t from, int64_t to)
{
    int64_t t = from;
    while (t <= to) {
        size_t i = slot_of(t);
        uint64_t word = w->bits[i / 64] >> (i % 64);
        if (word != 0) {
            int64_t found = t + __builtin_ctzll(word);
            return found <= to ? found : -1;
        }
        t += (int64_t)(64 - i % 64);
    }
    return -1;
}

/* The present moves to t, whose slot is not empty: its nodes due by t go on the due list. */
static void reach(struct twheel *w, int64_t t)
{
    w->now = t;
    size_t i = slot_of(t);
    struct twheel_node *node = w->slot[i];
    while (node != NULL) {
        struct twheel_node *next = node->next;
        if (node->at <= t) {
            if (node->next != NULL)
                node->next->pprev = node->pprev;
            *node->pprev = node->next;
            push(&w->due, node);
        }
        node = next;
    }
    if (w->slot[i] == NULL)
        w->bits[i / 64] &= ~((uint64_t)1 << (i % 64));
}

struct twheel_node *twheel_due(struct twheel *w, int64_t now)
{
    while (w->due == NULL && w->now < now) {
        /* At most one turn is looked at: a slot empty over a turn is empty. */
        int64_t to = now - w->now > TWHEEL_SLOTS ? w->now + TWHEEL_SLOTS : now;
        int64_t t = scan(w, w->now + 1, to);
        if (t < 0)
            w->now = now; /* no slot holds a node due by now */
        else
            reach(w, t);
    }
    return w->due;
}

int64_t twheel_next(struct twheel *w)
{
    if (w->due != NULL)
        return w->now;
    if (w->n == 0)
        return -1;
    if (w->hint <= w->now || w->hint == INT64_MAX)
        w->hint = scan(w, w->now + 1, w->now + TWHEEL_SLOTS);
    return w->hint;
}
