/*
 * lock.c — lock handles: acquire, release, extend, and their state.
 *
 * A handle stands for one hold of a lock. Acquiring a resource the session
 * already holds yields another handle with the same token and fence; the
 * handles of one lock share its hold count and lease. The caller owns each
 * handle (rlock_lock_free), while the client keeps every live handle on a
 * list so that the background thread can mark it LOST when the daemon says
 * so or the session ends. A handle is listed by the background thread in the
 * same critical section that completes its acquire, so no LockLost event can
 * slip in between.
 *
 * States: HELD -> LOST (event, session end, or the daemon no longer knows
 * the lock) or HELD -> RELEASED (rlock_release). Only rlk_lock_set_state
 * changes them.
 */
#include "rlock_internal.h"

#include <stdlib.h>
#include <string.h>

void rlk_lock_set_state(struct rlock_lock *l, enum rlock_lock_state st,
                        enum rlock_lost_reason reason)
{
    l->state = st;
    l->lost_reason = st == RLOCK_LOST ? reason : RLOCK_LOST_UNSPECIFIED;
    if (st != RLOCK_HELD)
        l->notify = 0;
}

int rlk_lock_same(const struct rlock_lock *l, const char *resource, const char *token)
{
    return l->token != NULL && strcmp(l->resource, resource) == 0 &&
           strcmp(l->token, token) == 0;
}

/* c->mu held: give every handle of lock l the hold count and/or lease (NULL: unchanged). */
static void lock_share(struct rlock_client *c, const struct rlock_lock *l,
                       const uint32_t *hold_count, const uint32_t *ttl_ms)
{
    for (struct rlock_lock *o = c->locks; o != NULL; o = o->next) {
        if (!rlk_lock_same(o, l->resource, l->token))
            continue;
        if (hold_count != NULL)
            o->hold_count = *hold_count;
        if (ttl_ms != NULL)
            o->ttl_ms = *ttl_ms;
    }
}

static void lock_unlink(struct rlock_client *c, struct rlock_lock *l)
{
    if (!l->listed)
        return;
    if (l->prev != NULL)
        l->prev->next = l->next;
    else
        c->locks = l->next;
    if (l->next != NULL)
        l->next->prev = l->prev;
    l->prev = l->next = NULL;
    l->listed = 0;
}

static void lock_destroy(struct rlock_lock *l)
{
    free(l->resource);
    free(l->token);
    free(l);
}

enum rlock_err rlk_lock_grant(struct rlock_client *c, struct rlock_lock *l,
                              const Rlock__V1__AcquireReply *r)
{
    if (r->token == NULL || r->token[0] == '\0')
        return RLOCK_ERR_PROTOCOL;
    l->token = strdup(r->token);
    if (l->token == NULL)
        return RLOCK_ERR_NOMEM;
    l->fence = r->fence;
    l->ttl_ms = r->ttl_ms;
    l->hold_count = r->hold_count ? r->hold_count : 1;
    rlk_lock_set_state(l, RLOCK_HELD, RLOCK_LOST_UNSPECIFIED);
    l->prev = NULL;
    l->next = c->locks;
    if (c->locks != NULL)
        c->locks->prev = l;
    c->locks = l;
    l->listed = 1;
    lock_share(c, l, &l->hold_count, NULL);
    return RLOCK_OK;
}

void rlk_lock_free_all(struct rlock_client *c)
{
    struct rlock_lock *l = c->locks;
    c->locks = NULL;
    while (l != NULL) {
        struct rlock_lock *next = l->next;
        lock_destroy(l);
        l = next;
    }
}

RLOCK_API enum rlock_err rlock_acquire(struct rlock_client *c, const char *resource,
                                       const struct rlock_acquire_opts *opts,
                                       uint32_t timeout_ms, struct rlock_lock **out)
{
    if (c == NULL || out == NULL)
        return RLOCK_ERR_ARG;
    *out = NULL;
    if (resource == NULL || resource[0] == '\0')
        return rlk_fail(c, RLOCK_ERR_ARG, "resource name is empty");
    struct rlock_acquire_opts none = {0};
    if (opts == NULL)
        opts = &none;

    struct rlock_lock *l = calloc(1, sizeof *l);
    if (l == NULL || (l->resource = strdup(resource)) == NULL) {
        free(l);
        return rlk_fail(c, RLOCK_ERR_NOMEM, "out of memory");
    }
    l->client = c;

    Rlock__V1__Acquire a = RLOCK__V1__ACQUIRE__INIT;
    a.resource = l->resource;
    a.ttl_ms = opts->ttl_ms;
    a.wait_ms = opts->wait_ms;
    a.watchdog_off = opts->watchdog_off != 0;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.body_case = RLOCK__V1__REQUEST__BODY_ACQUIRE;
    req.acquire = &a;
    struct rlk_call call = {.expect = RLOCK__V1__RESPONSE__BODY_ACQUIRE, .grant = l};
    enum rlock_err e = rlk_call(c, &req, &call, opts->wait_ms, timeout_ms);
    rlk_call_done(&call);
    if (e == RLOCK_OK) {
        *out = l;
        return RLOCK_OK;
    }
    pthread_mutex_lock(&c->mu);
    lock_unlink(c, l);
    pthread_mutex_unlock(&c->mu);
    lock_destroy(l);
    return e;
}

/* The guarded fields of a handle, read together under its client's mutex. */
struct lock_view {
    enum rlock_lock_state state;
    enum rlock_lost_reason reason;
    uint32_t ttl_ms;
    uint32_t hold_count;
};

static struct lock_view lock_view(const struct rlock_lock *l)
{
    struct lock_view v = {.state = RLOCK_LOST};
    if (l == NULL)
        return v;
    pthread_mutex_lock(&l->client->mu);
    /* A resumed process may ask before the background thread has looked at the clock. */
    (void)rlk_session_check(l->client);
    v.state = l->state;
    v.reason = l->lost_reason;
    v.ttl_ms = l->ttl_ms;
    v.hold_count = l->hold_count;
    pthread_mutex_unlock(&l->client->mu);
    return v;
}

/* RLOCK_OK if the handle is HELD, else RLOCK_ERR_NOT_HELD with rlock_errmsg saying why. */
static enum rlock_err lock_require_held(const struct rlock_lock *l)
{
    struct lock_view v = lock_view(l);
    if (v.state == RLOCK_RELEASED)
        return rlk_fail(l->client, RLOCK_ERR_NOT_HELD, "this handle was already released");
    if (v.state == RLOCK_LOST)
        return rlk_fail(l->client, RLOCK_ERR_NOT_HELD, "the lock was lost (%s)",
                        rlock_lost_reason_str(v.reason));
    return RLOCK_OK;
}

/* After NOT_HELD from the daemon the lock is gone, whatever the handle said. */
static void lock_forget(struct rlock_lock *l)
{
    struct rlock_client *c = l->client;
    pthread_mutex_lock(&c->mu);
    for (struct rlock_lock *o = c->locks; o != NULL; o = o->next) {
        if (rlk_lock_same(o, l->resource, l->token) && o->state == RLOCK_HELD)
            rlk_lock_set_state(o, RLOCK_LOST, RLOCK_LOST_UNSPECIFIED);
    }
    pthread_mutex_unlock(&c->mu);
}

/*
 * The exchange behind release and extend: only for a HELD handle, and when
 * the daemon answers NOT_HELD it no longer knows the lock at all.
 */
static enum rlock_err lock_call(struct rlock_lock *l, Rlock__V1__Request *req,
                                struct rlk_call *call, uint32_t timeout_ms)
{
    enum rlock_err e = lock_require_held(l);
    if (e != RLOCK_OK)
        return e;
    e = rlk_call(l->client, req, call, 0, timeout_ms);
    if (e == RLOCK_ERR_NOT_HELD)
        lock_forget(l);
    return e;
}

RLOCK_API enum rlock_err rlock_release(struct rlock_lock *l, uint32_t timeout_ms)
{
    if (l == NULL)
        return RLOCK_ERR_ARG;
    Rlock__V1__Release rel = RLOCK__V1__RELEASE__INIT;
    rel.resource = l->resource;
    rel.token = l->token;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.body_case = RLOCK__V1__REQUEST__BODY_RELEASE;
    req.release = &rel;
    struct rlk_call call = {.expect = RLOCK__V1__RESPONSE__BODY_RELEASE};
    enum rlock_err e = lock_call(l, &req, &call, timeout_ms);
    if (e == RLOCK_OK) {
        uint32_t left = rlk_call_response(&call)->release->hold_count;
        pthread_mutex_lock(&l->client->mu);
        rlk_lock_set_state(l, RLOCK_RELEASED, RLOCK_LOST_UNSPECIFIED);
        lock_share(l->client, l, &left, NULL);
        pthread_mutex_unlock(&l->client->mu);
    }
    rlk_call_done(&call);
    return e;
}

RLOCK_API enum rlock_err rlock_extend(struct rlock_lock *l, uint32_t ttl_ms, uint32_t timeout_ms)
{
    if (l == NULL)
        return RLOCK_ERR_ARG;
    Rlock__V1__Extend ext = RLOCK__V1__EXTEND__INIT;
    ext.resource = l->resource;
    ext.ttl_ms = ttl_ms;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.body_case = RLOCK__V1__REQUEST__BODY_EXTEND;
    req.extend = &ext;
    struct rlk_call call = {.expect = RLOCK__V1__RESPONSE__BODY_EXTEND};
    enum rlock_err e = lock_call(l, &req, &call, timeout_ms);
    if (e == RLOCK_OK) {
        uint32_t ttl = rlk_call_response(&call)->extend->ttl_ms;
        pthread_mutex_lock(&l->client->mu);
        lock_share(l->client, l, NULL, &ttl);
        pthread_mutex_unlock(&l->client->mu);
    }
    rlk_call_done(&call);
    return e;
}

RLOCK_API void rlock_lock_free(struct rlock_lock *l)
{
    if (l == NULL)
        return;
    struct rlock_client *c = l->client;
    pthread_mutex_lock(&c->mu);
    lock_unlink(c, l);
    pthread_mutex_unlock(&c->mu);
    lock_destroy(l);
}

RLOCK_API enum rlock_lock_state rlock_lock_state(const struct rlock_lock *l)
{
    return lock_view(l).state;
}

RLOCK_API enum rlock_lost_reason rlock_lock_lost_reason(const struct rlock_lock *l)
{
    return lock_view(l).reason;
}

RLOCK_API uint32_t rlock_lock_ttl_ms(const struct rlock_lock *l)
{
    return lock_view(l).ttl_ms;
}

RLOCK_API uint32_t rlock_lock_hold_count(const struct rlock_lock *l)
{
    return lock_view(l).hold_count;
}

RLOCK_API const char *rlock_lock_resource(const struct rlock_lock *l)
{
    return l != NULL ? l->resource : NULL;
}

RLOCK_API const char *rlock_lock_token(const struct rlock_lock *l)
{
    return l != NULL ? l->token : NULL;
}

RLOCK_API uint64_t rlock_lock_fence(const struct rlock_lock *l)
{
    return l != NULL ? l->fence : 0;
}
