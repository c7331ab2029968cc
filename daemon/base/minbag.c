/* SPDX-License-Identifier: BSD-3-Clause */
/* minbag.c — see minbag.h. */
#include "minbag.h"

#include <stdlib.h>

#define MINBAG_EMPTY INT64_MIN
/* The table's first size, and the largest minbag_clear keeps (4 KiB of slots). */
#define MINBAG_CAP_MIN 16u
#define MINBAG_CAP_KEEP 256u

void minbag_init(struct minbag *m)
{
    m->slot = NULL;
    m->cap = m->used = 0;
    lheap_init(&m->order);
}

void minbag_free(struct minbag *m)
{
    free(m->slot);
    lheap_free(&m->order);
    minbag_init(m);
}

void minbag_clear(struct minbag *m)
{
    if (m->cap > MINBAG_CAP_KEEP || m->order.cap > MINBAG_CAP_KEEP) {
        minbag_free(m);
        return;
    }
    for (uint32_t i = 0; i < m->cap; i++)
        m->slot[i].key = MINBAG_EMPTY;
    m->used = 0;
    m->order.n = 0;
}

static uint32_t home(const struct minbag *m, int64_t key)
{
    return MINBAG_HOME(m, key);
}

/* key's slot, or the free slot where it would go. cap > used. */
static struct minbag_slot *probe(const struct minbag *m, int64_t key)
{
    uint32_t i = home(m, key);
    while (m->slot[i].key != key && m->slot[i].key != MINBAG_EMPTY)
        i = (i + 1) & (m->cap - 1);
    return &m->slot[i];
}

/* The table at cap slots (a power of two above used). 0, or -1 when out of memory. */
static int resize(struct minbag *m, uint32_t cap)
{
    struct minbag_slot *slot = malloc((size_t)cap * sizeof *slot);
    if (slot == NULL)
        return -1;
    for (uint32_t i = 0; i < cap; i++)
        slot[i].key = MINBAG_EMPTY;
    struct minbag old = *m;
    m->slot = slot;
    m->cap = cap;
    for (uint32_t i = 0; i < old.cap; i++)
        if (old.slot[i].key != MINBAG_EMPTY)
            *probe(m, old.slot[i].key) = old.slot[i];
    free(old.slot);
    return 0;
}

int minbag_add(struct minbag *m, int64_t key)
{
    /* At most 3/4 full: a probe stays short. */
    if ((uint64_t)(m->used + 1) * 4 > (uint64_t)m->cap * 3) {
        uint32_t cap = m->cap > 0 ? m->cap * 2 : MINBAG_CAP_MIN;
        if (cap < m->cap || resize(m, cap) != 0)
            return -1;
    }
    struct minbag_slot *s = probe(m, key);
    if (s->key == MINBAG_EMPTY) {
        if (lheap_push(&m->order, key, NULL) != 0)
            return -1;
        s->key = key;
        s->count = 0;
        m->used++;
    }
    s->count++;
    return 0;
}

void minbag_remove(struct minbag *m, int64_t key)
{
    struct minbag_slot *s = probe(m, key);
    if (s->key == key && s->count > 0)
        s->count--;
}

uint32_t minbag_count(const struct minbag *m, int64_t key)
{
    if (m->cap == 0)
        return 0;
    const struct minbag_slot *s = probe(m, key);
    return s->key == key ? s->count : 0;
}

/*
 * Free slot i, shifting back the slots after it that probed past it (Knuth's
 * algorithm R), so that no search stops early at the hole.
 */
static void slot_delete(struct minbag *m, uint32_t i)
{
    uint32_t mask = m->cap - 1, j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (m->slot[j].key == MINBAG_EMPTY)
            break;
        uint32_t h = home(m, m->slot[j].key);
        /* Slot j may move to i unless its home lies cyclically in (i, j]. */
        int stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
        if (!stays) {
            m->slot[i] = m->slot[j];
            i = j;
        }
    }
    m->slot[i].key = MINBAG_EMPTY;
    m->used--;
}

int minbag_min(struct minbag *m, uint32_t budget, int64_t *out)
{
    const struct lheap_entry *top;
    while ((top = lheap_top(&m->order)) != NULL) {
        struct minbag_slot *s = probe(m, top->at);
        if (s->count > 0 || budget == 0) {
            *out = top->at;
            return 1;
        }
        budget--;
        slot_delete(m, (uint32_t)(s - m->slot));
        lheap_pop(&m->order);
    }
    return 0;
}
