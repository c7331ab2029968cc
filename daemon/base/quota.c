/* SPDX-License-Identifier: BSD-3-Clause */
/* quota.c — see quota.h. */
#include "quota.h"

#include <stdlib.h>
#include <string.h>

/* The fingerprint is already a keyed hash: its first bytes pick the chain. */
static struct quota **chain_of(struct quota_table *t, const uint8_t fp[16])
{
    uint32_t h;
    memcpy(&h, fp, sizeof h);
    return &t->slot[h % QUOTA_SLOTS];
}

struct quota *quota_find(struct quota_table *t, const uint8_t fp[16])
{
    for (struct quota *q = *chain_of(t, fp); q != NULL; q = q->next)
        if (memcmp(q->fp, fp, 16) == 0)
            return q;
    return NULL;
}

struct quota *quota_get(struct quota_table *t, const uint8_t fp[16])
{
    struct quota *q = quota_find(t, fp);
    if (q != NULL)
        return quota_ref(q);
    if ((q = calloc(1, sizeof *q)) == NULL)
        return NULL;
    memcpy(q->fp, fp, 16);
    q->refs = 1;
    struct quota **head = chain_of(t, fp);
    q->next = *head;
    *head = q;
    t->n++;
    return q;
}

struct quota *quota_ref(struct quota *q)
{
    if (q != NULL)
        q->refs++;
    return q;
}

void quota_put(struct quota_table *t, struct quota *q)
{
    if (q == NULL || --q->refs > 0)
        return;
    struct quota **p = chain_of(t, q->fp);
    while (*p != q)
        p = &(*p)->next;
    *p = q->next;
    t->n--;
    free(q);
}

const char *quota_check(const struct quota *q, int waits)
{
    if (q == NULL)
        return NULL;
    if (q->max_locks != 0 && q->locks >= q->max_locks)
        return "max_locks";
    if (waits && q->max_waiters != 0 && q->waiters >= q->max_waiters)
        return "max_waiters";
    return NULL;
}
