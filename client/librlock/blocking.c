/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * blocking.c — the blocking API: a thin layer over the engine.
 *
 * A call is a struct rlk_call on the caller's stack. The caller queues its
 * request and writes it (under c->mu, without blocking), then reads the
 * socket itself when no other thread does (rlk_reactor_lead), or sleeps on
 * the call's own futex word until the engine — run by whichever thread reads
 * the answer — marks it DONE: one wake-up per completed call, whatever the
 * number of threads sharing the client. Cancellation sets another bit of
 * the same word. At its deadline the caller gives up on the call and the
 * session with it (the outcome is unknown: RLOCK_ERR_DEADLINE).
 */
#include "rlock_internal.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rlock_cancel {
    pthread_mutex_t mu;
    int fired;
    struct rlk_call *watchers; /* blocking acquires waiting on this token */
};

/* --- cancellation tokens ----------------------------------------------------------- */

RLOCK_API struct rlock_cancel *rlock_cancel_new(void)
{
    struct rlock_cancel *k = calloc(1, sizeof *k);
    if (k != NULL)
        pthread_mutex_init(&k->mu, NULL);
    return k;
}

RLOCK_API void rlock_cancel(struct rlock_cancel *k)
{
    if (k == NULL)
        return;
    pthread_mutex_lock(&k->mu);
    k->fired = 1;
    /* A watcher unlinks itself under k->mu before returning: each one here is alive. */
    for (struct rlk_call *w = k->watchers; w != NULL; w = w->knext) {
        atomic_fetch_or_explicit(&w->state, RLK_CALL_CANCEL_REQ, memory_order_seq_cst);
        rlk_futex_wake(&w->state);
        int fd1 = atomic_load_explicit(&w->lead_fd1, memory_order_seq_cst);
        if (fd1 > 0)
            rlk_reactor_wake_leader(fd1 - 1); /* it polls the socket, not the futex */
    }
    pthread_mutex_unlock(&k->mu);
}

RLOCK_API int rlock_cancel_fired(const struct rlock_cancel *k)
{
    if (k == NULL)
        return 0;
    struct rlock_cancel *m = (struct rlock_cancel *)k;
    pthread_mutex_lock(&m->mu);
    int fired = k->fired;
    pthread_mutex_unlock(&m->mu);
    return fired;
}

RLOCK_API void rlock_cancel_free(struct rlock_cancel *k)
{
    if (k == NULL)
        return;
    pthread_mutex_destroy(&k->mu);
    free(k);
}

static void cancel_watch(struct rlock_cancel *k, struct rlk_call *call)
{
    pthread_mutex_lock(&k->mu);
    if (k->fired) {
        atomic_fetch_or_explicit(&call->state, RLK_CALL_CANCEL_REQ, memory_order_release);
    } else {
        call->cancel = k;
        call->kprev = NULL;
        call->knext = k->watchers;
        if (k->watchers != NULL)
            k->watchers->kprev = call;
        k->watchers = call;
    }
    pthread_mutex_unlock(&k->mu);
}

static void cancel_unwatch(struct rlock_cancel *k, struct rlk_call *call)
{
    pthread_mutex_lock(&k->mu);
    if (call->cancel == k) {
        if (call->kprev != NULL)
            call->kprev->knext = call->knext;
        else
            k->watchers = call->knext;
        if (call->knext != NULL)
            call->knext->kprev = call->kprev;
        call->cancel = NULL;
    }
    pthread_mutex_unlock(&k->mu);
}

/* --- the call ------------------------------------------------------------------------ */

/*
 * Enter a blocking call on c: refuse what cannot be done from here, and count
 * the call so that rlock_close waits for its return. RLOCK_OK or the error.
 */
static enum rlock_err call_enter(struct rlock_client *c)
{
    if (c == NULL)
        return rlk_fail(RLOCK_ERR_ARG, "no client");
    if (rlk_in_callback)
        return rlk_fail(RLOCK_ERR_IN_CALLBACK,
                        "blocking call from a callback of the library (it would hold up "
                        "every other callback of the process)");
    if (c->mode != RLK_MODE_BLOCKING)
        return rlk_fail(RLOCK_ERR_ARG, "blocking call on an asynchronous client");
    if (rlk_inherited(c))
        return rlk_fail(RLOCK_ERR_CLOSED, "session ended: the client was inherited across "
                                          "fork(); only rlock_close may be used");
    rlk_client_lock(c);
    if (c->closing) {
        rlk_client_unlock(c);
        return rlk_fail(RLOCK_ERR_CLOSED, "session ended: the client is being closed");
    }
    c->calls_active++;
    rlk_client_unlock(c);
    return RLOCK_OK;
}

static void call_leave(struct rlock_client *c)
{
    rlk_client_lock(c);
    /* A call gives the socket back before it returns: none may be left leading. */
    assert(c->calls_active > 1 || c->leader_call == NULL);
    if (--c->calls_active == 0 && c->closing)
        pthread_cond_broadcast(&c->idle_cv);
    rlk_client_unlock(c);
}

/* c->mu held: the request of call is written out, in part, or not at all. */
static const char *written_text(const struct rlock_client *c, const struct rlk_call *call)
{
    if (c->tx_sent >= call->tx_end)
        return "request written, no answer";
    return "request not written: the daemon was not reading";
}

/*
 * Submit req as call and sleep until it completes, its cancellation token
 * fires, or extra_ms + timeout_ms pass. Returns the call's result (with the
 * thread's error detail set on failure).
 */
static enum rlock_err call_run(struct rlock_client *c, Rlock__V1__Request *req,
                               struct rlk_call *call, uint32_t extra_ms, uint32_t timeout_ms,
                               struct rlock_cancel *k)
{
    uint64_t budget = (uint64_t)extra_ms + (timeout_ms ? timeout_ms : RLOCK_DEFAULT_TIMEOUT_MS);
    int64_t deadline = rlk_mono_ms() + (int64_t)budget;

    rlk_client_lock(c);
    if (!rlk_eng_check(c)) {
        rlk_error_set(&call->detail, RLOCK_ERR_CLOSED, 0, "session ended: %s",
                      c->end_reason[0] ? c->end_reason : "closed");
        rlk_client_unlock(c);
        return rlk_fail_with(&call->detail);
    }
    /* Take the socket before the request goes out: the answer cannot then
     * reach the I/O thread first, which would have to hand it over. */
    int lead = rlk_reactor_lead_begin(c, call);
    enum rlock_err e = rlk_eng_submit(c, req, call);
    if (e == RLOCK_OK && rlk_eng_want_write(c))
        rlk_reactor_want_write(c);
    if (e != RLOCK_OK && lead)
        rlk_reactor_lead_end(c, call);
    rlk_client_unlock(c);
    if (e != RLOCK_OK)
        return rlk_fail_with(&call->detail);
    if (k != NULL)
        cancel_watch(k, call);

    int no_lead = 0;
    for (;;) {
        unsigned s = atomic_load_explicit(&call->state, memory_order_acquire);
        if (s & RLK_CALL_DONE)
            break;
        int cancel = (s & RLK_CALL_CANCEL_REQ) != 0;
        if (cancel || rlk_mono_ms() >= deadline) {
            char why[RLK_REASON_BYTES];
            rlk_client_lock(c);
            if (lead) { /* cancelled before it ever waited: give the socket back */
                rlk_reactor_lead_end(c, call);
                lead = 0;
            }
            snprintf(why, sizeof why, "no answer to request %llu within %llu ms (%s)",
                     (unsigned long long)call->id, (unsigned long long)budget,
                     written_text(c, call));
            int completed = rlk_eng_abandon(c, call, cancel, why);
            if (rlk_eng_want_write(c)) /* a Cancel the socket did not take at once */
                rlk_reactor_want_write(c);
            rlk_client_unlock(c);
            if (completed)
                break;
            if (k != NULL)
                cancel_unwatch(k, call);
            if (cancel)
                return rlk_fail(RLOCK_ERR_CANCELLED, "acquire cancelled");
            return rlk_fail(RLOCK_ERR_DEADLINE, "%s; session closed", why);
        }
        /* Read the answer on this thread if no other does: no hand-over from the
         * I/O thread, one wake-up less on every call. Else sleep until it comes. */
        if (lead) {
            no_lead = rlk_reactor_lead_wait(c, call, deadline) < 0;
            lead = 0;
            continue;
        }
        int r = no_lead ? 0 : rlk_reactor_lead(c, call, deadline);
        if (r < 0)
            no_lead = 1; /* poll failed: from now on the I/O thread reads for us */
        if (r <= 0)
            rlk_futex_wait(&call->state, s, deadline);
    }
    if (lead) { /* done before it ever waited (answered while being written) */
        rlk_client_lock(c);
        rlk_reactor_lead_end(c, call);
        rlk_client_unlock(c);
    }
    if (k != NULL)
        cancel_unwatch(k, call);
    if (call->err != RLOCK_OK)
        return rlk_fail_with(&call->detail);
    return RLOCK_OK;
}

/* call_enter + call_run + call_leave for a call without a handle. */
enum rlock_err rlk_call_simple(struct rlock_client *c, Rlock__V1__Request *req,
                               struct rlk_call *call, uint32_t timeout_ms)
{
    enum rlock_err e = call_enter(c);
    if (e != RLOCK_OK)
        return e;
    e = call_run(c, req, call, 0, timeout_ms, NULL);
    call_leave(c);
    return e;
}

/* --- connect ----------------------------------------------------------------------- */

/* Say Hello; the engine adopts the granted timeouts from the reply. */
static enum rlock_err client_hello(struct rlock_client *c, const struct rlock_options *opts,
                                   uint32_t timeout_ms)
{
    Rlock__V1__Hello h;
    rlk_hello_fill(&h, opts);
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.body_case = RLOCK__V1__REQUEST__BODY_HELLO;
    req.hello = &h;
    struct rlk_call call = {.kind = RLK_CALL_HELLO};
    return rlk_call_simple(c, &req, &call, timeout_ms);
}

/*
 * The session must still be alive when the Hello reply is in: a reply that
 * took a whole session timeout leaves a session the daemon may have ended
 * already, and handing that out would only fail the first call. 0, or -1
 * with a message in err.
 */
static int client_check_new(struct rlock_client *c, const char *address, int64_t took_ms,
                            char *err, size_t errlen)
{
    rlk_client_lock(c);
    int open = rlk_eng_check(c);
    uint32_t timeout_ms = c->session_timeout_ms;
    char reason[RLK_REASON_BYTES];
    snprintf(reason, sizeof reason, "%s", c->end_reason);
    rlk_client_unlock(c);
    if (open)
        return 0;
    snprintf(err, errlen,
             "%s: hello: the session ended as soon as it opened (%s); the reply took %lld ms "
             "and the session timeout is %u ms",
             address, reason[0] ? reason : "closed", (long long)took_ms, timeout_ms);
    return -1;
}

/*
 * One try of rlock_connect: a client connected to the first address of the
 * list that accepts, from start, and its Hello answered, by deadline
 * (rlk_mono_ms). *c is the client (also on failure, for the caller to close).
 */
static enum rlock_err connect_from(const char *address, const struct rlock_options *opts,
                                   unsigned start, int64_t deadline, struct rlock_client **c,
                                   char *err, size_t errlen)
{
    *c = rlk_client_new(opts, RLK_MODE_BLOCKING);
    if (*c == NULL) {
        snprintf(err, errlen, "out of memory");
        return RLOCK_ERR_NOMEM;
    }
    int64_t left = deadline - rlk_mono_ms();
    int fd = rlk_client_open(*c, address, start, left > 0 ? (uint32_t)left : 1, err, errlen);
    if (fd < 0)
        return fd == -2 ? RLOCK_ERR_ARG : RLOCK_ERR_CONNECT;
    rlk_client_lock(*c);
    int rc = rlk_eng_init(*c, fd);
    rlk_client_unlock(*c);
    if (rc < 0) {
        snprintf(err, errlen, "out of memory");
        return RLOCK_ERR_NOMEM;
    }
    if (rlk_reactor_add(*c) < 0) {
        snprintf(err, errlen, "cannot start the library's threads");
        return RLOCK_ERR_NOMEM;
    }
    const char *at = (*c)->addrs->a[(*c)->addr_used];
    left = deadline - rlk_mono_ms();
    int64_t hello_at = rlk_alive_ms();
    enum rlock_err e = client_hello(*c, opts, left > 0 ? (uint32_t)left : 1);
    if (e != RLOCK_OK) {
        snprintf(err, errlen, "%s: hello: %s", at, rlock_last_error()->message);
        /* Transport trouble is a failed connect; a refusal keeps the daemon's status. */
        if (e == RLOCK_ERR_DEADLINE || e == RLOCK_ERR_CLOSED || e == RLOCK_ERR_PROTOCOL)
            e = RLOCK_ERR_CONNECT;
        return e;
    }
    if (client_check_new(*c, at, rlk_alive_ms() - hello_at, err, errlen) < 0)
        return RLOCK_ERR_CONNECT;
    return RLOCK_OK;
}

RLOCK_API enum rlock_err rlock_connect(const char *address, const struct rlock_options *opts,
                                       struct rlock_client **out, char *errbuf, size_t errlen)
{
    char err[2 * RLK_REASON_BYTES] = "";
    struct rlock_options none = {0};
    struct rlock_client *c = NULL;
    enum rlock_err e = RLOCK_ERR_ARG;
    if (opts == NULL)
        opts = &none;
    if (out != NULL)
        *out = NULL;
    if (address == NULL || out == NULL) {
        snprintf(err, sizeof err, "address and out must not be NULL");
        goto fail;
    }
    if (rlk_in_callback) {
        e = RLOCK_ERR_IN_CALLBACK;
        snprintf(err, sizeof err, "rlock_connect from a callback of the library");
        goto fail;
    }
    uint32_t budget = opts->connect_timeout_ms ? opts->connect_timeout_ms
                                               : RLOCK_DEFAULT_TIMEOUT_MS;
    int64_t deadline = rlk_mono_ms() + budget;
    struct rlk_addr_list l;
    if (rlk_addr_list_parse(address, &l, err, sizeof err) < 0)
        goto fail;
    /*
     * A daemon that accepts and then drops the connection before answering
     * the Hello (it died, or is shutting down) sends the client on to the
     * next address of the list, as a refused connect does.
     */
    unsigned start = rlk_addr_start(l.n);
    for (unsigned tries = 0;; tries++) {
        e = connect_from(address, opts, start, deadline, &c, err, sizeof err);
        if (e != RLOCK_ERR_CONNECT || c->addrs == NULL || tries + 1 >= l.n ||
            rlk_mono_ms() >= deadline)
            break;
        start = (c->addr_used + 1) % l.n;
        rlock_close(c);
        c = NULL;
    }
    if (e != RLOCK_OK)
        goto fail;
    *out = c;
    return RLOCK_OK;
fail:
    if (errbuf != NULL && errlen > 0)
        snprintf(errbuf, errlen, "%s", err);
    rlk_fail(e, "%s", err);
    rlock_close(c);
    return e;
}

/* --- locks ----------------------------------------------------------------------------- */

/* The owner an acquire is sent with, or 0 (and an error) when opts->owner is not allowed. */
static uint64_t acquire_owner(const struct rlock_acquire_opts *o)
{
    if (o->owner == 0)
        return rlock_thread_owner();
    return o->owner < RLOCK_OWNER_THREAD_BIT ? o->owner : 0;
}

RLOCK_API enum rlock_err rlock_acquire(struct rlock_client *c, const char *resource,
                                       const struct rlock_acquire_opts *opts,
                                       uint32_t timeout_ms, struct rlock_lock **out)
{
    if (out == NULL)
        return rlk_fail(RLOCK_ERR_ARG, "out must not be NULL");
    *out = NULL;
    if (resource == NULL || resource[0] == '\0')
        return rlk_fail(RLOCK_ERR_ARG, "resource name is empty");
    struct rlock_acquire_opts none = {0};
    if (opts == NULL)
        opts = &none;
    uint64_t owner = acquire_owner(opts);
    if (owner == 0)
        return rlk_fail(RLOCK_ERR_ARG, "owner must be below RLOCK_OWNER_THREAD_BIT");
    enum rlock_err e = rlk_acquire_check(opts);
    if (e != RLOCK_OK)
        return e;
    e = call_enter(c);
    if (e != RLOCK_OK)
        return e;

    rlk_client_lock(c);
    struct rlock_lock *h = rlk_handle_new(c, resource);
    if (h != NULL)
        rlk_handle_set_owner(h, owner);
    rlk_client_unlock(c);
    if (h == NULL) {
        call_leave(c);
        return rlk_fail(RLOCK_ERR_NOMEM, "out of memory");
    }
    Rlock__V1__Acquire a;
    rlk_acquire_fill(&a, rlk_handle_resource(h), opts, owner);
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.body_case = RLOCK__V1__REQUEST__BODY_ACQUIRE;
    req.acquire = &a;
    struct rlk_call call = {.kind = RLK_CALL_ACQUIRE, .handle = h};
    e = call_run(c, &req, &call, opts->wait_ms, timeout_ms, opts->cancel);
    if (e != RLOCK_OK)
        rlk_holder_keep(call.has_holder ? &call.holder : NULL); /* with call_run's detail */
    if (e == RLOCK_OK) {
        *out = h;
    } else if (call.handle != NULL) { /* not handed over to a cancelled acquire */
        rlk_client_lock(c);
        rlk_handle_destroy(c, h);
        rlk_client_unlock(c);
    }
    call_leave(c);
    return e;
}

/* Release or extend h: only for a handle still holding its lock. */
static enum rlock_err handle_call(struct rlock_lock *h, Rlock__V1__Request *req,
                                  struct rlk_call *call, const char **token, uint32_t timeout_ms)
{
    if (h == NULL)
        return rlk_fail(RLOCK_ERR_ARG, "no lock handle");
    struct rlock_client *c = rlk_handle_client(h);
    enum rlock_err e = call_enter(c);
    if (e != RLOCK_OK)
        return e;
    rlk_client_lock(c);
    e = rlk_handle_usable(c, h, &call->detail, token);
    rlk_client_unlock(c);
    if (e == RLOCK_OK)
        e = call_run(c, req, call, 0, timeout_ms, NULL);
    else
        rlk_fail_with(&call->detail);
    call_leave(c);
    return e;
}

RLOCK_API enum rlock_err rlock_release(struct rlock_lock *l, uint32_t timeout_ms)
{
    Rlock__V1__Release rel = RLOCK__V1__RELEASE__INIT;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.body_case = RLOCK__V1__REQUEST__BODY_RELEASE;
    req.release = &rel;
    if (l != NULL)
        rel.resource = (char *)rlk_handle_resource(l);
    struct rlk_call call = {.kind = RLK_CALL_RELEASE, .handle = l};
    return handle_call(l, &req, &call, (const char **)&rel.token, timeout_ms);
}

RLOCK_API enum rlock_err rlock_extend(struct rlock_lock *l, uint32_t ttl_ms, uint32_t timeout_ms)
{
    Rlock__V1__Extend ext = RLOCK__V1__EXTEND__INIT;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.body_case = RLOCK__V1__REQUEST__BODY_EXTEND;
    req.extend = &ext;
    ext.ttl_ms = ttl_ms;
    if (l != NULL)
        ext.resource = (char *)rlk_handle_resource(l);
    struct rlk_call call = {.kind = RLK_CALL_EXTEND, .handle = l};
    return handle_call(l, &req, &call, (const char **)&ext.token, timeout_ms);
}

/* --- ping and stats ------------------------------------------------------------------ */

RLOCK_API enum rlock_err rlock_ping(struct rlock_client *c, uint32_t timeout_ms,
                                    uint64_t *server_time_ms)
{
    Rlock__V1__Ping p = RLOCK__V1__PING__INIT;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.body_case = RLOCK__V1__REQUEST__BODY_PING;
    req.ping = &p;
    struct rlk_call call = {.kind = RLK_CALL_PING};
    enum rlock_err e = rlk_call_simple(c, &req, &call, timeout_ms);
    if (e == RLOCK_OK && server_time_ms != NULL)
        *server_time_ms = call.server_time_ms;
    return e;
}

RLOCK_API enum rlock_err rlock_stats(struct rlock_client *c, uint32_t timeout_ms,
                                     struct rlock_stats *out)
{
    if (out == NULL)
        return rlk_fail(RLOCK_ERR_ARG, "out must not be NULL");
    Rlock__V1__Stats s = RLOCK__V1__STATS__INIT;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.body_case = RLOCK__V1__REQUEST__BODY_STATS;
    req.stats = &s;
    struct rlk_call call = {.kind = RLK_CALL_STATS, .stats = out};
    return rlk_call_simple(c, &req, &call, timeout_ms);
}
