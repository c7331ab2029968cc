/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * admin.c — the operators' requests of the blocking API (rlock.h).
 *
 * Each is a blocking call of kind RLK_CALL_KEEP: the I/O thread only keeps
 * the packed response; the calling thread unpacks it with a bounded
 * allocator and runs the visitors itself, so no application code ever runs
 * on the library's threads and a slow visitor holds up nobody else.
 */
#include "rlock_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A kept response, unpacked; free with reply_free. */
struct reply {
    struct wire_budget budget;
    Rlock__V1__Response *r;
};

/* Send req and wait for its OK response with a body of body_case, into *out. */
static enum rlock_err admin_call(struct rlock_client *c, Rlock__V1__Request *req,
                                 Rlock__V1__Response__BodyCase body_case, uint32_t timeout_ms,
                                 struct reply *out)
{
    struct rlk_call call = {.kind = RLK_CALL_KEEP, .keep_body = body_case};
    out->r = NULL;
    enum rlock_err e = rlk_call_simple(c, req, &call, timeout_ms);
    if (e != RLOCK_OK)
        return e;
    wire_budget_init(&out->budget, wire_budget_for(call.kept_len));
    out->r = rlock__v1__response__unpack(&out->budget.alloc, call.kept_len, call.kept);
    free(call.kept);
    if (out->r == NULL)
        return rlk_fail(RLOCK_ERR_NOMEM, "out of memory reading a reply");
    return RLOCK_OK;
}

static void reply_free(struct reply *rep)
{
    if (rep->r != NULL)
        rlock__v1__response__free_unpacked(rep->r, &rep->budget.alloc);
    rep->r = NULL;
}

/* Check the cursor arguments of a listing. */
static enum rlock_err cursor_args(const char *cursor, char *next_cursor, size_t len)
{
    if (next_cursor != NULL && len < RLOCK_CURSOR_BYTES)
        return rlk_fail(RLOCK_ERR_ARG, "next_cursor needs room for %d bytes",
                        RLOCK_CURSOR_BYTES);
    if (cursor != NULL && strlen(cursor) >= RLOCK_CURSOR_BYTES)
        return rlk_fail(RLOCK_ERR_ARG, "cursor too long (it comes from next_cursor)");
    return RLOCK_OK;
}

/* A page of a listing: check the cursor arguments, then admin_call. */
static enum rlock_err list_call(struct rlock_client *c, Rlock__V1__Request *req,
                                Rlock__V1__Response__BodyCase body_case, const char *cursor,
                                char *next_cursor, size_t len, uint32_t timeout_ms,
                                struct reply *out)
{
    enum rlock_err e = cursor_args(cursor, next_cursor, len);
    return e != RLOCK_OK ? e : admin_call(c, req, body_case, timeout_ms, out);
}

/* Copy the daemon's next cursor out. */
static enum rlock_err cursor_out(const char *next, char *next_cursor, size_t len)
{
    if (strlen(next) >= RLOCK_CURSOR_BYTES)
        return rlk_fail(RLOCK_ERR_PROTOCOL, "the daemon sent a cursor of %zu bytes",
                        strlen(next));
    if (next_cursor != NULL)
        snprintf(next_cursor, len, "%s", next);
    return RLOCK_OK;
}

RLOCK_API enum rlock_err rlock_list_sessions(struct rlock_client *c, const char *cursor,
                                             uint32_t limit, rlock_session_visit_fn visit,
                                             void *arg, char *next_cursor, size_t len,
                                             uint32_t timeout_ms)
{
    Rlock__V1__ListSessions q = RLOCK__V1__LIST_SESSIONS__INIT;
    q.cursor = (char *)(cursor != NULL ? cursor : "");
    q.limit = limit;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.body_case = RLOCK__V1__REQUEST__BODY_LIST_SESSIONS;
    req.list_sessions = &q;
    struct reply rep;
    enum rlock_err e = list_call(c, &req, RLOCK__V1__RESPONSE__BODY_LIST_SESSIONS, cursor,
                                 next_cursor, len, timeout_ms, &rep);
    if (e != RLOCK_OK)
        return e;
    const Rlock__V1__ListSessionsReply *r = rep.r->list_sessions;
    e = cursor_out(r->next_cursor, next_cursor, len);
    for (size_t i = 0; e == RLOCK_OK && visit != NULL && i < r->n_sessions; i++) {
        const Rlock__V1__SessionInfo *s = r->sessions[i];
        struct rlock_session_entry entry = {
            .id = s->session_id,
            .client_name = s->client_name,
            .peer = s->peer,
            .state = (enum rlock_session_state)s->state,
            .role = (enum rlock_role)s->role,
            .connected_at_ms = s->connected_at_ms,
            .idle_ms = s->idle_ms,
            .locks_held = s->locks_held,
            .waiting = s->waiting,
            .in_flight = s->in_flight,
            .requested_timeout_ms = s->requested_timeout_ms,
            .timeout_ms = s->timeout_ms,
            .resumed = s->resumed != 0,
        };
        if (visit(&entry, arg) != 0)
            break;
    }
    reply_free(&rep);
    return e;
}

RLOCK_API enum rlock_err rlock_list_locks(struct rlock_client *c,
                                          const struct rlock_lock_filter *filter,
                                          const char *cursor, uint32_t limit,
                                          rlock_lock_visit_fn visit, void *arg,
                                          char *next_cursor, size_t len, uint32_t timeout_ms)
{
    Rlock__V1__ListLocks q = RLOCK__V1__LIST_LOCKS__INIT;
    q.cursor = (char *)(cursor != NULL ? cursor : "");
    q.limit = limit;
    if (filter != NULL && filter->prefix != NULL)
        q.prefix = (char *)filter->prefix;
    if (filter != NULL && filter->session_id != NULL)
        q.session_id = (char *)filter->session_id;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.body_case = RLOCK__V1__REQUEST__BODY_LIST_LOCKS;
    req.list_locks = &q;
    struct reply rep;
    enum rlock_err e = list_call(c, &req, RLOCK__V1__RESPONSE__BODY_LIST_LOCKS, cursor,
                                 next_cursor, len, timeout_ms, &rep);
    if (e != RLOCK_OK)
        return e;
    const Rlock__V1__ListLocksReply *r = rep.r->list_locks;
    e = cursor_out(r->next_cursor, next_cursor, len);
    for (size_t i = 0; e == RLOCK_OK && visit != NULL && i < r->n_locks; i++) {
        const Rlock__V1__LockInfo *l = r->locks[i];
        struct rlock_lock_entry entry = {
            .resource = l->resource,
            .session_id = l->session_id,
            .client_name = l->client_name,
            .owner = l->owner,
            .fence = l->fence,
            .token = l->token,
            .acquired_at_ms = l->acquired_at_ms,
            .ttl_ms = l->ttl_ms,
            .ttl_left_ms = l->ttl_left_ms,
            .watchdog = l->watchdog != 0,
            .hold_count = l->hold_count,
            .waiters = l->waiters,
            .shared = l->mode == RLOCK__V1__LOCK_MODE__MODE_SHARED,
            .limit = l->limit,
            .permits = l->permits,
            .leader = l->leader != 0,
        };
        if (visit(&entry, arg) != 0)
            break;
    }
    reply_free(&rep);
    return e;
}

RLOCK_API enum rlock_err rlock_top_resources(struct rlock_client *c, enum rlock_top_order order,
                                             uint32_t limit, rlock_resource_visit_fn visit,
                                             void *arg, struct rlock_top_summary *summary,
                                             uint32_t timeout_ms)
{
    if ((int)order < RLOCK_TOP_WAIT || order > RLOCK_TOP_LOSSES)
        return rlk_fail(RLOCK_ERR_ARG, "unknown order %d", (int)order);
    Rlock__V1__TopResources q = RLOCK__V1__TOP_RESOURCES__INIT;
    q.limit = limit;
    q.order = (Rlock__V1__TopOrder)order;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.body_case = RLOCK__V1__REQUEST__BODY_TOP_RESOURCES;
    req.top_resources = &q;
    struct reply rep;
    enum rlock_err e =
        admin_call(c, &req, RLOCK__V1__RESPONSE__BODY_TOP_RESOURCES, timeout_ms, &rep);
    if (e != RLOCK_OK)
        return e;
    const Rlock__V1__TopResourcesReply *r = rep.r->top_resources;
    if (summary != NULL) {
        summary->capacity = r->capacity;
        summary->followed = r->followed;
        summary->total_weight = r->total_weight;
        summary->error_bound = r->error_bound;
    }
    for (size_t i = 0; visit != NULL && i < r->n_resources; i++) {
        const Rlock__V1__ResourceStats *m = r->resources[i];
        struct rlock_resource_stats st = {
            .resource = m->resource,
            .weight = m->weight,
            .weight_error = m->weight_error,
            .contended = m->contended,
            .grants = m->grants,
            .timeouts = m->timeouts,
            .refusals = m->refusals,
            .cancels = m->cancels,
            .wait_total_us = m->wait_total_us,
            .wait_p50_us = m->wait_p50_us,
            .wait_p99_us = m->wait_p99_us,
            .wait_max_us = m->wait_max_us,
            .holds = m->holds,
            .losses = m->losses,
            .hold_total_us = m->hold_total_us,
            .hold_p50_us = m->hold_p50_us,
            .hold_p99_us = m->hold_p99_us,
            .hold_max_us = m->hold_max_us,
            .waiters = m->waiters,
            .waiters_max = m->waiters_max,
            .held = m->holder != NULL && m->holder->here,
        };
        if (st.held)
            rlk_holder_copy(&st.holder, m->holder);
        if (visit(&st, arg) != 0)
            break;
    }
    reply_free(&rep);
    return RLOCK_OK;
}

RLOCK_API enum rlock_err rlock_force_release(struct rlock_client *c, const char *resource,
                                             uint32_t timeout_ms, struct rlock_forced *out)
{
    if (resource == NULL || resource[0] == '\0')
        return rlk_fail(RLOCK_ERR_ARG, "resource name is empty");
    Rlock__V1__ForceRelease q = RLOCK__V1__FORCE_RELEASE__INIT;
    q.resource = (char *)resource;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.body_case = RLOCK__V1__REQUEST__BODY_FORCE_RELEASE;
    req.force_release = &q;
    struct reply rep;
    enum rlock_err e =
        admin_call(c, &req, RLOCK__V1__RESPONSE__BODY_FORCE_RELEASE, timeout_ms, &rep);
    if (e != RLOCK_OK)
        return e;
    const Rlock__V1__ForceReleaseReply *r = rep.r->force_release;
    if (out != NULL) {
        memset(out, 0, sizeof *out);
        snprintf(out->session_id, sizeof out->session_id, "%s", r->session_id);
        snprintf(out->client_name, sizeof out->client_name, "%s", r->client_name);
        out->owner = r->owner;
        out->fence = r->fence;
        out->waiters = r->waiters;
    }
    reply_free(&rep);
    return RLOCK_OK;
}

RLOCK_API enum rlock_err rlock_kill_session(struct rlock_client *c, const char *session_id,
                                            uint32_t timeout_ms, uint32_t *locks_released)
{
    if (session_id == NULL || session_id[0] == '\0')
        return rlk_fail(RLOCK_ERR_ARG, "session id is empty");
    Rlock__V1__KillSession q = RLOCK__V1__KILL_SESSION__INIT;
    q.session_id = (char *)session_id;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.body_case = RLOCK__V1__REQUEST__BODY_KILL_SESSION;
    req.kill_session = &q;
    struct reply rep;
    enum rlock_err e =
        admin_call(c, &req, RLOCK__V1__RESPONSE__BODY_KILL_SESSION, timeout_ms, &rep);
    if (e != RLOCK_OK)
        return e;
    if (locks_released != NULL)
        *locks_released = rep.r->kill_session->locks_released;
    reply_free(&rep);
    return RLOCK_OK;
}

#define COPY_TEXT(dst, src) snprintf((dst), sizeof(dst), "%s", (src))

RLOCK_API enum rlock_err rlock_server_info(struct rlock_client *c, uint32_t timeout_ms,
                                           struct rlock_server_info *out)
{
    if (out == NULL)
        return rlk_fail(RLOCK_ERR_ARG, "out must not be NULL");
    Rlock__V1__ServerInfo q = RLOCK__V1__SERVER_INFO__INIT;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.body_case = RLOCK__V1__REQUEST__BODY_SERVER_INFO;
    req.server_info = &q;
    struct reply rep;
    enum rlock_err e =
        admin_call(c, &req, RLOCK__V1__RESPONSE__BODY_SERVER_INFO, timeout_ms, &rep);
    if (e != RLOCK_OK)
        return e;
    const Rlock__V1__ServerInfoReply *r = rep.r->server_info;
    memset(out, 0, sizeof *out);
    COPY_TEXT(out->server_version, r->server_version);
    out->protocol_version = r->protocol_version;
    out->pid = r->pid;
    out->started_at_ms = r->started_at_ms;
    out->uptime_ms = r->uptime_ms;
    COPY_TEXT(out->config_file, r->config_file);
    COPY_TEXT(out->listen, r->listen);
    COPY_TEXT(out->redis_address, r->redis_address);
    out->redis_database = r->redis_database;
    COPY_TEXT(out->key_prefix, r->key_prefix);
    out->redis_up = r->redis_up != 0;
    out->redis_connections = r->redis_connections;
    out->redis_connections_ready = r->redis_connections_ready;
    out->sessions = r->sessions;
    out->held_locks = r->held_locks;
    out->waiters = r->waiters;
    out->max_sessions = r->max_sessions;
    out->max_locks = r->max_locks;
    out->max_locks_per_session = r->max_locks_per_session;
    out->max_waiters = r->max_waiters;
    out->max_frame_bytes = r->max_frame_bytes;
    out->max_resource_bytes = r->max_resource_bytes;
    out->default_ttl_ms = r->default_ttl_ms;
    out->min_ttl_ms = r->min_ttl_ms;
    out->max_ttl_ms = r->max_ttl_ms;
    out->max_wait_ms = r->max_wait_ms;
    out->session_timeout_ms = r->session_timeout_ms;
    out->min_session_timeout_ms = r->min_session_timeout_ms;
    out->max_session_timeout_ms = r->max_session_timeout_ms;
    out->auth = r->auth != 0;
    out->admin_tokens = r->admin_tokens;
    out->client_tokens = r->client_tokens;
    out->auth_failures = r->auth_failures;
    out->permission_denied = r->permission_denied;
    COPY_TEXT(out->redis_topology, r->redis_topology);
    COPY_TEXT(out->redis_master, r->redis_master);
    out->redis_failovers = r->redis_failovers;
    out->redis_pubsub_connected = r->redis_pubsub_connected != 0;
    out->redis_nodes = r->redis_nodes;
    out->resume = r->resume != 0;
    COPY_TEXT(out->shutdown, r->shutdown);
    out->sessions_resumed = r->sessions_resumed;
    out->resumes_refused = r->resumes_refused;
    out->locks_adopted = r->locks_adopted;
    out->adopts_refused = r->adopts_refused;
    out->sessions_handed_over = r->sessions_handed_over;
    reply_free(&rep);
    return RLOCK_OK;
}
