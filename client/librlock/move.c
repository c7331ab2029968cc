/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * move.c — a session that outlives its connection (docs/protocol.md §10,
 * docs/client.md "When the daemon goes away").
 *
 *   OPEN ──connection lost / SessionClosing{resume} / daemon silent──▶ MOVING
 *   MOVING: link DOWN ──backoff──▶ CONNECTING ──▶ UP: Resume, Adopt per lock (at most
 *           MOVE_ADOPTS_IN_FLIGHT due at once), Release{acquire_id} per Acquire left
 *           unanswered, in one write
 *   MOVING ──every answer in, Resume accepted──▶ OPEN
 *   MOVING ──refused, or not resumed by the session timeout──▶ ENDED
 *
 * Calls pending when the connection is lost complete at once: an Acquire
 * UNAVAILABLE (what it may have taken is released by its id after the
 * resume); a Release or an Extend UNAVAILABLE (the lock is still held, with
 * the validity it had: release it again once resumed); anything else
 * UNAVAILABLE. New calls are refused UNAVAILABLE until the session is open
 * again. Held locks read UNCERTAIN meanwhile, with their valid-until
 * unchanged; one whose validity passes is LOST (EXPIRED) there and then,
 * because its key may have expired.
 *
 * Every function runs with c->mu held, from whichever thread drives the
 * engine (the reactor's for a blocking client, the application's in
 * rlock_async_process for an asynchronous one).
 */
#include "rlock_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Backoff between rounds of the address list: from the first to the last value. */
#define MOVE_BACKOFF_FIRST_MS 50u
#define MOVE_BACKOFF_MAX_MS 1000u
/* How long one try (connect, Resume and its answer) may take: a share of the session timeout. */
#define MOVE_TRY_MIN_MS 500
#define MOVE_TRY_MAX_MS 5000
/* How long a session without a session timeout keeps trying. */
#define MOVE_DEFAULT_LIMIT_MS 30000
/* Adopts queued at once on a new connection; more as their answers come in. */
#define MOVE_ADOPTS_IN_FLIGHT 4096u

/* --- acquires left unanswered ------------------------------------------------------- */

static void unanswered_add(struct rlock_client *c, uint64_t id, const char *resource)
{
    size_t n = strlen(resource) + 1;
    struct rlk_unanswered *u = malloc(sizeof *u + n);
    if (u == NULL)
        return; /* its key, if any, expires with its ttl */
    u->id = id;
    memcpy(u->resource, resource, n);
    u->next = c->move.unanswered;
    c->move.unanswered = u;
}

void rlk_move_free(struct rlock_client *c)
{
    struct rlk_unanswered *u;
    while ((u = c->move.unanswered) != NULL) {
        c->move.unanswered = u->next;
        free(u);
    }
    if (c->old_fd >= 0)
        close(c->old_fd);
    c->old_fd = -1;
}

/* --- the loss of a connection ---------------------------------------------------------- */

void rlk_move_settle(struct rlock_client *c, struct rlk_call *call)
{
    const char *lost = "the connection to the daemon was lost before the answer";
    switch (call->kind) {
    case RLK_CALL_ACQUIRE:
        /* Sent: it may have been granted; the grant is released by its id after the resume. */
        if (call->held_frame == NULL && call->handle != NULL)
            unanswered_add(c, call->id, rlk_handle_resource(call->handle));
        if (call->cancelled)
            rlk_eng_complete_err(c, call, RLOCK_ERR_CANCELLED, "acquire cancelled");
        else
            rlk_eng_complete_err(c, call, RLOCK_ERR_UNAVAILABLE,
                                 "%s; nothing it may have taken stays held", lost);
        return;
    case RLK_CALL_FORGET:
        if (call->acq_id != 0)
            unanswered_add(c, call->acq_id,
                           call->acq_resource != NULL ? call->acq_resource : "");
        break;
    case RLK_CALL_RELEASE:
    case RLK_CALL_EXTEND:
    case RLK_CALL_PING:
    case RLK_CALL_STATS:
    case RLK_CALL_KEEP:
    case RLK_CALL_HELLO:
    case RLK_CALL_LEADER:
    case RLK_CALL_OBSERVE:
    case RLK_CALL_UNOBSERVE:
        rlk_eng_complete_err(c, call, RLOCK_ERR_UNAVAILABLE, "%s", lost);
        return;
    case RLK_CALL_REOBSERVE: /* sent again after the next resume */
    case RLK_CALL_KEEPALIVE:
    case RLK_CALL_CANCEL:
    case RLK_CALL_RESUME:
    case RLK_CALL_ADOPT:
        break;
    }
    /* The engine's own: nobody waits for it. */
    call->done_fn = NULL;
    rlk_eng_complete(c, call);
}

/* Aim the engine at fd, a new connection (connected, or connect in progress). */
static int swap_fd(struct rlock_client *c, int fd)
{
    int prev = c->fd;
    rlk_tls_detach(c); /* the TLS state of the connection left goes with it */
    c->fd = fd;
    c->fd_changed = 1;
    if (c->mode == RLK_MODE_BLOCKING)
        rlk_reactor_swap_fd(c, prev); /* out of epoll before it may be closed */
    if (prev >= 0) {
        if (c->move.keep_old && c->old_fd < 0)
            c->old_fd = prev; /* the daemon left behind: closed once resumed */
        else
            close(prev);
    }
    return rlk_tls_attach(c, c->addrs->a[c->addr_used]);
}

int rlk_move_begin(struct rlock_client *c, const char *why, int keep_old)
{
    if (c->state == RLK_SESSION_ENDED || c->closing || rlk_inherited(c) ||
        c->session_secret[0] == '\0' || c->addrs == NULL || c->addrs->n == 0)
        return 0;
    int64_t now = rlk_alive_ms();
    if (c->state == RLK_SESSION_OPEN) {
        c->state = RLK_SESSION_MOVING;
        c->move.since = now;
        c->move.give_up_at =
            now + (c->session_timeout_ms ? c->session_timeout_ms : MOVE_DEFAULT_LIMIT_MS);
        c->move.next_try = now;
        c->move.backoff_ms = 0;
        c->move.tries = 0;
        c->move.keep_old = keep_old;
        c->move.last[0] = '\0';
        snprintf(c->move.why, sizeof c->move.why, "%s", why);
    } else {
        /* A try failed: the next address, after a pause once the list went round. */
        snprintf(c->move.last, sizeof c->move.last, "%s", why);
        if (c->move.tries % c->addrs->n == 0) {
            uint32_t b = c->move.backoff_ms ? c->move.backoff_ms * 2 : MOVE_BACKOFF_FIRST_MS;
            c->move.backoff_ms = b < MOVE_BACKOFF_MAX_MS ? b : MOVE_BACKOFF_MAX_MS;
            c->move.next_try = now + c->move.backoff_ms;
        } else {
            c->move.next_try = now;
        }
    }
    /*
     * Shut the connection at once, so that its daemon sees it end — unless it
     * is the one the session left a live daemon on (kept until the resume).
     */
    if (c->fd >= 0 && !(c->move.keep_old && c->old_fd < 0))
        shutdown(c->fd, SHUT_RDWR);
    c->link = RLK_LINK_DOWN;
    c->move.resumed = 0;
    c->move.batch = 0;
    c->move.adopt_next = NULL;
    c->corked = 0;
    /* What was queued or half read belongs to the connection left. */
    c->tx.off = c->tx.len = 0;
    c->tx_sent = c->tx_queued;
    c->rx.off = c->rx.len = 0;
    rlk_eng_drain_pending(c, rlk_move_settle);
    c->keepalive_inflight = 0;
    if (c->mode == RLK_MODE_BLOCKING)
        rlk_reactor_reschedule(c, c->move.next_try);
    else
        c->async_wake = c->move.next_try;
    return 1;
}

/* --- the resume ------------------------------------------------------------------------ */

/*
 * Queue Adopts for the held locks not yet sent on this connection, while
 * fewer than MOVE_ADOPTS_IN_FLIGHT answers are due: a client with a million
 * locks must not queue them all at once (RLK_MAX_TX_BYTES). The rest follow
 * as answers come in (rlk_move_answer).
 */
static void send_adopts(struct rlock_client *c)
{
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.body_case = RLOCK__V1__REQUEST__BODY_ADOPT;
    struct rlk_lock *lk;
    while ((lk = c->move.adopt_next) != NULL && c->move.batch < MOVE_ADOPTS_IN_FLIGHT &&
           c->state == RLK_SESSION_MOVING) {
        c->move.adopt_next = rlk_lock_next(lk);
        Rlock__V1__Adopt a;
        rlk_lock_adopt_fill(lk, &a);
        req.adopt = &a;
        struct rlk_call *call = calloc(1, sizeof *call);
        if (call == NULL)
            continue; /* not adopted: lost when its validity ends */
        call->kind = RLK_CALL_ADOPT;
        call->lock = lk;
        rlk_lock_ref(lk);
        if (rlk_eng_submit_own(c, &req, call) == 0)
            c->move.batch++;
    }
}

/* Queue Resume, the first Adopts and the Releases by acquire id, and write them at once. */
static void send_batch(struct rlock_client *c)
{
    c->corked = 1;
    Rlock__V1__Resume res = RLOCK__V1__RESUME__INIT;
    res.session_id = c->session_id;
    res.session_secret = c->session_secret;
    res.client_name = c->hello_name;
    res.protocol_version = WIRE_PROTOCOL_VERSION;
    res.session_timeout_ms = c->hello_timeout_ms;
    res.auth_token = c->hello_auth;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.body_case = RLOCK__V1__REQUEST__BODY_RESUME;
    req.resume = &res;
    struct rlk_call *call = calloc(1, sizeof *call);
    if (call == NULL) {
        c->corked = 0;
        rlk_eng_end(c, "out of memory resuming the session", 0);
        return;
    }
    call->kind = RLK_CALL_RESUME;
    if (rlk_eng_submit_own(c, &req, call) == 0)
        c->move.batch++;
    c->move.adopt_next = rlk_lock_first(c);
    send_adopts(c);
    struct rlk_unanswered *u;
    while ((u = c->move.unanswered) != NULL) {
        c->move.unanswered = u->next;
        rlk_eng_forget(c, u->resource, NULL, u->id);
        free(u);
    }
    c->corked = 0;
    if (c->state == RLK_SESSION_MOVING)
        rlk_eng_flush(c);
}

void rlk_move_connect_done(struct rlock_client *c)
{
    if (c->state != RLK_SESSION_MOVING || c->link != RLK_LINK_CONNECTING)
        return;
    int e = rlk_conn_result(c->fd);
    if (e == EINPROGRESS)
        return;
    if (e != 0) {
        char why[RLK_REASON_BYTES];
        snprintf(why, sizeof why, "connect %.160s: %.60s", c->addrs->a[c->addr_used],
                 strerror(e));
        (void)rlk_move_begin(c, why, 0);
        return;
    }
    c->link = RLK_LINK_UP;
    c->last_rx_ms = c->last_tx_ms = rlk_alive_ms();
    send_batch(c);
}

/* Connect to the next address of the list. */
static void try_next(struct rlock_client *c, int64_t now)
{
    unsigned n = c->addrs->n;
    c->addr_used = (c->addr_used + 1) % n;
    /* A host name with several addresses: the next of those on each round of the list. */
    unsigned pick = c->move.tries / n;
    c->move.tries++;
    int64_t share = c->session_timeout_ms / 4;
    if (share < MOVE_TRY_MIN_MS)
        share = MOVE_TRY_MIN_MS;
    if (share > MOVE_TRY_MAX_MS)
        share = MOVE_TRY_MAX_MS;
    c->move.try_until = now + share;
    char err[RLK_REASON_BYTES];
    int done = 0;
    int fd = rlk_conn_start(c->addrs->a[c->addr_used], pick, &done, err, sizeof err);
    if (fd < 0) {
        (void)rlk_move_begin(c, err, 0);
        return;
    }
    c->link = done ? RLK_LINK_UP : RLK_LINK_CONNECTING;
    if (swap_fd(c, fd) != 0) {
        (void)rlk_move_begin(c, "out of memory for the TLS connection", 0);
        return;
    }
    if (done) {
        c->last_rx_ms = c->last_tx_ms = now;
        send_batch(c);
    }
}

/* Every answer of the batch is in and the Resume was accepted: the session is open again. */
static void finish(struct rlock_client *c)
{
    c->state = RLK_SESSION_OPEN;
    c->resumes++;
    c->fd_changed = 1;
    if (c->old_fd >= 0) {
        /* The daemon left behind may be alive: now its end of the session changes nothing. */
        close(c->old_fd);
        c->old_fd = -1;
    }
    int64_t now = rlk_alive_ms();
    c->last_ping_ms = now;
    if (c->mode == RLK_MODE_BLOCKING)
        rlk_reactor_reschedule(c, now);
    else
        c->async_wake = now;
    /* This daemon may not know what the session observed, nor what changed meanwhile. */
    rlk_elect_resumed(c);
}

/* The daemon refused the Resume for good: the session cannot be carried on. */
static int resume_refused_for_good(int status)
{
    return status == RLOCK__V1__STATUS__STATUS_UNAUTHENTICATED ||
           status == RLOCK__V1__STATUS__STATUS_INVALID ||
           status == RLOCK__V1__STATUS__STATUS_PERMISSION_DENIED;
}

static void resend_adopt(struct rlock_client *c, struct rlk_lock *lk)
{
    struct rlk_call *call = calloc(1, sizeof *call);
    if (call == NULL)
        return;
    Rlock__V1__Adopt a;
    rlk_lock_adopt_fill(lk, &a);
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.body_case = RLOCK__V1__REQUEST__BODY_ADOPT;
    req.adopt = &a;
    call->kind = RLK_CALL_ADOPT;
    call->lock = lk;
    rlk_lock_ref(lk);
    if (rlk_eng_submit_own(c, &req, call) == 0)
        c->move.batch++;
}

void rlk_move_answer(struct rlock_client *c, struct rlk_call *call, const Rlock__V1__Response *r)
{
    int status = (int)r->status;
    int ok = status == RLOCK__V1__STATUS__STATUS_OK;
    if (c->move.batch > 0)
        c->move.batch--;
    if (call->kind == RLK_CALL_RESUME) {
        if (ok && r->body_case == RLOCK__V1__RESPONSE__BODY_HELLO) {
            rlk_eng_take_hello(c, r->hello);
            c->move.resumed = 1;
        } else {
            char why[RLK_REASON_BYTES];
            snprintf(why, sizeof why, "resume refused by %.120s: %.30s: %.80s",
                     c->addrs->a[c->addr_used], wire_status_name(status),
                     r->message ? r->message : "");
            call->done_fn = NULL;
            rlk_eng_complete(c, call);
            if (resume_refused_for_good(status))
                rlk_eng_end(c, why, 0);
            else
                (void)rlk_move_begin(c, why, 0);
            return;
        }
    } else {
        struct rlk_lock *lk = call->lock;
        if (ok && r->body_case == RLOCK__V1__RESPONSE__BODY_ADOPT)
            rlk_lock_adopted(c, lk, r->adopt, call->sent_ms);
        else if (status == RLOCK__V1__STATUS__STATUS_UNAVAILABLE &&
                 c->state == RLK_SESSION_MOVING)
            resend_adopt(c, lk); /* the daemon took its new token back: ask again */
        else
            rlk_lock_lose(c, lk, RLOCK_LOST_UNSPECIFIED); /* a LockLost said why, if gone */
    }
    call->done_fn = NULL;
    rlk_eng_complete(c, call);
    if (c->state == RLK_SESSION_MOVING && c->move.adopt_next != NULL &&
        c->move.batch < MOVE_ADOPTS_IN_FLIGHT / 2) {
        c->corked = 1;
        send_adopts(c);
        c->corked = 0;
        if (c->state == RLK_SESSION_MOVING)
            rlk_eng_flush(c);
    }
    if (c->state == RLK_SESSION_MOVING && c->move.resumed && c->move.batch == 0 &&
        c->move.adopt_next == NULL)
        finish(c);
}

/* --- timers -------------------------------------------------------------------------- */

int64_t rlk_move_timers(struct rlock_client *c, int64_t now)
{
    rlk_lock_expire(c, now);
    if (now >= c->move.give_up_at) {
        char why[3 * RLK_REASON_BYTES];
        snprintf(why, sizeof why, "not resumed within %lld ms (%s%s%s)",
                 (long long)(now - c->move.since), c->move.why,
                 c->move.last[0] ? "; last try: " : "", c->move.last);
        rlk_eng_end(c, why, 0);
        return -1;
    }
    if (c->link == RLK_LINK_DOWN && now >= c->move.next_try) {
        if (c->leader_call != NULL)
            return now + 1; /* a caller still polls the old descriptor: let it go first */
        try_next(c, now);
    } else if (c->link != RLK_LINK_DOWN && !c->move.resumed && now >= c->move.try_until) {
        /* Once resumed, the adopts take what they take: each lock's validity bounds it. */
        char why[RLK_REASON_BYTES];
        snprintf(why, sizeof why, "%.200s: no answer in time", c->addrs->a[c->addr_used]);
        (void)rlk_move_begin(c, why, 0);
    }
    if (c->state != RLK_SESSION_MOVING)
        return c->state == RLK_SESSION_ENDED ? -1 : now + 1;
    int64_t wake = c->move.give_up_at;
    if (c->link == RLK_LINK_DOWN && c->move.next_try < wake)
        wake = c->move.next_try;
    else if (c->link != RLK_LINK_DOWN && !c->move.resumed && c->move.try_until < wake)
        wake = c->move.try_until;
    int64_t end = rlk_lock_earliest_end(c);
    if (end != INT64_MAX && end + 1 < wake)
        wake = end + 1;
    return wake > now ? wake : now + 1;
}
