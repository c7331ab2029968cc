/*
 * session.c — the background thread of a client, and everything that decides
 * when the session is over.
 *
 *   callers ──rlk_session_send──▶ socket ──▶ rlockd
 *      ▲                                       │
 *      │ cond (by request id)                  ▼
 *   pending calls ◀── dispatch ◀── frames ◀── session_main (poll, read)
 *                         │
 *                         └─▶ LockLost: handles LOST, on_lost()
 *
 * The thread reads frames, hands each Response to the call waiting for its id,
 * applies Events to the lock handles, and writes a Ping whenever nothing was
 * written for a keepalive interval (any frame counts as a keepalive for the
 * daemon). The session is over when the connection reaches EOF or fails, when
 * the daemon sends something unreadable, or when no frame went out or came in
 * for a whole session timeout: the daemon ends a session it has not heard from
 * for that long, so a process that was stopped (SIGSTOP, a debugger, a
 * suspended machine) must assume its locks are gone. The clock is checked
 * right after every wake-up so that a resumed process notices at once, and
 * by every getter of the application (rlk_session_check) in case that
 * thread runs first. The thread sleeps on CLOCK_BOOTTIME too (a timerfd):
 * poll's own timeout counts CLOCK_MONOTONIC, which stands still while the
 * machine is suspended.
 *
 * Any thread may end the session (a call that ran out of time breaks it);
 * at that moment every pending call fails with RLOCK_ERR_CLOSED and every
 * HELD handle becomes LOST (RLOCK_LOST_SESSION). on_lost then fires once per
 * lock from this thread as it exits, unless the application itself is
 * closing the client. When the application closes the client from on_lost
 * (on this thread), the thread frees the client on its way out.
 */
#include "rlock_internal.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

/* Shortest poll timeout: bounds spinning while another thread holds the writer. */
#define SESSION_MIN_POLL_MS 10
/* Longest poll timeout without a timerfd, so that a suspend is noticed soon after resuming. */
#define SESSION_MAX_POLL_MS 1000
/* Safety margin on the session timeout: at least this, or 1/SESSION_MARGIN_DIV of it. */
#define SESSION_MARGIN_MIN_MS 2
#define SESSION_MARGIN_DIV 50
#define SESSION_RX_INITIAL (64u * 1024u)

/*
 * c->mu held. The only function that changes c->state: the session is over.
 * Fails every pending call with RLOCK_ERR_CLOSED and turns every HELD handle
 * LOST (marked for on_lost, which the background thread calls on its way
 * out), so that whoever sees the end sees all of it at once. The first
 * reason sticks.
 */
static void session_over(struct rlock_client *c, const char *reason)
{
    if (c->state == RLK_SESSION_ENDED)
        return;
    if (reason != NULL && reason[0] && !c->end_reason[0])
        snprintf(c->end_reason, sizeof c->end_reason, "%s", reason);
    c->state = RLK_SESSION_ENDED;
    for (struct rlk_call *call = c->calls; call != NULL; call = call->next) {
        call->done = 1;
        call->err = RLOCK_ERR_CLOSED;
    }
    c->calls = NULL;
    pthread_cond_broadcast(&c->cond);
    int notify = c->on_lost != NULL && !c->closing;
    for (struct rlock_lock *l = c->locks; l != NULL; l = l->next) {
        if (l->state != RLOCK_HELD)
            continue;
        rlk_lock_set_state(l, RLOCK_LOST, RLOCK_LOST_SESSION);
        l->notify = notify;
    }
}

void rlk_session_break(struct rlock_client *c, const char *fmt, ...)
{
    char why[RLK_ERRMSG_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&c->mu);
    session_over(c, why);
    pthread_mutex_unlock(&c->mu);
    shutdown(c->fd, SHUT_RDWR);
}

/*
 * c->mu held: how long the client may stay unheard (or hear nothing) before
 * it must assume the session is over; 0 = no limit. The daemon ends a session
 * once no frame came for >= the timeout, counting from when the frame
 * arrived, which is after our timestamp; the margin covers clock granularity
 * and the daemon's timer firing a little early, so that the client never
 * believes in a session the daemon already ended.
 */
static int64_t session_limit_ms(const struct rlock_client *c)
{
    int64_t t = c->session_timeout_ms;
    if (t == 0)
        return 0;
    int64_t margin = t / SESSION_MARGIN_DIV;
    if (margin < SESSION_MARGIN_MIN_MS)
        margin = SESSION_MARGIN_MIN_MS;
    return t - margin > 1 ? t - margin : 1;
}

/* c->mu held: 1 (with why) if the daemon may have given up on the session by now. */
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
 * c->mu held: when the next Ping is due. One goes out after a keepalive
 * interval without writing anything, and also after one without hearing
 * anything (other requests may be in flight, waiting for locks, and keep
 * last_tx fresh while no answer comes back), at most once per interval.
 */
static int64_t session_ping_at(const struct rlock_client *c)
{
    int64_t quiet = c->last_rx_ms > c->last_ping_ms ? c->last_rx_ms : c->last_ping_ms;
    int64_t at = c->last_tx_ms < quiet ? c->last_tx_ms : quiet;
    return at + c->keepalive_ms;
}

int rlk_session_check(struct rlock_client *c)
{
    char why[RLK_ERRMSG_BYTES];
    if (c->state == RLK_SESSION_OPEN && session_stale(c, rlk_alive_ms(), why, sizeof why)) {
        session_over(c, why);
        /* The background thread may sleep for a while yet: wake it to deliver on_lost. */
        if (c->fd >= 0)
            shutdown(c->fd, SHUT_RDWR);
    }
    return c->state == RLK_SESSION_OPEN;
}

/*
 * c->mu held: how long poll may sleep before a ping or a liveness check is
 * due (-1: no limit); *wake_at gets that moment on rlk_alive_ms()'s clock.
 */
static int session_poll_timeout(const struct rlock_client *c, int64_t *wake_at)
{
    *wake_at = -1;
    if (c->session_timeout_ms == 0 && c->keepalive_ms == 0)
        return -1;
    int64_t now = rlk_alive_ms();
    int64_t wake = session_ping_at(c);
    int64_t limit = session_limit_ms(c);
    if (limit > 0) {
        int64_t oldest = c->last_tx_ms < c->last_rx_ms ? c->last_tx_ms : c->last_rx_ms;
        if (oldest + limit < wake)
            wake = oldest + limit;
    }
    int64_t t = wake - now;
    if (t < SESSION_MIN_POLL_MS)
        t = SESSION_MIN_POLL_MS;
    if (c->timer_fd < 0 && t > SESSION_MAX_POLL_MS)
        t = SESSION_MAX_POLL_MS;
    *wake_at = now + t;
    return t > INT32_MAX ? INT32_MAX : (int)t;
}

/* Arm the timerfd (if any) for wake_at on CLOCK_BOOTTIME, or disarm it (wake_at < 0). */
static void session_arm_timer(const struct rlock_client *c, int64_t wake_at)
{
    if (c->timer_fd < 0)
        return;
    struct itimerspec its = {0};
    if (wake_at >= 0) {
        its.it_value.tv_sec = wake_at / 1000;
        its.it_value.tv_nsec = (long)(wake_at % 1000) * 1000000L;
        if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
            its.it_value.tv_nsec = 1; /* all zero would disarm it */
    }
    (void)timerfd_settime(c->timer_fd, TFD_TIMER_ABSTIME, &its, NULL);
}

/* write_mu held: the write itself, the staleness check, and the bookkeeping. */
static enum rlock_err session_send_locked(struct rlock_client *c, const uint8_t *buf, size_t len,
                                          int64_t deadline)
{
    char why[RLK_ERRMSG_BYTES];
    pthread_mutex_lock(&c->mu);
    int open = c->state == RLK_SESSION_OPEN;
    int stale = open && session_stale(c, rlk_alive_ms(), why, sizeof why);
    pthread_mutex_unlock(&c->mu);
    if (!open)
        return RLOCK_ERR_CLOSED;
    if (stale) {
        rlk_session_break(c, "%s", why);
        return RLOCK_ERR_CLOSED;
    }
    /*
     * Stamped before the write: the frame may sit in the socket buffer, and
     * an early stamp can only make the staleness check stricter.
     */
    int64_t sent_at = rlk_alive_ms();
    size_t written = 0;
    if (rlk_conn_write(c->fd, buf, len, deadline, &written) == 0) {
        pthread_mutex_lock(&c->mu);
        c->last_tx_ms = sent_at;
        pthread_mutex_unlock(&c->mu);
        return RLOCK_OK;
    }
    int err = errno;
    if (err == ETIMEDOUT) {
        rlk_session_break(c, "write timed out after %zu of %zu bytes", written, len);
        return RLOCK_ERR_DEADLINE;
    }
    rlk_session_break(c, "write: %s", strerror(err));
    return RLOCK_ERR_CLOSED;
}

/* Lock write_mu, giving up at deadline (rlk_mono_ms): another thread's write may be stuck. */
static int write_lock_until(struct rlock_client *c, int64_t deadline)
{
    int64_t left = deadline - rlk_mono_ms();
    if (left < 0)
        left = 0;
    struct timespec at;
    clock_gettime(CLOCK_REALTIME, &at); /* pthread_mutex_timedlock's clock */
    at.tv_sec += (time_t)(left / 1000);
    at.tv_nsec += (long)(left % 1000) * 1000000L;
    if (at.tv_nsec >= 1000000000L) {
        at.tv_sec++;
        at.tv_nsec -= 1000000000L;
    }
    int rc;
    while ((rc = pthread_mutex_timedlock(&c->write_mu, &at)) == EINTR)
        ;
    return rc == 0 ? 0 : -1;
}

enum rlock_err rlk_session_send(struct rlock_client *c, const uint8_t *buf, size_t len,
                                int64_t deadline)
{
    /* Nothing was written: the session stays as it is, and the caller's own
     * deadline is reported (rlk_call tells this case by the session being open). */
    if (write_lock_until(c, deadline) != 0)
        return RLOCK_ERR_DEADLINE;
    enum rlock_err e = session_send_locked(c, buf, len, deadline);
    pthread_mutex_unlock(&c->write_mu);
    return e;
}

/* Send a Ping when nothing was written for a keepalive interval. */
static void session_keepalive(struct rlock_client *c)
{
    pthread_mutex_lock(&c->mu);
    int64_t now = rlk_alive_ms();
    int due = c->keepalive_ms > 0 && now >= session_ping_at(c);
    uint64_t id = due ? ++c->next_id : 0;
    uint32_t limit = c->session_timeout_ms ? c->session_timeout_ms : RLOCK_DEFAULT_TIMEOUT_MS;
    pthread_mutex_unlock(&c->mu);
    /* A writer busy right now sends a frame, which is as good as a ping. */
    if (!due || pthread_mutex_trylock(&c->write_mu) != 0)
        return;
    Rlock__V1__Ping ping = RLOCK__V1__PING__INIT;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.id = id;
    req.body_case = RLOCK__V1__REQUEST__BODY_PING;
    req.ping = &ping;
    size_t len = 0;
    uint8_t *buf = wire_pack_request(&req, &len);
    if (buf != NULL && session_send_locked(c, buf, len, rlk_mono_ms() + limit) == RLOCK_OK) {
        pthread_mutex_lock(&c->mu);
        c->last_ping_ms = now;
        pthread_mutex_unlock(&c->mu);
    }
    pthread_mutex_unlock(&c->write_mu);
    free(buf);
}

/* c->mu held: adopt the timeouts the daemon granted. */
static void session_hello(struct rlock_client *c, const Rlock__V1__HelloReply *h)
{
    uint32_t st = h->session_timeout_ms;
    uint32_t ka = h->keepalive_interval_ms;
    if (st == 0 && ka == 0)
        ka = RLK_FALLBACK_KEEPALIVE_MS;
    else if (st > 0 && (ka == 0 || ka > st / 2))
        ka = st / 3;
    if (ka < SESSION_MIN_POLL_MS)
        ka = SESSION_MIN_POLL_MS;
    c->session_timeout_ms = st;
    c->keepalive_ms = ka;
    snprintf(c->session_id, sizeof c->session_id, "%s", h->session_id ? h->session_id : "");
}

/* Hand a response to the call waiting for its id; takes ownership of f. */
static int session_response(struct rlock_client *c, struct rlk_frame *f, char *why, size_t n)
{
    const Rlock__V1__Response *r = f->msg->response;
    int ok = r->status == RLOCK__V1__STATUS__STATUS_OK;
    enum rlock_err grant_err = RLOCK_OK;

    pthread_mutex_lock(&c->mu);
    if (ok && r->body_case == RLOCK__V1__RESPONSE__BODY_HELLO)
        session_hello(c, r->hello);
    struct rlk_call **p = &c->calls;
    while (*p != NULL && (*p)->id != r->id)
        p = &(*p)->next;
    struct rlk_call *call = *p;
    if (call != NULL) {
        *p = call->next;
        call->next = NULL;
        /* Listed under the same lock hold as the completion, so no event can miss it. */
        if (call->grant != NULL && ok && r->body_case == RLOCK__V1__RESPONSE__BODY_ACQUIRE)
            grant_err = rlk_lock_grant(c, call->grant, r->acquire);
        if (grant_err != RLOCK_OK) {
            call->err = grant_err;
            call->why = grant_err == RLOCK_ERR_NOMEM ? "out of memory recording a lock"
                                                     : "acquire reply without a token";
        }
        call->frame = f;
        call->done = 1;
        f = NULL;
        pthread_cond_broadcast(&c->cond);
    } else if (r->id == 0 && !ok && !c->end_reason[0]) {
        /* A connection-level error (frame too large, malformed): the daemon closes next. */
        snprintf(c->end_reason, sizeof c->end_reason, "the daemon reported %s: %s",
                 wire_status_name((int)r->status), r->message ? r->message : "");
    }
    pthread_mutex_unlock(&c->mu);
    rlk_frame_free(f); /* a keepalive's answer, or a late one nobody waits for */
    if (grant_err != RLOCK_OK) {
        /* A granted lock we cannot track must not stay held: end the session. */
        snprintf(why, n, "could not record a granted lock: %s", rlock_strerror(grant_err));
        return -1;
    }
    return 0;
}

/* Mark the lock LOST and tell the application, once per lock. */
static void session_lock_lost(struct rlock_client *c, const Rlock__V1__LockLost *ev)
{
    const char *resource = ev->resource ? ev->resource : "";
    const char *token = ev->token ? ev->token : "";
    enum rlock_lost_reason reason = RLOCK_LOST_UNSPECIFIED;
    if ((int)ev->reason > 0 && ev->reason <= RLOCK__V1__LOST_REASON__LOST_SESSION)
        reason = (enum rlock_lost_reason)ev->reason;

    int matched = 0, newly_lost = 0;
    pthread_mutex_lock(&c->mu);
    for (struct rlock_lock *l = c->locks; l != NULL; l = l->next) {
        if (l->state == RLOCK_RELEASED || strcmp(l->resource, resource) != 0 ||
            (token[0] && strcmp(l->token, token) != 0))
            continue;
        matched++;
        if (l->state == RLOCK_HELD) {
            rlk_lock_set_state(l, RLOCK_LOST, reason);
            newly_lost++;
        }
    }
    int closing = c->closing;
    pthread_mutex_unlock(&c->mu);
    /*
     * Once per lock: not again for handles already LOST, but also for a lock
     * whose handles were all freed or released, which is still the
     * application's lock while a hold remains.
     */
    if (c->on_lost != NULL && !closing && (newly_lost > 0 || matched == 0))
        c->on_lost(c, resource, token, ev->fence, reason, c->on_lost_arg);
}

/* Act on an event. 0, or -1 (with why) when it ends the session. */
static int session_event(struct rlock_client *c, const Rlock__V1__Event *ev, char *why, size_t n)
{
    switch (ev->body_case) {
    case RLOCK__V1__EVENT__BODY_LOCK_LOST:
        session_lock_lost(c, ev->lock_lost);
        return 0;
    case RLOCK__V1__EVENT__BODY_SESSION_CLOSING:
        /*
         * The daemon has ended the session and released its locks already
         * (protocol.md §3.3); nothing pending will be answered. End it here
         * rather than at the EOF that follows, which may be slow to come.
         */
        snprintf(why, n, "the daemon is closing the session: %s",
                 ev->session_closing->reason ? ev->session_closing->reason : "");
        return -1;
    default:
        return 0; /* an event kind this library does not know: ignore */
    }
}

/* Decode one frame body and act on it. 0, or -1 (with why) when the stream is unusable. */
static int session_dispatch(struct rlock_client *c, const uint8_t *data, uint32_t len,
                            char *why, size_t n)
{
    struct rlk_frame *f = calloc(1, sizeof *f);
    if (f == NULL) {
        snprintf(why, n, "out of memory reading a frame");
        return -1;
    }
    wire_budget_init(&f->budget, wire_budget_for(len));
    f->msg = rlock__v1__server_message__unpack(&f->budget.alloc, len, data);
    if (f->msg == NULL) {
        free(f);
        snprintf(why, n, "malformed frame of %u bytes from the daemon", len);
        return -1;
    }
    pthread_mutex_lock(&c->mu);
    c->last_rx_ms = rlk_alive_ms();
    pthread_mutex_unlock(&c->mu);

    if (f->msg->body_case == RLOCK__V1__SERVER_MESSAGE__BODY_RESPONSE)
        return session_response(c, f, why, n);
    int rc = 0;
    if (f->msg->body_case == RLOCK__V1__SERVER_MESSAGE__BODY_EVENT)
        rc = session_event(c, f->msg->event, why, n);
    rlk_frame_free(f);
    return rc;
}

/* Make room for at least need bytes in the receive buffer. */
static int session_rx_reserve(struct rlock_client *c, size_t need)
{
    if (need <= c->rx_cap)
        return 0;
    size_t cap = c->rx_cap ? c->rx_cap : SESSION_RX_INITIAL;
    while (cap < need)
        cap *= 2;
    uint8_t *p = realloc(c->rx, cap);
    if (p == NULL)
        return -1;
    c->rx = p;
    c->rx_cap = cap;
    return 0;
}

/* Dispatch every complete frame in the buffer and keep the partial rest. */
static int session_parse(struct rlock_client *c, char *why, size_t n)
{
    size_t off = 0;
    int rc = 0;
    while (rc == 0 && c->rx_len - off >= WIRE_HEADER_BYTES) {
        uint32_t flen = wire_get_len(c->rx + off);
        if (flen > RLK_MAX_FRAME_BYTES) {
            snprintf(why, n, "frame of %u bytes from the daemon (limit %u)", flen,
                     RLK_MAX_FRAME_BYTES);
            return -1;
        }
        if (c->rx_len - off - WIRE_HEADER_BYTES < flen)
            break;
        rc = session_dispatch(c, c->rx + off + WIRE_HEADER_BYTES, flen, why, n);
        off += WIRE_HEADER_BYTES + flen;
    }
    memmove(c->rx, c->rx + off, c->rx_len - off);
    c->rx_len -= off;
    if (rc == 0 && c->rx_len >= WIRE_HEADER_BYTES &&
        session_rx_reserve(c, WIRE_HEADER_BYTES + (size_t)wire_get_len(c->rx)) < 0) {
        snprintf(why, n, "out of memory for a frame");
        return -1;
    }
    return rc;
}

/* Read what the socket has. 0, or -1 (with why) when the session is over. */
static int session_read(struct rlock_client *c, char *why, size_t n)
{
    if (session_rx_reserve(c, c->rx_len + 1) < 0) {
        snprintf(why, n, "out of memory for a frame");
        return -1;
    }
    ssize_t got = read(c->fd, c->rx + c->rx_len, c->rx_cap - c->rx_len);
    if (got == 0) {
        snprintf(why, n, "connection closed by the daemon");
        return -1;
    }
    if (got < 0) {
        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        snprintf(why, n, "read: %s", strerror(errno));
        return -1;
    }
    c->rx_len += (size_t)got;
    return session_parse(c, why, n);
}

/* Call on_lost for every handle marked for notification, once per lock. */
static void session_notify_lost(struct rlock_client *c)
{
    for (;;) {
        pthread_mutex_lock(&c->mu);
        struct rlock_lock *l = c->locks;
        while (l != NULL && !l->notify)
            l = l->next;
        if (l == NULL || c->closing) {
            pthread_mutex_unlock(&c->mu);
            return;
        }
        for (struct rlock_lock *o = c->locks; o != NULL; o = o->next) {
            if (rlk_lock_same(o, l->resource, l->token))
                o->notify = 0;
        }
        /* Copies: the application may free the handle while the callback runs. */
        char *resource = strdup(l->resource);
        char *token = strdup(l->token);
        uint64_t fence = l->fence;
        pthread_mutex_unlock(&c->mu);
        if (resource != NULL && token != NULL)
            c->on_lost(c, resource, token, fence, RLOCK_LOST_SESSION, c->on_lost_arg);
        free(resource);
        free(token);
    }
}

/* The background thread's last act: end the session (if nobody did) and tell the application. */
static void session_end(struct rlock_client *c, const char *why)
{
    pthread_mutex_lock(&c->mu);
    session_over(c, why);
    pthread_mutex_unlock(&c->mu);
    shutdown(c->fd, SHUT_RDWR);
    if (c->on_lost != NULL)
        session_notify_lost(c);
}

static void *session_main(void *arg)
{
    struct rlock_client *c = arg;
    char why[RLK_ERRMSG_BYTES] = "";
    for (;;) {
        int64_t wake_at;
        pthread_mutex_lock(&c->mu);
        int timeout = session_poll_timeout(c, &wake_at);
        pthread_mutex_unlock(&c->mu);
        session_arm_timer(c, wake_at);

        struct pollfd p[2] = {{.fd = c->fd, .events = POLLIN},
                              {.fd = c->timer_fd, .events = POLLIN}};
        int ready = poll(p, c->timer_fd >= 0 ? 2 : 1, timeout);
        if (ready < 0 && errno != EINTR) {
            snprintf(why, sizeof why, "poll: %s", strerror(errno));
            break;
        }
        if (ready > 0 && (p[1].revents & POLLIN)) {
            uint64_t ticks;
            ssize_t got = read(c->timer_fd, &ticks, sizeof ticks);
            (void)got; /* only the wake-up matters; re-armed above */
        }
        /* First thing after any wake-up: were we away for too long? */
        pthread_mutex_lock(&c->mu);
        int stale = session_stale(c, rlk_alive_ms(), why, sizeof why);
        pthread_mutex_unlock(&c->mu);
        if (stale)
            break;
        if (ready > 0 && p[0].revents != 0 && session_read(c, why, sizeof why) < 0)
            break;
        session_keepalive(c);
    }
    session_end(c, why);
    pthread_mutex_lock(&c->mu);
    int free_self = c->free_on_exit;
    pthread_mutex_unlock(&c->mu);
    if (free_self) {
        /* rlock_close ran in on_lost on this thread and left the rest to us. */
        pthread_detach(pthread_self());
        rlk_client_free(c);
    }
    return NULL;
}

int rlk_session_start(struct rlock_client *c)
{
    /* Without it the thread falls back to capped poll timeouts (SESSION_MAX_POLL_MS). */
    c->timer_fd = timerfd_create(CLOCK_BOOTTIME, TFD_CLOEXEC | TFD_NONBLOCK);
    /* Signals meant for the application must never land on this thread. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&c->thread, NULL, session_main, c);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        errno = rc;
        return -1;
    }
    c->thread_started = 1;
    return 0;
}
