/* SPDX-License-Identifier: BSD-3-Clause */
/* validity.c — see validity.h. */
#include "validity.h"

#include <stdlib.h>
#include <sys/queue.h>

#include "lease.h"
#include "lheap.h"
#include "session.h"

/* Stale heap tops corrected after a confirmation: more than the one stale entry it makes. */
#define VALIDITY_FIX_RAISED 2
/* At most this many per keepalive (a loop turn's share); the answer is a lower bound anyway. */
#define VALIDITY_FIX_ASKED 4096
/* The heap is filtered once it holds this many entries and more than twice its live leases. */
#define VALIDITY_HEAP_MIN 64

/* The watchdog leases of one session and one ttl, by the end of their validity. */
struct vlist {
    LIST_ENTRY(vlist) link; /* on session.valid_lists */
    TAILQ_HEAD(valid_leases, lease) leases;
    uint32_t ttl_ms;
    uint32_t n;
};

static int64_t valid_key(const struct lease *l)
{
    return l->valid_until_ms - LEASE_MARGIN_MS(l->ttl_ms);
}

/* --- the lists --------------------------------------------------------------- */

/* s's list of ttl_ms, or NULL (a session uses few ttls: one, mostly). */
static struct vlist *list_find(const struct session *s, uint32_t ttl_ms)
{
    struct vlist *v;
    LIST_FOREACH(v, &s->valid_lists, link) {
        if (v->ttl_ms == ttl_ms)
            return v;
    }
    return NULL;
}

/* s's list of ttl_ms, made when there is none; NULL when out of memory. */
static struct vlist *list_of(struct session *s, uint32_t ttl_ms)
{
    struct vlist *v = list_find(s, ttl_ms);
    if (v != NULL)
        return v;
    v = calloc(1, sizeof *v);
    if (v == NULL)
        return NULL;
    TAILQ_INIT(&v->leases);
    v->ttl_ms = ttl_ms;
    LIST_INSERT_HEAD(&s->valid_lists, v, link);
    return v;
}

/* An empty list is freed, unless it is the session's only one: a session that takes
 * and lets go of one lock at a time would otherwise allocate a list per acquire. */
static void list_drop_if_empty(struct session *s, struct vlist *v)
{
    if (v->n != 0 || (LIST_FIRST(&s->valid_lists) == v && LIST_NEXT(v, link) == NULL))
        return;
    LIST_REMOVE(v, link);
    free(v);
}

/*
 * l (not on v) into v at its place: before the head when it ends first, else
 * after the last lease that ends no later, found walking back from the tail.
 * One list holds one ttl, so validity ends order the keys. -1 when the place
 * is more than VALIDITY_WALK_MAX leases back (l is not added).
 */
static int list_insert(struct vlist *v, struct lease *l)
{
    struct lease *first = TAILQ_FIRST(&v->leases);
    if (first == NULL || l->valid_until_ms <= first->valid_until_ms) {
        TAILQ_INSERT_HEAD(&v->leases, l, valid_link);
    } else {
        struct lease *p = TAILQ_LAST(&v->leases, valid_leases);
        for (unsigned walked = 0; p->valid_until_ms > l->valid_until_ms; walked++) {
            if (walked == VALIDITY_WALK_MAX)
                return -1;
            p = TAILQ_PREV(p, valid_leases, valid_link); /* not NULL: first ends before l */
        }
        TAILQ_INSERT_AFTER(&v->leases, p, l, valid_link);
    }
    v->n++;
    l->valid_in = VALID_LIST;
    return 0;
}

/* A listed lease is on the list of its ttl: validity_ttl_change keeps it so. */
static void list_remove(struct session *s, struct lease *l)
{
    struct vlist *v = list_find(s, l->ttl_ms);
    TAILQ_REMOVE(&v->leases, l, valid_link);
    v->n--;
    l->valid_in = VALID_NONE;
    list_drop_if_empty(s, v);
}

/* --- the heap of exceptions ---------------------------------------------------- */

static int entry_live(const struct lease *l)
{
    return l->valid_in == VALID_HEAP && !l->forgotten;
}

static void heap_push(struct session *s, struct lease *l)
{
    if (lheap_push(&s->valid_heap, valid_key(l), l) != 0) {
        s->valid_broken = 1; /* out of memory: validity_session_ms walks instead */
        return;
    }
    lease_ref(l);
    l->valid_in = VALID_HEAP;
    s->valid_heap_live++;
}

/*
 * Keep only the live entries, one per lease, at its own key. A lease that left
 * the heap and came back has two; the older one's key may be above the lease's
 * own (an Extend to a longer ttl takes a larger margin off), and only the newer
 * one was a bound. O(n), once per n/2 leavings.
 */
static void heap_filter(struct session *s)
{
    struct lheap *h = &s->valid_heap;
    uint32_t kept = 0;
    for (uint32_t i = 0; i < h->n; i++) {
        struct lease *l = h->a[i].obj;
        if (entry_live(l) && !l->valid_seen) {
            l->valid_seen = 1;
            h->a[kept++] = (struct lheap_entry){.at = valid_key(l), .obj = l};
        } else {
            lease_unref(l);
        }
    }
    h->n = kept;
    for (uint32_t i = 0; i < h->n; i++)
        ((struct lease *)h->a[i].obj)->valid_seen = 0;
    lheap_heapify(h);
}

/* A lease left the heap: its entries are dead from now on. */
static void heap_leave(struct session *s, struct lease *l)
{
    l->valid_in = VALID_NONE;
    s->valid_heap_live--;
    if (s->valid_heap.n >= VALIDITY_HEAP_MIN && s->valid_heap.n > 2 * s->valid_heap_live)
        heap_filter(s);
}

/* Drop the dead entries at the top and correct up to budget stale keys there. */
static void fix_top(struct session *s, uint32_t budget)
{
    struct lheap_entry *top;
    while (budget > 0 && (top = lheap_top(&s->valid_heap)) != NULL) {
        struct lease *l = top->obj;
        if (!entry_live(l)) {
            lheap_pop(&s->valid_heap);
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

/* --- a lease's place ------------------------------------------------------------- */

/* l (in neither) into the list of its ttl, or the heap when its place there is too far back. */
static void place(struct session *s, struct lease *l)
{
    struct vlist *v = list_of(s, l->ttl_ms);
    if (v != NULL && list_insert(v, l) == 0)
        return;
    if (v != NULL)
        list_drop_if_empty(s, v);
    heap_push(s, l);
}

static void unplace(struct session *s, struct lease *l)
{
    if (l->valid_in == VALID_LIST)
        list_remove(s, l);
    else if (l->valid_in == VALID_HEAP)
        heap_leave(s, l);
}

void validity_add(struct lease *l)
{
    struct session *s = l->sess;
    if (!l->watchdog || s == NULL || l->forgotten)
        return;
    place(s, l);
}

void validity_raised(struct lease *l)
{
    struct session *s = l->sess;
    if (s == NULL || l->valid_in == VALID_NONE)
        return;
    if (l->valid_in == VALID_LIST) {
        struct lease *next = TAILQ_NEXT(l, valid_link);
        if (next == NULL || next->valid_until_ms >= l->valid_until_ms)
            return; /* still in order: the common case of the last lease renewed */
        struct vlist *v = list_find(s, l->ttl_ms);
        TAILQ_REMOVE(&v->leases, l, valid_link);
        v->n--;
        if (list_insert(v, l) == 0)
            return; /* at its place, usually the tail */
        l->valid_in = VALID_NONE;
        list_drop_if_empty(s, v);
        heap_push(s, l);
        return;
    }
    unplace(s, l);
    place(s, l);
    fix_top(s, VALIDITY_FIX_RAISED);
}

void validity_ttl_change(struct lease *l, uint32_t ttl_ms)
{
    struct session *s = l->sess;
    int placed = s != NULL && l->valid_in != VALID_NONE;
    if (placed)
        unplace(s, l);
    l->ttl_ms = ttl_ms;
    if (placed)
        place(s, l);
}

void validity_forget(struct lease *l)
{
    if (l->sess != NULL)
        unplace(l->sess, l);
}

void validity_drain(struct session *s)
{
    struct lheap_entry *top;
    while ((top = lheap_top(&s->valid_heap)) != NULL) {
        struct lease *l = top->obj;
        lheap_pop(&s->valid_heap);
        lease_unref(l);
    }
    s->valid_heap_live = 0;
    struct vlist *v;
    while ((v = LIST_FIRST(&s->valid_lists)) != NULL) {
        struct lease *l;
        while ((l = TAILQ_FIRST(&v->leases)) != NULL) {
            TAILQ_REMOVE(&v->leases, l, valid_link);
            l->valid_in = VALID_NONE;
        }
        LIST_REMOVE(v, link);
        free(v);
    }
}

uint32_t validity_lists(const struct session *s)
{
    uint32_t n = 0;
    const struct vlist *v;
    LIST_FOREACH(v, &s->valid_lists, link)
        n++;
    return n;
}

uint32_t validity_session_ms(struct session *s, int64_t from_ms)
{
    int64_t min = INT64_MAX;
    if (!s->valid_broken) {
        struct vlist *v;
        LIST_FOREACH(v, &s->valid_lists, link) {
            const struct lease *first = TAILQ_FIRST(&v->leases);
            if (first != NULL && valid_key(first) < min)
                min = valid_key(first);
        }
        fix_top(s, VALIDITY_FIX_ASKED);
        const struct lheap_entry *top = lheap_top(&s->valid_heap);
        if (top != NULL && top->at < min)
            min = top->at;
    } else {
        const struct lease *l;
        TAILQ_FOREACH(l, &s->leases, sess_link) {
            if (l->watchdog && valid_key(l) < min)
                min = valid_key(l);
        }
    }
    if (min == INT64_MAX)
        return 0;
    int64_t left = min - from_ms;
    return left <= 0 ? 0 : left > UINT32_MAX ? UINT32_MAX : (uint32_t)left;
}
