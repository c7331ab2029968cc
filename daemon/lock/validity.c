/* SPDX-License-Identifier: BSD-3-Clause */
/* validity.c — see validity.h. */
#include "validity.h"

#include "lease.h"
#include "lheap.h"
#include "session.h"

/* Stale tops corrected after a renewal: more than the one stale entry it makes. */
#define VALIDITY_FIX_RAISED 2
/* At most this many per keepalive (a loop turn's share); the answer is a lower bound anyway. */
#define VALIDITY_FIX_ASKED 4096
/* Dead entries are filtered out once there are this many and no fewer than the living. */
#define VALIDITY_DEAD_MIN 64

static int64_t valid_key(const struct lease *l)
{
    return l->valid_until_ms - LEASE_MARGIN_MS(l->ttl_ms);
}

void validity_add(struct lease *l)
{
    struct session *s = l->sess;
    if (!l->watchdog || s == NULL || l->forgotten)
        return;
    if (lheap_push(&s->valid_heap, valid_key(l), l) != 0) {
        s->valid_heap_broken = 1;
        return;
    }
    lease_ref(l);
    l->in_validity = 1;
}

/* Drop the dead entries at the top and correct up to budget stale keys there. */
static void fix_top(struct session *s, uint32_t budget)
{
    struct lheap_entry *top;
    while (budget > 0 && (top = lheap_top(&s->valid_heap)) != NULL) {
        struct lease *l = top->obj;
        if (l->forgotten) {
            lheap_pop(&s->valid_heap);
            s->valid_dead--;
            l->in_validity = 0;
            lease_unref(l);
            continue;
        }
        int64_t key = valid_key(l);
        if (top->at >= key)
            return; /* its own: the minimum */
        lheap_raise_top(&s->valid_heap, key);
        budget--;
    }
}

void validity_raised(struct lease *l)
{
    if (l->in_validity && l->sess != NULL)
        fix_top(l->sess, VALIDITY_FIX_RAISED);
}

void validity_forgotten(struct session *s)
{
    s->valid_dead++;
    struct lheap *h = &s->valid_heap;
    if (s->valid_dead < VALIDITY_DEAD_MIN || s->valid_dead < h->n - s->valid_dead)
        return;
    uint32_t kept = 0;
    for (uint32_t i = 0; i < h->n; i++) {
        struct lease *l = h->a[i].obj;
        if (!l->forgotten) {
            h->a[kept++] = h->a[i];
            continue;
        }
        l->in_validity = 0;
        lease_unref(l);
    }
    h->n = kept;
    s->valid_dead = 0;
    lheap_heapify(h);
}

void validity_drain(struct session *s)
{
    struct lheap_entry *top;
    while ((top = lheap_top(&s->valid_heap)) != NULL) {
        struct lease *l = top->obj;
        lheap_pop(&s->valid_heap);
        l->in_validity = 0;
        lease_unref(l);
    }
    s->valid_dead = 0;
}

uint32_t validity_session_ms(struct session *s, int64_t from_ms)
{
    if (!s->valid_heap_broken) {
        fix_top(s, VALIDITY_FIX_ASKED);
        const struct lheap_entry *top = lheap_top(&s->valid_heap);
        int64_t left = top != NULL ? top->at - from_ms : 0;
        return left <= 0 ? 0 : left > UINT32_MAX ? UINT32_MAX : (uint32_t)left;
    }
    uint32_t min = 0;
    int any = 0;
    const struct lease *l;
    TAILQ_FOREACH(l, &s->leases, sess_link) {
        if (!l->watchdog)
            continue;
        uint32_t v = lease_valid_ms(l, from_ms);
        if (!any || v < min)
            min = v;
        any = 1;
    }
    return min;
}
