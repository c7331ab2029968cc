/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lease.c — see lease.h. The bookkeeping of one held lock: its validity and
 * the longest its key may live, its place in the timing wheel, and how it is
 * lost or forgotten.
 */
#include "lease.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "contention.h"
#include "lock.h"
#include "log.h"
#include "seal.h"
#include "resource.h"
#include "server.h"
#include "session.h"
#include "tombstone.h"
#include "validity.h"
#include "watchdog.h"

/* A million of them: see the struct's comment (glibc's 224-byte chunk). */
static_assert(sizeof(struct lease) <= 216, "struct lease outgrew its malloc chunk");

/*
 * How long past its longest possible expiry a forgotten key is still
 * deleted by token while Redis stays unreachable: a command stuck in a
 * stalled Redis may run when it resumes.
 */
#define LEASE_CLEANUP_GRACE_MS 600000

void lease_ref(struct lease *l)
{
    l->refs++;
}

void lease_unref(struct lease *l)
{
    if (--l->refs > 0)
        return;
    resource_unref(l->res);
    free(l->extra);
    free(l);
}

/*
 * Redis just granted g on res, so the places of local leases that grant
 * excludes are gone (deleted behind our back, expired earlier than our clock
 * said, lost with a Redis restart): an exclusive grant found the key free, a
 * shared one found no exclusive token there. Two holds that exclude each
 * other are never held here at once.
 */
void lease_lose_excluded(struct resource *res, int shared, uint32_t limit, const char *why)
{
    if (res->holder != NULL)
        lease_lose(res->holder, RLOCK__V1__LOST_REASON__LOST_MISSING, why);
    /* From the first each time: a loss may change the list. A resource is one kind at a
     * time, so a grant of one group kind excludes places of another. */
    for (;;) {
        struct lease *l;
        LIST_FOREACH(l, &res->shared, res_link)
            if (!shared || l->limit != limit)
                break;
        if (l == NULL)
            return;
        lease_lose(l, RLOCK__V1__LOST_REASON__LOST_MISSING, why);
    }
}

/* The daemon's count of l's kind goes up or down by one (metrics). */
static void lease_count_kind(struct server *srv, const struct lease *l, int delta)
{
    if (l->leader)
        srv->nleases_leader += (uint64_t)(int64_t)delta;
    if (!l->shared)
        return;
    if (l->limit > 0)
        l->res->permits_here += (uint32_t)(int32_t)(delta * (int32_t)l->permits);
    uint64_t *n = l->limit > 0 ? &srv->nleases_permits : &srv->nleases_shared;
    *n += (uint64_t)(int64_t)delta;
}

size_t lease_marker(uint32_t limit, char out[LEASE_MARKER_MAX])
{
    int n = limit == 0 ? snprintf(out, LEASE_MARKER_MAX, "group:rw")
                       : snprintf(out, LEASE_MARKER_MAX, "group:sem:%u", limit);
    return n < 0 ? 0 : (size_t)n;
}

struct lease *lease_new(struct session *s, struct resource *res, const struct lease_grant *g)
{
    lease_lose_excluded(res, g->shared, g->limit, "the key was found free by another acquire");
    assert(res->holder == NULL && (g->shared || res->nshared == 0));
    struct lease *l = calloc(1, sizeof *l);
    if (l == NULL)
        return NULL;
    int64_t now = util_now_ms();
    l->sess = s;
    l->res = res;
    resource_ref(res);
    memcpy(l->token, g->token, sizeof l->token);
    l->fence = g->fence;
    l->owner = g->owner;
    l->ttl_ms = g->ttl_ms;
    l->holds = g->holds != 0 ? g->holds : 1;
    l->watchdog = g->watchdog;
    l->lock_delay_ms = g->lock_delay_ms;
    l->shared = g->shared != 0;
    l->leader = g->leader != 0;
    l->limit = g->limit;
    l->permits = g->permits;
    l->refs = 1;
    l->granted_ms = now;
    uint32_t key_ttl = g->key_ttl_ms != 0 ? g->key_ttl_ms : g->ttl_ms;
    l->valid_until_ms = g->sent_ms + key_ttl;
    l->max_expiry_ms = now + key_ttl + LEASE_DRIFT_MS(key_ttl);
    l->next_renew_ms = g->sent_ms + key_ttl / 3;
    size_t trace_len = g->trace != NULL ? strlen(g->trace) : 0;
    if (g->max_hold_wall_ms != 0 || g->max_hold_ms != 0 || trace_len > 0) {
        l->extra = calloc(1, sizeof *l->extra + trace_len + 1);
        if (l->extra == NULL) {
            resource_unref(res);
            free(l);
            return NULL;
        }
        if (trace_len > 0)
            memcpy(l->extra->trace, g->trace, trace_len + 1);
        if (g->max_hold_wall_ms != 0) {
            /* Another daemon's deadline, on the wall clock: what is left of it from now
             * (at least 1: 0 means none). */
            uint64_t wall = util_wall_ms();
            l->extra->max_hold_wall_ms = g->max_hold_wall_ms;
            l->extra->max_hold_at_ms =
                now + (g->max_hold_wall_ms > wall ? (int64_t)(g->max_hold_wall_ms - wall) : 0);
        } else if (g->max_hold_ms != 0) {
            l->extra->max_hold_at_ms = now + g->max_hold_ms;
            l->extra->max_hold_wall_ms = util_wall_ms() + g->max_hold_ms;
        }
    }
    TAILQ_INSERT_TAIL(&s->leases, l, sess_link);
    s->nleases++;
    if (s->quota != NULL) /* the session's account is fixed from its Hello to its end */
        s->quota->locks++;
    validity_add(l);
    s->srv->nleases++;
    lease_count_kind(s->srv, l, 1);
    if (l->shared) {
        LIST_INSERT_HEAD(&res->shared, l, res_link);
        res->nshared++;
    } else {
        res->holder = l;
    }
    lease_schedule(l);
    return l;
}

void lease_confirmed(struct lease *l, int64_t sent_ms, uint32_t ttl_ms)
{
    /* The key expires no sooner than sent + ttl (renew.lua never shortens it). */
    if (sent_ms + ttl_ms > l->valid_until_ms)
        validity_raise(l, sent_ms + ttl_ms);
    int64_t latest = util_now_ms() + ttl_ms + LEASE_DRIFT_MS(ttl_ms);
    if (latest > l->max_expiry_ms)
        l->max_expiry_ms = latest;
    l->next_renew_ms = sent_ms + l->ttl_ms / 3;
}

void lease_unconfirmed(struct lease *l, uint32_t ttl_ms)
{
    /* It may run any time the key still exists, and set ttl_ms from then. */
    l->max_expiry_ms += ttl_ms + LEASE_DRIFT_MS(ttl_ms);
}

int lease_expired(const struct lease *l, int64_t now)
{
    return now + LEASE_MARGIN_MS(l->ttl_ms) >= l->valid_until_ms;
}

void lease_lose_expired(struct lease *l, int64_t now)
{
    static const char why[] = "the lease ran out before a renew succeeded";
    int64_t late = now - (l->valid_until_ms - LEASE_MARGIN_MS(l->ttl_ms));
    if (late <= LEASE_LATENESS_MS) {
        lease_lose(l, RLOCK__V1__LOST_REASON__LOST_EXPIRED, why);
        return;
    }
    char buf[200];
    snprintf(buf, sizeof buf, "%s; noticed %lld ms after it was due, more than the %d ms the "
             "loss margin allows (the daemon was held up)", why, (long long)late,
             LEASE_LATENESS_MS);
    lease_lose(l, RLOCK__V1__LOST_REASON__LOST_EXPIRED, buf);
}

uint32_t lease_valid_ms(const struct lease *l, int64_t from_ms)
{
    int64_t left = l->valid_until_ms - LEASE_MARGIN_MS(l->ttl_ms) - from_ms;
    return left <= 0 ? 0 : left > UINT32_MAX ? UINT32_MAX : (uint32_t)left;
}

void lease_seal(const struct lease *l, char *out)
{
    const struct server *srv = l->res->srv;
    if (!srv->resume) {
        out[0] = '\0';
        return;
    }
    const struct seal_terms t = {
        .session_id = l->sess->id,
        .resource = l->res->name,
        .resource_len = l->res->name_len,
        .token = l->token,
        .fence = l->fence,
        .ttl_ms = l->ttl_ms,
        .watchdog = l->watchdog,
        .max_hold_until_ms = lease_max_hold_wall(l),
        .lock_delay_ms = l->lock_delay_ms,
    };
    seal_lock(&srv->resume_key, &t, out);
}

void lease_schedule(struct lease *l)
{
    struct server *srv = l->res->srv;
    if (l->forgotten) {
        twheel_remove(&srv->lease_timers, &l->timer);
        return;
    }
    int64_t at = l->valid_until_ms - LEASE_MARGIN_MS(l->ttl_ms);
    if (lease_max_hold_at(l) != 0 && lease_max_hold_at(l) < at)
        at = lease_max_hold_at(l);
    if ((l->watchdog || l->verify) && !l->renewing && l->next_renew_ms < at)
        at = l->next_renew_ms;
    twheel_set(&srv->lease_timers, &l->timer, at);
    watchdog_rearm(srv);
}

void lease_forget(struct lease *l)
{
    if (l->forgotten)
        return;
    l->forgotten = 1;
    contention_held(l->res->srv, l->res, (util_now_ms() - l->granted_ms) * 1000, l->lost);
    twheel_remove(&l->res->srv->lease_timers, &l->timer);
    TAILQ_REMOVE(&l->sess->leases, l, sess_link);
    l->sess->nleases--;
    if (l->sess->quota != NULL)
        l->sess->quota->locks--;
    l->res->srv->nleases--;
    lease_count_kind(l->res->srv, l, -1);
    if (l->shared) {
        LIST_REMOVE(l, res_link);
        l->res->nshared--;
    } else if (l->res->holder == l) {
        l->res->holder = NULL;
    }
    validity_forget(l);
    l->sess = NULL;
    lease_unref(l); /* a renew in flight may still hold it */
}

void lease_push_lost(struct session *s, const char *resource, const char *token, uint64_t fence,
                     Rlock__V1__LostReason reason, const char *why)
{
    struct server *srv = s->srv;
    Rlock__V1__LockLost lost = RLOCK__V1__LOCK_LOST__INIT;
    lost.resource = (char *)resource;
    lost.token = (char *)token;
    lost.fence = fence;
    lost.reason = reason;
    lost.message = (char *)why;
    Rlock__V1__Event ev = RLOCK__V1__EVENT__INIT;
    ev.body_case = RLOCK__V1__EVENT__BODY_LOCK_LOST;
    ev.lock_lost = &lost;
    session_push_event(s, &ev);
    srv->ctr.locks_lost++;
    if ((int)reason >= 0 && (int)reason < METRIC_REASONS)
        srv->mx.lost[reason]++;
}

void lease_lose(struct lease *l, Rlock__V1__LostReason reason, const char *why)
{
    if (l->forgotten)
        return;
    struct session *s = l->sess;
    struct resource *res = l->res;
    struct server *srv = l->res->srv;
    if (s->moved) {
        /* Its session went on elsewhere, whose daemon adopted the key (a new token): this
         * lease is only waiting to be let go of. Nobody to tell, no key of ours to touch. */
        resource_ref(res);
        lease_forget(l);
        lock_kick(res);
        resource_unref(res);
        return;
    }
    const char *trace = lease_trace(l);
    log_info("session %s (%s): lost lock %s (fence %llu): %s%s%s", s->id, s->peer, res->name,
             (unsigned long long)l->fence, why, trace != NULL ? "; trace " : "",
             trace != NULL ? trace : "");
    lease_push_lost(s, res->name, l->token, l->fence, reason, why);
    if (reason == RLOCK__V1__LOST_REASON__LOST_FORCED) {
        /*
         * An operator wants the lock free now. Its holder was just told; the
         * delete by token normally goes out before the next waiter's try, on
         * the same Redis connection, so that try finds the key gone (behind a
         * backlog of releases, the confirmed delete wakes the waiter again).
         */
        lock_release_token(srv, res, l->token, l->shared, l->max_expiry_ms);
    } else if (reason == RLOCK__V1__LOST_REASON__LOST_EXPIRED ||
               reason == RLOCK__V1__LOST_REASON__LOST_MAX_HOLD) {
        /*
         * The key may still hold our token, for longer than we believed if a
         * renew whose answer never came did run. Delete it by token, but not
         * before the validity its holder was promised is over.
         */
        cleanup_add(srv, res, l->token, l->shared, l->valid_until_ms,
                    l->max_expiry_ms + LEASE_CLEANUP_GRACE_MS);
        /*
         * MAX_HOLD comes while that promise runs (up to a ttl more). If Redis
         * lost the key since the last renew (a restart without persistence),
         * the next try would find it free: keep it taken till then. (EXPIRED
         * comes when the promise is over, bar the loss margin.)
         */
        if (reason == RLOCK__V1__LOST_REASON__LOST_MAX_HOLD)
            tombstone_swap(srv, res, l->token, l->valid_until_ms);
    } else if (reason == RLOCK__V1__LOST_REASON__LOST_MISSING) {
        /* Redis lost the key: keep the lock taken until the promise is over. */
        tombstone_set(srv, res, l->token, l->valid_until_ms);
    }
    resource_ref(res);
    l->lost = 1;
    lease_forget(l);
    lock_kick(res); /* the key may be free now, or will be at its expiry */
    resource_unref(res);
}
