/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rlock_event.h — run an asynchronous librlock client on a libevent loop.
 *
 *     struct rlock_client *c;
 *     rlock_async_connect(addr, &opts, on_ready, NULL, &c, err, sizeof err);
 *     struct rlock_libevent *b = rlock_libevent_attach(base, c, on_closed, NULL);
 *     rlock_async_acquire(c, "orders/42", &o, on_acquired, NULL, NULL);
 *     event_base_dispatch(base);
 *     ...
 *     rlock_libevent_detach(b);   // before rlock_close(c)
 *     rlock_close(c);
 *
 * The bridge watches the client's descriptor for the events it asks for
 * (rlock_async_events), arms a timer for its keepalives
 * (rlock_async_timeout_ms), and calls rlock_async_process; submissions
 * re-aim it through rlock_async_on_change. When the session ends it stops
 * watching and calls on_closed (if not NULL) with the client: detach and
 * close there, or later. With a bridge attached, end a client from a
 * completion with rlock_shutdown, not rlock_close (which would free the
 * client under the bridge). Header-only: the application links libevent
 * itself, librlock does not depend on it.
 */
#ifndef RLOCK_EVENT_H
#define RLOCK_EVENT_H

#include <poll.h>
#include <stdlib.h>

#include <event2/event.h>

#include "rlock.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rlock_libevent {
    struct event_base *base;
    struct rlock_client *c;
    struct event *io;    /* the client's descriptor, for the events in `events` */
    struct event *timer; /* the client's next keepalive or liveness check */
    int events;          /* poll events io watches now; -1 before the first update */
    int fd;              /* the descriptor io watches (a session that moved has a new one) */
    int closed;
    void (*on_closed)(struct rlock_client *c, void *arg);
    void *arg;
};

static void rlock_libevent_io_cb_(evutil_socket_t fd, short what, void *arg);

/* Watch what the client wants now: its events and its next timer. */
static inline void rlock_libevent_update_(struct rlock_libevent *b)
{
    if (b->closed)
        return;
    int want = rlock_async_events(b->c);
    int fd = rlock_async_fd(b->c);
    if (want != b->events || fd != b->fd) {
        short ev = EV_PERSIST;
        if (want & POLLIN)
            ev |= EV_READ;
        if (want & POLLOUT)
            ev |= EV_WRITE;
        event_del(b->io);
        event_assign(b->io, b->base, fd, ev, rlock_libevent_io_cb_, b);
        event_add(b->io, NULL);
        b->events = want;
        b->fd = fd;
    }
    int64_t ms = rlock_async_timeout_ms(b->c);
    if (ms < 0) {
        evtimer_del(b->timer);
    } else {
        struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000)};
        evtimer_add(b->timer, &tv);
    }
}

static inline void rlock_libevent_run_(struct rlock_libevent *b, int revents)
{
    if (b->closed)
        return;
    if (rlock_async_process(b->c, revents) != RLOCK_OK) {
        b->closed = 1;
        event_del(b->io);
        evtimer_del(b->timer);
        if (b->on_closed != NULL)
            b->on_closed(b->c, b->arg);
        return;
    }
    rlock_libevent_update_(b);
}

static void rlock_libevent_io_cb_(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    int revents = 0;
    if (what & EV_READ)
        revents |= POLLIN;
    if (what & EV_WRITE)
        revents |= POLLOUT;
    rlock_libevent_run_((struct rlock_libevent *)arg, revents);
}

static void rlock_libevent_timer_cb_(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    rlock_libevent_run_((struct rlock_libevent *)arg, 0);
}

static void rlock_libevent_change_cb_(struct rlock_client *c, void *arg)
{
    (void)c;
    rlock_libevent_update_((struct rlock_libevent *)arg);
}

/* Attach c to base. NULL when out of memory. */
static inline struct rlock_libevent *
rlock_libevent_attach(struct event_base *base, struct rlock_client *c,
                      void (*on_closed)(struct rlock_client *c, void *arg), void *arg)
{
    struct rlock_libevent *b = (struct rlock_libevent *)calloc(1, sizeof *b);
    if (b == NULL)
        return NULL;
    b->base = base;
    b->c = c;
    b->events = -1;
    b->on_closed = on_closed;
    b->arg = arg;
    b->io = event_new(base, rlock_async_fd(c), EV_PERSIST | EV_READ, rlock_libevent_io_cb_, b);
    b->timer = evtimer_new(base, rlock_libevent_timer_cb_, b);
    if (b->io == NULL || b->timer == NULL) {
        if (b->io != NULL)
            event_free(b->io);
        if (b->timer != NULL)
            event_free(b->timer);
        free(b);
        return NULL;
    }
    rlock_async_on_change(c, rlock_libevent_change_cb_, b);
    rlock_libevent_update_(b);
    /* Output queued before the attach (the Hello) and answers already read are handled at once. */
    event_active(b->timer, EV_TIMEOUT, 0);
    return b;
}

/* Stop watching and free the bridge (not the client). Accepts NULL. */
static inline void rlock_libevent_detach(struct rlock_libevent *b)
{
    if (b == NULL)
        return;
    rlock_async_on_change(b->c, NULL, NULL);
    event_free(b->io);
    event_free(b->timer);
    free(b);
}

#ifdef __cplusplus
}
#endif

#endif
