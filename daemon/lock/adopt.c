/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * adopt.c — Adopt: a resumed session takes over, on this daemon, a lock it
 * held on another one (docs/architecture.md, "Session resume").
 *
 * The claim is checked against its seal first: a client can adopt only a
 * lock its own session was granted, with the very terms it was granted
 * (fence, ttl, watchdog, max_hold deadline, lock delay). adopt.lua then swaps
 * the key's token for a new one of this daemon's, if the key still holds the
 * claimed one: from then on every write of the daemon the session left fails
 * its token compare. Nothing is granted anew: the fence, owner and hold count
 * carry over.
 *
 * An adopt whose answer never came may still run: its new token is deleted
 * (by token, retried until confirmed, as for an acquire whose outcome is
 * unknown) and the client told UNAVAILABLE; if it retries, it finds the key
 * gone or taken, and reports the lock lost. Never two holders.
 */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "lease.h"
#include "lock.h"
#include "log.h"
#include "pool.h"
#include "relq.h"
#include "reply.h"
#include "request.h"
#include "resource.h"
#include "scripts.h"
#include "seal.h"

/* The longest a key set now with ttl_ms may live (Redis's clock may be fast). */
static int64_t adopt_key_life_end(uint32_t ttl_ms)
{
    return util_now_ms() + ttl_ms + LEASE_DRIFT_MS(ttl_ms);
}

/*
 * Free the key adopt.lua may have given req's new token. The lock was held
 * before the move, and its holder may still be acting on it until it reads
 * a notice: the key is let go as at an unclean session end, behind a
 * tombstone for the lock's lock_delay, never freed at once.
 */
static void adopt_let_go(struct request *req, int64_t max_expiry_ms)
{
    relq_add(req->srv, req->res, req->token, 0, req->lock_delay_ms, max_expiry_ms);
    /* Whichever it was: a key, or a place among shared holders (adopt.lua moves both). */
    relq_add(req->srv, req->res, req->token, 1, req->lock_delay_ms, max_expiry_ms);
}

/* The lease res still has for the session's connection that moved away, with token. */
static struct lease *adopt_moved_lease(struct resource *res, const char *token)
{
    if (res->holder != NULL && res->holder->sess->moved)
        return res->holder;
    struct lease *l;
    LIST_FOREACH(l, &res->shared, res_link)
        if (l->sess->moved && strcmp(l->token, token) == 0)
            return l;
    return NULL;
}

static void adopt_reply_cb(const redisReply *reply, const char *err, void *arg)
{
    struct request *req = arg;
    struct resource *res = req->res;
    struct session *s = req->sess;
    long long pttl = 0;
    struct reply_place place;
    int v = reply_adopt_place(reply, &pttl, &place);
    if (v == REPLY_RENEW_UNKNOWN) {
        /* It may have run, or run later: nobody must be left holding the new token. */
        adopt_let_go(req, adopt_key_life_end(req->ttl_ms));
        if (s != NULL)
            session_respond_error(s, req->id, RLOCK__V1__STATUS__STATUS_UNAVAILABLE,
                                  reply == NULL ? err : "unexpected reply from Redis");
    } else if (s == NULL || s->state == SESSION_CLOSING) {
        /* The session ended while its adopt was in Redis (a client ends a session
         * it is still resuming without a Goodbye: an unclean end). */
        if (v == REPLY_RENEW_OK)
            adopt_let_go(req, adopt_key_life_end((uint32_t)pttl));
    } else if (v != REPLY_RENEW_OK) {
        const char *why = v == REPLY_RENEW_MISSING ? "the key is gone: the lock was lost before the resume"
                                                   : "the key holds another token: the lock was lost before the resume";
        log_info("session %s (%s): adopt of %s (fence %llu) refused: %s", s->id, s->peer,
                 res->name, (unsigned long long)req->fence, why);
        lease_push_lost(s, res->name, req->old_token, req->fence,
                        v == REPLY_RENEW_MISSING ? RLOCK__V1__LOST_REASON__LOST_MISSING
                                                 : RLOCK__V1__LOST_REASON__LOST_STOLEN,
                        why);
        session_respond_error(s, req->id, RLOCK__V1__STATUS__STATUS_NOT_HELD, why);
    } else if (util_now_ms() + LEASE_MARGIN_MS(req->ttl_ms) >= req->sent_ms + pttl) {
        /* Redis answered so late that the key may already have run out. */
        adopt_let_go(req, adopt_key_life_end((uint32_t)pttl));
        lease_push_lost(s, res->name, req->old_token, req->fence,
                        RLOCK__V1__LOST_REASON__LOST_EXPIRED, "redis answered the adopt too late");
        session_respond_error(s, req->id, RLOCK__V1__STATUS__STATUS_NOT_HELD,
                              "redis answered the adopt too late");
    } else {
        /* The same session's lease here from before its resume (a connection closed as moved,
         * its leases let go of over the next loop turns): it is this one now. */
        struct lease *before = adopt_moved_lease(res, req->old_token);
        if (before != NULL)
            lease_forget(before);
        struct lease_grant g = {
            .token = req->token,
            .fence = req->fence,
            .owner = req->owner,
            .ttl_ms = req->ttl_ms,
            .watchdog = req->watchdog,
            .sent_ms = req->sent_ms,
            .lock_delay_ms = req->lock_delay_ms,
            .holds = req->holds,
            .max_hold_wall_ms = req->max_hold_wall_ms,
            .key_ttl_ms = (uint32_t)pttl,
            .shared = place.group,
            .limit = place.limit,
            .permits = place.permits,
            .leader = place.leader,
        };
        struct lease *l = lease_new(s, res, &g);
        if (l == NULL) {
            adopt_let_go(req, adopt_key_life_end((uint32_t)pttl));
            session_respond_error(s, req->id, RLOCK__V1__STATUS__STATUS_INTERNAL, "out of memory");
        } else {
            s->srv->ctr.locks_adopted++;
            char seal[SEAL_TEXT_LEN + 1];
            lease_seal(l, seal);
            Rlock__V1__AdoptReply r = RLOCK__V1__ADOPT_REPLY__INIT;
            r.token = l->token;
            r.seal = seal;
            r.ttl_ms = l->ttl_ms;
            r.valid_ms = lease_valid_ms(l, req->arrival_ms);
            log_debug("session %s (%s): adopted %s (fence %llu)", s->id, s->peer, res->name,
                      (unsigned long long)l->fence);
            session_respond(s, req->id, RLOCK__V1__STATUS__STATUS_OK, NULL,
                            RLOCK__V1__RESPONSE__BODY_ADOPT, &r);
        }
    }
    lock_request_done(req);
}

/* What is wrong with claim a of session s before any state is touched; NULL if nothing. */
static const char *adopt_check(struct session *s, const Rlock__V1__Adopt *a,
                               Rlock__V1__Status *st)
{
    struct server *srv = s->srv;
    *st = RLOCK__V1__STATUS__STATUS_INVALID;
    if (!srv->resume)
        return "this daemon has no resume key: it cannot adopt locks";
    const char *bad = lock_check_resource(srv->cfg, a->resource);
    if (bad != NULL)
        return bad;
    char token[UTIL_UUID_LEN + 1];
    if (util_uuid_parse(a->token, token) != 0 || strcmp(token, a->token) != 0)
        return "token is not a token this service hands out (a lower-case UUID)";
    if (a->ttl_ms == 0)
        return "ttl_ms must be given";
    char expect[SEAL_TEXT_LEN + 1];
    const struct seal_terms t = {
        .session_id = s->id,
        .resource = a->resource,
        .resource_len = strlen(a->resource),
        .token = a->token,
        .fence = a->fence,
        .ttl_ms = a->ttl_ms,
        .watchdog = !a->watchdog_off,
        .max_hold_until_ms = a->max_hold_until_ms,
        .lock_delay_ms = a->lock_delay_ms,
    };
    seal_lock(&srv->resume_key, &t, expect);
    if (!seal_matches(a->seal, expect)) {
        srv->ctr.adopts_refused++;
        *st = RLOCK__V1__STATUS__STATUS_PERMISSION_DENIED;
        return "the seal does not match: not a lock of this session, or not its terms";
    }
    if (lock_session_lease(s, a->resource) != NULL)
        return "this session holds the lock already";
    if (s->nleases + s->nrequests >= srv->cfg->max_locks_per_session) {
        *st = RLOCK__V1__STATUS__STATUS_LIMIT_EXCEEDED;
        return "too many locks held or awaited by this session";
    }
    if (srv->nleases + srv->nacquires >= srv->cfg->max_locks) {
        *st = RLOCK__V1__STATUS__STATUS_LIMIT_EXCEEDED;
        return "too many locks held or awaited in this daemon (limits.max_locks)";
    }
    if (quota_check(s->quota, 0) != NULL) {
        *st = RLOCK__V1__STATUS__STATUS_LIMIT_EXCEEDED;
        return "quota of this session's auth token reached (max_locks)";
    }
    return NULL;
}

int lock_adopt(struct session *s, uint64_t id, const Rlock__V1__Adopt *a)
{
    struct server *srv = s->srv;
    Rlock__V1__Status st;
    const char *bad = adopt_check(s, a, &st);
    if (bad != NULL) {
        session_respond_error(s, id, st, bad);
        return 0;
    }
    if (a->max_hold_until_ms != 0 && a->max_hold_until_ms <= util_wall_ms()) {
        /* Held for its max_hold already: no longer renewed, by anyone. */
        lease_push_lost(s, a->resource, a->token, a->fence, RLOCK__V1__LOST_REASON__LOST_MAX_HOLD,
                        "max_hold passed before the resume");
        session_respond_error(s, id, RLOCK__V1__STATUS__STATUS_NOT_HELD,
                              "max_hold passed before the resume");
        return 0;
    }
    struct resource *res = resource_get(srv, a->resource, strlen(a->resource));
    if (res == NULL) {
        session_respond_error(s, id, RLOCK__V1__STATUS__STATUS_INTERNAL, "out of memory");
        return 0;
    }
    if (!rpool_route_ready(srv->pool, res->route)) {
        resource_unref(res);
        session_respond_error(s, id, RLOCK__V1__STATUS__STATUS_UNAVAILABLE, "redis unavailable");
        return 0;
    }
    struct request *req = request_new(srv, s, id, RLOCK__V1__REQUEST__BODY_ADOPT);
    if (req == NULL) {
        resource_unref(res);
        session_respond_error(s, id, RLOCK__V1__STATUS__STATUS_INTERNAL, "out of memory");
        return 0;
    }
    req->res = res;
    req->ttl_ms = a->ttl_ms;
    req->watchdog = !a->watchdog_off;
    req->owner = a->owner;
    req->fence = a->fence;
    req->lock_delay_ms = a->lock_delay_ms;
    req->holds = a->hold_count;
    req->max_hold_wall_ms = a->max_hold_until_ms;
    req->arrival_ms = s->last_frame_ms;
    snprintf(req->old_token, sizeof req->old_token, "%s", a->token);
    util_uuid(&srv->rng, req->token);
    /* KEYS: the lock key, and the holders and permits keys in case it is a group's place. */
    char ttl[16], holders[res->key_len + RESOURCE_SUBKEY_MAX + 1], permits[sizeof holders];
    const char *args[6] = {res->key, holders, permits, req->old_token, req->token, ttl};
    size_t lens[6] = {res->key_len,
                      resource_subkey(res, RESOURCE_HOLDERS_SUFFIX, holders, sizeof holders),
                      resource_subkey(res, RESOURCE_PERMITS_SUFFIX, permits, sizeof permits),
                      UTIL_UUID_LEN, UTIL_UUID_LEN, 0};
    lens[5] = (size_t)snprintf(ttl, sizeof ttl, "%u", req->watchdog ? req->ttl_ms : 0u);
    request_set_state(req, REQUEST_IN_REDIS);
    req->sent_ms = util_now_ms();
    rpool_eval(srv->pool, res->route, SCRIPT_ADOPT, 3, 6, args, lens, adopt_reply_cb, req);
    return 1;
}
