/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * admin.c — ForceRelease, KillSession and ServerInfo, and what the admin
 * requests share (see admin.h; the listings are in admin_list.c).
 *
 * Both actions reach only what this daemon holds: a lock whose key another
 * daemon or an application set is not ours to delete, so ForceRelease
 * answers NOT_HELD for it rather than guess.
 */
#include "admin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "config.h"
#include "lease.h"
#include "log.h"
#include "metrics.h"
#include "pubsub.h"
#include "pool.h"
#include "resource.h"
#include "sentinel.h"
#include "sessidx.h"
#include "session.h"
#include "wire.h"

uint32_t admin_limit(uint32_t asked)
{
    if (asked == 0)
        return ADMIN_LIMIT_DEFAULT;
    return asked > ADMIN_LIMIT_MAX ? ADMIN_LIMIT_MAX : asked;
}

uint32_t admin_page_bytes(const struct session *s)
{
    /* Leave room for the replies of other requests in flight below max_output_bytes. */
    uint32_t quarter = s->srv->cfg->max_output_bytes / 4;
    return quarter < ADMIN_PAGE_BYTES ? quarter : ADMIN_PAGE_BYTES;
}

void admin_force_release(struct session *s, uint64_t id, const Rlock__V1__ForceRelease *q)
{
    if (q->resource[0] == '\0') {
        session_respond_error(s, id, RLOCK__V1__STATUS__STATUS_INVALID, "resource is empty");
        return;
    }
    struct resource *res = resource_find(s->srv, q->resource, strlen(q->resource));
    struct lease *l = res != NULL ? res->holder : NULL;
    if (l == NULL && res != NULL && res->nshared > 0) {
        /* Held shared: the token names the holder, needed when there are several. */
        if (q->token[0] == '\0' && res->nshared > 1) {
            char msg[128];
            snprintf(msg, sizeof msg,
                     "held shared by %u sessions of this daemon: name the lock's token "
                     "(ListLocks shows each)", res->nshared);
            session_respond_error(s, id, RLOCK__V1__STATUS__STATUS_INVALID, msg);
            return;
        }
        l = LIST_FIRST(&res->shared);
        if (q->token[0] != '\0')
            LIST_FOREACH(l, &res->shared, res_link)
                if (strcmp(q->token, l->token) == 0)
                    break;
        if (l == NULL) {
            session_respond_error(s, id, RLOCK__V1__STATUS__STATUS_NOT_HELD,
                          "held shared here, but by no holder with that token");
            return;
        }
    }
    if (l == NULL) {
        session_respond_error(s, id, RLOCK__V1__STATUS__STATUS_NOT_HELD,
                      "no session of this daemon holds it (if its key exists, another daemon "
                      "or an application holds it)");
        return;
    }
    if (q->token[0] != '\0' && strcmp(q->token, l->token) != 0) {
        session_respond_error(s, id, RLOCK__V1__STATUS__STATUS_NOT_HELD,
                      "held here, but with another token");
        return;
    }
    Rlock__V1__ForceReleaseReply r = RLOCK__V1__FORCE_RELEASE_REPLY__INIT;
    char holder[UTIL_UUID_LEN + 1], name[sizeof l->sess->name];
    snprintf(holder, sizeof holder, "%s", l->sess->id);
    snprintf(name, sizeof name, "%s", l->sess->name);
    r.session_id = holder;
    r.client_name = name;
    r.owner = l->owner;
    r.fence = l->fence;
    r.waiters = res->nwaiters;
    log_info("session %s (%s, %s): forced release of %s (fence %llu, session %s)", s->id,
             s->peer, s->name[0] ? s->name : "-", res->name, (unsigned long long)l->fence, holder);
    /* The holder is told, the key deleted by token, the next waiter tries (lease_lose). */
    lease_lose(l, RLOCK__V1__LOST_REASON__LOST_FORCED, "released by an operator");
    session_respond(s, id, RLOCK__V1__STATUS__STATUS_OK, NULL,
                    RLOCK__V1__RESPONSE__BODY_FORCE_RELEASE, &r);
}

void admin_kill_session(struct session *s, uint64_t id, const Rlock__V1__KillSession *q)
{
    char sid[UTIL_UUID_LEN + 1];
    if (util_uuid_parse(q->session_id, sid) != 0) {
        session_respond_error(s, id, RLOCK__V1__STATUS__STATUS_INVALID,
                              "session_id is not a session id (a UUID, as rlockctl sessions lists)");
        return;
    }
    struct session *t = sessidx_find(s->srv->sessidx, sid);
    if (t == NULL) {
        session_respond_error(s, id, RLOCK__V1__STATUS__STATUS_NOT_FOUND,
                      "no session with that id on this daemon");
        return;
    }
    log_info("session %s (%s, %s): ending session %s (%s, %s)", s->id, s->peer,
             s->name[0] ? s->name : "-", t->id, t->peer, t->name[0] ? t->name : "-");
    Rlock__V1__KillSessionReply r = RLOCK__V1__KILL_SESSION_REPLY__INIT;
    r.locks_released = t->nleases;
    r.requests_dropped = t->nrequests;
    /* Answered first: the operator may be ending its own session. */
    session_respond(s, id, RLOCK__V1__STATUS__STATUS_OK, NULL,
                    RLOCK__V1__RESPONSE__BODY_KILL_SESSION, &r);
    Rlock__V1__SessionClosing sc = RLOCK__V1__SESSION_CLOSING__INIT;
    sc.reason = "ended by an operator";
    Rlock__V1__Event ev = RLOCK__V1__EVENT__INIT;
    ev.body_case = RLOCK__V1__EVENT__BODY_SESSION_CLOSING;
    ev.session_closing = &sc;
    session_push_event(t, &ev);
    /* A clean end, as after Goodbye: the locks are freed at once, without lock_delay. */
    t->goodbye = 1;
    session_close(t, "ended by an operator", 1);
}

/* The metrics' samples, gathered for the Stats reply (the same list as /metrics). */
struct stats_metrics {
    Rlock__V1__Metric *items;
    Rlock__V1__Metric **ptrs;
    size_t n, cap;
    int oom;
};

static void stats_sample(void *ctx, const struct metric_sample *smp)
{
    struct stats_metrics *sm = ctx;
    if (sm->oom)
        return;
    if (sm->n == sm->cap) {
        size_t cap = sm->cap ? sm->cap * 2 : 128;
        Rlock__V1__Metric *items = realloc(sm->items, cap * sizeof *items);
        if (items != NULL)
            sm->items = items;
        Rlock__V1__Metric **ptrs = items ? realloc(sm->ptrs, cap * sizeof *ptrs) : NULL;
        if (items == NULL || ptrs == NULL) {
            sm->oom = 1;
            return;
        }
        sm->ptrs = ptrs;
        sm->cap = cap;
    }
    Rlock__V1__Metric *m = &sm->items[sm->n];
    rlock__v1__metric__init(m);
    size_t nl = strlen(smp->name) + strlen(smp->suffix) + 1;
    m->name = malloc(nl);
    m->labels = strdup(smp->labels);
    if (m->name == NULL || m->labels == NULL) {
        free(m->name);
        free(m->labels);
        sm->oom = 1;
        return;
    }
    snprintf(m->name, nl, "%s%s", smp->name, smp->suffix);
    m->value = smp->value;
    sm->n++;
}

void admin_stats(struct session *s, uint64_t id)
{
    const struct server *srv = s->srv;
    const struct rpool_stats *ps = rpool_stats(srv->pool);
    Rlock__V1__StatsReply r = RLOCK__V1__STATS_REPLY__INIT;
    r.sessions = srv->nsessions;
    r.held_locks = srv->nleases;
    r.waiters = srv->nwaiters;
    r.redis_connections = rpool_size(srv->pool);
    r.redis_connections_ready = rpool_ready_count(srv->pool);
    r.redis_up = r.redis_connections_ready > 0;
    r.script_reloads = ps->script_reloads;
    r.acquires = srv->ctr.acquires;
    r.grants = srv->ctr.grants;
    r.locks_lost = srv->ctr.locks_lost;
    r.redis_errors = ps->errors;
    r.uptime_ms = (uint64_t)(util_now_ms() - srv->start_ms);
    r.server_version = RLOCKD_VERSION;
    struct stats_metrics sm = {0};
    metrics_walk(srv, NULL, stats_sample, &sm);
    for (size_t i = 0; i < sm.n; i++) /* now that items no longer move */
        sm.ptrs[i] = &sm.items[i];
    if (!sm.oom) {
        r.n_metrics = sm.n;
        r.metrics = sm.ptrs;
    }
    session_respond(s, id, RLOCK__V1__STATUS__STATUS_OK, NULL,
                    RLOCK__V1__RESPONSE__BODY_STATS, &r);
    for (size_t i = 0; i < sm.n; i++) {
        free(sm.items[i].name);
        free(sm.items[i].labels);
    }
    free(sm.items);
    free(sm.ptrs);
}

void admin_server_info(struct session *s, uint64_t id, const Rlock__V1__ServerInfo *q)
{
    (void)q;
    const struct server *srv = s->srv;
    const struct config *cfg = srv->cfg;
    Rlock__V1__ServerInfoReply r = RLOCK__V1__SERVER_INFO_REPLY__INIT;
    r.server_version = RLOCKD_VERSION;
    r.protocol_version = WIRE_PROTOCOL_VERSION;
    r.pid = (uint32_t)getpid();
    r.started_at_ms = util_wall_of_ms(srv->start_ms);
    r.uptime_ms = (uint64_t)(util_now_ms() - srv->start_ms);
    r.config_file = (char *)(srv->config_path != NULL ? srv->config_path : "");
    r.listen = cfg->listen;
    r.redis_address = cfg->redis_address;
    r.redis_database = cfg->redis_database;
    r.key_prefix = cfg->key_prefix;
    r.redis_connections = rpool_size(srv->pool);
    r.redis_connections_ready = rpool_ready_count(srv->pool);
    r.redis_up = r.redis_connections_ready > 0;
    r.sessions = srv->nsessions;
    r.held_locks = srv->nleases;
    r.waiters = srv->nwaiters;
    r.max_sessions = cfg->max_sessions;
    r.max_locks = cfg->max_locks;
    r.max_locks_per_session = cfg->max_locks_per_session;
    r.max_waiters = cfg->max_waiters_per_resource;
    r.max_frame_bytes = cfg->max_frame_bytes;
    r.max_resource_bytes = cfg->max_resource_bytes;
    r.default_ttl_ms = cfg->default_ttl_ms;
    r.min_ttl_ms = cfg->min_ttl_ms;
    r.max_ttl_ms = cfg->max_ttl_ms;
    r.max_wait_ms = cfg->max_wait_ms;
    r.session_timeout_ms = cfg->session_timeout_ms;
    r.min_session_timeout_ms = cfg->session_min_timeout_ms;
    r.max_session_timeout_ms = cfg->session_max_timeout_ms;
    r.auth = cfg->auth != NULL;
    r.admin_tokens = (uint32_t)auth_tokens_count(cfg->auth, AUTH_ROLE_ADMIN);
    r.client_tokens = (uint32_t)auth_tokens_count(cfg->auth, AUTH_ROLE_CLIENT);
    r.auth_failures = srv->ctr.auth_failures;
    r.permission_denied = srv->ctr.permission_denied;
    enum config_topology topo = config_topology(cfg);
    r.redis_topology = (char *)config_topology_name(topo);
    if (topo != TOPOLOGY_SINGLE)
        r.redis_address = "";
    char master[160] = "";
    const struct config_address *m = rpool_master(srv->pool);
    if (m != NULL && topo == TOPOLOGY_SENTINEL)
        snprintf(master, sizeof master, strchr(m->host, ':') ? "[%s]:%u" : "%s:%u", m->host,
                 m->port);
    else if (topo == TOPOLOGY_SINGLE)
        snprintf(master, sizeof master, "%s", cfg->redis_address);
    r.redis_master = master;
    r.redis_failovers = sentinel_switches(srv) + rpool_stats(srv->pool)->failovers;
    r.redis_pubsub_connected = pubsub_connected(srv);
    r.redis_nodes = topo == TOPOLOGY_CLUSTER ? rpool_node_count(srv->pool) : 0;
    r.resume = srv->resume;
    r.shutdown = config_handover(srv->cfg) && srv->resume ? "handover" : "release";
    r.sessions_resumed = srv->ctr.sessions_resumed;
    r.resumes_refused = srv->ctr.resumes_refused;
    r.locks_adopted = srv->ctr.locks_adopted;
    r.adopts_refused = srv->ctr.adopts_refused;
    r.sessions_handed_over = srv->ctr.sessions_handed_over;
    session_respond(s, id, RLOCK__V1__STATUS__STATUS_OK, NULL,
                    RLOCK__V1__RESPONSE__BODY_SERVER_INFO, &r);
}
