/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * engine.c — the protocol engine of one client: everything that happens on
 * its connection, whoever drives it.
 *
 *   submit ──▶ tx buffer ──write──▶ rlockd ──▶ rx buffer ──▶ frames
 *                                                         │
 *        pending calls (by id) ◀── responses ◀────────────┤
 *        lock objects (locks.c) ◀── LockLost events ◀─────┘
 *
 * The engine is single-threaded: every function runs with c->mu held. It
 * never blocks (the socket is non-blocking) and never calls the application:
 * what it produces for others — completed calls, lost-lock notes — is queued
 * on the client and handed over by the driver after c->mu is released
 * (rlk_client_unlock). A blocking client is driven by the reactor thread and
 * by its callers; an asynchronous one by rlock_async_process.
 *
 * The session is over (rlk_eng_end) at EOF, on a read or write error, on an
 * unreadable frame, on SessionClosing, when no frame went out or came in for
 * a whole session timeout (the daemon ends a session it has not heard from
 * for that long, so a process that was stopped or a machine that slept must
 * assume its locks are gone), when the application ends it, or when a call's
 * outcome became unknown (a blocking call that ran out of time) — unless the
 * daemon gave the session a secret: then a lost connection, a SessionClosing
 * that asks it to move, or a daemon silent for 2/3 of the session timeout
 * moves the session instead (move.c), and it ends only if that fails.
 */
#include "rlock_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define ENG_RX_INITIAL (16u * 1024u)
#define ENG_CALLTAB_INITIAL 16u
/* Safety margin on the session timeout: at least this, or 1/ENG_MARGIN_DIV of it. */
#define ENG_MARGIN_MIN_MS 2
#define ENG_MARGIN_DIV 50

/* --- pending calls by id ------------------------------------------------------------ */

static size_t calltab_slot(const struct rlk_calltab *t, uint64_t id)
{
    /* Ids are sequential: multiplying spreads neighbours across the table. */
    return (size_t)((id * UINT64_C(0x9E3779B97F4A7C15)) >> 32) & (t->nb - 1);
}

static int calltab_grow(struct rlk_calltab *t)
{
    size_t nb = t->nb ? t->nb * 2 : ENG_CALLTAB_INITIAL;
    struct rlk_call **b = calloc(nb, sizeof *b);
    if (b == NULL)
        return -1;
    struct rlk_calltab nt = {.b = b, .nb = nb, .n = t->n};
    for (size_t i = 0; i < t->nb; i++) {
        struct rlk_call *call = t->b[i], *next;
        for (; call != NULL; call = next) {
            next = call->hnext;
            size_t k = calltab_slot(&nt, call->id);
            call->hnext = b[k];
            b[k] = call;
        }
    }
    free(t->b);
    *t = nt;
    return 0;
}

static int calltab_add(struct rlk_calltab *t, struct rlk_call *call)
{
    if (t->n >= t->nb && calltab_grow(t) < 0 && t->nb == 0)
        return -1; /* a table that cannot grow still works, with longer chains */
    size_t k = calltab_slot(t, call->id);
    call->hnext = t->b[k];
    t->b[k] = call;
    t->n++;
    return 0;
}

/* Unlink and return the call with id, or NULL. */
static struct rlk_call *calltab_take(struct rlk_calltab *t, uint64_t id)
{
    if (t->nb == 0)
        return NULL;
    for (struct rlk_call **p = &t->b[calltab_slot(t, id)]; *p != NULL; p = &(*p)->hnext) {
        if ((*p)->id == id) {
            struct rlk_call *call = *p;
            *p = call->hnext;
            call->hnext = NULL;
            t->n--;
            return call;
        }
    }
    return NULL;
}

static struct rlk_call *calltab_find(const struct rlk_calltab *t, uint64_t id)
{
    if (t->nb == 0)
        return NULL;
    for (struct rlk_call *call = t->b[calltab_slot(t, id)]; call != NULL; call = call->hnext)
        if (call->id == id)
            return call;
    return NULL;
}

/* --- acquires held back behind a withdrawn one ------------------------------------------ */

/*
 * A withdrawn (cancelled) acquire may have been granted before the daemon
 * saw the withdrawal; the engine then releases that grant when its answer
 * comes. A new acquire of the same resource by the same owner must not reach
 * the daemon in between: it would be taken as a re-entry of the grant about
 * to be released. Such an acquire is held back, packed, until no withdrawn
 * acquire of that resource and owner is pending, and then follows the
 * release on the wire.
 */
static int withdrawn_pending(const struct rlock_client *c, const char *resource, uint64_t owner)
{
    if (c->ncancelled == 0)
        return 0;
    for (size_t i = 0; i < c->pending.nb; i++)
        for (const struct rlk_call *p = c->pending.b[i]; p != NULL; p = p->hnext)
            if (p->cancelled && p->kind == RLK_CALL_ACQUIRE && p->handle != NULL &&
                rlk_handle_owner(p->handle) == owner &&
                strcmp(rlk_handle_resource(p->handle), resource) == 0)
                return 1;
    return 0;
}

static void held_unlink(struct rlock_client *c, struct rlk_call *call)
{
    for (struct rlk_call **p = &c->held_back; *p != NULL; p = &(*p)->hnext_held) {
        if (*p == call) {
            *p = call->hnext_held;
            call->hnext_held = NULL;
            return;
        }
    }
}

static void held_release(struct rlock_client *c);

/* --- completions --------------------------------------------------------------------- */

static void owned_free(struct rlock_client *c, struct rlk_call *call)
{
    free(call->held_frame);
    free(call->acq_resource);
    free(call->leader);
    if (call->lock != NULL)
        rlk_lock_unref(call->lock);
    if (call->handle != NULL && call->kind == RLK_CALL_ACQUIRE)
        rlk_handle_destroy(c, call->handle); /* never handed out */
    free(call);
}

/*
 * The call's result is final. A blocking caller is woken; an owned call goes
 * to the completion list, or is freed at once when nobody awaits it (the
 * engine's own requests).
 */
void rlk_eng_complete(struct rlock_client *c, struct rlk_call *call)
{
    if (call->cancelled && call->kind == RLK_CALL_ACQUIRE)
        c->ncancelled--;
    if (call->held_frame != NULL) {
        held_unlink(c, call);
        free(call->held_frame);
        call->held_frame = NULL;
    }
    if (call->owned) {
        if (call->done_fn == NULL) {
            owned_free(c, call);
            return;
        }
        call->cnext = NULL;
        *c->done_tail = call;
        c->done_tail = &call->cnext;
        return;
    }
    atomic_uint *word = &call->state;
    /* A leading caller polls the socket, not the futex: it sees DONE when it
     * reads the answer itself, else it needs its poll interrupted. */
    int leadfd1 = call == c->leader_call
                      ? atomic_load_explicit(&call->lead_fd1, memory_order_relaxed)
                      : 0;
    /*
     * From here on the caller may return at any moment (it does not need mu
     * to see DONE): touch nothing of the call. The wake uses only the address,
     * so a caller gone already costs at most a spurious wake-up of whatever
     * sleeps there next.
     */
    atomic_fetch_or_explicit(word, RLK_CALL_DONE, memory_order_release);
    if (leadfd1 == 0)
        rlk_futex_wake(word);
    else if (!c->leader_reading) /* the leader holds off its exit (and its thread's
                                  * eventfd stays open) until we drop c->mu */
        rlk_reactor_wake_leader(leadfd1 - 1);
}

void rlk_eng_complete_err(struct rlock_client *c, struct rlk_call *call, enum rlock_err err,
                          const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    call->err = err;
    call->detail.code = err;
    call->detail.retry_after_ms = 0;
    vsnprintf(call->detail.message, sizeof call->detail.message, fmt, ap);
    va_end(ap);
    rlk_eng_complete(c, call);
}

void rlk_eng_note_lost(struct rlock_client *c, const char *resource, const char *token,
                       uint64_t fence, enum rlock_lost_reason reason, int quiet)
{
    if (rlk_inherited(c))
        return; /* the lost fd is shared with the parent, whose lock this is */
    if (c->lost_fd >= 0) {
        uint64_t one = 1;
        ssize_t n = write(c->lost_fd, &one, sizeof one);
        (void)n; /* an eventfd at its maximum is readable already */
    }
    if (quiet || c->on_lost == NULL)
        return;
    struct rlk_note *n = rlk_note_add(c, RLK_NOTE_LOST, resource, token);
    if (n == NULL)
        return; /* the handle's state still says LOST */
    n->fence = fence;
    n->reason = reason;
}

struct rlk_note *rlk_note_add(struct rlock_client *c, enum rlk_note_kind kind,
                              const char *resource, const char *text)
{
    size_t rlen = strlen(resource) + 1, tlen = strlen(text) + 1;
    struct rlk_note *n = malloc(sizeof *n + rlen + tlen);
    if (n == NULL)
        return NULL;
    memcpy(n->resource, resource, rlen);
    n->token = n->resource + rlen;
    memcpy(n->token, text, tlen);
    n->kind = kind;
    n->fence = 0;
    n->reason = RLOCK_LOST_UNSPECIFIED;
    n->elected = 0;
    n->next = NULL;
    *c->notes_tail = n;
    c->notes_tail = &n->next;
    return n;
}

/* --- writing ------------------------------------------------------------------------- */

int rlk_eng_linked(const struct rlock_client *c)
{
    return c->state != RLK_SESSION_ENDED && c->link != RLK_LINK_DOWN;
}

int rlk_eng_want_write(const struct rlock_client *c)
{
    if (c->state == RLK_SESSION_ENDED)
        return 0;
    if (c->link == RLK_LINK_CONNECTING || c->tls_read_wants_write)
        return 1;
    return c->link == RLK_LINK_UP && c->tx.len > 0 && !c->tls_write_wants_read;
}

/*
 * The connection broke (why): move the session to another connection if it
 * can be resumed, else end it. keep_old: the daemon may be alive (it went
 * silent) and must not see the connection end before the adopts.
 */
static void link_lost(struct rlock_client *c, const char *why, int keep_old)
{
    if (!rlk_move_begin(c, why, keep_old))
        rlk_eng_end(c, why, 0);
}

/* Read what the socket has and act on each frame (no write). */
static void read_socket(struct rlock_client *c);

void rlk_eng_flush(struct rlock_client *c)
{
    if (c->state == RLK_SESSION_ENDED)
        return;
    if (c->link == RLK_LINK_CONNECTING) {
        rlk_move_connect_done(c);
        return;
    }
    if (c->link != RLK_LINK_UP || c->corked)
        return;
    if (c->tls_read_wants_write) {
        /* A TLS read waited for the socket to take its output: it can go on now. */
        c->tls_read_wants_write = 0;
        read_socket(c);
        if (!rlk_eng_linked(c) || c->link != RLK_LINK_UP)
            return;
    }
    while (c->tx.len > 0) {
        int64_t before = rlk_alive_ms();
        char why[RLK_REASON_BYTES];
        ssize_t n = rlk_sock_write(c, c->tx.data + c->tx.off, c->tx.len, why, sizeof why);
        if (n > 0) {
            iobuf_consume(&c->tx, (size_t)n);
            c->tx_sent += (uint64_t)n;
            /*
             * Stamped with a time from before the write once everything queued
             * is out: the daemon receives it later still, so the staleness
             * check can only be stricter than the daemon's.
             */
            if (c->tx.len == 0)
                c->last_tx_ms = before;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        link_lost(c, why, 0);
        return;
    }
}

/*
 * A stop of observing name is being submitted: the daemon takes requests in order, so
 * the Observes of name sent before it subscribe the session only until the stop ends it,
 * whatever their answers say and whenever they come (a stop is answered at once, an
 * Observe after its read in Redis). They are marked so, and the election is no longer
 * observed: no change is reported from now on.
 */
static void observe_stopping(struct rlock_client *c, const char *name)
{
    for (size_t i = 0; i < c->pending.nb; i++)
        for (struct rlk_call *p = c->pending.b[i]; p != NULL; p = p->hnext)
            if ((p->kind == RLK_CALL_OBSERVE || p->kind == RLK_CALL_REOBSERVE) &&
                strcmp(p->name, name) == 0)
                p->superseded = 1;
    rlk_elect_unobserve(c, name);
}

/* The move's own requests go out on a connection whose session is not open yet. */
static int move_call(const struct rlk_call *call)
{
    return call->kind == RLK_CALL_RESUME || call->kind == RLK_CALL_ADOPT ||
           call->kind == RLK_CALL_FORGET;
}

enum rlock_err rlk_eng_submit(struct rlock_client *c, Rlock__V1__Request *req,
                              struct rlk_call *call)
{
    /* Here, under c->mu with the queueing: no answer can come in between. Refused or
     * not, the application has stopped observing. */
    if (call->kind == RLK_CALL_UNOBSERVE)
        observe_stopping(c, call->name);
    if (c->state == RLK_SESSION_MOVING && !(c->link == RLK_LINK_UP && move_call(call))) {
        rlk_error_set(&call->detail, RLOCK_ERR_UNAVAILABLE, RLK_MOVE_RETRY_MS,
                      "the session is moving to another connection (%s); try again once it "
                      "has resumed",
                      c->move.why);
        return RLOCK_ERR_UNAVAILABLE;
    }
    if (c->state != RLK_SESSION_OPEN && c->state != RLK_SESSION_MOVING) {
        rlk_error_set(&call->detail, RLOCK_ERR_CLOSED, 0, "session ended: %s",
                      c->end_reason[0] ? c->end_reason : "closed");
        return RLOCK_ERR_CLOSED;
    }
    req->id = c->next_id + 1; /* the size depends on it */
    size_t body = protobuf_c_message_get_packed_size(&req->base);
    if (body > RLK_MAX_FRAME_BYTES) {
        rlk_error_set(&call->detail, RLOCK_ERR_ARG, 0, "request of %zu bytes is too large",
                      body);
        return RLOCK_ERR_ARG;
    }
    if (c->tx.len + WIRE_HEADER_BYTES + body > RLK_MAX_TX_BYTES) {
        rlk_eng_end(c, "the daemon reads nothing: output queue full", 0);
        rlk_error_set(&call->detail, RLOCK_ERR_CLOSED, 0, "session ended: %s", c->end_reason);
        return RLOCK_ERR_CLOSED;
    }
    int hold = call->kind == RLK_CALL_ACQUIRE && call->handle != NULL &&
               withdrawn_pending(c, rlk_handle_resource(call->handle),
                                 rlk_handle_owner(call->handle));
    if (hold) {
        call->held_frame = malloc(WIRE_HEADER_BYTES + body);
        if (call->held_frame == NULL) {
            rlk_error_set(&call->detail, RLOCK_ERR_NOMEM, 0, "out of memory queueing a request");
            return RLOCK_ERR_NOMEM;
        }
    } else if (iobuf_reserve(&c->tx, WIRE_HEADER_BYTES + body) < 0) {
        rlk_error_set(&call->detail, RLOCK_ERR_NOMEM, 0, "out of memory queueing a request");
        return RLOCK_ERR_NOMEM;
    }
    call->id = ++c->next_id;
    if (calltab_add(&c->pending, call) < 0) {
        free(call->held_frame);
        call->held_frame = NULL;
        rlk_error_set(&call->detail, RLOCK_ERR_NOMEM, 0, "out of memory queueing a request");
        return RLOCK_ERR_NOMEM;
    }
    atomic_store_explicit(&call->state, 0, memory_order_relaxed);
    call->sent_ms = rlk_alive_ms();
    if (hold) {
        /* Sent once the withdrawn acquire of the same lock and owner is answered. */
        wire_put_len(call->held_frame, (uint32_t)body);
        protobuf_c_message_pack(&req->base, call->held_frame + WIRE_HEADER_BYTES);
        call->held_len = WIRE_HEADER_BYTES + body;
        call->hnext_held = NULL;
        struct rlk_call **p = &c->held_back;
        while (*p != NULL)
            p = &(*p)->hnext_held;
        *p = call;
        return RLOCK_OK;
    }
    uint8_t *at = c->tx.data + c->tx.off + c->tx.len;
    wire_put_len(at, (uint32_t)body);
    protobuf_c_message_pack(&req->base, at + WIRE_HEADER_BYTES);
    int was_empty = c->tx.len == 0;
    c->tx.len += WIRE_HEADER_BYTES + body;
    c->tx_queued += WIRE_HEADER_BYTES + body;
    call->tx_end = c->tx_queued;
    /* Write at once from the calling thread; only leftovers wait for writability. */
    if (was_empty)
        rlk_eng_flush(c);
    return RLOCK_OK;
}

/* Queue every held-back acquire whose withdrawn one has been answered, in order. */
static void held_release(struct rlock_client *c)
{
    struct rlk_call **p = &c->held_back;
    while (*p != NULL) {
        struct rlk_call *call = *p;
        if (withdrawn_pending(c, rlk_handle_resource(call->handle),
                              rlk_handle_owner(call->handle))) {
            p = &call->hnext_held;
            continue;
        }
        if (iobuf_reserve(&c->tx, call->held_len) < 0) {
            rlk_eng_end(c, "out of memory queueing a request", 0);
            return;
        }
        memcpy(c->tx.data + c->tx.off + c->tx.len, call->held_frame, call->held_len);
        c->tx.len += call->held_len;
        c->tx_queued += call->held_len;
        call->tx_end = c->tx_queued;
        *p = call->hnext_held;
        call->hnext_held = NULL;
        free(call->held_frame);
        call->held_frame = NULL;
    }
    rlk_eng_flush(c);
}

int rlk_eng_submit_own(struct rlock_client *c, Rlock__V1__Request *req, struct rlk_call *call)
{
    call->owned = 1;
    if (rlk_eng_submit(c, req, call) == RLOCK_OK)
        return 0;
    call->handle = NULL;
    owned_free(c, call);
    return -1;
}

/* Queue one of the engine's own requests (nobody awaits its answer). */
static void submit_own(struct rlock_client *c, Rlock__V1__Request *req, enum rlk_call_kind kind,
                       struct rlock_lock *handle)
{
    struct rlk_call *call = calloc(1, sizeof *call);
    if (call == NULL)
        return; /* the daemon releases whatever is left when the session ends */
    call->kind = kind;
    call->handle = handle;
    rlk_eng_submit_own(c, req, call);
}

/*
 * Release a grant nobody wants (token of a lock the application never saw),
 * or, token NULL, whatever the Acquire acq_id may have taken (after a resume).
 * acq_id with a token: the Acquire the grant answered, whose derived token it
 * is, so that a connection lost before this Release is answered can send it
 * again by id.
 */
void rlk_eng_forget(struct rlock_client *c, const char *resource, const char *token,
                    uint64_t acq_id)
{
    struct rlk_call *call = calloc(1, sizeof *call);
    if (call == NULL || (acq_id != 0 && (call->acq_resource = strdup(resource)) == NULL)) {
        free(call);
        return; /* the daemon releases whatever is left when the session ends */
    }
    Rlock__V1__Release rel = RLOCK__V1__RELEASE__INIT;
    rel.resource = (char *)resource;
    rel.token = (char *)token;
    if (token == NULL)
        rel.acquire_id = acq_id;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.body_case = RLOCK__V1__REQUEST__BODY_RELEASE;
    req.release = &rel;
    call->kind = RLK_CALL_FORGET;
    call->acq_id = acq_id;
    rlk_eng_submit_own(c, &req, call);
}

/* --- responses ------------------------------------------------------------------------ */

static Rlock__V1__Response__BodyCase expected_body(const struct rlk_call *call)
{
    switch (call->kind) {
    case RLK_CALL_HELLO: return RLOCK__V1__RESPONSE__BODY_HELLO;
    case RLK_CALL_ACQUIRE: return RLOCK__V1__RESPONSE__BODY_ACQUIRE;
    case RLK_CALL_RELEASE:
    case RLK_CALL_FORGET: return RLOCK__V1__RESPONSE__BODY_RELEASE;
    case RLK_CALL_EXTEND: return RLOCK__V1__RESPONSE__BODY_EXTEND;
    case RLK_CALL_PING:
    case RLK_CALL_KEEPALIVE: return RLOCK__V1__RESPONSE__BODY_PING;
    case RLK_CALL_STATS: return RLOCK__V1__RESPONSE__BODY_STATS;
    case RLK_CALL_CANCEL: return RLOCK__V1__RESPONSE__BODY_CANCEL;
    case RLK_CALL_KEEP: return call->keep_body;
    case RLK_CALL_RESUME: return RLOCK__V1__RESPONSE__BODY_HELLO;
    case RLK_CALL_ADOPT: return RLOCK__V1__RESPONSE__BODY_ADOPT;
    case RLK_CALL_LEADER:
    case RLK_CALL_OBSERVE:
    case RLK_CALL_UNOBSERVE:
    case RLK_CALL_REOBSERVE: return RLOCK__V1__RESPONSE__BODY_LEADER;
    }
    return RLOCK__V1__RESPONSE__BODY__NOT_SET;
}

void rlk_eng_take_hello(struct rlock_client *c, const Rlock__V1__HelloReply *h)
{
    uint32_t st = h->session_timeout_ms;
    uint32_t ka = h->keepalive_interval_ms;
    if (st == 0 && ka == 0)
        ka = RLK_FALLBACK_KEEPALIVE_MS;
    else if (st > 0 && (ka == 0 || ka > st / 2))
        ka = st / 3;
    if (ka < RLK_MIN_KEEPALIVE_MS)
        ka = RLK_MIN_KEEPALIVE_MS;
    c->session_timeout_ms = st;
    c->keepalive_ms = ka;
    snprintf(c->session_id, sizeof c->session_id, "%s", h->session_id ? h->session_id : "");
    const char *secret = h->session_secret ? h->session_secret : "";
    snprintf(c->session_secret, sizeof c->session_secret, "%s",
             strlen(secret) < sizeof c->session_secret ? secret : "");
}

static void copy_stats(struct rlock_stats *out, const Rlock__V1__StatsReply *r)
{
    memset(out, 0, sizeof *out);
    out->sessions = r->sessions;
    out->held_locks = r->held_locks;
    out->waiters = r->waiters;
    out->redis_connections = r->redis_connections;
    out->redis_connections_ready = r->redis_connections_ready;
    out->redis_up = r->redis_up != 0;
    out->script_reloads = r->script_reloads;
    out->acquires = r->acquires;
    out->grants = r->grants;
    out->locks_lost = r->locks_lost;
    out->redis_errors = r->redis_errors;
    out->uptime_ms = r->uptime_ms;
    snprintf(out->server_version, sizeof out->server_version, "%s",
             r->server_version ? r->server_version : "");
}

/* The library's error for a response's status (with its detail); RLOCK_OK for OK. */
static enum rlock_err status_error(const Rlock__V1__Response *r, const struct rlk_call *call,
                                   struct rlock_error *detail)
{
    int status = (int)r->status;
    if (status < 0 || status > RLOCK__V1__STATUS__STATUS_DEADLOCK) {
        rlk_error_set(detail, RLOCK_ERR_PROTOCOL, 0, "unknown status %d from the daemon",
                      status);
        return RLOCK_ERR_PROTOCOL;
    }
    if (status != RLOCK__V1__STATUS__STATUS_OK) {
        enum rlock_err e = (enum rlock_err)status;
        const char *text = r->message != NULL && r->message[0] ? r->message : rlock_strerror(e);
        rlk_error_set(detail, e, r->retry_after_ms, "%s: %s", wire_status_name(status), text);
        return e;
    }
    if (r->body_case != expected_body(call)) {
        rlk_error_set(detail, RLOCK_ERR_PROTOCOL, 0,
                      "the daemon answered with the wrong reply body");
        return RLOCK_ERR_PROTOCOL;
    }
    return RLOCK_OK;
}

/* The answer to a withdrawn acquire: a grant that raced the withdrawal is given back. */
static void take_cancelled(struct rlock_client *c, struct rlk_call *call,
                           const Rlock__V1__Response *r)
{
    if (r->status == RLOCK__V1__STATUS__STATUS_OK &&
        r->body_case == RLOCK__V1__RESPONSE__BODY_ACQUIRE && r->acquire->token != NULL &&
        r->acquire->token[0] != '\0')
        rlk_eng_forget(c, rlk_handle_resource(call->handle), r->acquire->token, call->id);
    rlk_eng_complete_err(c, call, RLOCK_ERR_CANCELLED, "acquire cancelled");
    held_release(c); /* after the release of the racing grant, never before it */
}

/*
 * Keep r for the caller of call, packed: the unpacked message belongs to this
 * frame's allocator, and the caller reads it (and runs its visitors) on its
 * own thread, after this one has moved on.
 */
static enum rlock_err keep_response(struct rlk_call *call, const Rlock__V1__Response *r)
{
    size_t len = rlock__v1__response__get_packed_size(r);
    call->kept = malloc(len > 0 ? len : 1);
    if (call->kept == NULL) {
        rlk_error_set(&call->detail, RLOCK_ERR_NOMEM, 0, "out of memory keeping a reply");
        return RLOCK_ERR_NOMEM;
    }
    call->kept_len = rlock__v1__response__pack(r, call->kept);
    return RLOCK_OK;
}

/* Act on an OK answer of call; returns the call's final error. */
static enum rlock_err take_ok(struct rlock_client *c, struct rlk_call *call,
                              const Rlock__V1__Response *r)
{
    switch (call->kind) {
    case RLK_CALL_HELLO:
        rlk_eng_take_hello(c, r->hello);
        return RLOCK_OK;
    case RLK_CALL_ACQUIRE: {
        enum rlock_err e = rlk_lock_granted(c, call->handle, r->acquire, call->sent_ms);
        if (e != RLOCK_OK) {
            /* A grant we cannot track must not stay held. */
            if (r->acquire->token != NULL && r->acquire->token[0] != '\0')
                rlk_eng_forget(c, rlk_handle_resource(call->handle), r->acquire->token,
                               call->id);
            rlk_error_set(&call->detail, e, 0, "%s",
                          e == RLOCK_ERR_NOMEM ? "out of memory recording a lock"
                                               : "acquire reply without a token");
        }
        return e;
    }
    case RLK_CALL_RELEASE:
        call->hold_count = r->release->hold_count;
        rlk_lock_released(c, call->handle, call->hold_count);
        return RLOCK_OK;
    case RLK_CALL_EXTEND:
        call->ttl_ms = r->extend->ttl_ms;
        rlk_lock_extended(c, call->handle, r->extend->ttl_ms, r->extend->valid_ms,
                          call->sent_ms, r->extend->seal);
        return RLOCK_OK;
    case RLK_CALL_PING:
        call->server_time_ms = r->ping->server_time_ms;
        return RLOCK_OK;
    case RLK_CALL_KEEPALIVE:
        rlk_lock_vouched(c, call->sent_ms, r->ping->valid_ms);
        return RLOCK_OK;
    case RLK_CALL_STATS:
        if (call->stats != NULL)
            copy_stats(call->stats, r->stats);
        return RLOCK_OK;
    case RLK_CALL_KEEP:
        return keep_response(call, r);
    case RLK_CALL_LEADER:
    case RLK_CALL_OBSERVE:
    case RLK_CALL_UNOBSERVE:
    case RLK_CALL_REOBSERVE:
        return rlk_elect_answer(c, call, r->leader);
    case RLK_CALL_CANCEL:
    case RLK_CALL_FORGET:
    case RLK_CALL_RESUME: /* answered in move.c */
    case RLK_CALL_ADOPT:
        return RLOCK_OK;
    }
    return RLOCK_OK;
}

static void take_response(struct rlock_client *c, const Rlock__V1__Response *r)
{
    struct rlk_call *call = calltab_take(&c->pending, r->id);
    if (call == NULL) {
        /*
         * Id 0 is an answer to a frame the daemon could not read (too large,
         * malformed): it is closing the connection, and this is why.
         */
        if (r->id == 0 && r->status != RLOCK__V1__STATUS__STATUS_OK && !c->end_reason[0])
            snprintf(c->end_reason, sizeof c->end_reason, "the daemon reported %s: %s",
                     wire_status_name((int)r->status), r->message ? r->message : "");
        return;
    }
    if (call->kind == RLK_CALL_KEEPALIVE)
        c->keepalive_inflight--;
    /* The daemon heard this request: the session lives a timeout past its arrival. */
    if (call->sent_ms > c->answered_sent_ms)
        c->answered_sent_ms = call->sent_ms;
    if (call->cancelled) {
        take_cancelled(c, call, r);
        return;
    }
    if (call->kind == RLK_CALL_RESUME || call->kind == RLK_CALL_ADOPT) {
        rlk_move_answer(c, call, r);
        return;
    }
    enum rlock_err e = status_error(r, call, &call->detail);
    if ((e == RLOCK_ERR_NOT_ACQUIRED || e == RLOCK_ERR_TIMEOUT) &&
        call->kind == RLK_CALL_ACQUIRE && r->holder != NULL)
        rlk_holder_take(call, r->holder);
    if (e == RLOCK_OK)
        e = take_ok(c, call, r);
    else if (e == RLOCK_ERR_NOT_HELD &&
             (call->kind == RLK_CALL_RELEASE || call->kind == RLK_CALL_EXTEND))
        rlk_lock_forget(c, call->handle); /* the daemon no longer knows the lock at all */
    call->err = e;
    if (e != RLOCK_OK && call->kind == RLK_CALL_REOBSERVE)
        rlk_elect_refused(c, call); /* tried again later, or reported */
    rlk_eng_complete(c, call);
}

static void take_event(struct rlock_client *c, const Rlock__V1__Event *ev)
{
    switch (ev->body_case) {
    case RLOCK__V1__EVENT__BODY_LOCK_LOST: {
        const Rlock__V1__LockLost *l = ev->lock_lost;
        enum rlock_lost_reason reason = RLOCK_LOST_UNSPECIFIED;
        if ((int)l->reason > 0 && l->reason <= RLOCK__V1__LOST_REASON__LOST_MAX_HOLD)
            reason = (enum rlock_lost_reason)l->reason;
        if (l->token != NULL && l->token[0] != '\0')
            rlk_lock_lost_token(c, l->token, reason, c->quiet);
        return;
    }
    case RLOCK__V1__EVENT__BODY_SESSION_CLOSING: {
        /*
         * Without resume the daemon has ended the session and released its
         * locks already; nothing pending will be answered. End it here rather
         * than at the EOF that follows, which may be slow to come. With
         * resume it keeps the locks for us: leave (it hands them over when
         * the connection ends) and resume elsewhere, or here once it is back.
         */
        char why[RLK_REASON_BYTES];
        snprintf(why, sizeof why, "the daemon is closing the session: %s",
                 ev->session_closing->reason ? ev->session_closing->reason : "");
        if (!ev->session_closing->resume || !rlk_move_begin(c, why, 0))
            rlk_eng_end(c, why, 0);
        return;
    }
    case RLOCK__V1__EVENT__BODY_LEADER_CHANGED:
        rlk_elect_changed(c, ev->leader_changed);
        return;
    default:
        return; /* an event kind this library does not know: ignore */
    }
}

/* Decode one frame body and act on it. 0, or -1 when the stream is unusable. */
static int take_frame(struct rlock_client *c, const uint8_t *data, uint32_t len)
{
    struct wire_budget budget;
    wire_budget_init(&budget, wire_budget_for(len));
    Rlock__V1__ServerMessage *m = rlock__v1__server_message__unpack(&budget.alloc, len, data);
    if (m == NULL) {
        char why[RLK_REASON_BYTES];
        snprintf(why, sizeof why, "malformed frame of %u bytes from the daemon", len);
        rlk_eng_end(c, why, 0);
        return -1;
    }
    c->last_rx_ms = rlk_alive_ms();
    if (m->body_case == RLOCK__V1__SERVER_MESSAGE__BODY_RESPONSE)
        take_response(c, m->response);
    else if (m->body_case == RLOCK__V1__SERVER_MESSAGE__BODY_EVENT)
        take_event(c, m->event);
    rlock__v1__server_message__free_unpacked(m, &budget.alloc);
    return rlk_eng_linked(c) ? 0 : -1;
}

/* Act on every complete frame in rx. 0, or -1 when the session ended. */
static int parse_frames(struct rlock_client *c)
{
    struct iobuf *b = &c->rx;
    while (b->len >= WIRE_HEADER_BYTES) {
        const uint8_t *p = b->data + b->off;
        uint32_t flen = wire_get_len(p);
        if (flen > RLK_MAX_FRAME_BYTES) {
            char why[RLK_REASON_BYTES];
            snprintf(why, sizeof why, "frame of %u bytes from the daemon (limit %u)", flen,
                     RLK_MAX_FRAME_BYTES);
            rlk_eng_end(c, why, 0);
            return -1;
        }
        if (b->len - WIRE_HEADER_BYTES < flen)
            break;
        /*
         * Consumed before it is acted on: acting on it may move the session to
         * another connection, which empties rx (what was read belongs to the
         * connection left); consuming after that would push rx's offset past
         * its end and misalign every frame of the new connection. The bytes
         * stay where they are until take_frame has decoded them.
         */
        iobuf_consume(b, WIRE_HEADER_BYTES + flen);
        if (take_frame(c, p + WIRE_HEADER_BYTES, flen) < 0)
            return -1;
    }
    return 0;
}

/* Read what the socket has and act on each frame (no write). */
static void read_socket(struct rlock_client *c)
{
    /* TLS may hold decrypted bytes after the socket is drained: read them all. */
    for (int round = 0; (round < 4 || rlk_sock_pending(c)) && rlk_eng_linked(c); round++) {
        size_t want = ENG_RX_INITIAL;
        if (c->rx.len >= WIRE_HEADER_BYTES) {
            size_t frame = WIRE_HEADER_BYTES + (size_t)wire_get_len(c->rx.data + c->rx.off);
            if (frame > c->rx.len && frame - c->rx.len > want)
                want = frame - c->rx.len;
        }
        if (iobuf_reserve(&c->rx, want) < 0) {
            rlk_eng_end(c, "out of memory for a frame", 0);
            return;
        }
        size_t room = c->rx.cap - c->rx.off - c->rx.len;
        char why[RLK_REASON_BYTES];
        ssize_t got = rlk_sock_read(c, c->rx.data + c->rx.off + c->rx.len, room, why, sizeof why);
        if (got == 0) {
            link_lost(c, "connection closed by the daemon", 0);
            return;
        }
        if (got < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            link_lost(c, why, 0);
            return;
        }
        c->rx.len += (size_t)got;
        if (parse_frames(c) < 0)
            return;
        if ((size_t)got < room && c->ssl == NULL)
            break; /* drained: no need for another read that would say EAGAIN (TLS reads
                      a record at a time: only EAGAIN tells it is drained) */
    }
}

void rlk_eng_read(struct rlock_client *c)
{
    if (c->link == RLK_LINK_CONNECTING && c->state != RLK_SESSION_ENDED) {
        rlk_move_connect_done(c); /* an error shows as readable too */
        return;
    }
    read_socket(c);
    /* Answers may have let callers queue more; and replies never wait for requests. */
    if (c->tx.len > 0 && rlk_eng_linked(c))
        rlk_eng_flush(c);
}

/* --- time ------------------------------------------------------------------------------ */

/*
 * How long the client may stay unheard (or hear nothing) before it must
 * assume the session is over; 0 = no limit. The daemon ends a session once
 * no frame came for >= the timeout, counting from when the frame arrived,
 * which is after our timestamp; the margin covers clock granularity and the
 * daemon's timer firing a little early, so that the client never believes in
 * a session the daemon already ended.
 */
static int64_t session_limit_ms(const struct rlock_client *c)
{
    int64_t t = c->session_timeout_ms;
    if (t == 0)
        return 0;
    int64_t margin = t / ENG_MARGIN_DIV;
    if (margin < ENG_MARGIN_MIN_MS)
        margin = ENG_MARGIN_MIN_MS;
    return t - margin > 1 ? t - margin : 1;
}

/* 1 (with why) if the daemon may have given up on the session by now. */
static int session_stale(const struct rlock_client *c, int64_t now, char *why, size_t n)
{
    int64_t limit = session_limit_ms(c);
    if (limit == 0)
        return 0;
    if (now - c->last_tx_ms >= limit) {
        snprintf(why, n, "nothing sent to the daemon for %lld ms (session timeout %u ms)",
                 (long long)(now - c->last_tx_ms), c->session_timeout_ms);
        return 1;
    }
    if (now - c->last_rx_ms >= limit) {
        snprintf(why, n, "nothing heard from the daemon for %lld ms (session timeout %u ms)",
                 (long long)(now - c->last_rx_ms), c->session_timeout_ms);
        return 1;
    }
    return 0;
}

/*
 * When the next Ping is due. One goes out after a keepalive interval without
 * writing anything, and also after one without hearing anything (requests in
 * flight keep last_tx fresh while no answer comes back), at most once per
 * interval. While watchdog locks are held, one goes out at least every third
 * of the shortest ttl as well: its answer is what keeps their validity ahead.
 */
static int64_t ping_at(const struct rlock_client *c)
{
    int64_t quiet = c->last_rx_ms > c->last_ping_ms ? c->last_rx_ms : c->last_ping_ms;
    int64_t at = (c->last_tx_ms < quiet ? c->last_tx_ms : quiet) + c->keepalive_ms;
    uint32_t need = rlk_lock_keepalive_need(c);
    if (need > 0 && c->last_ping_ms + need < at)
        at = c->last_ping_ms + need;
    return at;
}

/*
 * 1 (with why) if a session that can move should: the daemon answered
 * nothing for two thirds of the session timeout (a keepalive goes out at
 * least every half of it, and is answered at once), so it is stopped,
 * stalled or cut off. Moving now leaves a third for the resume; waiting for
 * the whole timeout would leave nothing.
 */
static int64_t silent_after_ms(const struct rlock_client *c)
{
    return session_limit_ms(c) * 2 / 3;
}

static int daemon_silent(const struct rlock_client *c, int64_t now, char *why, size_t n)
{
    int64_t limit = session_limit_ms(c);
    if (limit == 0 || c->session_secret[0] == '\0' || c->addrs == NULL)
        return 0;
    if (now - c->last_rx_ms < silent_after_ms(c))
        return 0;
    snprintf(why, n, "nothing heard from the daemon for %lld ms (session timeout %u ms)",
             (long long)(now - c->last_rx_ms), c->session_timeout_ms);
    return 1;
}

int rlk_eng_check(struct rlock_client *c)
{
    char why[RLK_REASON_BYTES];
    int64_t now = rlk_alive_ms();
    if (c->state == RLK_SESSION_OPEN && session_stale(c, now, why, sizeof why))
        link_lost(c, why, 1);
    else if (c->state == RLK_SESSION_OPEN && daemon_silent(c, now, why, sizeof why))
        link_lost(c, why, 1);
    return c->state != RLK_SESSION_ENDED;
}

static void send_keepalive(struct rlock_client *c, int64_t now)
{
    Rlock__V1__Ping ping = RLOCK__V1__PING__INIT;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.body_case = RLOCK__V1__REQUEST__BODY_PING;
    req.ping = &ping;
    c->last_ping_ms = now;
    c->keepalive_inflight++;
    struct rlk_call *call = calloc(1, sizeof *call);
    if (call == NULL) {
        c->keepalive_inflight--;
        return;
    }
    call->kind = RLK_CALL_KEEPALIVE;
    call->owned = 1;
    if (rlk_eng_submit(c, &req, call) != RLOCK_OK) {
        c->keepalive_inflight--;
        free(call);
    }
}

int64_t rlk_eng_timers(struct rlock_client *c, int64_t now)
{
    if (!rlk_eng_check(c))
        return -1;
    if (c->state == RLK_SESSION_MOVING)
        return rlk_move_timers(c, now);
    if (c->session_timeout_ms == 0 && c->keepalive_ms == 0)
        return -1; /* before the HelloReply: nothing to keep alive yet */
    if (now >= ping_at(c))
        send_keepalive(c, now);
    /* Observes refused after a resume, due again. */
    int64_t retry = c->state == RLK_SESSION_OPEN ? rlk_elect_timers(c, now) : INT64_MAX;
    if (c->state != RLK_SESSION_OPEN)
        return c->state == RLK_SESSION_MOVING ? now + 1 : -1; /* the move's timers next */
    int64_t wake = ping_at(c);
    if (retry < wake)
        wake = retry;
    int64_t limit = session_limit_ms(c);
    if (limit > 0) {
        int64_t oldest = c->last_tx_ms < c->last_rx_ms ? c->last_tx_ms : c->last_rx_ms;
        if (oldest + limit < wake)
            wake = oldest + limit;
        if (c->session_secret[0] && c->addrs != NULL &&
            c->last_rx_ms + silent_after_ms(c) < wake)
            wake = c->last_rx_ms + silent_after_ms(c); /* daemon_silent */
    }
    return wake > now ? wake : now + 1;
}

/* --- the end ------------------------------------------------------------------------------ */

int rlk_inherited(const struct rlock_client *c)
{
    return c->fork_gen != rlk_fork_gen();
}

void rlk_eng_drain_pending(struct rlock_client *c,
                           void (*fn)(struct rlock_client *c, struct rlk_call *call))
{
    for (size_t i = 0; i < c->pending.nb; i++) {
        struct rlk_call *call;
        while ((call = c->pending.b[i]) != NULL) {
            c->pending.b[i] = call->hnext;
            call->hnext = NULL;
            c->pending.n--;
            fn(c, call);
        }
    }
}

/* A pending call when the session ends: it completes, CLOSED. */
static void end_call(struct rlock_client *c, struct rlk_call *call)
{
    if (call->cancelled)
        rlk_eng_complete_err(c, call, RLOCK_ERR_CANCELLED, "acquire cancelled");
    else
        rlk_eng_complete_err(c, call, RLOCK_ERR_CLOSED, "session ended: %s",
                             c->end_reason[0] ? c->end_reason : "closed");
}

void rlk_eng_end(struct rlock_client *c, const char *why, int quiet)
{
    if (c->state == RLK_SESSION_ENDED)
        return;
    /* A forked child's copy ends without a word: the session and the lost fd are the parent's. */
    if (rlk_inherited(c))
        quiet = 1;
    if (why != NULL && why[0] && !c->end_reason[0])
        snprintf(c->end_reason, sizeof c->end_reason, "%s", why);
    c->state = RLK_SESSION_ENDED;
    c->quiet |= quiet;
    rlk_eng_drain_pending(c, end_call);
    c->keepalive_inflight = 0;
    rlk_lock_lose_all(c, c->quiet);
    /* The session's end wakes a poller too, with no lock held (rlock.h: rlock_lost_fd). */
    if (c->lost_fd >= 0 && !rlk_inherited(c)) {
        uint64_t one = 1;
        ssize_t n = write(c->lost_fd, &one, sizeof one);
        (void)n; /* an eventfd at its maximum is readable already */
    }
    /* The daemon's side of a connection we share with our parent is not ours to end. */
    if (c->fd >= 0 && !rlk_inherited(c))
        shutdown(c->fd, SHUT_RDWR);
    c->link = RLK_LINK_DOWN;
    rlk_move_free(c);
}

void rlk_eng_goodbye(struct rlock_client *c)
{
    if (c->state != RLK_SESSION_OPEN || rlk_inherited(c))
        return;
    Rlock__V1__Goodbye g = RLOCK__V1__GOODBYE__INIT;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.body_case = RLOCK__V1__REQUEST__BODY_GOODBYE;
    req.goodbye = &g;
    req.id = ++c->next_id; /* its answer matches no call and is dropped */
    size_t body = protobuf_c_message_get_packed_size(&req.base);
    if (iobuf_reserve(&c->tx, WIRE_HEADER_BYTES + body) < 0)
        return; /* the daemon then sees an unclean end: lock_delay applies */
    uint8_t *at = c->tx.data + c->tx.off + c->tx.len;
    wire_put_len(at, (uint32_t)body);
    protobuf_c_message_pack(&req.base, at + WIRE_HEADER_BYTES);
    c->tx.len += WIRE_HEADER_BYTES + body;
    c->tx_queued += WIRE_HEADER_BYTES + body;
    rlk_eng_flush(c);
}

int rlk_eng_abandon(struct rlock_client *c, struct rlk_call *call, int cancel, const char *why)
{
    if (atomic_load_explicit(&call->state, memory_order_acquire) & RLK_CALL_DONE)
        return 1;
    if (calltab_take(&c->pending, call->id) != call)
        return 1; /* cannot happen: a call leaves the table only to complete */
    if (call->held_frame != NULL) {
        /* Never sent: nothing to withdraw from the daemon. */
        held_unlink(c, call);
        free(call->held_frame);
        call->held_frame = NULL;
        if (!cancel)
            rlk_eng_end(c, why, 0);
        return 0;
    }
    if (!cancel) {
        rlk_eng_end(c, why, 0);
        return 0;
    }
    /*
     * Hand the acquire over to the engine: an owned copy takes its place and
     * its handle, so that a grant answering it is released, and the daemon is
     * asked to withdraw the waiter.
     */
    struct rlk_call *own = calloc(1, sizeof *own);
    if (own == NULL) {
        rlk_eng_end(c, "out of memory cancelling an acquire", 0);
        return 0;
    }
    own->id = call->id;
    own->kind = RLK_CALL_ACQUIRE;
    own->owned = 1;
    own->cancelled = 1;
    c->ncancelled++;
    own->handle = call->handle;
    own->sent_ms = call->sent_ms;
    call->handle = NULL;
    if (calltab_add(&c->pending, own) < 0) {
        free(own);
        rlk_eng_end(c, "out of memory cancelling an acquire", 0);
        return 0;
    }
    Rlock__V1__Cancel k = RLOCK__V1__CANCEL__INIT;
    k.request_id = own->id;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.body_case = RLOCK__V1__REQUEST__BODY_CANCEL;
    req.cancel = &k;
    submit_own(c, &req, RLK_CALL_CANCEL, NULL);
    return 0;
}

int rlk_eng_cancel_id(struct rlock_client *c, uint64_t id)
{
    struct rlk_call *call = calltab_find(&c->pending, id);
    if (call == NULL || call->kind != RLK_CALL_ACQUIRE || call->cancelled || !call->owned)
        return -1;
    call->cancelled = 1;
    c->ncancelled++;
    if (call->held_frame != NULL) {
        /* Never sent: complete it here, in rlock_async_process. */
        calltab_take(&c->pending, id);
        rlk_eng_complete_err(c, call, RLOCK_ERR_CANCELLED, "acquire cancelled");
        return 0;
    }
    Rlock__V1__Cancel k = RLOCK__V1__CANCEL__INIT;
    k.request_id = id;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.body_case = RLOCK__V1__REQUEST__BODY_CANCEL;
    req.cancel = &k;
    submit_own(c, &req, RLK_CALL_CANCEL, NULL);
    return 0;
}

/* --- life cycle -------------------------------------------------------------------------- */

int rlk_eng_init(struct rlock_client *c, int fd)
{
    c->fd = fd;
    if (c->addrs != NULL && rlk_tls_attach(c, c->addrs->a[c->addr_used]) != 0)
        return -1;
    c->old_fd = -1;
    c->state = RLK_SESSION_OPEN;
    c->link = RLK_LINK_UP;
    c->last_tx_ms = c->last_rx_ms = c->last_ping_ms = c->answered_sent_ms = rlk_alive_ms();
    c->done_tail = &c->done_head;
    c->notes_tail = &c->notes;
    c->lost_fd = -1;
    if (calltab_grow(&c->pending) < 0)
        return -1;
    return 0;
}

void rlk_eng_free(struct rlock_client *c)
{
    for (size_t i = 0; i < c->pending.nb; i++) {
        struct rlk_call *call, *next;
        for (call = c->pending.b[i]; call != NULL; call = next) {
            next = call->hnext;
            if (call->owned)
                owned_free(c, call);
        }
    }
    free(c->pending.b);
    memset(&c->pending, 0, sizeof c->pending);
    struct rlk_call *call;
    while ((call = c->done_head) != NULL) {
        c->done_head = call->cnext;
        owned_free(c, call);
    }
    c->done_tail = &c->done_head;
    struct rlk_note *n;
    while ((n = c->notes) != NULL) {
        c->notes = n->next;
        free(n);
    }
    c->notes_tail = &c->notes;
    iobuf_free(&c->tx);
    iobuf_free(&c->rx);
    rlk_tls_free(c);
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    rlk_move_free(c);
    if (c->lost_fd >= 0)
        close(c->lost_fd);
    c->lost_fd = -1;
}
