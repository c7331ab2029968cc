/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * httpd.h — a small HTTP/1.x server for the operator endpoint: GET and HEAD,
 * one request per connection, every cost a peer can cause bounded.
 *
 * Why not evhttp: libevent 2.1's evhttp has no cap on connections and no way
 * to count them (it accepts on its own), no whole-request deadline (its
 * timeout is per read), no size limit unless asked and a header parser that
 * rescans a long line on every read; it also echoes an unchecked version
 * ("HTTP/1.1000" became "HTTP/1.-24"). The endpoint needs three paths, so the
 * server is this file: its limits are the ones below, and nothing a peer
 * sends outlives them.
 */
#ifndef RLOCKD_HTTPD_H
#define RLOCKD_HTTPD_H

#include <stddef.h>
#include <stdint.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "counters.h"

struct config_address;
struct httpd;

struct httpd_limits {
    uint32_t max_conns;    /* connections at once; the listener pauses at the cap */
    uint32_t head_bytes;   /* request line and headers together */
    uint32_t deadline_ms;  /* to receive the whole request; again to send the answer */
    uint64_t *refused;     /* counters by enum metric_http_reason (counters.h) */
};

/* What a route is asked: valid while the route runs. */
struct httpd_request {
    const char *path;          /* the target without its query string or fragment */
    const char *authorization; /* the Authorization header's value (leading blanks taken
                                  off), or NULL without one; a request with two is refused */
};

/* What a route answers: a status, its reason phrase, a content type, the body in `body`. */
struct httpd_reply {
    int code;
    const char *reason;
    const char *type;
    const char *allow;   /* an Allow header (405), or NULL */
    const char *headers; /* further header lines, each ending in CRLF, or NULL */
};

/* Answer a GET or HEAD of q: fill r and append the body to body. */
typedef void (*httpd_route_fn)(void *arg, const struct httpd_request *q, struct httpd_reply *r,
                               struct evbuffer *body);

/* Listen on addr; NULL (errno set, or a message logged) on failure. */
struct httpd *httpd_new(struct event_base *base, const struct config_address *addr,
                        const struct httpd_limits *lim, httpd_route_fn route, void *arg);
/* Close the listener and every connection. NULL is fine. */
void httpd_free(struct httpd *d);
/* Connections open now. */
uint32_t httpd_conns(const struct httpd *d);

#endif
