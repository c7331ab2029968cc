/*
 * session.c — a client connection: framing on a bufferevent, keepalive and
 * Hello deadlines, replies and events, and the end of the session.
 *
 *   socket -> bufferevent -> session_read (4-byte length, bounded, at most
 *   SESSION_FRAMES_PER_EVENT per read event) -> dispatch_frame -> handlers
 *   -> session_respond -> bufferevent output
 *
 * A session is never freed inside its own callbacks: session_close moves it
 * to the server's closed list and the reaper frees it after the loop turn.
 */
#include "session.h"

#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "config.h"
#include "dispatch.h"
#include "lock.h"
#include "log.h"
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
    log_debug("session %s: %s -> %s", s->id, state_name(s->state), state_name(st));
    s->state = st;
}

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
    bufferevent_disable(s->bev, EV_READ | EV_WRITE);
    bufferevent_setcb(s->bev, NULL, NULL, NULL, NULL);
    evtimer_del(s->timer);
    TAILQ_INSERT_TAIL(&s->srv->closed, s, link);
    server_schedule_reap(s->srv);
}

static void flushed_cb(struct bufferevent *bev, void *arg)
{
    (void)bev;
    session_retire(arg);
}

void session_close(struct session *s, const char *reason, int flush)
{
    if (s->state == SESSION_CLOSING)
        return;
    session_set_state(s, SESSION_CLOSING);
    log_info("session %s (%s, %s): closed: %s; releasing %u lock%s", s->id, s->peer,
             s->name[0] ? s->name : "-", reason, s->nleases, s->nleases == 1 ? "" : "s");
    /* Clean: the client said Goodbye, or the daemon itself is stopping. */
    lock_session_end(s, s->goodbye || s->srv->stopping);
    TAILQ_REMOVE(&s->srv->sessions, s, link);
    s->srv->nsessions--;

    struct evbuffer *out = bufferevent_get_output(s->bev);
    if (flush && evbuffer_get_length(out) > 0) {
        bufferevent_disable(s->bev, EV_READ);
        bufferevent_setcb(s->bev, NULL, flushed_cb, NULL, s);
        s->flush_then_close = 1;
        TAILQ_INSERT_TAIL(&s->srv->draining, s, link);
        session_arm(s, SESSION_FLUSH_MS);
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
    if (s->bev != NULL)
        bufferevent_free(s->bev);
    if (s->timer != NULL)
        event_free(s->timer);
    if (s->resume_ev != NULL)
        event_free(s->resume_ev);
    free(s);
}

/* --- output ----------------------------------------------------------------- */

static void session_send(struct session *s, const Rlock__V1__ServerMessage *m)
{
    if (s->state == SESSION_CLOSING && !s->flush_then_close)
        return;
    size_t len;
    uint8_t *buf = wire_pack_server_message(m, &len);
    if (buf == NULL) {
        log_error("session %s: out of memory packing a reply", s->id);
        return;
    }
    struct evbuffer *out = bufferevent_get_output(s->bev);
    bufferevent_write(s->bev, buf, len);
    free(buf);
    if (evbuffer_get_length(out) > s->srv->cfg->max_output_bytes && !s->overflow) {
        /* A reader this slow is disconnected, not buffered for; closing is
         * deferred because the caller may be in the middle of lock logic. */
        s->overflow = 1;
        event_active(s->resume_ev, EV_TIMEOUT, 0);
    }
}

void session_respond(struct session *s, uint64_t id, Rlock__V1__Status status, const char *msg,
                     Rlock__V1__Response__BodyCase body_case, void *body)
{
    Rlock__V1__Response r = RLOCK__V1__RESPONSE__INIT;
    r.id = id;
    r.status = status;
    r.message = (char *)(msg != NULL ? msg : "");
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
    default: r.body_case = RLOCK__V1__RESPONSE__BODY__NOT_SET; break;
    }
    if (status != RLOCK__V1__STATUS__STATUS_OK)
        log_debug("session %s: request %llu: %s: %s", s->id, (unsigned long long)id,
                  wire_status_name(status), r.message);
    Rlock__V1__ServerMessage m = RLOCK__V1__SERVER_MESSAGE__INIT;
    m.body_case = RLOCK__V1__SERVER_MESSAGE__BODY_RESPONSE;
    m.response = &r;
    session_send(s, &m);
}

void session_push_event(struct session *s, Rlock__V1__Event *ev)
{
    Rlock__V1__ServerMessage m = RLOCK__V1__SERVER_MESSAGE__INIT;
    m.body_case = RLOCK__V1__SERVER_MESSAGE__BODY_EVENT;
    m.event = ev;
    session_send(s, &m);
}

/* --- input ------------------------------------------------------------------ */

static void session_read(struct session *s)
{
    struct evbuffer *in = bufferevent_get_input(s->bev);
    const struct config *cfg = s->srv->cfg;
    for (int n = 0; n < SESSION_FRAMES_PER_EVENT; n++) {
        if (s->state == SESSION_CLOSING)
            return;
        size_t avail = evbuffer_get_length(in);
        uint8_t hdr[WIRE_HEADER_BYTES];
        uint32_t len = 0;
        evbuffer_copyout(in, hdr, WIRE_HEADER_BYTES);
        enum wire_frame_state st = wire_frame_next(hdr, avail, cfg->max_frame_bytes, &len);
        if (st == WIRE_FRAME_TOO_LARGE) {
            /* Refused before buffering it: answer, then close this connection only. */
            char msg[96];
            snprintf(msg, sizeof msg, "frame of %u bytes exceeds max_frame_bytes (%u)", len,
                     cfg->max_frame_bytes);
            log_warn("session %s (%s): %s", s->id, s->peer, msg);
            session_respond(s, 0, RLOCK__V1__STATUS__STATUS_INVALID, msg,
                            RLOCK__V1__RESPONSE__BODY__NOT_SET, NULL);
            session_close(s, "frame too large", 1);
            return;
        }
        if (st == WIRE_FRAME_PARTIAL)
            return; /* wait for the rest (at most max_frame_bytes are ever buffered) */
        evbuffer_drain(in, WIRE_HEADER_BYTES);
        static const uint8_t empty[1];
        const uint8_t *body = len > 0 ? evbuffer_pullup(in, len) : empty;
        s->last_frame_ms = util_now_ms(); /* any frame is a keepalive */
        if (body != NULL)
            dispatch_frame(s, body, len);
        evbuffer_drain(in, len);
    }
    /* The cap was reached: let other connections run, then continue. */
    event_active(s->resume_ev, EV_TIMEOUT, 0);
}

static void read_cb(struct bufferevent *bev, void *arg)
{
    (void)bev;
    session_read(arg);
}

static void resume_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct session *s = arg;
    if (s->state == SESSION_CLOSING)
        return;
    if (s->overflow) {
        log_warn("session %s (%s): output above max_output_bytes; disconnecting slow reader",
                 s->id, s->peer);
        session_close(s, "slow reader", 0);
        return;
    }
    session_read(s);
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    struct session *s = arg;
    if (what & BEV_EVENT_EOF)
        session_close(s, "connection closed by client", 0);
    else if (what & BEV_EVENT_ERROR)
        session_close(s, "connection error", 0);
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

void session_activate(struct session *s, uint32_t timeout_ms)
{
    s->timeout_ms = timeout_ms;
    session_set_state(s, SESSION_ACTIVE);
    session_arm(s, timeout_ms);
}

struct session *session_new(struct server *srv, int fd, const char *peer)
{
    struct session *s = calloc(1, sizeof *s);
    if (s == NULL)
        goto fail;
    s->srv = srv;
    s->state = SESSION_ACCEPTED;
    TAILQ_INIT(&s->requests);
    TAILQ_INIT(&s->leases);
    util_uuid(&srv->rng, s->id);
    snprintf(s->peer, sizeof s->peer, "%s", peer);
    s->opened_ms = s->last_frame_ms = util_now_ms();
    s->bev = bufferevent_socket_new(srv->base, fd, BEV_OPT_CLOSE_ON_FREE);
    if (s->bev == NULL)
        goto fail;
    fd = -1; /* the bufferevent owns it now */
    s->timer = evtimer_new(srv->base, timer_cb, s);
    s->resume_ev = event_new(srv->base, -1, 0, resume_cb, s);
    if (s->timer == NULL || s->resume_ev == NULL)
        goto fail;
    /* Never buffer more than one maximal frame plus a header per read. */
    bufferevent_setwatermark(s->bev, EV_READ, 0, (size_t)srv->cfg->max_frame_bytes + 64);
    bufferevent_setcb(s->bev, read_cb, NULL, event_cb, s);
    bufferevent_enable(s->bev, EV_READ);
    session_arm(s, srv->cfg->hello_timeout_ms);
    TAILQ_INSERT_TAIL(&srv->sessions, s, link);
    srv->nsessions++;
    srv->ctr.sessions_opened++;
    log_debug("session %s: accepted from %s", s->id, peer);
    return s;
fail:
    if (fd >= 0)
        evutil_closesocket(fd);
    session_free(s);
    return NULL;
}

/* --- requests --------------------------------------------------------------- */

struct request *request_new(struct server *srv, struct session *s, uint64_t id, int op)
{
    struct request *r = calloc(1, sizeof *r);
    if (r == NULL)
        return NULL;
    r->srv = srv;
    r->sess = s;
    r->id = id;
    r->op = op;
    r->state = REQUEST_NEW;
    if (s != NULL) {
        TAILQ_INSERT_TAIL(&s->requests, r, sess_link);
        s->nrequests++;
    } else {
        srv->background++;
    }
    return r;
}

void request_orphan(struct request *r)
{
    TAILQ_REMOVE(&r->sess->requests, r, sess_link);
    r->sess->nrequests--;
    r->sess = NULL;
    r->srv->background++;
    if (r->deadline_ev != NULL)
        evtimer_del(r->deadline_ev);
}

void request_free(struct request *r)
{
    if (r == NULL)
        return;
    struct server *srv = r->srv;
    int background = r->sess == NULL;
    if (r->sess != NULL) {
        TAILQ_REMOVE(&r->sess->requests, r, sess_link);
        r->sess->nrequests--;
    }
    if (r->deadline_ev != NULL)
        event_free(r->deadline_ev);
    free(r);
    if (background)
        server_background_done(srv);
}
