/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * holder.c — the Holder of a refused or timed-out Acquire (holder.h).
 *
 * Kept apart from lock.c, which decides the refusals: this only describes
 * what stands in the way, from the resource's leases here or from the
 * request's latest busy answer, so the answer's shape is read in one place.
 */
#include "holder.h"

#include "lease.h"
#include "reply.h"
#include "request.h"
#include "resource.h"
#include "session.h"

void holder_seen(struct request *req, long long pttl, int held_by, int64_t now)
{
    req->busy_until_ms = pttl >= 0 ? now + pttl : -1;
    req->busy_by = (uint8_t)held_by;
}

Rlock__V1__Holder *holder_of_lease(Rlock__V1__Holder *h, const struct lease *l, uint32_t holders,
                                   int64_t now)
{
    rlock__v1__holder__init(h);
    h->here = 1;
    h->session_id = (char *)l->sess->id;
    h->client_name = (char *)l->sess->name;
    h->owner = l->owner;
    h->mode = l->shared && l->limit == 0 ? RLOCK__V1__LOCK_MODE__MODE_SHARED
                                         : RLOCK__V1__LOCK_MODE__MODE_EXCLUSIVE;
    h->limit = l->limit;
    h->permits = l->permits;
    h->since_ms = util_wall_of_ms(l->granted_ms);
    h->holders = holders;
    h->ttl_left_ms = lease_valid_ms(l, now);
    return h;
}

Rlock__V1__Holder *holder_fill(Rlock__V1__Holder *h, const struct resource *res,
                               const struct request *req, int64_t now)
{
    if (res->holder != NULL)
        return holder_of_lease(h, res->holder, 1, now);
    if (res->nshared > 0)
        return holder_of_lease(h, LIST_FIRST(&res->shared), res->nshared, now);
    if (req == NULL || req->busy_until_ms == 0)
        req = TAILQ_FIRST(&res->waiters);
    if (req == NULL || req->busy_until_ms == 0)
        return NULL;
    rlock__v1__holder__init(h);
    h->foreign = req->busy_by == REPLY_HELD_BY_FOREIGN;
    int64_t left = req->busy_until_ms - now;
    if (req->busy_until_ms > 0 && left > 0)
        h->ttl_left_ms = left < UINT32_MAX ? (uint32_t)left : UINT32_MAX;
    return h;
}
