/* SPDX-License-Identifier: BSD-3-Clause */
/* contention.c — see contention.h. */
#include "contention.h"

#include "config.h"
#include "counters.h"
#include "resource.h"
#include "server.h"
#include "topk.h"

int contention_start(struct server *srv)
{
    if (srv->cfg->top_resources == 0)
        return 0;
    srv->top = topk_new(srv->cfg->top_resources, sizeof(struct contention_stats), srv->hash_key);
    return srv->top != NULL ? 0 : -1;
}

void contention_stop(struct server *srv)
{
    topk_free(srv->top);
    srv->top = NULL;
}

struct contention_stats *contention_of(struct topk_entry *e)
{
    return (struct contention_stats *)(void *)e->payload;
}

unsigned contention_bucket(uint64_t us)
{
    unsigned b = us < 2 ? 0 : 63u - (unsigned)__builtin_clzll(us);
    return b < CONTENTION_BUCKETS ? b : CONTENTION_BUCKETS - 1;
}

static void hist_add(uint32_t hist[CONTENTION_BUCKETS], uint64_t us)
{
    uint32_t *c = &hist[contention_bucket(us)];
    if (*c < UINT32_MAX)
        (*c)++;
}

uint64_t contention_quantile(const uint32_t hist[CONTENTION_BUCKETS], uint64_t n, double q,
                             uint64_t max_us)
{
    if (n == 0)
        return 0;
    /* The rank of the quantile, 1-based: the smallest value with at least q * n at or below. */
    uint64_t rank = (uint64_t)(q * (double)n + 0.999999);
    if (rank < 1)
        rank = 1;
    uint64_t seen = 0;
    for (unsigned b = 0; b < CONTENTION_BUCKETS; b++) {
        seen += hist[b];
        if (seen >= rank) {
            uint64_t upper = b + 1 < 64 ? (UINT64_C(1) << (b + 1)) - 1 : UINT64_MAX;
            return upper < max_us ? upper : max_us;
        }
    }
    return max_us; /* the histogram saturated: the maximum is still exact */
}

static uint64_t positive(int64_t us)
{
    return us > 0 ? (uint64_t)us : 0;
}

void contention_began(struct server *srv, const struct resource *res)
{
    if (srv->top == NULL)
        return;
    struct topk_entry *e = topk_add(srv->top, res->name, res->name_len, 1);
    if (e != NULL && res->nwaiters > contention_of(e)->queue_max)
        contention_of(e)->queue_max = res->nwaiters;
}

void contention_waited(struct server *srv, const struct resource *res, int64_t wait_us,
                       enum contention_end end, int began)
{
    uint64_t us = positive(wait_us);
    counters_histogram_add(&srv->mx.lock_wait, counters_lock_time_bounds, us);
    if (srv->top == NULL)
        return;
    struct topk_entry *e = topk_add(srv->top, res->name, res->name_len, us + (began ? 0 : 1));
    if (e == NULL)
        return;
    struct contention_stats *st = contention_of(e);
    st->contended++;
    switch (end) {
    case CONTENTION_GRANTED:
        st->grants++;
        break;
    case CONTENTION_TIMEOUT:
        st->timeouts++;
        break;
    case CONTENTION_REFUSED:
        st->refusals++;
        break;
    case CONTENTION_CANCELLED:
        st->cancels++;
        break;
    }
    st->wait_us += us;
    if (us > st->wait_max_us)
        st->wait_max_us = us;
    hist_add(st->wait_hist, us);
    if (res->nwaiters > st->queue_max)
        st->queue_max = res->nwaiters;
}

void contention_held(struct server *srv, const struct resource *res, int64_t hold_us, int lost)
{
    uint64_t us = positive(hold_us);
    counters_histogram_add(&srv->mx.lock_hold, counters_lock_time_bounds, us);
    if (srv->top == NULL)
        return;
    struct topk_entry *e = topk_find(srv->top, res->name, res->name_len);
    if (e == NULL)
        return; /* nobody waited for it (or not enough to be followed) */
    struct contention_stats *st = contention_of(e);
    st->holds++;
    st->losses += lost != 0;
    st->hold_us += us;
    if (us > st->hold_max_us)
        st->hold_max_us = us;
    hist_add(st->hold_hist, us);
}

void contention_queued(struct server *srv, const struct resource *res)
{
    if (srv->top == NULL || res->nwaiters < 2)
        return; /* a lone waiter is counted when its wait ends */
    struct topk_entry *e = topk_find(srv->top, res->name, res->name_len);
    if (e != NULL && res->nwaiters > contention_of(e)->queue_max)
        contention_of(e)->queue_max = res->nwaiters;
}
