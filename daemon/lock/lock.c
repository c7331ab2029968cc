/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lock.c — what Acquire, Release, Extend and Cancel mean, in terms of
 * leases, resources, local wait queues and the Lua scripts.
 *
 * Every reply callback from the pool runs exactly once; a request keeps its
 * resource referenced until then, and a request whose session ended meanwhile
 * (orphaned, sess == NULL) still completes: a grant nobody can receive is
 * released at once by token. A command whose answer never came is assumed to
 * have done the worst it could: an acquire set the key (deleted by token,
 * retried), an Extend lengthened it (lease_unconfirmed); renew.lua never
 * shortens a key, so no unanswered command can cut the validity we count on.
 */
#include "lock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "auth.h"
#include "calls.h"
#include "cleanup.h"
#include "config.h"
#include "contention.h"
#include "deadlock.h"
#include "election.h"
#include "holder.h"
#include "log.h"
#include "pubsub.h"
#include "pool.h"
#include "relq.h"
#include "reply.h"
#include "resource.h"
#include "seal.h"
#include "tombstone.h"
#include "validity.h"
#include "wire.h"

#define WAKE_POLL_MS 1000 /* retry period when the holder's key has no expiry */
/*
 * A key held by a token rlockd did not make (acquire.lua's foreign: the copied SET NX
 * scripts) may be freed without the notice on the channel that wakes the waiters: the
 * head tries again after FOREIGN_RECHECK_MIN_MS, doubling up to FOREIGN_RECHECK_MAX_MS,
 * and never later than the key's PTTL. Over the whole daemon these tries are bounded:
 * with n resources waiting so, each waits at least n / FOREIGN_RECHECKS_PER_S seconds,
 * so that they cost Redis about FOREIGN_RECHECKS_PER_S calls a second at most, however
 * many there are (a million waits each try every 1000 s: their PTTL comes first).
 */
#define FOREIGN_RECHECK_MIN_MS 10
#define FOREIGN_RECHECK_MAX_MS 200
#define FOREIGN_RECHECKS_PER_S 1000u
/*
 * An exclusive head waiting behind shared holds claims the resource (no new
 * shared holds join them: docs/design-kinds.md) and tries again every
 * CLAIM_REFRESH_MS, or later when many resources wait so (the same bound on
 * tries as foreign waits), with a claim lasting CLAIM_LIFE_FACTOR tries: one
 * late try does not let it lapse, and a daemon that dies leaves it for seconds.
 */
#define CLAIM_REFRESH_MS 1000
#define CLAIM_LIFE_FACTOR 3
/*
 * How long past a key's longest possible life a delete by token is still
 * retried while Redis stays unreachable (cleanup.h): a command stuck in a
 * stalled Redis runs when it resumes.
 */
#define LOCK_CLEANUP_GRACE_MS 600000

/* res's head no longer waits behind a key held outside rlockd (foreign_delay). */
static void foreign_end(struct resource *res)
{
    if (!res->foreign_wait)
        return;
    res->foreign_wait = 0;
    res->srv->foreign_waits--;
}

/* --- trace ids ------------------------------------------------------------------ */

/*
 * The lines of a traced operation: "trace ID: session SID (NAME): what". Only
 * operations a client traced get them (log_trace_msg bounds their rate); the
 * trace id was checked (lock_check_trace), the resource name too.
 */
#define TRACE_LINE(trace, s, fmt, ...)                                                           \
    do {                                                                                        \
        if ((trace) != NULL)                                                                    \
            log_trace_msg(LOG_LEVEL_INFO, "trace %s: session %s (%s): " fmt, (trace), (s)->id,  \
                          (s)->name[0] ? (s)->name : "-", __VA_ARGS__);                         \
    } while (0)

const char *lock_check_trace(const char *trace)
{
    return wire_check_trace_id(trace);
}

/* A copy of a checked trace id for a request (NULL: none, or out of memory: untraced). */
static char *trace_copy(const char *trace)
{
    return trace != NULL && trace[0] != '\0' ? strdup(trace) : NULL;
}

/* --- replies ---------------------------------------------------------------- */

/* Grant (or re-enter) l for the request with id that arrived at arrival_ms. */
static void answer_acquired(struct session *s, uint64_t id, const struct lease *l,
                           int64_t arrival_ms)
{
    Rlock__V1__AcquireReply a = RLOCK__V1__ACQUIRE_REPLY__INIT;
    a.token = (char *)l->token;
    a.fence = l->fence;
    a.ttl_ms = l->ttl_ms;
    a.hold_count = l->holds;
    a.watchdog = l->watchdog;
    a.valid_ms = lease_valid_ms(l, arrival_ms);
    char seal[SEAL_TEXT_LEN + 1];
    lease_seal(l, seal);
    a.seal = seal;
    a.max_hold_until_ms = lease_max_hold_wall(l);
    a.lock_delay_ms = l->lock_delay_ms;
    a.mode = l->shared && l->limit == 0 ? RLOCK__V1__LOCK_MODE__MODE_SHARED
                                        : RLOCK__V1__LOCK_MODE__MODE_EXCLUSIVE;
    a.limit = l->limit;
    a.permits = l->permits;
    s->srv->ctr.grants++;
    counters_acquire_answered(s->srv, RLOCK__V1__STATUS__STATUS_OK);
    session_respond(s, id, RLOCK__V1__STATUS__STATUS_OK, NULL,
                    RLOCK__V1__RESPONSE__BODY_ACQUIRE, &a);
}

static void answer_released(struct session *s, uint64_t id, uint32_t holds, const char *msg)
{
    Rlock__V1__ReleaseReply r = RLOCK__V1__RELEASE_REPLY__INIT;
    r.hold_count = holds;
    session_respond(s, id, RLOCK__V1__STATUS__STATUS_OK, msg,
                    RLOCK__V1__RESPONSE__BODY_RELEASE, &r);
}

static void answer_error(struct request *req, Rlock__V1__Status st, const char *msg)
{
    if (req->sess == NULL)
        return;
    if (req->op == RLOCK__V1__REQUEST__BODY_ACQUIRE)
        counters_acquire_answered(req->srv, st);
    session_respond_error(req->sess, req->id, st, msg);
}

/* req, an acquire that found its lock taken, ended so (counted once: contention.h). */
static void contention_end(struct request *req, enum contention_end end)
{
    if (!req->contended || req->contention_counted)
        return;
    req->contention_counted = 1;
    contention_waited(req->srv, req->res, util_now_us() - req->arrival_us, end,
                      req->contention_began);
}

/* req, which will wait, found its lock taken: followed from now (contention.h). */
static void contention_begin(struct request *req)
{
    req->contended = 1;
    if (req->contention_began || req->deadline_ms == 0)
        return;
    req->contention_began = 1;
    contention_began(req->srv, req->res);
}

/* An Acquire that did not get its lock (NOT_ACQUIRED, TIMEOUT): said with who holds it. */
static void answer_refused(struct request *req, Rlock__V1__Status st, const char *msg)
{
    req->contended = 1; /* a refusal is contention, whatever came before */
    contention_end(req, st == RLOCK__V1__STATUS__STATUS_TIMEOUT ? CONTENTION_TIMEOUT
                                                                : CONTENTION_REFUSED);
    if (req->sess == NULL)
        return;
    TRACE_LINE(req->trace, req->sess, "acquire %s: %s after %lld ms", req->res->name,
               st == RLOCK__V1__STATUS__STATUS_TIMEOUT ? "timed out" : "not acquired",
               (long long)(util_now_ms() - req->arrival_ms));
    Rlock__V1__Holder h;
    counters_acquire_answered(req->srv, st);
    session_respond_refused(req->sess, req->id, st, msg,
                            holder_fill(&h, req->res, req, util_now_ms()));
}

/* Refuse an Acquire at once (it never became a request). */
static void acquire_refuse(struct session *s, uint64_t id, Rlock__V1__Status st, const char *msg)
{
    counters_acquire_answered(s->srv, st);
    session_respond_error(s, id, st, msg);
}

/* The same for NOT_ACQUIRED of res, with who holds the lock (h may be NULL). */
static void acquire_refuse_held(struct session *s, uint64_t id, const struct resource *res,
                                const char *msg, Rlock__V1__Holder *h)
{
    contention_waited(s->srv, res, util_now_us() - s->last_frame_us, CONTENTION_REFUSED, 0);
    counters_acquire_answered(s->srv, RLOCK__V1__STATUS__STATUS_NOT_ACQUIRED);
    session_respond_refused(s, id, RLOCK__V1__STATUS__STATUS_NOT_ACQUIRED, msg, h);
}

uint32_t lock_session_valid_ms(struct session *s, int64_t from_ms)
{
    return validity_session_ms(s, from_ms);
}

/*
 * s's lease on res, exclusive or shared, or NULL. A resource's shared holders
 * and a session's leases may each be many: the shorter list is walked.
 */
static struct lease *session_hold(const struct session *s, const struct resource *res)
{
    if (res->holder != NULL && res->holder->sess == s)
        return res->holder;
    if (res->nshared == 0)
        return NULL;
    struct lease *l;
    if (res->nshared <= s->nleases) {
        LIST_FOREACH(l, &res->shared, res_link)
            if (l->sess == s)
                return l;
    } else {
        TAILQ_FOREACH(l, &s->leases, sess_link)
            if (l->res == res)
                return l->shared ? l : NULL;
    }
    return NULL;
}

struct lease *lock_session_lease(struct session *s, const char *name)
{
    struct resource *res = resource_find(s->srv, name, strlen(name));
    struct lease *l = res != NULL ? session_hold(s, res) : NULL;
    if (l == NULL)
        return NULL;
    int64_t now = util_now_ms();
    if (lease_expired(l, now)) {
        /* Its timer is about to say so: never answer for a lease past its validity. */
        lease_lose_expired(l, now);
        return NULL;
    }
    return l;
}

/* --- quotas ----------------------------------------------------------------- */

/* Why s's token may not take one more lock (or wait for one), into buf; NULL: it may. */
static const char *lock_quota_refusal(const struct session *s, int waits, char *buf, size_t len)
{
    const struct quota *q = s->quota;
    const char *which = quota_check(q, waits);
    if (which == NULL)
        return NULL;
    int locks = which[4] == 'l'; /* "max_locks" or "max_waiters" */
    const char *role = s->role == AUTH_ROLE_ADMIN ? "admin" : "client";
    snprintf(buf, len,
             "quota of this session's auth token reached: %u %s (%s: the token file entry's "
             "%s=N, else limits.%s_%s)",
             locks ? q->max_locks : q->max_waiters,
             locks ? "locks held or awaited" : "acquires waiting", which, which, role, which);
    return buf;
}

/* --- wait queue ------------------------------------------------------------- */

/* Remove req from its resource's queue; returns 1 if it was the head. */
static int waitq_remove(struct request *req)
{
    struct resource *res = req->res;
    int was_head = TAILQ_FIRST(&res->waiters) == req;
    TAILQ_REMOVE(&res->waiters, req, wait_link);
    req->in_queue = 0;
    res->nwaiters--;
    req->srv->nwaiters--;
    if (req->quota != NULL)
        req->quota->waiters--;
    if (was_head)
        res->head_trying = 0;
    if (res->nwaiters == 0) {
        res->wake_pending = 0;
        foreign_end(res); /* nobody tries again */
        pubsub_watch(req->srv, res, 0); /* nobody here wants its release notices now */
    }
    return was_head;
}

static void claim_dropped_cb(const redisReply *reply, const char *err, void *arg)
{
    (void)reply, (void)err, (void)arg; /* unanswered, the claim lapses by its PX */
}

/*
 * An exclusive request that claimed its resource leaves without a grant
 * (timed out, cancelled, its session gone): its claim goes with it, by
 * claimant (release.lua on the claim key, announced on no channel), so that
 * shared requests need not wait for it to lapse.
 */
static void claim_drop(struct request *req)
{
    struct resource *res = req->res;
    if (!rpool_route_ready(req->srv->pool, res->route))
        return;
    /* Announced on the resource's channel: shared waiters on other daemons look again. */
    char claim[res->key_len + RESOURCE_SUBKEY_MAX + 1];
    char channel[res->key_len + sizeof PUBSUB_CHANNEL_SUFFIX];
    const char *args[3] = {claim, req->token, channel};
    size_t lens[3] = {resource_subkey(res, RESOURCE_CLAIM_SUFFIX, claim, sizeof claim),
                      UTIL_UUID_LEN, pubsub_channel(req->srv, res, channel, sizeof channel)};
    rpool_eval(req->srv->pool, res->route, SCRIPT_RELEASE, 1, 3, args, lens, claim_dropped_cb,
               NULL);
}

void lock_request_done(struct request *req)
{
    struct resource *res = req->res;
    int kick = 0;
    if (res != NULL && req->op == RLOCK__V1__REQUEST__BODY_ACQUIRE && req->claiming &&
        !req->granted)
        claim_drop(req);
    if (res != NULL && req->op == RLOCK__V1__REQUEST__BODY_ACQUIRE)
        contention_end(req, CONTENTION_CANCELLED); /* unless a grant or refusal counted it */
    if (res != NULL && req->in_queue)
        kick = waitq_remove(req);
    request_set_state(req, REQUEST_DONE);
    request_free(req);
    /* The request's own reference keeps res alive through the kick. */
    if (kick)
        lock_kick(res);
    resource_unref(res);
}

static void acquire_try(struct request *req);

/*
 * An acquire by owner (shared or not) of the session that holds l: 1 when it
 * is granted on l at once (a re-entry, or one more shared hold). 0 with
 * *refusal set when it is refused (*st); 0 with *refusal NULL when it waits
 * for another owner of the session to let go.
 *
 * In one session a resource is one lock (Release and Extend name the
 * resource): shared acquires of every owner add holds to the session's one
 * shared lease; the stronger exclusive hold covers its owner's shared
 * acquires. An exclusive acquire by an owner holding it shared is refused:
 * two upgraders waiting for each other to leave is the classic deadlock.
 * Once several owners share the lease, who holds it is no longer known, so
 * every exclusive acquire of the session is refused alike.
 */
static int lock_joins(const struct lease *l, const struct request *ask, Rlock__V1__Status *st,
                      const char **refusal)
{
    static char msg[160]; /* the daemon answers from one thread */
    uint64_t owner = ask->owner;
    int shared = ask->shared;
    *refusal = NULL;
    *st = RLOCK__V1__STATUS__STATUS_WRONG_KIND;
    if (l->limit != 0 || ask->limit != 0) {
        /* A semaphore on either side: within a session it is held like an exclusive lock
         * (one lease, its owner re-enters, other owners wait), with the same limit. */
        if (l->limit != ask->limit) {
            if (l->limit == 0)
                snprintf(msg, sizeof msg, "held by this session as a lock, not a semaphore");
            else
                snprintf(msg, sizeof msg, "held by this session as a semaphore of %u permits",
                         l->limit);
            *refusal = msg;
            return 0;
        }
        if (l->owner != owner)
            return 0;
        if (ask->permits > l->permits) {
            snprintf(msg, sizeof msg,
                     "this owner holds %u permits of the semaphore: release them to take %u",
                     l->permits, ask->permits);
            *refusal = msg;
            return 0;
        }
    } else if (ask->value != NULL && !l->leader && !l->shared) {
        if (l->owner == owner)
            *refusal = "held by this owner as a plain lock: a campaign needs a grant of its own "
                       "(release the lock, then campaign)";
        return 0;
    } else if (l->shared && !shared) {
        if (l->owner == owner || l->owners_mixed) {
            *st = RLOCK__V1__STATUS__STATUS_WRONG_KIND;
            *refusal = "held shared by this owner: no upgrade to exclusive (release the shared "
                       "hold, then acquire exclusive)";
        }
        return 0;
    }
    if (!l->shared && l->owner != owner)
        return 0;
    if (ask->no_reentry && l->owner == owner) {
        *st = RLOCK__V1__STATUS__STATUS_ALREADY_HELD;
        *refusal = "this owner already holds the lock (re-entry refused)";
        return 0;
    }
    return 1;
}

/* Grant one more hold on l to owner (lock_joins said so) and answer request id. */
static void lock_join(struct lease *l, uint64_t owner, struct session *s, uint64_t id,
                      int64_t arrival_ms)
{
    l->holds++;
    if (l->owner != owner)
        l->owners_mixed = 1;
    answer_acquired(s, id, l, arrival_ms);
}

void lock_kick(struct resource *res)
{
    struct request *head;
    resource_ref(res); /* dropping waiters below must not free res under us */
    while ((head = TAILQ_FIRST(&res->waiters)) != NULL && !res->head_trying) {
        if (head->sess != NULL && head->sess->state == SESSION_CLOSING) {
            /* Its session is ending (and dropping its waiters): not worth a try. */
            contention_end(head, CONTENTION_CANCELLED);
            request_set_state(head, REQUEST_DONE);
            waitq_remove(head);
            request_free(head);
            resource_unref(res);
            continue;
        }
        struct lease *l = head->sess != NULL ? session_hold(head->sess, res) : NULL;
        if (l == NULL) {
            if (res->wake_ev != NULL)
                evtimer_del(res->wake_ev);
            acquire_try(head);
            break;
        }
        /* The head's own session holds res (another owner's hold, or granted meanwhile). */
        const char *refusal = NULL;
        Rlock__V1__Status st = RLOCK__V1__STATUS__STATUS_OK;
        int joins = lock_joins(l, head, &st, &refusal);
        if (!joins && refusal == NULL) {
            contention_begin(head);
            break; /* another owner's hold: its release or loss kicks us */
        }
        if (refusal != NULL) {
            answer_error(head, st, refusal);
        } else {
            contention_end(head, CONTENTION_GRANTED);
            lock_join(l, head->owner, head->sess, head->id, head->arrival_ms);
        }
        request_set_state(head, REQUEST_DONE);
        waitq_remove(head);
        request_free(head);
        resource_unref(res);
    }
    resource_unref(res);
}

void lock_wake(struct resource *res)
{
    if (TAILQ_EMPTY(&res->waiters) || res->holder != NULL)
        return; /* nobody waits, or it is held here: its release or loss kicks the queue */
    if (res->head_trying) {
        /* The try's answer may predate the release this is about: it came on another
         * connection. A busy answer then tries once more (acquire_busy). */
        res->wake_pending = 1;
        return;
    }
    lock_kick(res);
}

static void wake_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    lock_kick(arg);
}

/*
 * The next try of res's head, which found its key held outside rlockd, or
 * (claim) is exclusive and found shared holds it must keep claiming the
 * resource from (pttl: the key's PTTL).
 */
static int64_t foreign_delay(struct resource *res, long long pttl, int claim)
{
    struct server *srv = res->srv;
    if (!res->foreign_wait) {
        res->foreign_wait = 1;
        res->recheck_ms = FOREIGN_RECHECK_MIN_MS;
        srv->foreign_waits++;
    } else {
        if (!claim)
            srv->mx.foreign_rechecks++; /* this busy answer was of a try again */
        res->recheck_ms = res->recheck_ms * 2 < FOREIGN_RECHECK_MAX_MS
                              ? (uint16_t)(res->recheck_ms * 2)
                              : FOREIGN_RECHECK_MAX_MS;
    }
    int64_t delay = claim ? CLAIM_REFRESH_MS : res->recheck_ms;
    int64_t fair = (int64_t)(srv->foreign_waits * 1000u / FOREIGN_RECHECKS_PER_S);
    if (fair > delay)
        delay = fair;
    if (pttl >= 0 && pttl < delay)
        delay = pttl;
    return delay;
}

static void waitq_arm(struct resource *res, int64_t delay_ms)
{
    if (res->wake_ev == NULL)
        res->wake_ev = evtimer_new(res->srv->base, wake_cb, res);
    if (res->wake_ev == NULL)
        return; /* the deadline still ends the wait */
    struct timeval tv = util_tv_ms(delay_ms < 1 ? 1 : delay_ms);
    evtimer_add(res->wake_ev, &tv);
}

static void deadline_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct request *req = arg;
    if (req->state == REQUEST_IN_REDIS) {
        req->expired = 1; /* the try in flight decides: a late grant is still a grant */
        return;
    }
    answer_refused(req, RLOCK__V1__STATUS__STATUS_TIMEOUT, "wait timed out");
    lock_request_done(req);
}

/* --- release by token ----------------------------------------------------------- */

static void release_reply_cb(const redisReply *reply, const char *err, void *arg)
{
    struct request *req = arg;
    int confirmed = reply_delete(reply) != REPLY_DELETE_UNKNOWN;
    if (req->sess != NULL) {
        if (confirmed)
            answer_released(req->sess, req->id, 0, NULL);
        else
            answer_released(req->sess, req->id, 0,
                           "released here, but Redis did not confirm the delete; "
                           "the key expires within its ttl");
    }
    if (reply == NULL || reply_error_text(reply) != NULL)
        log_warn("release of %s not confirmed: %s", req->res->name,
                 reply == NULL ? err : reply_error_text(reply));
    if (!confirmed)
        cleanup_add(req->srv, req->res, req->token, req->shared,
                    util_now_ms(), req->max_expiry_ms + LOCK_CLEANUP_GRACE_MS);
    struct resource *res = req->res;
    resource_ref(res);
    lock_request_done(req);
    lock_kick(res); /* hand the lock to the next local waiter at once */
    resource_unref(res);
}

/*
 * Release token (req->shared: its shared place); req is answered (if it has a
 * session) and freed by the callback. max_expiry_ms bounds how long the key
 * could outlive an unconfirmed release, for the cleanup retries.
 */
static void release_send(struct request *req, const char *token, int64_t max_expiry_ms)
{
    req->max_expiry_ms = max_expiry_ms;
    memcpy(req->token, token, sizeof req->token);
    request_set_state(req, REQUEST_IN_REDIS);
    calls_release(req->srv, req->res, token, req->shared, release_reply_cb, req);
}

void lock_release_token(struct server *srv, struct resource *res, const char *token, int shared,
                        int64_t max_expiry_ms)
{
    relq_add(srv, res, token, shared, 0, max_expiry_ms);
}

/* The longest a key set now by a command with ttl_ms may live (Redis's clock may be fast). */
static int64_t key_life_end(uint32_t ttl_ms)
{
    return util_now_ms() + ttl_ms + LEASE_DRIFT_MS(ttl_ms);
}

/* --- acquire ---------------------------------------------------------------- */

static void acquire_reply_cb(const redisReply *reply, const char *err, void *arg);
static void acquire_busy(struct request *req, long long pttl, int held_by);

/*
 * group_acquire.lua for a shared hold or a semaphore's permits: marker,
 * holders, permits, fence and claim keys; token, ttl, fence_ttl, marker, k.
 */
static void acquire_send_shared(struct request *req, const char *ttl, size_t ttl_len,
                                const char *fence_ttl, size_t fence_ttl_len)
{
    struct resource *res = req->res;
    char sub[4][res->key_len + RESOURCE_SUBKEY_MAX + 1];
    static const char *const suffixes[4] = {RESOURCE_HOLDERS_SUFFIX, RESOURCE_PERMITS_SUFFIX,
                                            RESOURCE_FENCE_SUFFIX, RESOURCE_CLAIM_SUFFIX};
    char marker[LEASE_MARKER_MAX], k[16];
    const char *args[10] = {res->key, sub[0], sub[1], sub[2], sub[3],
                            req->token, ttl, fence_ttl, marker, k};
    size_t lens[10] = {res->key_len, 0, 0, 0, 0, UTIL_UUID_LEN, ttl_len, fence_ttl_len,
                       lease_marker(req->limit, marker), 0};
    lens[9] = (size_t)snprintf(k, sizeof k, "%u", req->limit > 0 ? req->permits : 1);
    for (int i = 0; i < 4; i++)
        lens[1 + i] = resource_subkey(res, suffixes[i], sub[i], sizeof sub[i]);
    rpool_eval(req->srv->pool, res->route, SCRIPT_GROUP_ACQUIRE, 5, 10, args, lens,
               acquire_reply_cb, req);
}

/*
 * acquire.lua for a campaign: the lock's keys as for any exclusive try (args
 * and lens as acquire_try fills them), with the claim key always there (claim
 * ms '0' until the request claims), the token as claimant, then the leader
 * key, the value and the channel its grant is announced on.
 */
static void acquire_send_campaign(struct request *req, const char **args, size_t *lens)
{
    struct resource *res = req->res;
    char claim_key[res->key_len + RESOURCE_SUBKEY_MAX + 1];
    char leader_key[res->key_len + RESOURCE_SUBKEY_MAX + 1];
    char chan[res->key_len + sizeof PUBSUB_CHANNEL_SUFFIX];
    char claim_ms[16];
    const char *all[11] = {args[0], args[1], claim_key, leader_key, args[3], args[4], args[5],
                           claim_ms, req->token, req->value, chan};
    size_t all_lens[11] = {lens[0], lens[1],
                           resource_subkey(res, RESOURCE_CLAIM_SUFFIX, claim_key, sizeof claim_key),
                           resource_subkey(res, RESOURCE_LEADER_SUFFIX, leader_key,
                                           sizeof leader_key),
                           lens[3], lens[4], lens[5], 0, UTIL_UUID_LEN, req->value_len,
                           pubsub_channel(req->srv, res, chan, sizeof chan)};
    all_lens[7] = (size_t)snprintf(claim_ms, sizeof claim_ms, "%u",
                                   req->claiming ? req->claim_ms : 0);
    rpool_eval(req->srv->pool, res->route, SCRIPT_ACQUIRE, 4, 11, all, all_lens,
               acquire_reply_cb, req);
}

static void acquire_try(struct request *req)
{
    struct resource *res = req->res;
    char ttl[16], fence_ttl[16], claim_ms[16];
    char fence_key[res->key_len + RESOURCE_SUBKEY_MAX + 1];
    char claim_key[res->key_len + RESOURCE_SUBKEY_MAX + 1];
    /* KEYS lock, fence (and claim); ARGV token, ttl, fence_ttl (and claim_ms). */
    const char *args[7] = {res->key, fence_key, claim_key, req->token, ttl, fence_ttl, claim_ms};
    size_t lens[7] = {res->key_len, resource_fence_key(res, fence_key, sizeof fence_key),
                      0, UTIL_UUID_LEN, 0, 0, 0};
    lens[4] = (size_t)snprintf(ttl, sizeof ttl, "%u", req->ttl_ms);
    lens[5] = (size_t)snprintf(fence_ttl, sizeof fence_ttl, "%u", req->srv->cfg->fence_ttl_ms);
    if (req->in_queue) {
        res->head_trying = 1;
        res->wake_pending = 0; /* this try sees whatever woke the queue before */
    }
    request_set_state(req, REQUEST_IN_REDIS);
    req->sent_ms = util_now_ms();
    int64_t guard = res->tombstones_unsent > 0 ? res->promised_until_ms : 0;
    if (res->held_back_until_ms > guard)
        guard = res->held_back_until_ms;
    if (guard > req->sent_ms) {
        /* Its key may be free in Redis while a tombstone for a lost holder's promise is
         * retried, or a place of ours stands in for it: the lock is taken until that
         * promise ends, wherever the tombstone is. */
        acquire_busy(req, guard - req->sent_ms, 0);
        return;
    }
    if (req->value != NULL && res->holder != NULL) {
        /* A campaign behind a leader of this daemon waits for that lease's release or
         * loss, which kicks the queue, without asking Redis: were the key lost (a restart
         * without persistence), acquire.lua would grant it and write and publish the
         * leader record before this daemon could hold the grant back for the old leader's
         * promise (acquire_found_lost_key), and observers would be shown a term nobody
         * is granted. */
        acquire_busy(req, -1, REPLY_HELD_BY_RLOCKD);
        return;
    }
    if (req->shared) {
        acquire_send_shared(req, ttl, lens[4], fence_ttl, lens[5]);
        return;
    }
    if (req->value != NULL) {
        acquire_send_campaign(req, args, lens);
        return;
    }
    if (!req->claiming) {
        /* Without the claim key: acquire.lua as the copied scripts' SET NX, nothing more. */
        const char *plain[5] = {args[0], args[1], args[3], args[4], args[5]};
        size_t plain_lens[5] = {lens[0], lens[1], lens[3], lens[4], lens[5]};
        rpool_eval(req->srv->pool, res->route, SCRIPT_ACQUIRE, 2, 5, plain, plain_lens,
                   acquire_reply_cb, req);
        return;
    }
    /* Waiting behind shared holds: claim the resource (the claimant is the token, the
     * same for every try of this request). */
    lens[2] = resource_subkey(res, RESOURCE_CLAIM_SUFFIX, claim_key, sizeof claim_key);
    lens[6] = (size_t)snprintf(claim_ms, sizeof claim_ms, "%u", req->claim_ms);
    rpool_eval(req->srv->pool, res->route, SCRIPT_ACQUIRE, 3, 7, args, lens, acquire_reply_cb,
               req);
}

/*
 * Redis granted req although a lease of this daemon there is still valid, or
 * was lost moments ago with its promise still running (a renew that found
 * the key MISSING answered before this try, both in Redis at once): Redis
 * lost that key (a restart without persistence, FLUSHALL). The old holder is
 * told MISSING, but it was promised the lock until its valid-until and may
 * not have read the notice yet. So the grant is turned into a tombstone
 * lasting until then (our token is replaced, by token), and req is answered
 * as if the lock were still held: a try gets NOT_ACQUIRED, a waiter waits
 * on. Returns 1 when it did so, 0 when no such promise runs (grant as usual).
 */
static void held_back_cb(const redisReply *reply, const char *err, void *arg)
{
    /* Unanswered, the place lives to the grant's ttl: longer, never shorter. */
    (void)reply, (void)err, (void)arg;
}

static int acquire_found_lost_key(struct request *req, int overflow)
{
    struct resource *res = req->res;
    static const char why[] = "Redis lost the lock's key: another acquire found it free";
    /* Each sets the guard below, the promise still running. */
    lease_lose_excluded(res, req->shared, req->limit, why);
    /* Redis counted fewer permits than this daemon holds: places of ours are gone, and
     * which is not known; none can be vouched for. */
    while (overflow && !LIST_EMPTY(&res->shared))
        lease_lose(LIST_FIRST(&res->shared), RLOCK__V1__LOST_REASON__LOST_MISSING, why);
    /* A lost holder's tombstone not yet in Redis: this grant took the key it was for. */
    if (res->tombstones_unsent == 0)
        return 0;
    int64_t until = res->promised_until_ms;
    int64_t left = until - util_now_ms();
    if (left <= 0)
        return 0;
    log_warn("%s: granted while this daemon's lease there was still valid for %lld ms (Redis "
             "lost its key): kept as a tombstone until then", res->name, (long long)left);
    /* Straight to the pool, not the paced release queue: it must be in place
     * before the grant's own ttl could run out. A shared or semaphore place is kept
     * until then, nobody's (its group's marker keeps the key taken: a tombstone could
     * not be set there), and this daemon grants nothing before then. */
    int64_t wait = left + LEASE_DRIFT_MS(left);
    if (req->shared) {
        calls_release_later(req->srv, res, req->token, (uint32_t)wait, held_back_cb, NULL);
        if (until + LEASE_DRIFT_MS(left) > res->held_back_until_ms)
            res->held_back_until_ms = until + LEASE_DRIFT_MS(left);
    } else {
        tombstone_swap(req->srv, res, req->token, until);
    }
    req->granted = 0; /* waits again: a claim it holds goes with it if it gives up */
    acquire_busy(req, wait, 0);
    return 1;
}

/*
 * 1 when a grant of req means that some local shared place of its resource is
 * gone. A resource is one kind at a time here (lease_lose_excluded), so its
 * first shared place tells the kind of them all.
 */
static int grant_excludes_shared(const struct request *req)
{
    const struct lease *first = LIST_FIRST(&req->res->shared);
    return first != NULL && (!req->shared || first->limit != req->limit);
}

static void acquire_granted(struct request *req, uint64_t fence)
{
    struct session *s = req->sess;
    struct resource *res = req->res;
    foreign_end(res);
    if (s == NULL || s->state == SESSION_CLOSING) {
        log_debug("granted %s to a session that has ended; releasing", res->name);
        lock_release_token(req->srv, res, req->token, req->shared, key_life_end(req->ttl_ms));
        lock_request_done(req);
        return;
    }
    struct lease *mine = req->shared ? session_hold(s, res) : NULL;
    if (mine != NULL && mine->shared && mine->limit == req->limit) {
        /* Two tries of one session were granted a place (tries without a wait run side by
         * side): one lock per session, so this place is given back, and the request joins
         * the session's lease, is refused, or waits for its other owner, as if it had
         * come after. */
        lock_release_token(req->srv, res, req->token, 1, key_life_end(req->ttl_ms));
        const char *refusal;
        Rlock__V1__Status st;
        int joins = lock_joins(mine, req, &st, &refusal);
        if (!joins && refusal == NULL) {
            req->granted = 0;
            acquire_busy(req, 0, REPLY_HELD_BY_RLOCKD);
            return;
        }
        if (joins) {
            contention_end(req, CONTENTION_GRANTED);
            lock_join(mine, req->owner, s, req->id, req->arrival_ms);
        } else
            answer_error(req, st, refusal);
        lock_request_done(req);
        return;
    }
    /* Redis counted fewer permits than this daemon holds: it lost places of ours. */
    int overflow = req->limit > 0 && res->permits_here + req->permits > req->limit;
    if ((res->holder != NULL || grant_excludes_shared(req) || overflow ||
         res->tombstones_unsent > 0) &&
        acquire_found_lost_key(req, overflow))
        return;
    if (util_now_ms() + LEASE_MARGIN_MS(req->ttl_ms) >= req->sent_ms + req->ttl_ms) {
        /* Redis answered so late that the lease may already have run out. */
        lock_release_token(req->srv, res, req->token, req->shared, key_life_end(req->ttl_ms));
        answer_error(req, RLOCK__V1__STATUS__STATUS_UNAVAILABLE,
                    "redis answered after the lease had run out");
        lock_request_done(req);
        return;
    }
    struct lease_grant g = {
        .token = req->token,
        .fence = fence,
        .owner = req->owner,
        .ttl_ms = req->ttl_ms,
        .watchdog = req->watchdog,
        .sent_ms = req->sent_ms,
        .max_hold_ms = req->max_hold_ms,
        .lock_delay_ms = req->lock_delay_ms,
        .shared = req->shared,
        .limit = req->limit,
        .permits = req->permits,
        .leader = req->value != NULL,
        .trace = req->trace,
    };
    struct lease *l = lease_new(s, res, &g);
    if (l == NULL) {
        lock_release_token(req->srv, res, req->token, req->shared, key_life_end(req->ttl_ms));
        answer_error(req, RLOCK__V1__STATUS__STATUS_INTERNAL, "out of memory");
    } else {
        contention_end(req, CONTENTION_GRANTED);
        TRACE_LINE(req->trace, s, "granted %s (fence %llu) after %lld ms", res->name,
                   (unsigned long long)l->fence, (long long)(util_now_ms() - req->arrival_ms));
        answer_acquired(s, req->id, l, req->arrival_ms);
    }
    resource_ref(res);
    lock_request_done(req);
    lock_kick(res); /* a waiter of the same owner becomes a re-entry */
    resource_unref(res);
}

static void acquire_busy(struct request *req, long long pttl, int held_by)
{
    struct resource *res = req->res;
    int64_t now = util_now_ms();
    holder_seen(req, pttl, held_by, now);
    contention_begin(req);
    if (req->deadline_ms == 0) {
        answer_refused(req, RLOCK__V1__STATUS__STATUS_NOT_ACQUIRED, "held by another owner");
        lock_request_done(req);
        return;
    }
    if (req->sess == NULL || req->expired || now >= req->deadline_ms) {
        answer_refused(req, RLOCK__V1__STATUS__STATUS_TIMEOUT, "wait timed out");
        lock_request_done(req);
        return;
    }
    if (!req->wait_traced) {
        req->wait_traced = 1;
        TRACE_LINE(req->trace, req->sess, "acquire %s waits (%s)", res->name,
                   held_by == REPLY_HELD_BY_FOREIGN ? "held outside rlockd"
                   : RESOURCE_HELD_HERE(res)        ? "held through this daemon"
                                                    : "held through another daemon");
    }
    /* Only the head of the queue tries, so this is the head: wait for a wake-up. */
    res->head_trying = 0;
    request_set_state(req, REQUEST_WAITING);
    if (session_hold(req->sess, res) != NULL) {
        /* Busy because this session's own earlier acquire won: a re-entry or a join, a
         * refusal, or a wait for that owner's release (lock_kick decides). */
        lock_kick(res);
        return;
    }
    /* From now on a release through another daemon wakes the head too. */
    pubsub_watch(req->srv, res, 1);
    if (res->wake_pending) {
        lock_kick(res); /* a notice came during the try, perhaps of a release it missed */
        return;
    }
    if (held_by == REPLY_HELD_BY_FOREIGN) {
        waitq_arm(res, foreign_delay(res, pttl, 0));
        return;
    }
    if (held_by == REPLY_HELD_BY_GROUP && !req->shared) {
        /* Claim the resource from the next try on, and try again before the claim lapses. */
        int64_t delay = foreign_delay(res, pttl, 1);
        req->claiming = 1;
        req->claim_ms = (uint32_t)(CLAIM_LIFE_FACTOR * (delay > CLAIM_REFRESH_MS ? delay
                                                                              : CLAIM_REFRESH_MS));
        waitq_arm(res, delay);
        return;
    }
    foreign_end(res);
    waitq_arm(res, pttl >= 0 ? pttl : pttl == -1 ? WAKE_POLL_MS : 1);
}

/* A try of a withdrawn acquire came back: undo a grant (or a possible one) and say so. */
static void acquire_cancelled(struct request *req, enum reply_acquire_kind kind)
{
    if (kind != REPLY_ACQUIRE_BUSY)
        lock_release_token(req->srv, req->res, req->token, req->shared, key_life_end(req->ttl_ms));
    answer_error(req, RLOCK__V1__STATUS__STATUS_CANCELLED, "acquire cancelled");
    lock_request_done(req);
}

/*
 * min_replicas_acked: the grant counts only once that many replicas have it
 * (WAIT on the grant's own connection, which waits for every write sent
 * there before it). Fewer in time: the lock is given back and the client
 * gets UNAVAILABLE, as a failover now could lose the key.
 */
static void wait_reply_cb(const redisReply *reply, const char *err, void *arg)
{
    struct request *req = arg;
    const struct config *cfg = req->srv->cfg;
    if (req->cancelled) {
        acquire_cancelled(req, REPLY_ACQUIRE_GRANTED);
        return;
    }
    long long acked = reply != NULL && reply->type == REDIS_REPLY_INTEGER ? reply->integer : -1;
    if (acked >= (long long)cfg->min_replicas_acked) {
        acquire_granted(req, req->fence);
        return;
    }
    char why[160];
    if (acked < 0)
        snprintf(why, sizeof why, "no answer to WAIT for replicas: %s",
                 reply == NULL ? err : reply_error_text(reply) ? reply_error_text(reply)
                                                                : "unexpected reply");
    else
        snprintf(why, sizeof why, "only %lld of %u replicas acknowledged the grant in time",
                 acked, cfg->min_replicas_acked);
    log_warn("acquire %s: %s; released", req->res->name, why);
    req->srv->mx.replica_ack_failures++;
    lock_release_token(req->srv, req->res, req->token, req->shared, key_life_end(req->ttl_ms));
    answer_error(req, RLOCK__V1__STATUS__STATUS_UNAVAILABLE, why);
    lock_request_done(req);
}

static void acquire_wait_replicas(struct request *req, uint64_t fence)
{
    const struct config *cfg = req->srv->cfg;
    char n[16], ms[16];
    const char *argv[3] = {"WAIT", n, ms};
    size_t lens[3] = {4, 0, 0};
    lens[1] = (size_t)snprintf(n, sizeof n, "%u", cfg->min_replicas_acked);
    lens[2] = (size_t)snprintf(ms, sizeof ms, "%u", cfg->replica_ack_timeout_ms);
    req->fence = fence;
    rpool_command(req->srv->pool, req->res->route, 3, argv, lens, wait_reply_cb, req);
}

static void acquire_reply_cb(const redisReply *reply, const char *err, void *arg)
{
    struct request *req = arg;
    uint64_t fence = 0;
    long long pttl = 0;
    int held_by = REPLY_HELD_BY_RLOCKD;
    enum reply_acquire_kind kind = reply_acquire(reply, &fence, &pttl, &held_by);
    req->granted = kind == REPLY_ACQUIRE_GRANTED;
    if (req->cancelled) {
        acquire_cancelled(req, kind);
        return;
    }
    if (reply == NULL) {
        /* The outcome is unknown: a compare-and-delete of our fresh token is always safe. */
        lock_release_token(req->srv, req->res, req->token, req->shared, key_life_end(req->ttl_ms));
        answer_error(req, RLOCK__V1__STATUS__STATUS_UNAVAILABLE, err);
        lock_request_done(req);
        return;
    }
    if (kind == REPLY_ACQUIRE_ERROR || kind == REPLY_ACQUIRE_MALFORMED) {
        const char *text = reply_error_text(reply);
        log_error("acquire %s: unexpected reply from Redis%s%s", req->res->name,
                  text != NULL ? ": " : "", text != NULL ? text : "");
        /* A script error may come after its SET: delete by token whatever happened. */
        lock_release_token(req->srv, req->res, req->token, req->shared, key_life_end(req->ttl_ms));
        answer_error(req, RLOCK__V1__STATUS__STATUS_INTERNAL,
                    text != NULL
                        ? "redis refused the acquire script (does the lock's key or its "
                          "fence key hold another type?)"
                        : "unexpected reply from Redis");
        lock_request_done(req);
        return;
    }
    if (kind == REPLY_ACQUIRE_WRONG_KIND) {
        /* Nothing was set: the resource is a semaphore (group_acquire.lua's answer). */
        const redisReply *held = reply->element[1];
        unsigned long n = 0;
        char why[160], as[64];
        if (held->len > 10 && memcmp(held->str, "group:sem:", 10) == 0 &&
            sscanf(held->str + 10, "%lu", &n) == 1)
            snprintf(as, sizeof as, "a semaphore of %lu permits", n);
        else
            snprintf(as, sizeof as, "%s",
                     held->len == 8 && memcmp(held->str, "group:rw", 8) == 0
                         ? "a read-write lock held shared"
                         : "an exclusive lock");
        snprintf(why, sizeof why, "the resource is held as %s%s", as,
                 req->limit > 0 ? " (a semaphore takes a name of its own, with one limit)"
                                : " (a lock takes a name no semaphore uses)");
        answer_error(req, RLOCK__V1__STATUS__STATUS_WRONG_KIND, why);
        lock_request_done(req);
        return;
    }
    if (kind == REPLY_ACQUIRE_GRANTED && req->srv->cfg->min_replicas_acked > 0)
        acquire_wait_replicas(req, fence);
    else if (kind == REPLY_ACQUIRE_GRANTED)
        acquire_granted(req, fence);
    else
        acquire_busy(req, pttl, held_by);
}

/* Resource names go to Redis only as keys; still, only printable UTF-8 within bounds. */
const char *lock_check_resource(const struct config *cfg, const char *name)
{
    size_t n = strlen(name);
    if (n == 0)
        return "resource is empty";
    if (n > cfg->max_resource_bytes)
        return "resource name too long";
    const char *bad = util_text_check(name, n);
    if (bad != NULL)
        return strcmp(bad, "contains control characters") == 0
                   ? "resource contains control characters"
                   : "resource is not valid UTF-8";
    return NULL;
}

const char *lock_check_kind(const Rlock__V1__Acquire *a)
{
    if (a->mode != RLOCK__V1__LOCK_MODE__MODE_EXCLUSIVE &&
        a->mode != RLOCK__V1__LOCK_MODE__MODE_SHARED)
        return "mode must be EXCLUSIVE (0) or SHARED (1)";
    if (!a->campaign && a->value != NULL && a->value[0] != '\0')
        return "value is a campaign's: set campaign too";
    if (a->campaign) {
        if (a->mode != RLOCK__V1__LOCK_MODE__MODE_EXCLUSIVE || a->limit != 0)
            return "a campaign is exclusive: leave mode EXCLUSIVE and limit 0";
        if (a->value != NULL && strlen(a->value) > LOCK_VALUE_MAX)
            return "value must be at most " LOCK_VALUE_MAX_TEXT " bytes";
    }
    if (a->limit == 0)
        return a->permits != 0 ? "permits need a limit (a semaphore)" : NULL;
    if (a->limit > LOCK_LIMIT_MAX)
        return "limit must be at most " LOCK_LIMIT_MAX_TEXT;
    if (a->mode != RLOCK__V1__LOCK_MODE__MODE_EXCLUSIVE)
        return "a semaphore (limit > 0) has no mode: leave mode EXCLUSIVE";
    if (a->permits > a->limit)
        return "permits must be at most limit";
    return NULL;
}

int lock_check_ttl(const struct config *cfg, uint32_t *ttl)
{
    if (*ttl == 0)
        *ttl = cfg->default_ttl_ms;
    return *ttl < cfg->min_ttl_ms || *ttl > cfg->max_ttl_ms ? -1 : 0;
}

static int check_ttl(struct session *s, uint64_t id, uint32_t *ttl)
{
    const struct config *cfg = s->srv->cfg;
    if (lock_check_ttl(cfg, ttl) != 0) {
        char msg[96];
        snprintf(msg, sizeof msg, "ttl_ms must be between %u and %u", cfg->min_ttl_ms,
                 cfg->max_ttl_ms);
        session_respond_error(s, id, RLOCK__V1__STATUS__STATUS_INVALID, msg);
        return -1;
    }
    return 0;
}

/* The max_hold an acquire gets: its own, within [limits] max_hold; 0 = none. */
static uint32_t effective_max_hold(const struct config *cfg, uint32_t asked)
{
    if (asked == 0)
        return cfg->max_hold_ms;
    return cfg->max_hold_ms != 0 && asked > cfg->max_hold_ms ? cfg->max_hold_ms : asked;
}

/* The lock_delay an acquire gets: its own or the default, within max_lock_delay. */
static uint32_t effective_lock_delay(const struct config *cfg, uint32_t asked)
{
    uint32_t d = asked != 0 ? asked : cfg->lock_delay_ms;
    return d > cfg->max_lock_delay_ms ? cfg->max_lock_delay_ms : d;
}

int lock_acquire(struct session *s, uint64_t id, const Rlock__V1__Acquire *a)
{
    struct server *srv = s->srv;
    const struct config *cfg = srv->cfg;
    const char *bad = lock_check_resource(cfg, a->resource);
    srv->ctr.acquires++;
    if (bad != NULL) {
        acquire_refuse(s, id, RLOCK__V1__STATUS__STATUS_INVALID, bad);
        return 0;
    }
    uint32_t ttl = a->ttl_ms;
    if (check_ttl(s, id, &ttl) != 0) {
        counters_acquire_answered(srv, RLOCK__V1__STATUS__STATUS_INVALID);
        return 0;
    }

    const char *kind_bad = lock_check_kind(a);
    if (kind_bad == NULL)
        kind_bad = lock_check_trace(a->trace_id);
    if (kind_bad != NULL) {
        acquire_refuse(s, id, RLOCK__V1__STATUS__STATUS_INVALID, kind_bad);
        return 0;
    }
    /* A semaphore's places are a group's, as shared holds are (group_*.lua). */
    int shared = a->mode == RLOCK__V1__LOCK_MODE__MODE_SHARED || a->limit > 0;
    struct request ask = {.owner = a->owner, .shared = (uint8_t)shared, .no_reentry = a->no_reentry,
                          .limit = a->limit, .permits = a->limit > 0 && a->permits == 0 ? 1
                                                                                 : a->permits,
                          .value = a->campaign ? (char *)(a->value != NULL ? a->value : "") : NULL};
    struct lease *held = lock_session_lease(s, a->resource);
    if (held != NULL) { /* a re-entry or join needs no Redis round trip */
        const char *refusal;
        Rlock__V1__Status st;
        if (lock_joins(held, &ask, &st, &refusal)) {
            lock_join(held, a->owner, s, id, s->last_frame_ms);
            return 0;
        }
        if (refusal != NULL) {
            acquire_refuse(s, id, st, refusal);
            return 0;
        }
    }
    if (held != NULL && a->wait_ms == 0) { /* another owner of this session holds it */
        Rlock__V1__Holder h;
        acquire_refuse_held(s, id, held->res, "held by another owner of this session",
                            holder_of_lease(&h, held, held->shared ? held->res->nshared : 1,
                                            util_now_ms()));
        return 0;
    }
    if (s->nleases + s->nrequests >= cfg->max_locks_per_session) {
        acquire_refuse(s, id, RLOCK__V1__STATUS__STATUS_LIMIT_EXCEEDED,
                      "too many locks held or awaited by this session");
        return 0;
    }
    /* Tries in Redis count too: a burst of them could all succeed at once. */
    if (srv->nleases + srv->nacquires >= cfg->max_locks) {
        acquire_refuse(s, id, RLOCK__V1__STATUS__STATUS_LIMIT_EXCEEDED,
                      "too many locks held or awaited in this daemon (limits.max_locks)");
        return 0;
    }
    uint32_t wait = a->wait_ms < cfg->max_wait_ms ? a->wait_ms : cfg->max_wait_ms;
    char why[160];
    if (lock_quota_refusal(s, wait > 0, why, sizeof why) != NULL) {
        acquire_refuse(s, id, RLOCK__V1__STATUS__STATUS_LIMIT_EXCEEDED, why);
        return 0;
    }
    struct resource *res = resource_get(srv, a->resource, strlen(a->resource));
    if (res == NULL) {
        acquire_refuse(s, id, RLOCK__V1__STATUS__STATUS_INTERNAL, "out of memory");
        return 0;
    }
    if (!rpool_route_ready(srv->pool, res->route)) {
        resource_unref(res);
        acquire_refuse(s, id, RLOCK__V1__STATUS__STATUS_UNAVAILABLE, "redis unavailable");
        return 0;
    }
    if (wait == 0 && a->limit > 0 && res->nwaiters > 0) {
        /* Permits may be free while the head waits for more than are: a try taking them
         * would pass it, and a stream of small tries would keep it out for ever. */
        Rlock__V1__Holder h;
        acquire_refuse_held(s, id, res,
                            "requests of this daemon wait for the semaphore before this one "
                            "(first come, first served)",
                            holder_fill(&h, res, NULL, util_now_ms()));
        resource_unref(res);
        return 0;
    }
    if (wait > 0 && res->nwaiters >= cfg->max_waiters_per_resource) {
        resource_unref(res);
        acquire_refuse(s, id, RLOCK__V1__STATUS__STATUS_LIMIT_EXCEEDED,
                      "too many waiters on this resource");
        return 0;
    }
    struct request *req = request_new(s->srv, s, id, RLOCK__V1__REQUEST__BODY_ACQUIRE);
    if (req == NULL) {
        resource_unref(res);
        acquire_refuse(s, id, RLOCK__V1__STATUS__STATUS_INTERNAL, "out of memory");
        return 0;
    }
    req->res = res;
    req->ttl_ms = ttl;
    req->watchdog = !a->watchdog_off;
    req->owner = a->owner;
    req->no_reentry = a->no_reentry;
    req->shared = (uint8_t)shared;
    req->limit = ask.limit;
    req->permits = ask.permits;
    if (a->campaign) {
        req->value_len = a->value != NULL ? strlen(a->value) : 0;
        req->value = malloc(req->value_len + 1);
        if (req->value == NULL) {
            lock_request_done(req);
            acquire_refuse(s, id, RLOCK__V1__STATUS__STATUS_INTERNAL, "out of memory");
            return 0;
        }
        memcpy(req->value, req->value_len > 0 ? a->value : "", req->value_len + 1);
    }
    req->trace = trace_copy(a->trace_id);
    req->max_hold_ms = effective_max_hold(cfg, a->max_hold_ms);
    req->lock_delay_ms = effective_lock_delay(cfg, a->lock_delay_ms);
    req->arrival_ms = s->last_frame_ms;
    if (srv->resume) /* derived: a resumed session can have it released (Release.acquire_id) */
        seal_acquire_token(&srv->resume_key, s->id, id, req->token);
    else
        util_uuid(&srv->rng, req->token);
    char cycle[1024];
    if (wait > 0 && RESOURCE_HELD_HERE(res) && deadlock_find(req, cycle, sizeof cycle)) {
        /* The youngest wait of the cycle is this one: refused, the others go on. */
        log_peer_info("session %s (%s): %s%s%s", s->id, s->name[0] ? s->name : "-", cycle,
                      req->trace != NULL ? "; trace " : "", req->trace != NULL ? req->trace : "");
        req->contended = 1;
        contention_end(req, CONTENTION_REFUSED);
        answer_error(req, RLOCK__V1__STATUS__STATUS_DEADLOCK, cycle);
        lock_request_done(req);
        return 0;
    }
    if (wait > 0) {
        req->deadline_ms = util_now_ms() + wait;
        req->deadline_ev = evtimer_new(srv->base, deadline_cb, req);
        struct timeval tv = util_tv_ms(wait);
        if (req->deadline_ev != NULL)
            evtimer_add(req->deadline_ev, &tv);
        /* FIFO: join the queue; the head (possibly this one) tries. */
        int behind = res->nwaiters > 0; /* others wait before it */
        TAILQ_INSERT_TAIL(&res->waiters, req, wait_link);
        req->in_queue = 1;
        res->nwaiters++;
        if (behind)
            contention_begin(req);
        contention_queued(srv, res);
        srv->nwaiters++;
        if (req->quota != NULL)
            req->quota->waiters++;
        request_set_state(req, REQUEST_WAITING);
        lock_kick(res);
        return 1;
    }
    acquire_try(req);
    return 1;
}

/* --- release ---------------------------------------------------------------- */

/*
 * Release.acquire_id: after a resume, release whatever the Acquire with that
 * id, unanswered when the session's connection was lost, may have taken. Its
 * token is derived from the session and the id (seal_acquire_token); the key
 * is deleted if it holds that token, retried until confirmed for as long as
 * such a key could live. Answered OK at once.
 */
static int release_unanswered(struct session *s, uint64_t id, const Rlock__V1__Release *r)
{
    struct server *srv = s->srv;
    const char *bad = lock_check_resource(srv->cfg, r->resource);
    if (!srv->resume)
        bad = "this daemon has no resume key: acquire_id means nothing here";
    else if (r->acquire_id >= id)
        bad = "acquire_id must name an earlier request of this session";
    if (bad != NULL) {
        session_respond_error(s, id, RLOCK__V1__STATUS__STATUS_INVALID, bad);
        return 0;
    }
    char token[UTIL_UUID_LEN + 1];
    seal_acquire_token(&srv->resume_key, s->id, r->acquire_id, token);
    struct lease *l = lock_session_lease(s, r->resource);
    if (l != NULL && strcmp(l->token, token) == 0) {
        session_respond_error(s, id, RLOCK__V1__STATUS__STATUS_INVALID,
                              "that acquire's lock is held: release it by its token");
        return 0;
    }
    struct resource *res = resource_get(srv, r->resource, strlen(r->resource));
    if (res == NULL) {
        session_respond_error(s, id, RLOCK__V1__STATUS__STATUS_INTERNAL, "out of memory");
        return 0;
    }
    /* Any ttl the acquire may have asked for: at most max_ttl (limits can only have grown);
     * either mode: its token is released as a key and as a shared place. */
    lock_release_token(srv, res, token, 0, key_life_end(srv->cfg->max_ttl_ms));
    lock_release_token(srv, res, token, 1, key_life_end(srv->cfg->max_ttl_ms));
    resource_unref(res);
    answer_released(s, id, 0, NULL);
    return 0;
}

int lock_release(struct session *s, uint64_t id, const Rlock__V1__Release *r)
{
    const char *bad = lock_check_trace(r->trace_id);
    if (bad != NULL) {
        session_respond_error(s, id, RLOCK__V1__STATUS__STATUS_INVALID, bad);
        return 0;
    }
    if (r->acquire_id != 0)
        return release_unanswered(s, id, r);
    struct lease *l = lock_session_lease(s, r->resource);
    if (l == NULL || (r->token[0] != '\0' && strcmp(r->token, l->token) != 0)) {
        session_respond_error(s, id, RLOCK__V1__STATUS__STATUS_NOT_HELD,
                      "this session does not hold the lock");
        return 0;
    }
    if (--l->holds > 0) {
        answer_released(s, id, l->holds, NULL);
        return 0;
    }
    s->srv->mx.releases++;
    struct request *req = request_new(s->srv, s, id, RLOCK__V1__REQUEST__BODY_RELEASE);
    if (req == NULL) {
        l->holds++;
        session_respond_error(s, id, RLOCK__V1__STATUS__STATUS_INTERNAL, "out of memory");
        return 0;
    }
    req->res = l->res;
    req->shared = l->shared;
    resource_ref(l->res);
    char token[UTIL_UUID_LEN + 1];
    memcpy(token, l->token, sizeof token);
    int64_t max_expiry = l->max_expiry_ms;
    TRACE_LINE(r->trace_id[0] != '\0' ? r->trace_id : lease_trace(l), s,
               "released %s (fence %llu) after %lld ms held", l->res->name,
               (unsigned long long)l->fence, (long long)(util_now_ms() - l->granted_ms));
    lease_forget(l);
    release_send(req, token, max_expiry);
    return 1;
}

/* --- extend ----------------------------------------------------------------- */

static void extend_reply_cb(const redisReply *reply, const char *err, void *arg)
{
    struct request *req = arg;
    struct lease *l = req->sess != NULL ? session_hold(req->sess, req->res) : NULL;
    if (l != NULL && strcmp(l->token, req->token) != 0)
        l = NULL;
    if (l != NULL)
        l->extending = 0;
    int8_t v;
    if (reply_renew(reply, 1, &v) != 0 || v == REPLY_RENEW_UNKNOWN) {
        /* It may still run, and lengthen the key; it cannot shorten it. */
        if (l != NULL)
            lease_unconfirmed(l, req->ttl_ms);
        else
            lock_release_token(req->srv, req->res, req->token, req->shared, key_life_end(req->ttl_ms));
        answer_error(req, RLOCK__V1__STATUS__STATUS_UNAVAILABLE,
                    reply == NULL ? err : "unexpected reply from Redis");
    } else if (v != REPLY_RENEW_OK || l == NULL) {
        if (l == NULL && v == REPLY_RENEW_OK) /* released meanwhile */
            lock_release_token(req->srv, req->res, req->token, req->shared, key_life_end(req->ttl_ms));
        if (l != NULL)
            lease_lose(l,
                       v == REPLY_RENEW_MISSING ? RLOCK__V1__LOST_REASON__LOST_MISSING
                                                : RLOCK__V1__LOST_REASON__LOST_STOLEN,
                       "extend found the key gone or taken");
        answer_error(req, RLOCK__V1__STATUS__STATUS_NOT_HELD, "the lock is no longer held");
    } else {
        validity_ttl_change(l, req->ttl_ms);
        lease_confirmed(l, req->sent_ms, req->ttl_ms);
        lease_schedule(l);
        Rlock__V1__ExtendReply e = RLOCK__V1__EXTEND_REPLY__INIT;
        e.ttl_ms = l->ttl_ms;
        e.valid_ms = lease_valid_ms(l, req->arrival_ms);
        char seal[SEAL_TEXT_LEN + 1];
        lease_seal(l, seal);
        e.seal = seal;
        session_respond(req->sess, req->id, RLOCK__V1__STATUS__STATUS_OK, NULL,
                        RLOCK__V1__RESPONSE__BODY_EXTEND, &e);
    }
    lock_request_done(req);
}

int lock_extend(struct session *s, uint64_t id, const Rlock__V1__Extend *e)
{
    const char *bad = lock_check_trace(e->trace_id);
    if (bad != NULL) {
        session_respond_error(s, id, RLOCK__V1__STATUS__STATUS_INVALID, bad);
        return 0;
    }
    struct lease *l = lock_session_lease(s, e->resource);
    if (l == NULL || (e->token[0] != '\0' && strcmp(e->token, l->token) != 0)) {
        session_respond_error(s, id, RLOCK__V1__STATUS__STATUS_NOT_HELD,
                      "this session does not hold the lock");
        return 0;
    }
    if (l->extending) {
        session_respond_error(s, id, RLOCK__V1__STATUS__STATUS_LIMIT_EXCEEDED,
                      "an Extend of this lock is already in progress");
        return 0;
    }
    /* 0 keeps the lock's own ttl, granted within the limits of its time: a reload that
     * narrowed them since does not make it invalid. */
    uint32_t ttl = e->ttl_ms != 0 ? e->ttl_ms : l->ttl_ms;
    if (e->ttl_ms != 0 && check_ttl(s, id, &ttl) != 0)
        return 0;
    struct request *req = request_new(s->srv, s, id, RLOCK__V1__REQUEST__BODY_EXTEND);
    if (req == NULL) {
        session_respond_error(s, id, RLOCK__V1__STATUS__STATUS_INTERNAL, "out of memory");
        return 0;
    }
    req->res = l->res;
    resource_ref(l->res);
    req->ttl_ms = ttl;
    req->shared = l->shared;
    req->arrival_ms = s->last_frame_ms;
    memcpy(req->token, l->token, sizeof req->token);
    request_set_state(req, REQUEST_IN_REDIS);
    req->sent_ms = util_now_ms();
    l->extending = 1;
    TRACE_LINE(e->trace_id[0] != '\0' ? e->trace_id : lease_trace(l), s,
               "extend %s (fence %llu) to %u ms", l->res->name, (unsigned long long)l->fence, ttl);
    calls_renew(s->srv, &l, &ttl, 1, extend_reply_cb, req);
    return 1;
}

/* --- cancel ----------------------------------------------------------------- */

void lock_cancel(struct session *s, uint64_t id, const Rlock__V1__Cancel *c)
{
    struct request *req;
    TAILQ_FOREACH(req, &s->requests, sess_link) {
        if (req->op == RLOCK__V1__REQUEST__BODY_ACQUIRE && req->id == c->request_id &&
            !req->cancelled)
            break;
    }
    if (req != NULL && req->state == REQUEST_IN_REDIS) {
        req->cancelled = 1; /* its reply decides: a grant is released (acquire_cancelled) */
    } else if (req != NULL) {
        answer_error(req, RLOCK__V1__STATUS__STATUS_CANCELLED, "acquire cancelled");
        lock_request_done(req);
    }
    Rlock__V1__CancelReply r = RLOCK__V1__CANCEL_REPLY__INIT;
    r.found = req != NULL;
    session_respond(s, id, RLOCK__V1__STATUS__STATUS_OK, NULL, RLOCK__V1__RESPONSE__BODY_CANCEL,
                    &r);
}

/* --- session end ------------------------------------------------------------ */

uint32_t lock_session_end(struct session *s, int clean, uint32_t *budget)
{
    struct request *req;
    election_session_end(s);
    while ((req = TAILQ_FIRST(&s->requests)) != NULL) {
        if (req->state == REQUEST_IN_REDIS) {
            /* Orphan: its reply still arrives; a grant is then released by token. */
            request_orphan(req);
        } else {
            lock_request_done(req);
        }
    }
    struct lease *l;
    while (*budget > 0 && (l = TAILQ_FIRST(&s->leases)) != NULL) {
        (*budget)--;
        struct resource *res = l->res;
        char token[UTIL_UUID_LEN + 1];
        uint32_t delay = clean ? 0 : l->lock_delay_ms;
        int64_t max_expiry = l->max_expiry_ms;
        int shared = l->shared;
        memcpy(token, l->token, sizeof token);
        resource_ref(res);
        lease_forget(l);
        /* Batched and paced: a session may hold a hundred thousand locks. A moved
         * session's keys are left as they are: its client adopts them elsewhere. */
        if (!s->moved)
            relq_add(s->srv, res, token, shared, delay, max_expiry);
        resource_unref(res);
    }
    if (s->nleases == 0)
        validity_drain(s);
    return s->nleases;
}

/* --- sessions that ended: their leases, a batch per loop turn -------------------- */

#define LOCK_END_BATCH 4096u

void lock_end_some(struct server *srv, uint32_t budget)
{
    struct session *s;
    while ((s = TAILQ_FIRST(&srv->ending)) != NULL && budget > 0) {
        if (lock_session_end(s, s->end_clean, &budget) > 0)
            break;
        TAILQ_REMOVE(&srv->ending, s, end_link);
        s->ending = 0;
        session_schedule_reap(srv);
    }
    if (!TAILQ_EMPTY(&srv->ending)) {
        /* A timer, not event_active: it runs on the next turn, after the I/O
         * that turn finds, instead of again in this one. */
        struct timeval now = {0, 0};
        evtimer_add(srv->end_ev, &now);
    }
}

static void end_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct server *srv = arg;
    lock_end_some(srv, LOCK_END_BATCH);
    server_check_stopped(srv);
}

void lock_session_closed(struct session *s)
{
    struct server *srv = s->srv;
    uint32_t budget = srv->stopping ? UINT32_MAX : LOCK_END_BATCH;
    if (lock_session_end(s, s->end_clean, &budget) == 0)
        return;
    s->ending = 1;
    TAILQ_INSERT_TAIL(&srv->ending, s, end_link);
    struct timeval now = {0, 0};
    evtimer_add(srv->end_ev, &now);
}

int lock_start(struct server *srv)
{
    TAILQ_INIT(&srv->ending);
    srv->end_ev = evtimer_new(srv->base, end_cb, srv);
    return srv->end_ev != NULL && contention_start(srv) == 0 ? 0 : -1;
}

void lock_stop(struct server *srv)
{
    if (srv->end_ev != NULL)
        event_free(srv->end_ev);
    srv->end_ev = NULL;
    contention_stop(srv);
}
