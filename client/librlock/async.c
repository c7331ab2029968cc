/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * async.c — the asynchronous API: the engine driven by the application's
 * own event loop. No thread of the library is involved; completions and
 * lost-lock callbacks run inside rlock_async_process (or inside
 * rlock_shutdown / rlock_close for what those end), on the caller's thread,
 * with no lock of the library held, so they may submit further requests.
 */
#include "rlock_internal.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Refuse what an asynchronous call cannot do on c. RLOCK_OK or the error. */
static enum rlock_err async_check(const struct rlock_client *c)
{
    if (c == NULL)
        return rlk_fail(RLOCK_ERR_ARG, "no client");
    if (c->mode != RLK_MODE_ASYNC)
        return rlk_fail(RLOCK_ERR_ARG, "asynchronous call on a blocking client");
    if (rlk_inherited(c))
        return rlk_fail(RLOCK_ERR_CLOSED, "session ended: the client was inherited across "
                                          "fork(); only rlock_close may be used");
    return RLOCK_OK;
}

static void async_changed(struct rlock_client *c)
{
    if (c->change_fn != NULL)
        c->change_fn(c, c->change_arg);
}

/* An owned call of kind with its completion, or NULL when out of memory. */
static struct rlk_call *async_call(enum rlk_call_kind kind, struct rlock_lock *handle,
                                   rlock_done_fn done, void *arg)
{
    struct rlk_call *call = calloc(1, sizeof *call);
    if (call == NULL)
        return NULL;
    call->kind = kind;
    call->owned = 1;
    call->handle = handle;
    call->done_fn = done;
    call->done_arg = arg;
    return call;
}

/* Free an owned call that was never submitted (its handle is the caller's). */
static void async_call_free(struct rlk_call *call)
{
    if (call == NULL)
        return;
    free(call->leader);
    free(call->acq_resource);
    free(call);
}

/* Queue req as call (from async_call; NULL: out of memory), which is freed on failure. */
static enum rlock_err async_queue(struct rlock_client *c, Rlock__V1__Request *req,
                                  struct rlk_call *call, uint64_t *id)
{
    if (call == NULL)
        return rlk_fail(RLOCK_ERR_NOMEM, "out of memory");
    rlk_client_lock(c);
    (void)rlk_eng_check(c);
    enum rlock_err e = rlk_eng_submit(c, req, call);
    int queued = rlk_eng_want_write(c);
    rlk_client_unlock(c);
    if (e != RLOCK_OK) {
        rlk_fail_with(&call->detail);
        async_call_free(call);
        return e;
    }
    if (id != NULL)
        *id = call->id;
    if (queued)
        async_changed(c);
    return RLOCK_OK;
}

/* Queue req as an owned call of kind with its completion. */
static enum rlock_err async_submit(struct rlock_client *c, Rlock__V1__Request *req,
                                   enum rlk_call_kind kind, struct rlock_lock *handle,
                                   rlock_done_fn done, void *arg, uint64_t *id)
{
    return async_queue(c, req, async_call(kind, handle, done, arg), id);
}

RLOCK_API enum rlock_err rlock_async_connect(const char *address,
                                             const struct rlock_options *opts,
                                             rlock_done_fn on_ready, void *ready_arg,
                                             struct rlock_client **out, char *errbuf,
                                             size_t errlen)
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
    e = RLOCK_ERR_NOMEM;
    c = rlk_client_new(opts, RLK_MODE_ASYNC);
    if (c == NULL) {
        snprintf(err, sizeof err, "out of memory");
        goto fail;
    }
    int fd = rlk_client_open(c, address, RLK_ADDR_RANDOM,
                             opts->connect_timeout_ms ? opts->connect_timeout_ms
                                                      : RLOCK_DEFAULT_TIMEOUT_MS,
                             err, sizeof err);
    e = fd == -2 ? RLOCK_ERR_ARG : RLOCK_ERR_CONNECT;
    if (fd < 0)
        goto fail;
    rlk_client_lock(c);
    int rc = rlk_eng_init(c, fd);
    rlk_client_unlock(c);
    if (rc < 0) {
        e = RLOCK_ERR_NOMEM;
        snprintf(err, sizeof err, "out of memory");
        goto fail;
    }
    Rlock__V1__Hello h;
    rlk_hello_fill(&h, opts);
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.body_case = RLOCK__V1__REQUEST__BODY_HELLO;
    req.hello = &h;
    e = async_submit(c, &req, RLK_CALL_HELLO, NULL, on_ready, ready_arg, NULL);
    if (e != RLOCK_OK) {
        snprintf(err, sizeof err, "%s: hello: %s", address, rlock_last_error()->message);
        goto fail;
    }
    *out = c;
    return RLOCK_OK;
fail:
    if (errbuf != NULL && errlen > 0)
        snprintf(errbuf, errlen, "%s", err);
    rlk_fail(e, "%s", err);
    rlock_close(c);
    return e;
}

RLOCK_API int rlock_async_fd(const struct rlock_client *c)
{
    return c != NULL ? c->fd : -1;
}

RLOCK_API int rlock_async_events(const struct rlock_client *c)
{
    if (c == NULL)
        return 0;
    struct rlock_client *m = (struct rlock_client *)c;
    rlk_client_lock(m);
    int ev = rlk_eng_linked(c) ? POLLIN : 0;
    if (rlk_eng_want_write(c))
        ev |= POLLOUT;
    rlk_client_unlock(m);
    return ev;
}

RLOCK_API int64_t rlock_async_timeout_ms(const struct rlock_client *c)
{
    if (c == NULL)
        return -1;
    struct rlock_client *m = (struct rlock_client *)c;
    rlk_client_lock(m);
    int64_t wake = c->state != RLK_SESSION_ENDED ? c->async_wake : -1;
    int waiting = c->done_head != NULL || c->notes != NULL;
    rlk_client_unlock(m);
    if (waiting)
        return 0; /* completions wait to be run */
    if (wake < 0)
        return -1;
    int64_t left = wake - rlk_alive_ms();
    return left > 0 ? left : 0;
}

RLOCK_API void rlock_async_on_change(struct rlock_client *c, rlock_change_fn fn, void *arg)
{
    if (c == NULL)
        return;
    c->change_fn = fn;
    c->change_arg = arg;
}

/* Run one owned call's completion, then free it (the handle of a grant goes to the user). */
static void deliver_call(struct rlock_client *c, struct rlk_call *call)
{
    struct rlock_result r = {.err = call->err, .id = call->id};
    if (call->err != RLOCK_OK)
        r.error = &call->detail;
    if (call->kind == RLK_CALL_ACQUIRE && call->err != RLOCK_OK)
        rlk_holder_keep(call->has_holder ? &call->holder : NULL); /* for its completion */
    if (call->kind == RLK_CALL_ACQUIRE && call->err == RLOCK_OK) {
        r.lock = call->handle;
        call->handle = NULL;
    }
    r.hold_count = call->hold_count;
    r.ttl_ms = call->ttl_ms;
    r.server_time_ms = call->server_time_ms;
    if (call->err == RLOCK_OK)
        r.leader = call->leader;
    call->done_fn(c, &r, call->done_arg);
    if (call->handle != NULL && call->kind == RLK_CALL_ACQUIRE) {
        rlk_client_lock(c);
        rlk_handle_destroy(c, call->handle);
        rlk_client_unlock(c);
    }
    async_call_free(call);
}

void rlk_async_deliver(struct rlock_client *c)
{
    for (;;) {
        rlk_client_lock(c);
        struct rlk_call *done = c->done_head;
        struct rlk_note *notes = c->notes;
        c->done_head = NULL;
        c->done_tail = &c->done_head;
        c->notes = NULL;
        c->notes_tail = &c->notes;
        rlk_client_unlock(c);
        if (done == NULL && notes == NULL)
            return;
        while (done != NULL) {
            struct rlk_call *next = done->cnext;
            deliver_call(c, done);
            done = next;
        }
        while (notes != NULL) {
            struct rlk_note *next = notes->next;
            if (!atomic_load(&c->cb_closed))
                rlk_note_deliver(c, notes);
            free(notes);
            notes = next;
        }
    }
}

RLOCK_API enum rlock_err rlock_async_process(struct rlock_client *c, int revents)
{
    enum rlock_err e = async_check(c);
    if (e != RLOCK_OK)
        return e;
    c->in_process = 1;
    rlk_client_lock(c);
    if (rlk_eng_linked(c) && (revents & (POLLIN | POLLHUP | POLLERR)))
        rlk_eng_read(c);
    if (rlk_eng_linked(c) && (revents & POLLOUT))
        rlk_eng_flush(c);
    c->async_wake = rlk_eng_timers(c, rlk_alive_ms());
    /* A session that moved has a new descriptor: the loop must watch that one. */
    int changed = c->fd_changed;
    c->fd_changed = 0;
    rlk_client_unlock(c);
    rlk_async_deliver(c);
    if (changed && !c->free_after_process)
        async_changed(c);
    c->in_process = 0;
    if (c->free_after_process) {
        rlk_client_free(c);
        return RLOCK_ERR_CLOSED;
    }
    /* A completion may have ended the session (rlock_shutdown): say so now. */
    rlk_client_lock(c);
    int open = c->state != RLK_SESSION_ENDED;
    rlk_client_unlock(c);
    return open ? RLOCK_OK : RLOCK_ERR_CLOSED;
}

/* --- requests ------------------------------------------------------------------------- */

RLOCK_API enum rlock_err rlock_async_acquire(struct rlock_client *c, const char *resource,
                                             const struct rlock_acquire_opts *opts,
                                             rlock_done_fn done, void *arg, uint64_t *id)
{
    enum rlock_err e = async_check(c);
    if (e != RLOCK_OK)
        return e;
    if (resource == NULL || resource[0] == '\0' || done == NULL)
        return rlk_fail(RLOCK_ERR_ARG, "resource name is empty or no completion given");
    struct rlock_acquire_opts none = {0};
    if (opts == NULL)
        opts = &none;
    uint64_t owner = opts->owner ? opts->owner : rlock_thread_owner();
    if (opts->owner >= RLOCK_OWNER_THREAD_BIT)
        return rlk_fail(RLOCK_ERR_ARG, "owner must be below RLOCK_OWNER_THREAD_BIT");
    if ((e = rlk_acquire_check(opts)) != RLOCK_OK)
        return e;
    rlk_client_lock(c);
    struct rlock_lock *h = rlk_handle_new(c, resource);
    if (h != NULL)
        rlk_handle_set_owner(h, owner);
    rlk_client_unlock(c);
    if (h == NULL)
        return rlk_fail(RLOCK_ERR_NOMEM, "out of memory");
    Rlock__V1__Acquire a;
    rlk_acquire_fill(&a, rlk_handle_resource(h), opts, owner);
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.body_case = RLOCK__V1__REQUEST__BODY_ACQUIRE;
    req.acquire = &a;
    e = async_submit(c, &req, RLK_CALL_ACQUIRE, h, done, arg, id);
    if (e != RLOCK_OK) {
        rlk_client_lock(c);
        rlk_handle_destroy(c, h);
        rlk_client_unlock(c);
    }
    return e;
}

/* Release or extend submitted for handle l. */
static enum rlock_err async_handle_call(struct rlock_lock *l, Rlock__V1__Request *req,
                                        enum rlk_call_kind kind, const char **token,
                                        rlock_done_fn done, void *arg, uint64_t *id)
{
    if (l == NULL || done == NULL)
        return rlk_fail(RLOCK_ERR_ARG, "no lock handle or no completion given");
    struct rlock_client *c = rlk_handle_client(l);
    enum rlock_err e = async_check(c);
    if (e != RLOCK_OK)
        return e;
    struct rlock_error detail;
    rlk_client_lock(c);
    e = rlk_handle_usable(c, l, &detail, token);
    rlk_client_unlock(c);
    if (e != RLOCK_OK)
        return rlk_fail_with(&detail);
    return async_submit(c, req, kind, l, done, arg, id);
}

RLOCK_API enum rlock_err rlock_async_release(struct rlock_lock *l, rlock_done_fn done,
                                             void *arg, uint64_t *id)
{
    Rlock__V1__Release rel = RLOCK__V1__RELEASE__INIT;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.body_case = RLOCK__V1__REQUEST__BODY_RELEASE;
    req.release = &rel;
    if (l != NULL)
        rel.resource = (char *)rlk_handle_resource(l);
    return async_handle_call(l, &req, RLK_CALL_RELEASE, (const char **)&rel.token, done, arg,
                             id);
}

RLOCK_API enum rlock_err rlock_async_extend(struct rlock_lock *l, uint32_t ttl_ms,
                                            rlock_done_fn done, void *arg, uint64_t *id)
{
    Rlock__V1__Extend ext = RLOCK__V1__EXTEND__INIT;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.body_case = RLOCK__V1__REQUEST__BODY_EXTEND;
    req.extend = &ext;
    ext.ttl_ms = ttl_ms;
    if (l != NULL)
        ext.resource = (char *)rlk_handle_resource(l);
    return async_handle_call(l, &req, RLK_CALL_EXTEND, (const char **)&ext.token, done, arg,
                             id);
}

RLOCK_API enum rlock_err rlock_async_ping(struct rlock_client *c, rlock_done_fn done, void *arg,
                                          uint64_t *id)
{
    enum rlock_err e = async_check(c);
    if (e != RLOCK_OK)
        return e;
    if (done == NULL)
        return rlk_fail(RLOCK_ERR_ARG, "no completion given");
    Rlock__V1__Ping p = RLOCK__V1__PING__INIT;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.body_case = RLOCK__V1__REQUEST__BODY_PING;
    req.ping = &p;
    return async_submit(c, &req, RLK_CALL_PING, NULL, done, arg, id);
}

/* A Leader or Observe request of kind for election name. */
static enum rlock_err async_elect(struct rlock_client *c, const char *name,
                                  enum rlk_call_kind kind, rlock_done_fn done, void *arg,
                                  uint64_t *id)
{
    enum rlock_err e = async_check(c);
    if (e != RLOCK_OK)
        return e;
    if (name == NULL || name[0] == '\0' || done == NULL)
        return rlk_fail(RLOCK_ERR_ARG, "election name is empty or no completion given");
    struct rlk_call *call = async_call(kind, NULL, done, arg);
    if (call != NULL && ((call->acq_resource = strdup(name)) == NULL ||
                         (call->leader = calloc(1, sizeof *call->leader)) == NULL)) {
        async_call_free(call);
        call = NULL;
    }
    if (call == NULL)
        return rlk_fail(RLOCK_ERR_NOMEM, "out of memory");
    call->name = call->acq_resource;
    Rlock__V1__Request req;
    Rlock__V1__Leader l;
    Rlock__V1__Observe o;
    rlk_elect_fill(call, &req, &l, &o);
    /* A stop: the engine forgets the election when it queues it (rlk_eng_submit). */
    return async_queue(c, &req, call, id);
}

RLOCK_API enum rlock_err rlock_async_leader(struct rlock_client *c, const char *name,
                                            rlock_done_fn done, void *arg, uint64_t *id)
{
    return async_elect(c, name, RLK_CALL_LEADER, done, arg, id);
}

RLOCK_API enum rlock_err rlock_async_observe(struct rlock_client *c, const char *name,
                                             rlock_done_fn done, void *arg, uint64_t *id)
{
    return async_elect(c, name, RLK_CALL_OBSERVE, done, arg, id);
}

RLOCK_API enum rlock_err rlock_async_observe_stop(struct rlock_client *c, const char *name,
                                                  rlock_done_fn done, void *arg, uint64_t *id)
{
    return async_elect(c, name, RLK_CALL_UNOBSERVE, done, arg, id);
}

RLOCK_API enum rlock_err rlock_async_cancel(struct rlock_client *c, uint64_t id)
{
    enum rlock_err e = async_check(c);
    if (e != RLOCK_OK)
        return e;
    rlk_client_lock(c);
    int rc = rlk_eng_cancel_id(c, id);
    int queued = rlk_eng_want_write(c);
    rlk_client_unlock(c);
    if (rc < 0)
        return rlk_fail(RLOCK_ERR_NOT_HELD, "no acquire %llu is pending",
                        (unsigned long long)id);
    if (queued)
        async_changed(c);
    return RLOCK_OK;
}
