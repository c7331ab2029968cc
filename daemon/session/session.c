/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * session.c — a client connection: framing on a plain read event, keepalive
 * and Hello deadlines, replies and events, and the end of the session.
 *
 *   socket -> read event -> session_read into the server's scratch buffer
 *   (4-byte length, bounded, at most SESSION_FRAMES_PER_EVENT per read event)
 *   -> srv->on_frame (the top's dispatch) -> handlers -> session_respond ->
 *   output buffer, written once per loop turn (the flush event)
 *
 * A session is never freed inside its own callbacks: session_close moves it
 * to the server's closed list and the reaper frees it after the loop turn.
 * What a session's end means for its locks is the lock logic's: the server's
 * on_session_end hook.
 */
#include "session.h"
#include "tls.h"
#include "peercount.h"

#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include <errno.h>
#include <sys/socket.h>

#include <event2/event.h>

#include "auth.h"
#include "config.h"
#include "log.h"
#include "sessidx.h"
#include "wire.h"

#define SESSION_FRAMES_PER_EVENT 64 /* fairness between busy connections */
#define SESSION_FLUSH_MS 1000       /* time to deliver a last error before closing */
#define SESSION_RETRY_AFTER_MS 250  /* hint sent with UNAVAILABLE */

static const char *state_name(enum session_state st)
{
    static const char *const names[] = {"accepted", "active", "closing"};
    return names[st];
}

/* The one function that changes a session's state. */
static void session_set_state(struct session *s, enum session_state st)
{
    log_debug("session %s (%s): %s -> %s", s->id, s->peer, state_name(s->state),
              state_name(st));
    if (s->state == SESSION_ACCEPTED && st != SESSION_ACCEPTED) {
        TAILQ_REMOVE(&s->srv->pending, s, pending_link);
        s->srv->npending--;
        if (s->peer_counted && s->srv->peers != NULL) /* NULL: the daemon is ending */
            peercount_remove(s->srv->peers, s->peer_ip);
    }
    s->state = st;
}

static void session_queue_resume(struct session *s);
static void session_read(struct session *s);

static void session_arm(struct session *s, int64_t ms)
{
    struct timeval tv = util_tv_ms(ms);
    evtimer_add(s->timer, &tv);
}

/* Move a closing session to the reaper. */
static void session_retire(struct session *s)
{
    if (s->flush_then_close) {
        TAILQ_REMOVE(&s->srv->draining, s, link);
        s->flush_then_close = 0;
    }
    if (s->flush_queued) {
        TAILQ_REMOVE(&s->srv->flushq, s, flush_link);
        s->flush_queued = 0;
    }
    if (s->resume_queued) {
        TAILQ_REMOVE(&s->srv->resumeq, s, resume_link);
        s->resume_queued = 0;
    }
    event_del(s->rev);
    event_del(s->wev);
    evtimer_del(s->timer);
    TAILQ_INSERT_TAIL(&s->srv->closed, s, link);
    session_schedule_reap(s->srv);
}

void session_close(struct session *s, const char *reason, int flush)
{
    if (s->state == SESSION_CLOSING)
        return;
    if (s->srv->handing_over && !s->goodbye && s->state == SESSION_ACTIVE) {
        /* Told to move, it left: its client resumes it elsewhere (or here, restarted). */
        s->moved = 1;
        s->srv->ctr.sessions_handed_over++;
    }
    /* A connection that never completed its Hello is any peer's to open: its line is one
     * of those written at a bounded rate. */
    void (*log_fn)(int, const char *, ...) = s->state == SESSION_ACCEPTED ? log_peer_msg : log_msg;
    session_set_state(s, SESSION_CLOSING);
    log_fn(LOG_LEVEL_INFO, "session %s (%s, %s): closed: %s; %s %u lock%s", s->id, s->peer,
           s->name[0] ? s->name : "-", reason, s->moved ? "handing over" : "releasing",
           s->nleases, s->nleases == 1 ? "" : "s");
    /* Clean: the client said Goodbye, or the daemon itself is stopping. */
    s->end_clean = s->goodbye || s->srv->stopping;

    s->srv->on_session_end(s);
    TAILQ_REMOVE(&s->srv->sessions, s, link);
    sessidx_remove(s->srv->sessidx, s);
    s->srv->nsessions--;

    if (flush && s->tx.len > 0) {
        /* Deliver the last reply (an error) before closing; at most SESSION_FLUSH_MS. */
        event_del(s->rev);
        s->flush_then_close = 1;
        TAILQ_INSERT_TAIL(&s->srv->draining, s, link);
        session_arm(s, SESSION_FLUSH_MS);
        session_queue_flush(s);
        return;
    }
    session_retire(s);
}

void session_abandon_flush(struct session *s)
{
    session_retire(s);
}

void session_free(struct session *s)
{
    if (s == NULL)
        return;
    if (s->rev != NULL)
        event_free(s->rev);
    if (s->wev != NULL)
        event_free(s->wev);
    if (s->timer != NULL)
        event_free(s->timer);
    tls_close(s->ssl, s->tls_failed);
    if (s->fd >= 0)
        evutil_closesocket(s->fd);
    iobuf_free(&s->rx);
    iobuf_free(&s->tx);
    minbag_free(&s->valid); /* emptied by the lock layer (lock_session_end) */
    quota_put(&s->srv->quotas, s->quota);
    free(s);
}

/* --- output ----------------------------------------------------------------- */

/*
 * Replies are packed into the session's output buffer and written once per
 * loop turn, by the server's flush event, for every session that has any:
 * the replies to a batch of frames, or to the many Redis answers one read of
 * a Redis connection brings, leave in one write. Only when the socket does
 * not take everything does the session wait for writability (wev).
 */
void session_queue_flush(struct session *s)
{
    if (s->flush_queued)
        return;
    s->flush_queued = 1;
    TAILQ_INSERT_TAIL(&s->srv->flushq, s, flush_link);
    session_schedule_flush(s->srv);
}

/*
 * The socket's bytes, through TLS on a TLS session. A TLS read that must first
 * write (or a write that must first read) returns EAGAIN and notes it, so that
 * the other direction's event goes on with it.
 */
static ssize_t session_io_recv(struct session *s, void *buf, size_t len, const char **why)
{
    if (s->ssl != NULL && !s->tls_sniffed) {
        /*
         * A TLS client starts with a handshake record (type 22). A client of the plain
         * protocol starts with a frame length whose first byte is 0 (a frame is far below
         * 2^24 bytes): give it the plain protocol, so that its Hello can be answered with
         * what to do instead of a reset (hello.c refuses it).
         */
        unsigned char first;
        ssize_t n = recv(s->fd, &first, 1, MSG_PEEK);
        if (n <= 0)
            return n;
        s->tls_sniffed = 1;
        if (first != 22) {
            tls_close(s->ssl, 1);
            s->ssl = NULL;
            s->plain_on_tls = 1;
        }
    }
    if (s->ssl == NULL)
        return recv(s->fd, buf, len, 0);
    int want = 0;
    ssize_t n = tls_read(s->ssl, buf, len, &want, why);
    if (n < 0 && errno == EAGAIN && want == TLS_WANT_WRITE) {
        s->tls_read_wants_write = 1;
        if (!s->wev_armed && event_add(s->wev, NULL) == 0)
            s->wev_armed = 1;
    } else if (n < 0 && errno != EAGAIN) {
        s->tls_failed = 1;
    }
    return n;
}

static ssize_t session_io_send(struct session *s, const char **why)
{
    if (s->ssl == NULL)
        return send(s->fd, iobuf_head(&s->tx), s->tx.len, MSG_NOSIGNAL | MSG_DONTWAIT);
    int want = 0;
    ssize_t n = tls_write(s->ssl, iobuf_head(&s->tx), s->tx.len, &want, why);
    if (n < 0 && errno == EAGAIN && want == TLS_WANT_READ)
        s->tls_write_wants_read = 1;
    else if (n < 0 && errno != EAGAIN)
        s->tls_failed = 1;
    return n;
}

/* Write what the socket takes now. */
void session_flush(struct session *s)
{
    if (s->flush_queued) {
        TAILQ_REMOVE(&s->srv->flushq, s, flush_link);
        s->flush_queued = 0;
    }
    while (s->tx.len > 0) {
        const char *why = "connection error";
        ssize_t n = session_io_send(s, &why);
        if (n > 0) {
            iobuf_consume(&s->tx, (size_t)n);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            /* TLS may need to read first (a handshake message): read_cb flushes then. */
            if (!s->tls_write_wants_read && !s->wev_armed && event_add(s->wev, NULL) == 0)
                s->wev_armed = 1;
            return;
        }
        /* The peer is gone: nothing more can be delivered. */
        if (s->flush_then_close) {
            session_retire(s);
        } else {
            session_close(s, why, 0);
        }
        return;
    }
    if (s->wev_armed && !s->tls_read_wants_write) {
        event_del(s->wev);
        s->wev_armed = 0;
    }
    iobuf_shrink(&s->tx, 0); /* an idle session keeps no output buffer */
    if (s->flush_then_close)
        session_retire(s);
}

static void write_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct session *s = arg;
    if (s->tls_read_wants_write) {
        /* A TLS read could not go on until the socket took what it had to send. */
        s->tls_read_wants_write = 0;
        if (s->tx.len == 0 && s->wev_armed) {
            event_del(s->wev);
            s->wev_armed = 0;
        }
        if (s->state != SESSION_CLOSING)
            session_read(s);
        if (s->state == SESSION_CLOSING && !s->flush_then_close)
            return; /* retired: the reaper has it */
    }
    session_flush(s);
}

static void session_send(struct session *s, const Rlock__V1__ServerMessage *m)
{
    if (s->state == SESSION_CLOSING && !s->flush_then_close)
        return;
    size_t body = protobuf_c_message_get_packed_size(&m->base);
    if (body > UINT32_MAX || iobuf_reserve(&s->tx, WIRE_HEADER_BYTES + body) != 0) {
        log_error("session %s (%s): out of memory packing a reply", s->id, s->peer);
        return;
    }
    uint8_t *at = iobuf_tail(&s->tx);
    wire_put_len(at, (uint32_t)body);
    protobuf_c_message_pack(&m->base, at + WIRE_HEADER_BYTES);
    iobuf_added(&s->tx, WIRE_HEADER_BYTES + body);
    if (s->tx.len > s->srv->cfg->max_output_bytes && !s->overflow) {
        /* A reader this slow is disconnected, not buffered for; closing is
         * deferred because the caller may be in the middle of lock logic. */
        s->overflow = 1;
        event_active(s->rev, EV_TIMEOUT, 0);
        return;
    }
    session_queue_flush(s);
}

static void respond(struct session *s, uint64_t id, Rlock__V1__Status status, const char *msg,
                    Rlock__V1__Response__BodyCase body_case, void *body, Rlock__V1__Holder *holder)
{
    Rlock__V1__Response r = RLOCK__V1__RESPONSE__INIT;
    r.id = id;
    r.status = status;
    r.message = (char *)(msg != NULL ? msg : "");
    r.holder = holder;
    if (status == RLOCK__V1__STATUS__STATUS_UNAVAILABLE)
        r.retry_after_ms = SESSION_RETRY_AFTER_MS;
    r.body_case = body_case;
    switch (body_case) {
    case RLOCK__V1__RESPONSE__BODY_HELLO: r.hello = body; break;
    case RLOCK__V1__RESPONSE__BODY_ACQUIRE: r.acquire = body; break;
    case RLOCK__V1__RESPONSE__BODY_RELEASE: r.release = body; break;
    case RLOCK__V1__RESPONSE__BODY_EXTEND: r.extend = body; break;
    case RLOCK__V1__RESPONSE__BODY_PING: r.ping = body; break;
    case RLOCK__V1__RESPONSE__BODY_STATS: r.stats = body; break;
    case RLOCK__V1__RESPONSE__BODY_CANCEL: r.cancel = body; break;
    case RLOCK__V1__RESPONSE__BODY_LIST_SESSIONS: r.list_sessions = body; break;
    case RLOCK__V1__RESPONSE__BODY_LIST_LOCKS: r.list_locks = body; break;
    case RLOCK__V1__RESPONSE__BODY_FORCE_RELEASE: r.force_release = body; break;
    case RLOCK__V1__RESPONSE__BODY_KILL_SESSION: r.kill_session = body; break;
    case RLOCK__V1__RESPONSE__BODY_SERVER_INFO: r.server_info = body; break;
    case RLOCK__V1__RESPONSE__BODY_ADOPT: r.adopt = body; break;
    case RLOCK__V1__RESPONSE__BODY_LEADER: r.leader = body; break;
    case RLOCK__V1__RESPONSE__BODY_TOP_RESOURCES: r.top_resources = body; break;
    default: r.body_case = RLOCK__V1__RESPONSE__BODY__NOT_SET; break;
    }
    if (status != RLOCK__V1__STATUS__STATUS_OK)
        log_debug("session %s (%s): request %llu: %s: %s", s->id, s->peer, (unsigned long long)id,
                  wire_status_name(status), r.message);
    Rlock__V1__ServerMessage m = RLOCK__V1__SERVER_MESSAGE__INIT;
    m.body_case = RLOCK__V1__SERVER_MESSAGE__BODY_RESPONSE;
    m.response = &r;
    session_send(s, &m);
}

void session_respond(struct session *s, uint64_t id, Rlock__V1__Status status, const char *msg,
                     Rlock__V1__Response__BodyCase body_case, void *body)
{
    respond(s, id, status, msg, body_case, body, NULL);
}

void session_respond_error(struct session *s, uint64_t id, Rlock__V1__Status st, const char *msg)
{
    respond(s, id, st, msg, RLOCK__V1__RESPONSE__BODY__NOT_SET, NULL, NULL);
}

void session_respond_refused(struct session *s, uint64_t id, Rlock__V1__Status st,
                             const char *msg, Rlock__V1__Holder *holder)
{
    respond(s, id, st, msg, RLOCK__V1__RESPONSE__BODY__NOT_SET, NULL, holder);
}

void session_push_event(struct session *s, Rlock__V1__Event *ev)
{
    Rlock__V1__ServerMessage m = RLOCK__V1__SERVER_MESSAGE__INIT;
    m.body_case = RLOCK__V1__SERVER_MESSAGE__BODY_EVENT;
    m.event = ev;
    session_send(s, &m);
}

/* --- input ------------------------------------------------------------------ */

/*
 * Act on the complete frames in data[0..len), at most SESSION_FRAMES_PER_EVENT
 * of them (fairness between busy connections). Returns the bytes used, or -1
 * when the session closed.
 */
static ssize_t session_frames(struct session *s, const uint8_t *data, size_t len, int *capped)
{
    const struct config *cfg = s->srv->cfg;
    size_t used = 0;
    *capped = 0;
    for (int n = 0; n < SESSION_FRAMES_PER_EVENT; n++) {
        if (s->state == SESSION_CLOSING)
            return -1;
        /* Before its Hello a connection is anyone's: its first frame is small, and so is what
         * it may make the daemon buffer. */
        uint32_t limit = s->state == SESSION_ACCEPTED && cfg->max_frame_bytes > SESSION_HELLO_FRAME_MAX
                             ? SESSION_HELLO_FRAME_MAX
                             : cfg->max_frame_bytes;
        uint32_t flen = 0;
        enum wire_frame_state st = wire_frame_next(data + used, len - used, limit, &flen);
        if (st == WIRE_FRAME_PARTIAL)
            return (ssize_t)used; /* wait for the rest (at most max_frame_bytes) */
        if (st == WIRE_FRAME_TOO_LARGE) {
            /* Refused before buffering it: answer, then close this connection only. */
            char msg[96];
            snprintf(msg, sizeof msg, "frame of %u bytes exceeds %s (%u)", flen,
                     limit < cfg->max_frame_bytes ? "the limit before Hello" : "max_frame_bytes",
                     limit);
            log_peer_warn("session %s (%s): %s", s->id, s->peer, msg);
            s->srv->mx.frames_rejected[METRIC_FRAME_TOO_LARGE]++;
            session_respond_error(s, 0, RLOCK__V1__STATUS__STATUS_INVALID, msg);
            session_close(s, "frame too large", 1);
            return -1;
        }
        s->last_frame_us = util_now_us(); /* any frame is a keepalive */
        s->last_frame_ms = s->last_frame_us / 1000;
        s->srv->on_frame(s, data + used + WIRE_HEADER_BYTES, flen);
        used += WIRE_HEADER_BYTES + flen;
    }
    *capped = 1;
    return (ssize_t)used;
}

/*
 * Read what the socket has into the server's scratch buffer and act on the
 * frames in it; only a partial frame, or the frames left over when the cap
 * was reached, are copied into the session's own buffer. So an idle session
 * holds no input buffer, and a busy one rarely copies.
 */
static void session_read(struct session *s)
{
    struct server *srv = s->srv;
    int capped = 0;
    if (s->rx.len > 0) {
        /* Frames left from an earlier turn first; read more only when they are done. */
        ssize_t used = session_frames(s, iobuf_head(&s->rx), s->rx.len, &capped);
        if (used < 0)
            return;
        iobuf_consume(&s->rx, (size_t)used);
        if (capped) {
            session_queue_resume(s);
            return;
        }
    }
    const char *why = "connection error";
    ssize_t got = session_io_recv(s, srv->scratch, sizeof srv->scratch, &why);
    if (got == 0) {
        session_close(s, "connection closed by client", 0);
        return;
    }
    if (got < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            session_close(s, why, 0);
        return;
    }
    const uint8_t *data = srv->scratch;
    size_t len = (size_t)got;
    if (s->rx.len > 0) {
        /* Complete the partial frame kept from before. */
        if (iobuf_reserve(&s->rx, len) != 0) {
            session_close(s, "out of memory", 0);
            return;
        }
        memcpy(iobuf_tail(&s->rx), data, len);
        iobuf_added(&s->rx, len);
        ssize_t used = session_frames(s, iobuf_head(&s->rx), s->rx.len, &capped);
        if (used < 0)
            return;
        iobuf_consume(&s->rx, (size_t)used);
    } else {
        ssize_t used = session_frames(s, data, len, &capped);
        if (used < 0)
            return;
        if ((size_t)used < len) {
            if (iobuf_reserve(&s->rx, len - (size_t)used) != 0) {
                session_close(s, "out of memory", 0);
                return;
            }
            memcpy(iobuf_tail(&s->rx), data + used, len - (size_t)used);
            iobuf_added(&s->rx, len - (size_t)used);
        }
    }
    if (capped || (s->ssl != NULL && s->state != SESSION_CLOSING && tls_pending(s->ssl) > 0))
        session_queue_resume(s); /* the cap was reached, or TLS holds decrypted bytes the
                                    socket no longer shows: others first, then go on */
    else if (s->rx.len == 0)
        iobuf_shrink(&s->rx, 0);
}

/*
 * Go on after the loop has polled again. Not event_active(s->rev): an event
 * activated from its own callback runs again in the same pass, before the
 * loop looks at any socket, so one busy client could keep every other
 * session (and Redis replies) waiting. A zero-delay timer fires only after
 * the next poll, behind the I/O it found.
 */
static void session_queue_resume(struct session *s)
{
    struct server *srv = s->srv;
    if (s->resume_queued)
        return;
    s->resume_queued = 1;
    s->resume_turn = srv->resume_turn;
    TAILQ_INSERT_TAIL(&srv->resumeq, s, resume_link);
    if (!evtimer_pending(srv->resume_ev, NULL)) {
        struct timeval now = {0, 0};
        evtimer_add(srv->resume_ev, &now);
    }
}

static void read_cb(evutil_socket_t fd, short what, void *arg);

void session_resume_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct server *srv = arg;
    /* Only those queued before this turn: a session stopped again goes on next turn. */
    uint64_t turn = ++srv->resume_turn;
    struct session *s;
    while ((s = TAILQ_FIRST(&srv->resumeq)) != NULL && s->resume_turn < turn) {
        TAILQ_REMOVE(&srv->resumeq, s, resume_link);
        s->resume_queued = 0;
        read_cb(s->fd, EV_READ, s);
    }
}

static void read_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    struct session *s = arg;
    if (s->state == SESSION_CLOSING)
        return;
    if (s->overflow && (what & EV_TIMEOUT)) {
        log_warn("session %s (%s): output above max_output_bytes; disconnecting slow reader",
                 s->id, s->peer);
        s->srv->mx.conns_rejected[METRIC_CONN_SLOW_READER]++;
        session_close(s, "slow reader", 0);
        return;
    }
    if (s->tls_write_wants_read) {
        /* A TLS write could not go on until the peer's message came: it has. */
        s->tls_write_wants_read = 0;
        session_flush(s);
        if (s->state == SESSION_CLOSING || s->fd < 0)
            return;
    }
    session_read(s);
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct session *s = arg;
    int64_t now = util_now_ms();
    switch (s->state) {
    case SESSION_ACCEPTED:
        session_close(s, "no Hello in time", 0);
        break;
    case SESSION_ACTIVE: {
        int64_t idle = now - s->last_frame_ms;
        if (idle >= s->timeout_ms)
            session_close(s, "session timed out (no keepalive)", 0);
        else
            session_arm(s, s->timeout_ms - idle);
        break;
    }
    case SESSION_CLOSING:
        session_retire(s); /* the last reply could not be flushed in time */
        break;
    }
}

int session_take_id(struct session *s, const char *id)
{
    char old[sizeof s->id];
    memcpy(old, s->id, sizeof old);
    sessidx_remove(s->srv->sessidx, s);
    snprintf(s->id, sizeof s->id, "%s", id);
    if (sessidx_add(s->srv->sessidx, s) == 0)
        return 0;
    memcpy(s->id, old, sizeof old);
    if (sessidx_add(s->srv->sessidx, s) != 0)
        log_warn("session %s: out of memory indexing it; admin requests will not see it", s->id);
    return -1;
}

void session_activate(struct session *s, uint32_t timeout_ms)
{
    s->timeout_ms = timeout_ms;
    session_set_state(s, SESSION_ACTIVE);
    session_arm(s, timeout_ms);
}

struct session *session_new(struct server *srv, int fd, const char *peer, const uint8_t *ip,
                            struct ssl_st *ssl)
{
    struct session *s = calloc(1, sizeof *s);
    if (s == NULL) {
        tls_close(ssl, 1);
        evutil_closesocket(fd);
        return NULL;
    }
    s->srv = srv;
    s->fd = fd;
    s->ssl = ssl;
    s->state = SESSION_ACCEPTED;
    s->role = AUTH_ROLE_NONE; /* until Hello says otherwise: nothing is allowed */
    TAILQ_INIT(&s->requests);
    TAILQ_INIT(&s->leases);
    LIST_INIT(&s->observing);
    minbag_init(&s->valid);
    util_session_id(s->id);
    snprintf(s->peer, sizeof s->peer, "%s", peer);
    if (ip != NULL) {
        memcpy(s->peer_ip, ip, sizeof s->peer_ip);
        s->peer_tcp = 1;
    }
    s->last_frame_us = util_now_us();
    s->opened_ms = s->last_frame_ms = s->last_frame_us / 1000;
    s->rev = event_new(srv->base, fd, EV_READ | EV_PERSIST, read_cb, s);
    s->wev = event_new(srv->base, fd, EV_WRITE | EV_PERSIST, write_cb, s);
    s->timer = evtimer_new(srv->base, timer_cb, s);
    if (s->rev == NULL || s->wev == NULL || s->timer == NULL || event_add(s->rev, NULL) != 0) {
        session_free(s);
        return NULL;
    }
    session_arm(s, srv->cfg->hello_timeout_ms);
    TAILQ_INSERT_TAIL(&srv->sessions, s, link);
    if (sessidx_add(srv->sessidx, s) != 0)
        log_warn("session %s: out of memory indexing it; admin requests will not see it",
                 s->id);
    srv->nsessions++;
    TAILQ_INSERT_TAIL(&srv->pending, s, pending_link);
    srv->npending++;
    s->peer_counted = s->peer_tcp && peercount_add(srv->peers, s->peer_ip) == 0;
    srv->ctr.sessions_opened++;
    log_debug("session %s (%s): accepted", s->id, peer);
    return s;
}

void session_make_room(struct server *srv)
{
    while (srv->npending >= srv->cfg->max_pending) {
        struct session *old = TAILQ_FIRST(&srv->pending);
        /* A burst of connections is accepted before any is read: what the oldest sent may
         * already be its Hello. Read it; if it is still before its Hello, it goes. */
        int waiting = 0;
        if (ioctl(old->fd, FIONREAD, &waiting) == 0 && waiting > 0) {
            session_read(old);
            if (old->state != SESSION_ACCEPTED)
                continue;
        }
        srv->mx.conns_rejected[METRIC_CONN_MAX_PENDING]++;
        session_close(old, "evicted before its Hello (max_pending)", 0);
    }
}

/* --- the sessions of the server: reaper, flush, resume ----------------------- */

static void reap_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    session_reap_now(arg);
}

void session_reap_now(struct server *srv)
{
    struct session *s, *next;
    for (s = TAILQ_FIRST(&srv->closed); s != NULL; s = next) {
        next = TAILQ_NEXT(s, link);
        if (s->ending)
            continue; /* the lock logic schedules its reap once its leases are gone */
        TAILQ_REMOVE(&srv->closed, s, link);
        session_free(s);
    }
}

static void flush_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct server *srv = arg;
    struct session *s;
    while ((s = TAILQ_FIRST(&srv->flushq)) != NULL)
        session_flush(s); /* takes s off the queue */
}

void session_schedule_flush(struct server *srv)
{
    event_active(srv->flush_ev, EV_TIMEOUT, 0);
}

void session_schedule_reap(struct server *srv)
{
    event_active(srv->reap_ev, EV_TIMEOUT, 0);
}

int session_start(struct server *srv)
{
    TAILQ_INIT(&srv->sessions);
    TAILQ_INIT(&srv->pending);
    srv->peers = peercount_new(srv->hash_key);
    TAILQ_INIT(&srv->closed);
    TAILQ_INIT(&srv->draining);
    TAILQ_INIT(&srv->flushq);
    TAILQ_INIT(&srv->resumeq);
    srv->reap_ev = event_new(srv->base, -1, 0, reap_cb, srv);
    srv->flush_ev = event_new(srv->base, -1, 0, flush_cb, srv);
    srv->resume_ev = evtimer_new(srv->base, session_resume_cb, srv);
    srv->sessidx = sessidx_new(srv->hash_key);
    if (srv->reap_ev == NULL || srv->flush_ev == NULL || srv->resume_ev == NULL ||
        srv->sessidx == NULL || srv->peers == NULL)
        return -1;
    return 0;
}

void session_stop(struct server *srv)
{
    if (srv->reap_ev != NULL) {
        session_reap_now(srv);
        event_free(srv->reap_ev);
    }
    if (srv->flush_ev != NULL)
        event_free(srv->flush_ev);
    if (srv->resume_ev != NULL)
        event_free(srv->resume_ev);
    srv->reap_ev = srv->flush_ev = srv->resume_ev = NULL;
    sessidx_free(srv->sessidx);
    peercount_free(srv->peers);
    srv->peers = NULL;
    srv->sessidx = NULL;
}
