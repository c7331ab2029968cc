/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dispatch.c — from a frame to an operation.
 *
 * The frame is unpacked with a bounded allocator (protobuf-c has no limits
 * of its own), checked, and looked up in the op table by its oneof case.
 * A frame that does not decode closes its connection after an error reply;
 * a decodable request with a bad field gets INVALID and the session goes on.
 * Hello decides the session's role (auth.h); operations marked admin in the
 * table are refused (PERMISSION_DENIED) to sessions that may not send them.
 */
#include "dispatch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "auth.h"
#include "config.h"
#include "election.h"
#include "hello.h"
#include "lock.h"
#include "log.h"
#include "pbscan.h"
#include "resource.h"
#include "session.h"
#include "wire.h"

/* A handler answers its request, now or later: 1 when it goes on in a request of the lock
 * logic (timed when that ends), 0 when it was answered at once (timed here). */
typedef int op_fn(struct session *s, const Rlock__V1__Request *req);

const char *dispatch_hello_check(const Rlock__V1__Hello *h, char *buf, size_t len,
                                 const char **close_reason)
{
    return hello_check(h->protocol_version, h->client_name, buf, len, close_reason);
}

static int op_hello(struct session *s, const Rlock__V1__Request *req)
{
    hello_open(s, req->id, req->hello);
    return 0;
}

static int op_resume(struct session *s, const Rlock__V1__Request *req)
{
    hello_resume(s, req->id, req->resume);
    return 0;
}

static int op_adopt(struct session *s, const Rlock__V1__Request *req)
{
    return lock_adopt(s, req->id, req->adopt);
}

static int op_acquire(struct session *s, const Rlock__V1__Request *req)
{
    return lock_acquire(s, req->id, req->acquire);
}

static int op_leader(struct session *s, const Rlock__V1__Request *req)
{
    return election_leader(s, req->id, req->leader);
}

static int op_observe(struct session *s, const Rlock__V1__Request *req)
{
    return election_observe(s, req->id, req->observe);
}

static int op_release(struct session *s, const Rlock__V1__Request *req)
{
    return lock_release(s, req->id, req->release);
}

static int op_extend(struct session *s, const Rlock__V1__Request *req)
{
    return lock_extend(s, req->id, req->extend);
}

static int op_cancel(struct session *s, const Rlock__V1__Request *req)
{
    lock_cancel(s, req->id, req->cancel);
    return 0;
}

/* A clean end: locks released at once (no lock_delay), then the connection closes. */
static int op_goodbye(struct session *s, const Rlock__V1__Request *req)
{
    s->goodbye = 1;
    session_respond(s, req->id, RLOCK__V1__STATUS__STATUS_OK, NULL,
                    RLOCK__V1__RESPONSE__BODY__NOT_SET, NULL);
    session_close(s, "goodbye", 1);
    return 0;
}

static int op_ping(struct session *s, const Rlock__V1__Request *req)
{
    Rlock__V1__PingReply r = RLOCK__V1__PING_REPLY__INIT;
    r.server_time_ms = util_wall_ms();
    r.valid_ms = lock_session_valid_ms(s, s->last_frame_ms);
    session_respond(s, req->id, RLOCK__V1__STATUS__STATUS_OK, NULL,
                    RLOCK__V1__RESPONSE__BODY_PING, &r);
    return 0;
}

static int op_stats(struct session *s, const Rlock__V1__Request *req)
{
    admin_stats(s, req->id);
    return 0;
}

static int op_list_sessions(struct session *s, const Rlock__V1__Request *req)
{
    admin_list_sessions(s, req->id, req->list_sessions);
    return 0;
}

static int op_list_locks(struct session *s, const Rlock__V1__Request *req)
{
    admin_list_locks(s, req->id, req->list_locks);
    return 0;
}

static int op_force_release(struct session *s, const Rlock__V1__Request *req)
{
    admin_force_release(s, req->id, req->force_release);
    return 0;
}

static int op_kill_session(struct session *s, const Rlock__V1__Request *req)
{
    admin_kill_session(s, req->id, req->kill_session);
    return 0;
}

static int op_server_info(struct session *s, const Rlock__V1__Request *req)
{
    admin_server_info(s, req->id, req->server_info);
    return 0;
}

static int op_top_resources(struct session *s, const Rlock__V1__Request *req)
{
    admin_top_resources(s, req->id, req->top_resources);
    return 0;
}

/* The op table, indexed by the Request's oneof case (its name: wire_op_name). */
static const struct op_entry {
    op_fn *fn;
    int admin; /* needs a session with the admin role */
} ops[] = {
    [RLOCK__V1__REQUEST__BODY_HELLO] = {op_hello, 0},
    [RLOCK__V1__REQUEST__BODY_ACQUIRE] = {op_acquire, 0},
    [RLOCK__V1__REQUEST__BODY_RELEASE] = {op_release, 0},
    [RLOCK__V1__REQUEST__BODY_EXTEND] = {op_extend, 0},
    [RLOCK__V1__REQUEST__BODY_PING] = {op_ping, 0},
    [RLOCK__V1__REQUEST__BODY_STATS] = {op_stats, 0},
    [RLOCK__V1__REQUEST__BODY_CANCEL] = {op_cancel, 0},
    [RLOCK__V1__REQUEST__BODY_GOODBYE] = {op_goodbye, 0},
    [RLOCK__V1__REQUEST__BODY_LIST_SESSIONS] = {op_list_sessions, 1},
    [RLOCK__V1__REQUEST__BODY_LIST_LOCKS] = {op_list_locks, 1},
    [RLOCK__V1__REQUEST__BODY_FORCE_RELEASE] = {op_force_release, 1},
    [RLOCK__V1__REQUEST__BODY_KILL_SESSION] = {op_kill_session, 1},
    [RLOCK__V1__REQUEST__BODY_SERVER_INFO] = {op_server_info, 1},
    [RLOCK__V1__REQUEST__BODY_RESUME] = {op_resume, 0},
    [RLOCK__V1__REQUEST__BODY_ADOPT] = {op_adopt, 0},
    [RLOCK__V1__REQUEST__BODY_LEADER] = {op_leader, 0},
    [RLOCK__V1__REQUEST__BODY_OBSERVE] = {op_observe, 0},
    [RLOCK__V1__REQUEST__BODY_TOP_RESOURCES] = {op_top_resources, 1},
};

/* The handler of op, or NULL when this daemon has none. */
static const struct op_entry *op_find(int op)
{
    if (op <= 0 || (size_t)op >= sizeof ops / sizeof ops[0] || ops[op].fn == NULL)
        return NULL;
    return &ops[op];
}

Rlock__V1__Request *dispatch_decode(struct wire_budget *budget, const uint8_t *data, size_t len)
{
    wire_budget_init(budget, wire_budget_for(len));
    return rlock__v1__request__unpack(&budget->alloc, len, data);
}

const char *dispatch_check(const Rlock__V1__Request *req, const uint8_t *data, size_t len)
{
    const char *field = pbscan_nul_string(&rlock__v1__request__descriptor, data, len);
    if (field != NULL)
        return "a string field holds a NUL byte (U+0000 is not allowed in any string)";
    if (op_find((int)req->body_case) == NULL)
        return "unknown or missing operation";
    return NULL;
}

/* An admin operation from a session whose role does not allow it: refuse and count it. */
static int admin_refused(struct session *s, const Rlock__V1__Request *req,
                         const struct op_entry *op)
{
    if (!op->admin || s->role == AUTH_ROLE_OPEN || s->role == AUTH_ROLE_ADMIN)
        return 0;
    s->srv->ctr.permission_denied++;
    log_peer_info("session %s (%s, %s): %s refused: not an admin session", s->id, s->peer,
             s->name[0] ? s->name : "-", wire_op_name((int)req->body_case));
    session_respond_error(s, req->id, RLOCK__V1__STATUS__STATUS_PERMISSION_DENIED,
                  "this request needs a session authenticated with an admin token");
    return 1;
}

void dispatch_frame(struct session *s, const uint8_t *data, size_t len)
{
    struct wire_budget budget;
    Rlock__V1__Request *req = dispatch_decode(&budget, data, len);
    struct server *srv = s->srv;
    if (req == NULL) {
        srv->mx.frames_rejected[METRIC_FRAME_MALFORMED]++;
        log_peer_warn("session %s (%s): undecodable frame of %zu bytes%s", s->id, s->peer, len,
                 budget.exhausted ? " (allocation budget exhausted)" : "");
        session_respond_error(s, 0, RLOCK__V1__STATUS__STATUS_INVALID, "malformed frame");
        session_close(s, "malformed frame", 1);
        return;
    }
    const char *bad;
    if (s->state == SESSION_ACCEPTED && req->body_case != RLOCK__V1__REQUEST__BODY_HELLO &&
        req->body_case != RLOCK__V1__REQUEST__BODY_RESUME) {
        srv->mx.frames_rejected[METRIC_FRAME_BEFORE_HELLO]++;
        session_respond_error(s, req->id, RLOCK__V1__STATUS__STATUS_INVALID,
                      "Hello must be the first request");
        session_close(s, "request before Hello", 1);
    } else if ((bad = dispatch_check(req, data, len)) != NULL) {
        srv->mx.frames_rejected[op_find((int)req->body_case) == NULL
                                    ? METRIC_FRAME_UNKNOWN_OP
                                    : METRIC_FRAME_NUL_STRING]++;
        session_respond_error(s, req->id, RLOCK__V1__STATUS__STATUS_INVALID, bad);
        if (req->body_case == RLOCK__V1__REQUEST__BODY_HELLO ||
            req->body_case == RLOCK__V1__REQUEST__BODY_RESUME)
            session_close(s, "bad Hello", 1); /* as every other refused Hello */
    } else if ((srv->stopping || srv->handing_over) &&
               req->body_case == RLOCK__V1__REQUEST__BODY_ACQUIRE) {
        /* During a handover sessions stay connected until they leave: no acquire may
         * start (at a plain stop every session is closed at once, so none is read). */
        srv->ctr.acquires++;
        counters_acquire_answered(srv, RLOCK__V1__STATUS__STATUS_SHUTTING_DOWN);
        session_respond_error(s, req->id, RLOCK__V1__STATUS__STATUS_SHUTTING_DOWN,
                      "the server is shutting down");
    } else {
        /* Timed here when answered at once; a request that goes on is timed when it ends. */
        const struct op_entry *op = op_find((int)req->body_case);
        if (admin_refused(s, req, op) || !op->fn(s, req))
            counters_observe(srv, (int)req->body_case, util_now_us() - s->last_frame_us);
    }
    rlock__v1__request__free_unpacked(req, &budget.alloc);
}
