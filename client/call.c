/*
 * call.c — one request/response exchange with the daemon.
 *
 * Every blocking library call goes through rlk_call(): it links a pending
 * call (on the caller's stack) into the client's table, writes the request,
 * and sleeps on the client's condition variable until the background thread
 * hands it the response with the same id, the session ends, or the deadline
 * passes. A call that runs out of time breaks the session: its outcome on the
 * daemon is unknown, and ending the session makes the daemon undo it.
 */
#include "rlock_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum rlock_err rlk_fail(struct rlock_client *c, enum rlock_err e, const char *fmt, ...)
{
    if (c == NULL)
        return e;
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&c->mu);
    vsnprintf(c->errmsg, sizeof c->errmsg, fmt, ap);
    pthread_mutex_unlock(&c->mu);
    va_end(ap);
    return e;
}

void rlk_frame_free(struct rlk_frame *f)
{
    if (f == NULL)
        return;
    if (f->msg != NULL)
        rlock__v1__server_message__free_unpacked(f->msg, &f->budget.alloc);
    free(f);
}

const Rlock__V1__Response *rlk_call_response(const struct rlk_call *call)
{
    return call->frame->msg->response;
}

void rlk_call_done(struct rlk_call *call)
{
    rlk_frame_free(call->frame);
    call->frame = NULL;
}

/* c->mu held: remove call from the pending table if it is still there. */
static void call_unlink(struct rlock_client *c, struct rlk_call *call)
{
    for (struct rlk_call **p = &c->calls; *p != NULL; p = &(*p)->next) {
        if (*p == call) {
            *p = call->next;
            call->next = NULL;
            return;
        }
    }
}

/* c->mu held: assign an id and link the call, unless the session is over. */
static int call_register(struct rlock_client *c, Rlock__V1__Request *req, struct rlk_call *call)
{
    if (c->state != RLK_SESSION_OPEN)
        return -1;
    call->id = ++c->next_id;
    req->id = call->id;
    call->done = 0;
    call->next = c->calls;
    c->calls = call;
    return 0;
}

/* c->mu held: sleep until the call completes or deadline passes. 0 or -1 (timed out). */
static int call_wait(struct rlock_client *c, struct rlk_call *call, int64_t deadline)
{
    struct timespec ts = {.tv_sec = deadline / 1000, .tv_nsec = (deadline % 1000) * 1000000};
    while (!call->done) {
        if (pthread_cond_timedwait(&c->cond, &c->mu, &ts) == ETIMEDOUT && !call->done)
            return -1;
    }
    return 0;
}

static enum rlock_err closed_error(struct rlock_client *c)
{
    char reason[RLK_ERRMSG_BYTES];
    pthread_mutex_lock(&c->mu);
    snprintf(reason, sizeof reason, "%s", c->end_reason[0] ? c->end_reason : "closed");
    pthread_mutex_unlock(&c->mu);
    return rlk_fail(c, RLOCK_ERR_CLOSED, "session ended: %s", reason);
}

/* Turn a completed call into the library's result, recording the daemon's message. */
static enum rlock_err call_result(struct rlock_client *c, struct rlk_call *call)
{
    if (call->err == RLOCK_ERR_CLOSED)
        return closed_error(c);
    if (call->err != RLOCK_OK)
        return rlk_fail(c, call->err, "%s", call->why ? call->why : rlock_strerror(call->err));
    const Rlock__V1__Response *r = rlk_call_response(call);
    int status = (int)r->status;
    if (status < 0 || status > RLOCK__V1__STATUS__STATUS_INTERNAL)
        return rlk_fail(c, RLOCK_ERR_PROTOCOL, "unknown status %d from the daemon", status);
    if (status != RLOCK__V1__STATUS__STATUS_OK) {
        enum rlock_err e = (enum rlock_err)status;
        const char *text = r->message != NULL && r->message[0] ? r->message : rlock_strerror(e);
        if (r->retry_after_ms > 0)
            return rlk_fail(c, e, "%s: %s (retry after %u ms)", wire_status_name(status),
                            text, r->retry_after_ms);
        return rlk_fail(c, e, "%s: %s", wire_status_name(status), text);
    }
    if (r->body_case != call->expect)
        return rlk_fail(c, RLOCK_ERR_PROTOCOL, "the daemon answered with the wrong reply body");
    return RLOCK_OK;
}

enum rlock_err rlk_call(struct rlock_client *c, Rlock__V1__Request *req, struct rlk_call *call,
                        uint32_t extra_ms, uint32_t timeout_ms)
{
    uint64_t budget_ms = (uint64_t)extra_ms + (timeout_ms ? timeout_ms : RLOCK_DEFAULT_TIMEOUT_MS);
    int64_t deadline = rlk_mono_ms() + (int64_t)budget_ms;

    pthread_mutex_lock(&c->mu);
    int registered = call_register(c, req, call);
    pthread_mutex_unlock(&c->mu);
    if (registered < 0)
        return closed_error(c);

    size_t len = 0;
    uint8_t *buf = wire_pack_request(req, &len);
    enum rlock_err e = buf == NULL ? RLOCK_ERR_NOMEM : rlk_session_send(c, buf, len, deadline);
    free(buf);

    pthread_mutex_lock(&c->mu);
    int timed_out = 0;
    if (e == RLOCK_OK)
        timed_out = call_wait(c, call, deadline) < 0;
    int done = call->done;
    if (!done)
        call_unlink(c, call);
    pthread_mutex_unlock(&c->mu);

    /*
     * Only a written request can have been answered. When the write failed,
     * the break it caused also marked this call done (CLOSED); the caller's
     * own reason (a write that ran out of time: DEADLINE) is the truer one.
     */
    if (done && e == RLOCK_OK)
        return call_result(c, call);
    if (timed_out) {
        rlk_session_break(c, "no answer to request %llu within %llu ms",
                          (unsigned long long)call->id, (unsigned long long)budget_ms);
        return rlk_fail(c, RLOCK_ERR_DEADLINE,
                        "no answer from the daemon within %llu ms; session closed",
                        (unsigned long long)budget_ms);
    }
    if (e == RLOCK_ERR_NOMEM)
        return rlk_fail(c, e, "out of memory packing a request");
    if (e == RLOCK_ERR_DEADLINE) {
        pthread_mutex_lock(&c->mu);
        int open = c->state == RLK_SESSION_OPEN;
        pthread_mutex_unlock(&c->mu);
        if (open) /* it waited behind another thread's stalled write and sent nothing */
            return rlk_fail(c, e, "request not written within %llu ms: another request's "
                                  "write is stalled", (unsigned long long)budget_ms);
        return rlk_fail(c, e, "request not written within %llu ms; session closed",
                        (unsigned long long)budget_ms);
    }
    return closed_error(c);
}
