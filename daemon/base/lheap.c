/* SPDX-License-Identifier: BSD-3-Clause */
/* lheap.c — see lheap.h. */
#include "lheap.h"

#include <stdlib.h>

#define ARITY 4

void lheap_init(struct lheap *h)
{
    h->a = NULL;
    h->n = h->cap = 0;
}

void lheap_free(struct lheap *h)
{
    free(h->a);
    lheap_init(h);
}

static void sift_down(struct lheap *h, uint32_t i)
{
    struct lheap_entry e = h->a[i];
    for (;;) {
        uint64_t first = (uint64_t)ARITY * i + 1;
        if (first >= h->n)
            break;
        uint64_t end = first + ARITY < h->n ? first + ARITY : h->n;
        uint32_t best = (uint32_t)first;
        for (uint64_t c = first + 1; c < end; c++)
            if (h->a[c].at < h->a[best].at)
                best = (uint32_t)c;
        if (h->a[best].at >= e.at)
            break;
        h->a[i] = h->a[best];
        i = best;
    }
    h->a[i] = e;
}

int lheap_push(struct lheap *h, int64_t at, void *obj)
{
    if (h->n == h->cap) {
        uint32_t cap = h->cap > 0 ? h->cap * 2 : 8;
        if (cap < h->cap)
            return -1;
        struct lheap_entry *a = realloc(h->a, (size_t)cap * sizeof *a);
        if (a == NULL)
            return -1;
        h->a = a;
        h->cap = cap;
    }
    uint32_t i = h->n++;
    while (i > 0) {
        uint32_t parent = (i - 1) / ARITY;
        if (h->a[parent].at <= at)
            break;
        h->a[i] = h->a[parent];
        i = parent;
    }
    h->a[i] = (struct lheap_entry){.at = at, .obj = obj};
    return 0;
}

void lheap_pop(struct lheap *h)
{
    if (--h->n > 0) {
        h->a[0] = h->a[h->n];
        sift_down(h, 0);
    }
}
