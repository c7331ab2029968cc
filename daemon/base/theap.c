/* SPDX-License-Identifier: BSD-3-Clause */
/* theap.c — see theap.h. */
#include "theap.h"

#include <stdlib.h>

void theap_init(struct theap *h)
{
    h->a = NULL;
    h->n = h->cap = 0;
}

void theap_free(struct theap *h)
{
    for (size_t i = 0; i < h->n; i++)
        h->a[i].node->idx = 0;
    free(h->a);
    theap_init(h);
}

#define ARITY 4

static void put(struct theap *h, size_t i, struct theap_node *node)
{
    h->a[i].at = node->at;
    h->a[i].node = node;
    node->idx = i + 1;
}

static void sift_up(struct theap *h, size_t i)
{
    struct theap_node *node = h->a[i].node;
    int64_t at = node->at;
    while (i > 0) {
        size_t parent = (i - 1) / ARITY;
        if (h->a[parent].at <= at)
            break;
        put(h, i, h->a[parent].node);
        i = parent;
    }
    put(h, i, node);
}

static void sift_down(struct theap *h, size_t i)
{
    struct theap_node *node = h->a[i].node;
    int64_t at = node->at;
    for (;;) {
        size_t first = ARITY * i + 1, best = i;
        int64_t best_at = at;
        size_t end = first + ARITY < h->n ? first + ARITY : h->n;
        for (size_t c = first; c < end; c++) {
            if (h->a[c].at < best_at) {
                best = c;
                best_at = h->a[c].at;
            }
        }
        if (best == i)
            break;
        put(h, i, h->a[best].node);
        i = best;
    }
    put(h, i, node);
}

int theap_set(struct theap *h, struct theap_node *node, int64_t at)
{
    if (node->idx != 0) {
        int64_t old = node->at;
        node->at = at;
        h->a[node->idx - 1].at = at;
        if (at < old)
            sift_up(h, node->idx - 1);
        else if (at > old)
            sift_down(h, node->idx - 1);
        return 0;
    }
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 256;
        struct theap_slot *a = realloc(h->a, cap * sizeof *a);
        if (a == NULL)
            return -1;
        h->a = a;
        h->cap = cap;
    }
    node->at = at;
    put(h, h->n++, node);
    sift_up(h, h->n - 1);
    return 0;
}

void theap_remove(struct theap *h, struct theap_node *node)
{
    if (node->idx == 0)
        return;
    size_t i = node->idx - 1;
    node->idx = 0;
    struct theap_node *last = h->a[--h->n].node;
    if (last == node)
        return;
    put(h, i, last);
    sift_up(h, i);
    sift_down(h, last->idx - 1);
}

struct theap_node *theap_first(const struct theap *h)
{
    return h->n > 0 ? h->a[0].node : NULL;
}
