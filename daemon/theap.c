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
        h->a[i]->idx = 0;
    free(h->a);
    theap_init(h);
}

static void put(struct theap *h, size_t i, struct theap_node *node)
{
    h->a[i] = node;
    node->idx = i + 1;
}

static void sift_up(struct theap *h, size_t i)
{
    struct theap_node *node = h->a[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (h->a[parent]->at <= node->at)
            break;
        put(h, i, h->a[parent]);
        i = parent;
    }
    put(h, i, node);
}

static void sift_down(struct theap *h, size_t i)
{
    struct theap_node *node = h->a[i];
    for (;;) {
        size_t left = 2 * i + 1, best = i;
        int64_t at = node->at;
        if (left < h->n && h->a[left]->at < at) {
            best = left;
            at = h->a[left]->at;
        }
        if (left + 1 < h->n && h->a[left + 1]->at < at)
            best = left + 1;
        if (best == i)
            break;
        put(h, i, h->a[best]);
        i = best;
    }
    put(h, i, node);
}

int theap_set(struct theap *h, struct theap_node *node, int64_t at)
{
    if (node->idx != 0) {
        int64_t old = node->at;
        node->at = at;
        if (at < old)
            sift_up(h, node->idx - 1);
        else if (at > old)
            sift_down(h, node->idx - 1);
        return 0;
    }
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 256;
        struct theap_node **a = realloc(h->a, cap * sizeof *a);
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
    struct theap_node *last = h->a[--h->n];
    if (last == node)
        return;
    put(h, i, last);
    sift_up(h, i);
    sift_down(h, last->idx - 1);
}

struct theap_node *theap_first(const struct theap *h)
{
    return h->n > 0 ? h->a[0] : NULL;
}
