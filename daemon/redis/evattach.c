/* SPDX-License-Identifier: BSD-3-Clause */
/* evattach.c — see evattach.h. */
#include "evattach.h"

#include <stdlib.h>

struct evattach {
    redisAsyncContext *ac;
    struct event *rev, *wev;
    unsigned reading : 1, writing : 1; /* the event is added */
};

static void on_read(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct evattach *e = arg;
    redisAsyncHandleRead(e->ac);
}

static void on_write(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct evattach *e = arg;
    redisAsyncHandleWrite(e->ac);
}

static void add_read(void *data)
{
    struct evattach *e = data;
    if (!e->reading && event_add(e->rev, NULL) == 0)
        e->reading = 1;
}

static void del_read(void *data)
{
    struct evattach *e = data;
    if (e->reading) {
        event_del(e->rev);
        e->reading = 0;
    }
}

static void add_write(void *data)
{
    struct evattach *e = data;
    if (!e->writing && event_add(e->wev, NULL) == 0)
        e->writing = 1;
}

static void del_write(void *data)
{
    struct evattach *e = data;
    if (e->writing) {
        event_del(e->wev);
        e->writing = 0;
    }
}

static void cleanup(void *data)
{
    struct evattach *e = data;
    event_free(e->rev);
    event_free(e->wev);
    free(e);
}

int evattach(redisAsyncContext *ac, struct event_base *base)
{
    if (ac->ev.data != NULL)
        return -1;
    struct evattach *e = calloc(1, sizeof *e);
    if (e == NULL)
        return -1;
    e->ac = ac;
    e->rev = event_new(base, ac->c.fd, EV_READ | EV_PERSIST, on_read, e);
    e->wev = event_new(base, ac->c.fd, EV_WRITE | EV_PERSIST, on_write, e);
    if (e->rev == NULL || e->wev == NULL) {
        if (e->rev != NULL)
            event_free(e->rev);
        if (e->wev != NULL)
            event_free(e->wev);
        free(e);
        return -1;
    }
    ac->ev.data = e;
    ac->ev.addRead = add_read;
    ac->ev.delRead = del_read;
    ac->ev.addWrite = add_write;
    ac->ev.delWrite = del_write;
    ac->ev.cleanup = cleanup;
    /* As hiredis's own adapter: both, so that the connect's completion is seen. */
    add_read(e);
    add_write(e);
    return 0;
}
