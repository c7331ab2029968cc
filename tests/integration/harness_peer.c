/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * harness_peer.c — see harness_peer.h. Everything here asserts: it is called
 * from test bodies only.
 */
#include "harness_peer.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

void h_peer_open(struct h_peer *p, const struct h_env *e, const char *name)
{
    p->name = name;
    p->last_id = 1;
    h_raw_session(&p->raw, e, name);
}

uint32_t h_peer_open_timeout(struct h_peer *p, const struct h_env *e, const char *name,
                             uint32_t session_timeout_ms)
{
    p->name = name;
    p->last_id = 1;
    h_raw_open(&p->raw, e);
    return h_raw_hello(&p->raw, 1, name, session_timeout_ms);
}

uint64_t h_peer_next_id(struct h_peer *p)
{
    return ++p->last_id;
}

/* --- requests --------------------------------------------------------------- */

Rlock__V1__Acquire h_acquire_msg(const struct h_acq *a)
{
    Rlock__V1__Acquire m = RLOCK__V1__ACQUIRE__INIT;
    m.resource = (char *)a->resource;
    m.ttl_ms = a->ttl_ms;
    m.wait_ms = a->wait_ms;
    m.owner = a->owner;
    m.no_reentry = a->no_reentry;
    m.watchdog_off = a->watchdog_off;
    m.max_hold_ms = a->max_hold_ms;
    m.lock_delay_ms = a->lock_delay_ms;
    m.mode = a->shared ? RLOCK__V1__LOCK_MODE__MODE_SHARED : RLOCK__V1__LOCK_MODE__MODE_EXCLUSIVE;
    m.limit = a->limit;
    m.permits = a->permits;
    return m;
}

void h_peer_send_batch(struct h_peer *p, struct h_raw_batch *b)
{
    ck_assert_msg(h_raw_batch_send(&p->raw, b) == 0, "%s: the daemon closed the connection",
                  p->name);
}

uint64_t h_peer_send(struct h_peer *p, Rlock__V1__Request__BodyCase body_case, void *body)
{
    struct h_raw_batch b = {.len = 0};
    uint64_t id = h_peer_next_id(p);
    h_raw_batch_add_body(&b, id, body_case, body);
    h_peer_send_batch(p, &b);
    return id;
}

uint64_t h_peer_acquire(struct h_peer *p, const struct h_acq *a)
{
    Rlock__V1__Acquire m = h_acquire_msg(a);
    return h_peer_send(p, RLOCK__V1__REQUEST__BODY_ACQUIRE, &m);
}

uint64_t h_peer_release(struct h_peer *p, const char *resource, const char *token)
{
    Rlock__V1__Release m = RLOCK__V1__RELEASE__INIT;
    m.resource = (char *)resource;
    m.token = (char *)token;
    return h_peer_send(p, RLOCK__V1__REQUEST__BODY_RELEASE, &m);
}

uint64_t h_peer_extend(struct h_peer *p, const char *resource, uint32_t ttl_ms,
                       const char *token)
{
    Rlock__V1__Extend m = RLOCK__V1__EXTEND__INIT;
    m.resource = (char *)resource;
    m.ttl_ms = ttl_ms;
    m.token = (char *)token;
    return h_peer_send(p, RLOCK__V1__REQUEST__BODY_EXTEND, &m);
}

/* --- answers ---------------------------------------------------------------- */

const char *h_msg_describe(const Rlock__V1__ServerMessage *m)
{
    static char text[320];
    const Rlock__V1__Response *r = h_raw_response(m);
    if (r != NULL)
        snprintf(text, sizeof text, "the response to request %llu: %s \"%s\"",
                 (unsigned long long)r->id, wire_status_name(r->status), r->message);
    else if (m->event->body_case == RLOCK__V1__EVENT__BODY_LOCK_LOST)
        snprintf(text, sizeof text, "LockLost{%s, %s}", m->event->lock_lost->resource,
                 wire_lost_reason_name(m->event->lock_lost->reason));
    else
        snprintf(text, sizeof text, "an event (body %d)", (int)m->event->body_case);
    return text;
}

Rlock__V1__ServerMessage *h_peer_next(struct h_peer *p, const char *what)
{
    Rlock__V1__ServerMessage *m;
    int got = h_raw_read(&p->raw, h_now_ms() + H_PEER_DEADLINE_MS, &m);
    ck_assert_msg(got == 1, "%s: %s: %s", p->name, what,
                  got == 0 ? "the daemon closed the connection" : "no answer within 5 s");
    return m;
}

Rlock__V1__ServerMessage *h_peer_response(struct h_peer *p, uint64_t id, const char *what)
{
    Rlock__V1__ServerMessage *m = h_peer_next(p, what);
    const Rlock__V1__Response *r = h_raw_response(m);
    ck_assert_msg(r != NULL && r->id == id,
                  "%s: %s: expected the response to request %llu, got %s", p->name, what,
                  (unsigned long long)id, h_msg_describe(m));
    return m;
}

void h_peer_expect_status(struct h_peer *p, uint64_t id, Rlock__V1__Status st, const char *what)
{
    h_peer_expect_error(p, id, st, "", what);
}

void h_peer_expect_error(struct h_peer *p, uint64_t id, Rlock__V1__Status st, const char *text,
                         const char *what)
{
    Rlock__V1__ServerMessage *m = h_peer_response(p, id, what);
    const Rlock__V1__Response *r = m->response;
    ck_assert_msg(r->status == st, "%s: %s: %s, want %s", p->name, what, h_msg_describe(m),
                  wire_status_name(st));
    if (st != H_ST(OK))
        ck_assert_msg(r->body_case == RLOCK__V1__RESPONSE__BODY__NOT_SET,
                      "%s: %s: an error response with a body", p->name, what);
    ck_assert_msg(strstr(r->message, text) != NULL, "%s: %s: %s, want a message with \"%s\"",
                  p->name, what, h_msg_describe(m), text);
    h_raw_free(m);
}

void h_peer_expect_lost(struct h_peer *p, const char *resource, Rlock__V1__LostReason reason,
                        const char *what)
{
    Rlock__V1__ServerMessage *m = h_peer_next(p, what);
    ck_assert_msg(m->body_case == RLOCK__V1__SERVER_MESSAGE__BODY_EVENT &&
                      m->event->body_case == RLOCK__V1__EVENT__BODY_LOCK_LOST &&
                      strcmp(m->event->lock_lost->resource, resource) == 0 &&
                      m->event->lock_lost->reason == reason,
                  "%s: %s: got %s, want LockLost{%s, %s}", p->name, what, h_msg_describe(m),
                  resource, wire_lost_reason_name(reason));
    h_raw_free(m);
}

void h_peer_expect_eof(struct h_peer *p, const char *what)
{
    Rlock__V1__ServerMessage *m;
    int got = h_raw_read(&p->raw, h_now_ms() + H_PEER_DEADLINE_MS, &m);
    ck_assert_msg(got == 0, "%s: %s: expected the connection to close, got %s", p->name, what,
                  got < 0 ? "nothing within 5 s" : h_msg_describe(m));
}

void h_grant_copy(const Rlock__V1__AcquireReply *a, struct h_grant *g)
{
    snprintf(g->token, sizeof g->token, "%s", a->token);
    g->fence = a->fence;
    g->ttl_ms = a->ttl_ms;
    g->hold_count = a->hold_count;
    g->valid_ms = a->valid_ms;
    g->watchdog = a->watchdog;
    snprintf(g->seal, sizeof g->seal, "%s", a->seal);
    g->max_hold_until_ms = a->max_hold_until_ms;
    g->lock_delay_ms = a->lock_delay_ms;
}

void h_peer_expect_grant(struct h_peer *p, uint64_t id, struct h_grant *g, const char *what)
{
    Rlock__V1__ServerMessage *m = h_peer_response(p, id, what);
    const Rlock__V1__Response *r = m->response;
    ck_assert_msg(r->status == H_ST(OK) && r->body_case == RLOCK__V1__RESPONSE__BODY_ACQUIRE,
                  "%s: %s: %s, want an OK AcquireReply", p->name, what, h_msg_describe(m));
    h_grant_copy(r->acquire, g);
    h_raw_free(m);
}

void h_peer_acquire_ok(struct h_peer *p, const struct h_acq *a, struct h_grant *g,
                       const char *what)
{
    h_peer_expect_grant(p, h_peer_acquire(p, a), g, what);
}

void h_peer_release_ok(struct h_peer *p, const char *resource, const char *token, uint32_t holds,
                       const char *what)
{
    uint64_t id = h_peer_release(p, resource, token);
    Rlock__V1__ServerMessage *m = h_peer_response(p, id, what);
    const Rlock__V1__Response *r = m->response;
    ck_assert_msg(r->status == H_ST(OK) && r->body_case == RLOCK__V1__RESPONSE__BODY_RELEASE,
                  "%s: %s: %s, want an OK ReleaseReply", p->name, what, h_msg_describe(m));
    ck_assert_msg(r->release->hold_count == holds, "%s: %s: hold_count %u, want %u", p->name,
                  what, r->release->hold_count, holds);
    h_raw_free(m);
}

void h_peer_expect_quiet(struct h_peer *p, int ms, const char *what)
{
    Rlock__V1__ServerMessage *m;
    int got = h_raw_read(&p->raw, h_now_ms() + ms, &m);
    ck_assert_msg(got == -1, "%s: %s: expected nothing for %d ms, got %s", p->name, what, ms,
                  got == 0 ? "EOF" : h_msg_describe(m));
}

uint32_t h_peer_ping(struct h_peer *p, const char *what)
{
    Rlock__V1__Ping ping = RLOCK__V1__PING__INIT;
    uint64_t id = h_peer_send(p, RLOCK__V1__REQUEST__BODY_PING, &ping);
    Rlock__V1__ServerMessage *m = h_peer_response(p, id, what);
    ck_assert_msg(m->response->status == H_ST(OK) &&
                      m->response->body_case == RLOCK__V1__RESPONSE__BODY_PING,
                  "%s: %s: %s, want an OK PingReply", p->name, what, h_msg_describe(m));
    uint32_t v = m->response->ping->valid_ms;
    h_raw_free(m);
    return v;
}

void h_peer_stats(struct h_peer *p, uint64_t *waiters, uint64_t *held, const char *what)
{
    Rlock__V1__Stats st = RLOCK__V1__STATS__INIT;
    uint64_t id = h_peer_send(p, RLOCK__V1__REQUEST__BODY_STATS, &st);
    Rlock__V1__ServerMessage *m = h_peer_response(p, id, what);
    ck_assert_msg(m->response->status == H_ST(OK) &&
                      m->response->body_case == RLOCK__V1__RESPONSE__BODY_STATS,
                  "%s: %s: %s, want an OK StatsReply", p->name, what, h_msg_describe(m));
    *waiters = m->response->stats->waiters;
    *held = m->response->stats->held_locks;
    h_raw_free(m);
}

void h_peer_expect_stats(struct h_peer *p, uint64_t waiters, uint64_t held, const char *what)
{
    uint64_t w, h;
    h_peer_stats(p, &w, &h, what);
    ck_assert_msg(w == waiters && h == held,
                  "%s: Stats says %" PRIu64 " waiters and %" PRIu64 " held locks, want %" PRIu64
                  " and %" PRIu64,
                  what, w, h, waiters, held);
}
