/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * admin_top.c — TopResources: the most contended resources, from the
 * summary of contention.h, in the order asked.
 *
 * The counters (at most metrics.top_resources) are sorted on each request:
 * O(K log K), a few milliseconds at the largest K the configuration allows,
 * and nothing at all for the resources outside the summary. The reply is
 * bounded like a listing page (ADMIN_LIMIT_MAX entries, admin_page_bytes).
 */
#include "admin.h"

#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "contention.h"
#include "holder.h"
#include "resource.h"
#include "server.h"
#include "session.h"
#include "topk.h"

#define TOP_LIMIT_DEFAULT 10
/* A repeated field's tag and length in front of each entry, at most. */
#define ENTRY_OVERHEAD 6

/* The key of e in the order asked, for the sort (ties: by weight). */
struct admin_ranked {
    uint64_t key, then;
    struct topk_entry *e;
    const struct resource *res; /* NULL: not known to this daemon now */
};

static uint64_t order_key(Rlock__V1__TopOrder order, const struct topk_entry *e,
                          const struct resource *res)
{
    const struct contention_stats *st = contention_of((struct topk_entry *)e);
    switch (order) {
    case RLOCK__V1__TOP_ORDER__TOP_ORDER_CONTENDED:
        return st->contended;
    case RLOCK__V1__TOP_ORDER__TOP_ORDER_TIMEOUTS:
        return st->timeouts;
    case RLOCK__V1__TOP_ORDER__TOP_ORDER_HOLD:
        return st->hold_us;
    case RLOCK__V1__TOP_ORDER__TOP_ORDER_WAITERS:
        /* Queued now first, then the most queued at once. */
        return (uint64_t)(res != NULL ? res->nwaiters : 0) << 32 | st->queue_max;
    case RLOCK__V1__TOP_ORDER__TOP_ORDER_LOSSES:
        return st->losses;
    case RLOCK__V1__TOP_ORDER__TOP_ORDER_WAIT:
    default:
        return e->count;
    }
}

static int ranked_cmp(const void *a, const void *b)
{
    const struct admin_ranked *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? 1 : -1;
    if (x->then != y->then)
        return x->then < y->then ? 1 : -1;
    return strcmp(x->e->name, y->e->name);
}

static void fill(Rlock__V1__ResourceStats *out, const struct admin_ranked *r, Rlock__V1__Holder *h,
                 int64_t now)
{
    const struct contention_stats *st = contention_of(r->e);
    out->resource = r->e->name;
    out->weight = r->e->count;
    out->weight_error = r->e->error;
    out->contended = st->contended;
    out->grants = st->grants;
    out->timeouts = st->timeouts;
    out->refusals = st->refusals;
    out->cancels = st->cancels;
    out->wait_total_us = st->wait_us;
    out->wait_p50_us = contention_quantile(st->wait_hist, st->contended, 0.5, st->wait_max_us);
    out->wait_p99_us = contention_quantile(st->wait_hist, st->contended, 0.99, st->wait_max_us);
    out->wait_max_us = st->wait_max_us;
    out->holds = st->holds;
    out->hold_total_us = st->hold_us;
    out->hold_p50_us = contention_quantile(st->hold_hist, st->holds, 0.5, st->hold_max_us);
    out->hold_p99_us = contention_quantile(st->hold_hist, st->holds, 0.99, st->hold_max_us);
    out->hold_max_us = st->hold_max_us;
    out->losses = st->losses;
    out->waiters = r->res != NULL ? r->res->nwaiters : 0;
    out->waiters_max = out->waiters > st->queue_max ? out->waiters : st->queue_max;
    if (r->res != NULL && RESOURCE_HELD_HERE(r->res))
        out->holder = holder_fill(h, r->res, NULL, now);
}

void admin_top_free(struct admin_top *t)
{
    free(t->all);
    free(t->stats);
    free(t->ptrs);
    free(t->holders);
    memset(t, 0, sizeof *t);
}

int admin_top_build(struct server *srv, Rlock__V1__TopOrder order, uint32_t limit, size_t budget,
                    struct admin_top *t)
{
    Rlock__V1__TopResourcesReply *reply = &t->reply;
    memset(t, 0, sizeof *t);
    rlock__v1__top_resources_reply__init(reply);
    uint32_t n = srv->top != NULL ? topk_size(srv->top) : 0;
    if (limit > n)
        limit = n;
    t->all = n > 0 ? calloc(n, sizeof *t->all) : NULL;
    t->stats = limit > 0 ? calloc(limit, sizeof *t->stats) : NULL;
    t->ptrs = limit > 0 ? calloc(limit, sizeof *t->ptrs) : NULL;
    t->holders = limit > 0 ? calloc(limit, sizeof *t->holders) : NULL;
    if (limit > 0 && (t->all == NULL || t->stats == NULL || t->ptrs == NULL || t->holders == NULL)) {
        admin_top_free(t);
        return -1;
    }
    struct admin_ranked *all = t->all;
    for (uint32_t i = 0; i < n; i++) {
        struct topk_entry *e = topk_at(srv->top, i);
        all[i].e = e;
        all[i].res = resource_find(srv, e->name, e->name_len);
        all[i].key = order_key(order, e, all[i].res);
        all[i].then = e->count;
    }
    if (n > 1)
        qsort(all, n, sizeof *all, ranked_cmp);
    int64_t now = util_now_ms();
    size_t bytes = 0;
    for (uint32_t i = 0; i < limit; i++) {
        rlock__v1__resource_stats__init(&t->stats[i]);
        rlock__v1__holder__init(&t->holders[i]);
        fill(&t->stats[i], &all[i], &t->holders[i], now);
        bytes += rlock__v1__resource_stats__get_packed_size(&t->stats[i]) + ENTRY_OVERHEAD;
        if (bytes > budget && i > 0)
            break; /* the first always fits: a name is at most max_resource_bytes */
        t->ptrs[i] = &t->stats[i];
        reply->n_resources = i + 1;
    }
    reply->resources = t->ptrs;
    reply->capacity = srv->top != NULL ? topk_capacity(srv->top) : 0;
    reply->followed = n;
    reply->total_weight = srv->top != NULL ? topk_total(srv->top) : 0;
    reply->error_bound = reply->capacity > 0 ? reply->total_weight / reply->capacity : 0;
    return 0;
}

void admin_top_resources(struct session *s, uint64_t id, const Rlock__V1__TopResources *q)
{
    struct admin_top t;
    uint32_t limit = q->limit == 0 ? TOP_LIMIT_DEFAULT : admin_limit(q->limit);
    if (admin_top_build(s->srv, q->order, limit, admin_page_bytes(s), &t) != 0) {
        session_respond_error(s, id, RLOCK__V1__STATUS__STATUS_INTERNAL, "out of memory");
        return;
    }
    session_respond(s, id, RLOCK__V1__STATUS__STATUS_OK, NULL,
                    RLOCK__V1__RESPONSE__BODY_TOP_RESOURCES, &t.reply);
    admin_top_free(&t);
}
