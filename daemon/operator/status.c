/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * status.c — see status.h. Everything comes from what the loop already
 * knows (counters, the pool's state, the contention summary): nothing waits
 * on Redis. The summary's sort costs O(K log K) for K = metrics.top_resources
 * counters; http.c renders the document at most once per STATUS_CACHE_MS
 * whoever asks, so that a peer asking without end costs no more than that.
 */
#include "status.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "admin.h"
#include "config.h"
#include "jsonw.h"
#include "pool.h"
#include "pubsub.h"
#include "sentinel.h"
#include "server.h"
#include "topk.h"
#include "util.h"

/* The bytes of the listed resources' entries, at most: ten names of max_resource_bytes. */
#define STATUS_TOP_BYTES (64 * 1024)

void status_redis_where(const struct server *srv, char *buf, size_t len)
{
    enum config_topology t = config_topology(srv->cfg);
    const struct config_address *master = rpool_master(srv->pool);
    if (t == TOPOLOGY_CLUSTER)
        snprintf(buf, len, "cluster, %u nodes known", rpool_node_count(srv->pool));
    else if (t == TOPOLOGY_SENTINEL && master == NULL)
        snprintf(buf, len, "sentinel: no master named yet");
    else if (t == TOPOLOGY_SENTINEL)
        snprintf(buf, len, strchr(master->host, ':') ? "sentinel master [%s]:%u"
                                                      : "sentinel master %s:%u",
                 master->host, master->port);
    else
        snprintf(buf, len, "%s", srv->cfg->redis_address);
}

static const char *state_name(const struct server *srv)
{
    if (srv->handing_over)
        return "handing sessions over";
    return srv->stopping ? "stopping" : "serving";
}

static void write_redis(struct jsonw *w, const struct server *srv)
{
    char where[192];
    status_redis_where(srv, where, sizeof where);
    const struct rpool_stats *ps = rpool_stats(srv->pool);
    enum config_topology topo = config_topology(srv->cfg);
    jsonw_object(w, "redis");
    jsonw_str(w, "topology", config_topology_name(topo));
    jsonw_str(w, "where", where);
    jsonw_u64(w, "connections", rpool_size(srv->pool));
    jsonw_u64(w, "ready", rpool_ready_count(srv->pool));
    jsonw_u64(w, "nodes", topo == TOPOLOGY_CLUSTER ? rpool_node_count(srv->pool) : 0);
    jsonw_bool(w, "pubsub", pubsub_connected(srv));
    jsonw_u64(w, "failovers", sentinel_switches(srv) + ps->failovers);
    jsonw_u64(w, "errors", ps->errors);
    jsonw_u64(w, "script_reloads", ps->script_reloads);
    jsonw_end(w);
}

static const char *kind_name(const Rlock__V1__Holder *h)
{
    if (h->limit > 0)
        return "semaphore";
    return h->mode == RLOCK__V1__LOCK_MODE__MODE_SHARED ? "shared" : "exclusive";
}

static void write_holder(struct jsonw *w, const Rlock__V1__Holder *h, uint64_t wall_now)
{
    jsonw_object(w, "holder");
    jsonw_bool(w, "here", h->here);
    if (h->here) {
        jsonw_str(w, "session", h->session_id);
        jsonw_str(w, "client", h->client_name);
        char owner[24]; /* a string: JavaScript's numbers end at 2^53 */
        snprintf(owner, sizeof owner, "%" PRIu64, h->owner);
        jsonw_str(w, "owner", owner);
        jsonw_str(w, "kind", kind_name(h));
        jsonw_u64(w, "holders", h->holders);
        jsonw_u64(w, "permits", h->permits);
        jsonw_u64(w, "limit", h->limit);
        jsonw_u64(w, "held_ms", wall_now > h->since_ms ? wall_now - h->since_ms : 0);
    } else {
        jsonw_bool(w, "foreign", h->foreign);
    }
    jsonw_u64(w, "ttl_left_ms", h->ttl_left_ms);
    jsonw_end(w);
}

static void write_resource(struct jsonw *w, const Rlock__V1__ResourceStats *r, uint64_t wall_now)
{
    jsonw_object(w, NULL);
    jsonw_str(w, "resource", r->resource);
    jsonw_u64(w, "weight", r->weight);
    jsonw_u64(w, "weight_error", r->weight_error);
    jsonw_u64(w, "contended", r->contended);
    jsonw_u64(w, "grants", r->grants);
    jsonw_u64(w, "timeouts", r->timeouts);
    jsonw_u64(w, "refusals", r->refusals);
    jsonw_u64(w, "wait_total_us", r->wait_total_us);
    jsonw_u64(w, "wait_p99_us", r->wait_p99_us);
    jsonw_u64(w, "hold_p50_us", r->hold_p50_us);
    jsonw_u64(w, "losses", r->losses);
    jsonw_u64(w, "waiters", r->waiters);
    jsonw_u64(w, "waiters_max", r->waiters_max);
    if (r->holder != NULL)
        write_holder(w, r->holder, wall_now);
    jsonw_end(w);
}

/* The first STATUS_TOP resources of the summary in order, under key; waiting_only: those
 * with acquires queued now. */
static int write_list(struct jsonw *w, struct server *srv, const char *key,
                      Rlock__V1__TopOrder order, int waiting_only, uint64_t wall_now)
{
    struct admin_top t;
    if (admin_top_build(srv, order, STATUS_TOP, STATUS_TOP_BYTES, &t) != 0)
        return -1;
    jsonw_array(w, key);
    for (size_t i = 0; i < t.reply.n_resources; i++)
        if (!waiting_only || t.reply.resources[i]->waiters > 0)
            write_resource(w, t.reply.resources[i], wall_now);
    jsonw_end(w);
    admin_top_free(&t);
    return 0;
}

static int write_contention(struct jsonw *w, struct server *srv)
{
    uint64_t wall_now = util_wall_of_ms(util_now_ms());
    const struct topk *top = srv->top;
    jsonw_object(w, "contention");
    jsonw_u64(w, "capacity", top != NULL ? topk_capacity(top) : 0);
    jsonw_u64(w, "followed", top != NULL ? topk_size(top) : 0);
    uint64_t total = top != NULL ? topk_total(top) : 0;
    jsonw_u64(w, "total_weight", total);
    jsonw_u64(w, "error_bound", top != NULL ? total / topk_capacity(top) : 0);
    int rc = write_list(w, srv, "waiting", RLOCK__V1__TOP_ORDER__TOP_ORDER_WAITERS, 1, wall_now);
    if (rc == 0)
        rc = write_list(w, srv, "top", RLOCK__V1__TOP_ORDER__TOP_ORDER_WAIT, 0, wall_now);
    jsonw_end(w);
    return rc;
}

int status_render(struct server *srv, struct evbuffer *out)
{
    struct jsonw w;
    jsonw_init(&w, out);
    jsonw_object(&w, NULL);
    jsonw_str(&w, "version", RLOCKD_VERSION);
    jsonw_u64(&w, "pid", (uint64_t)getpid());
    jsonw_u64(&w, "uptime_ms", (uint64_t)(util_now_ms() - srv->start_ms));
    jsonw_u64(&w, "now_ms", util_wall_of_ms(util_now_ms()));
    jsonw_str(&w, "state", state_name(srv));
    jsonw_str(&w, "listen", srv->cfg->listen);
    jsonw_u64(&w, "sessions", srv->nsessions);
    jsonw_u64(&w, "locks", srv->nleases);
    jsonw_u64(&w, "waiters", srv->nwaiters);
    jsonw_u64(&w, "acquires", srv->ctr.acquires);
    jsonw_u64(&w, "grants", srv->ctr.grants);
    jsonw_u64(&w, "locks_lost", srv->ctr.locks_lost);
    jsonw_bool(&w, "auth", srv->cfg->auth != NULL);
    write_redis(&w, srv);
    int rc = write_contention(&w, srv);
    jsonw_end(&w);
    return rc;
}
