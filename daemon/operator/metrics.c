/* SPDX-License-Identifier: BSD-3-Clause */
/* metrics.c — see metrics.h. */
#include "metrics.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build_commit.h"
#include "cleanup.h"
#include "config.h"
#include "http.h"
#include "pubsub.h"
#include "pool.h"
#include "procstat.h"
#include "relq.h"
#include "sentinel.h"
#include "server.h"
#include "util.h"
#include "wire.h"

/* --- readers: one per metric, emitting its samples ------------------------------ */

typedef void sample_fn(void *ctx, const struct metric_sample *s);

static void one(const struct metric_def *m, sample_fn *fn, void *ctx, double v)
{
    struct metric_sample s = {.name = m->name, .suffix = "", .labels = "", .value = v};
    fn(ctx, &s);
}

static void labelled(const struct metric_def *m, sample_fn *fn, void *ctx, const char *key,
                     const char *label, double v)
{
    char labels[96];
    snprintf(labels, sizeof labels, "%s=\"%s\"", key, label);
    struct metric_sample s = {.name = m->name, .suffix = "", .labels = labels, .value = v};
    fn(ctx, &s);
}

/* A protocol enum value's name as a label: "NOT_ACQUIRED" -> "not_acquired". */
static const char *label_name(const char *name, char *buf, size_t len)
{
    size_t i = 0;
    for (; name[i] && i + 1 < len; i++)
        buf[i] = (char)tolower((unsigned char)name[i]);
    buf[i] = '\0';
    return buf;
}

#define READER(fn) static void fn(const struct server *srv, const struct metric_def *m, \
                                  sample_fn *sample, void *ctx)

READER(read_sessions) { one(m, sample, ctx, srv->nsessions); }
READER(read_sessions_opened) { one(m, sample, ctx, (double)srv->ctr.sessions_opened); }
READER(read_locks_held) { one(m, sample, ctx, (double)srv->nleases); }

READER(read_locks_held_by_kind)
{
    uint64_t others = srv->nleases_shared + srv->nleases_permits + srv->nleases_leader;
    labelled(m, sample, ctx, "kind", "exclusive",
             (double)(srv->nleases > others ? srv->nleases - others : 0));
    labelled(m, sample, ctx, "kind", "leader", (double)srv->nleases_leader);
    labelled(m, sample, ctx, "kind", "shared", (double)srv->nleases_shared);
    labelled(m, sample, ctx, "kind", "semaphore", (double)srv->nleases_permits);
}
READER(read_elections_observed) { one(m, sample, ctx, (double)srv->nobserved); }
READER(read_waiters) { one(m, sample, ctx, (double)srv->nwaiters); }
READER(read_foreign_waits) { one(m, sample, ctx, (double)srv->foreign_waits); }
READER(read_grants) { one(m, sample, ctx, (double)srv->ctr.grants); }
READER(read_foreign_rechecks) { one(m, sample, ctx, (double)srv->mx.foreign_rechecks); }
READER(read_releases) { one(m, sample, ctx, (double)srv->mx.releases); }
READER(read_renewals) { one(m, sample, ctx, (double)srv->mx.renewals); }
READER(read_renew_failures) { one(m, sample, ctx, (double)srv->mx.renew_failures); }
READER(read_timers_late) { one(m, sample, ctx, (double)srv->mx.timers_late); }
READER(read_auth_failures) { one(m, sample, ctx, (double)srv->ctr.auth_failures); }
READER(read_permission_denied) { one(m, sample, ctx, (double)srv->ctr.permission_denied); }
READER(read_sessions_resumed) { one(m, sample, ctx, (double)srv->ctr.sessions_resumed); }
READER(read_resumes_refused) { one(m, sample, ctx, (double)srv->ctr.resumes_refused); }
READER(read_locks_adopted) { one(m, sample, ctx, (double)srv->ctr.locks_adopted); }
READER(read_adopts_refused) { one(m, sample, ctx, (double)srv->ctr.adopts_refused); }
READER(read_handed_over) { one(m, sample, ctx, (double)srv->ctr.sessions_handed_over); }
READER(read_cleanup_pending) { one(m, sample, ctx, cleanup_count(srv->cleanups)); }
READER(read_release_queue) { one(m, sample, ctx, (double)relq_pending(srv)); }
READER(read_uptime) { one(m, sample, ctx, (double)(util_now_ms() - srv->start_ms) / 1000.0); }

READER(read_build_info)
{
    (void)srv;
    struct metric_sample s = {.name = m->name, .suffix = "",
                              .labels = "version=\"" RLOCKD_VERSION "\",commit=\"" RLOCKD_COMMIT "\"",
                              .value = 1};
    sample(ctx, &s);
}

/* A process_* gauge or counter: the field at offset of a fresh read, when it could be read. */
static void proc_field(const struct metric_def *m, sample_fn *sample, void *ctx, size_t offset)
{
    struct procstat ps;
    procstat_read(&ps);
    double v = *(const double *)((const char *)&ps + offset);
    if (v >= 0)
        one(m, sample, ctx, v);
}
#define PROC_READER(fn, field)                                                                   \
    READER(fn)                                                                                   \
    {                                                                                            \
        (void)srv;                                                                               \
        proc_field(m, sample, ctx, offsetof(struct procstat, field));                            \
    }
PROC_READER(read_proc_cpu, cpu_seconds)
PROC_READER(read_proc_rss, resident_bytes)
PROC_READER(read_proc_vsz, virtual_bytes)
PROC_READER(read_proc_fds, open_fds)
PROC_READER(read_proc_max_fds, max_fds)

READER(read_proc_start)
{
    int64_t up_ms = util_now_ms() - srv->start_ms;
    one(m, sample, ctx, (double)((int64_t)util_wall_ms() - up_ms) / 1000.0);
}
READER(read_redis_conns) { one(m, sample, ctx, rpool_size(srv->pool)); }
READER(read_redis_ready) { one(m, sample, ctx, rpool_ready_count(srv->pool)); }
READER(read_redis_connects) { one(m, sample, ctx, (double)rpool_stats(srv->pool)->connects); }
READER(read_redis_reloads)
{
    one(m, sample, ctx, (double)rpool_stats(srv->pool)->script_reloads);
}
READER(read_redis_timeouts) { one(m, sample, ctx, (double)rpool_stats(srv->pool)->timeouts); }
READER(read_redis_errors) { one(m, sample, ctx, (double)rpool_stats(srv->pool)->errors); }
READER(read_redis_batches) { one(m, sample, ctx, (double)rpool_stats(srv->pool)->batches); }
READER(read_redis_batched) { one(m, sample, ctx, (double)rpool_stats(srv->pool)->batched); }
READER(read_redis_nodes) { one(m, sample, ctx, rpool_node_count(srv->pool)); }
READER(read_redis_slot_maps) { one(m, sample, ctx, (double)rpool_stats(srv->pool)->slot_maps); }
READER(read_redis_redirects)
{
    const struct rpool_stats *ps = rpool_stats(srv->pool);
    labelled(m, sample, ctx, "kind", "moved", (double)ps->moved);
    labelled(m, sample, ctx, "kind", "ask", (double)ps->ask);
    labelled(m, sample, ctx, "kind", "tryagain", (double)ps->tryagain);
}
READER(read_pubsub_connected) { one(m, sample, ctx, pubsub_connected(srv)); }
READER(read_pubsub_subscriptions) { one(m, sample, ctx, pubsub_subscriptions(srv)); }
READER(read_pubsub_notifications) { one(m, sample, ctx, (double)pubsub_notifications(srv)); }

READER(read_topology)
{
    labelled(m, sample, ctx, "topology", config_topology_name(config_topology(srv->cfg)), 1);
}
READER(read_failovers)
{
    one(m, sample, ctx, (double)(sentinel_switches(srv) + rpool_stats(srv->pool)->failovers));
}
READER(read_sentinel_connected) { one(m, sample, ctx, sentinel_connected(srv)); }
READER(read_replica_ack_failures)
{
    one(m, sample, ctx, (double)srv->mx.replica_ack_failures);
}

READER(read_acquires)
{
    char buf[32];
    for (int st = 0; st < METRIC_STATUSES; st++)
        labelled(m, sample, ctx, "result", label_name(wire_status_name(st), buf, sizeof buf),
                 (double)srv->mx.acquires[st]);
}

READER(read_lost)
{
    char buf[32];
    for (int r = 1; r < METRIC_REASONS; r++)
        labelled(m, sample, ctx, "reason", label_name(wire_lost_reason_name(r), buf, sizeof buf),
                 (double)srv->mx.lost[r]);
}

READER(read_frames_rejected)
{
    static const char *const names[] = {
#define METRIC_NAME(id, name) name,
        METRIC_FRAME_REASONS(METRIC_NAME)
#undef METRIC_NAME
    };
    for (int i = 0; i < METRIC_FRAME_COUNT; i++)
        labelled(m, sample, ctx, "reason", names[i], (double)srv->mx.frames_rejected[i]);
}

READER(read_conns_rejected)
{
    static const char *const names[] = {
#define METRIC_NAME(id, name) name,
        METRIC_CONN_REASONS(METRIC_NAME)
#undef METRIC_NAME
    };
    for (int i = 0; i < METRIC_CONN_COUNT; i++)
        labelled(m, sample, ctx, "reason", names[i], (double)srv->mx.conns_rejected[i]);
}

READER(read_http_refused)
{
    static const char *const names[] = {
#define METRIC_NAME(id, name) name,
        METRIC_HTTP_REASONS(METRIC_NAME)
#undef METRIC_NAME
    };
    for (int i = 0; i < METRIC_HTTP_COUNT; i++)
        labelled(m, sample, ctx, "reason", names[i], (double)srv->mx.http_refused[i]);
}
READER(read_http_conns) { one(m, sample, ctx, http_connections(srv)); }

/* The samples of histogram h: its buckets cumulated, _sum and _count; each sample's labels
 * start with label (such as 'op="acquire",'; "" for none). */
static void histogram(const struct metric_def *m, sample_fn *sample, void *ctx,
                      const struct metric_histogram *h, const double bounds[METRIC_BUCKETS - 1],
                      const char *label)
{
    char labels[96];
    uint64_t cumulative = 0;
    for (size_t b = 0; b < METRIC_BUCKETS; b++) {
        cumulative += h->buckets[b];
        if (b < METRIC_BUCKETS - 1)
            snprintf(labels, sizeof labels, "%sle=\"%g\"", label, bounds[b]);
        else
            snprintf(labels, sizeof labels, "%sle=\"+Inf\"", label);
        struct metric_sample s = {m->name, "_bucket", labels, (double)cumulative};
        sample(ctx, &s);
    }
    /* The same labels without le and the comma before it. */
    size_t n = strlen(label);
    snprintf(labels, sizeof labels, "%.*s", n > 0 ? (int)n - 1 : 0, label);
    struct metric_sample sum = {m->name, "_sum", labels, h->sum};
    sample(ctx, &sum);
    struct metric_sample count = {m->name, "_count", labels, (double)h->count};
    sample(ctx, &count);
}

READER(read_latency)
{
    for (int op = 1; op < METRIC_OPS; op++) {
        const char *name = wire_op_name(op);
        if (name == NULL)
            continue;
        char label[64];
        snprintf(label, sizeof label, "op=\"%s\",", name);
        histogram(m, sample, ctx, &srv->mx.latency[op], counters_latency_bounds, label);
    }
}
READER(read_lock_wait)
{
    histogram(m, sample, ctx, &srv->mx.lock_wait, counters_lock_time_bounds, "");
}
READER(read_lock_hold)
{
    histogram(m, sample, ctx, &srv->mx.lock_hold, counters_lock_time_bounds, "");
}

/* X(name, type, help, reader) — every metric, once. */
#define METRIC_LIST(X)                                                                           \
    X("rlockd_sessions", "gauge", "Client sessions open now.", read_sessions)                    \
    X("rlockd_sessions_opened_total", "counter", "Client connections accepted.",                 \
      read_sessions_opened)                                                                     \
    X("rlockd_locks_held", "gauge", "Locks held by sessions of this daemon.", read_locks_held)   \
    X("rlockd_locks_held_by_kind", "gauge",                                                     \
      "Locks held by sessions of this daemon, by kind (a semaphore's places counted once each).", \
      read_locks_held_by_kind)                                                                  \
    X("rlockd_elections_observed", "gauge",                                                      \
      "Elections that sessions of this daemon observe (each read again on its news).",          \
      read_elections_observed)                                                                  \
    X("rlockd_waiters", "gauge", "Acquires waiting in the daemon's queues.", read_waiters)       \
    X("rlockd_foreign_waits", "gauge",                                                           \
      "Resources whose head waiter waits behind a key held outside rlockd.", read_foreign_waits) \
    X("rlockd_acquires_total", "counter", "Acquire requests answered, by result.",               \
      read_acquires)                                                                            \
    X("rlockd_grants_total", "counter", "Locks granted (re-entries included).", read_grants)      \
    X("rlockd_foreign_rechecks_total", "counter",                                                \
      "Tries again of a key held outside rlockd, whose release may come unannounced.",          \
      read_foreign_rechecks)                                                                    \
    X("rlockd_releases_total", "counter", "Locks freed by their holder's last Release.",          \
      read_releases)                                                                            \
    X("rlockd_renewals_total", "counter", "Leases a renew confirmed.", read_renewals)             \
    X("rlockd_renew_failures_total", "counter",                                                  \
      "Leases whose renew got no usable answer from Redis (retried).", read_renew_failures)    \
    X("rlockd_lease_timers_late_total", "counter",                                               \
      "Lease timer firings later than the loss margin allows (the daemon was held up).",        \
      read_timers_late)                                                                         \
    X("rlockd_locks_lost_total", "counter", "LockLost events pushed, by reason.", read_lost)      \
    X("rlockd_request_duration_seconds", "histogram",                                            \
      "Time from a request's arrival to its answer, by operation (acquire: waits included).",   \
      read_latency)                                                                             \
    X("rlockd_lock_wait_seconds", "histogram",                                                   \
      "Acquires that found their lock taken: time from arrival to grant, timeout, refusal or "  \
      "cancel.", read_lock_wait)                                                                \
    X("rlockd_lock_hold_seconds", "histogram",                                                   \
      "Locks held through this daemon: time from grant to release or loss.", read_lock_hold)   \
    X("rlockd_frames_rejected_total", "counter", "Client frames refused, by reason.",            \
      read_frames_rejected)                                                                     \
    X("rlockd_connections_rejected_total", "counter",                                            \
      "Client connections refused or dropped by the daemon, by reason.", read_conns_rejected)  \
    X("rlockd_http_connections", "gauge", "Connections open to this metrics endpoint.",          \
      read_http_conns)                                                                          \
    X("rlockd_http_requests_refused_total", "counter",                                           \
      "Metrics endpoint connections answered with an error or closed, by reason.",              \
      read_http_refused)                                                                        \
    X("rlockd_auth_failures_total", "counter", "Hellos refused for a missing or wrong token.",    \
      read_auth_failures)                                                                       \
    X("rlockd_permission_denied_total", "counter",                                              \
      "Admin requests refused to sessions without the admin role.", read_permission_denied)     \
    X("rlockd_sessions_resumed_total", "counter",                                               \
      "Sessions that came here by Resume (from another daemon, or this one restarted).",       \
      read_sessions_resumed)                                                                    \
    X("rlockd_resumes_refused_total", "counter",                                                \
      "Resumes refused: wrong secret or auth token, or no resume key.", read_resumes_refused) \
    X("rlockd_locks_adopted_total", "counter", "Locks a resumed session took over (Adopt).",    \
      read_locks_adopted)                                                                       \
    X("rlockd_adopts_refused_total", "counter",                                                 \
      "Adopts refused because their seal did not match the claimed lock.", read_adopts_refused) \
    X("rlockd_sessions_handed_over_total", "counter",                                           \
      "Sessions that left during a handover (SIGTERM), their locks left for the daemon they "  \
      "resume on.", read_handed_over)                                                           \
    X("rlockd_redis_connections", "gauge", "Redis command connections configured.",              \
      read_redis_conns)                                                                         \
    X("rlockd_redis_connections_ready", "gauge",                                                 \
      "Redis command connections ready (scripts loaded).", read_redis_ready)                    \
    X("rlockd_redis_connects_total", "counter", "Redis connections that became ready.",          \
      read_redis_connects)                                                                      \
    X("rlockd_redis_script_reloads_total", "counter", "NOSCRIPT answers retried with EVAL.",     \
      read_redis_reloads)                                                                       \
    X("rlockd_redis_command_timeouts_total", "counter",                                          \
      "Redis commands that missed command_timeout (their connection was reset).",               \
      read_redis_timeouts)                                                                      \
    X("rlockd_redis_errors_total", "counter", "Redis calls that ended without a reply.",          \
      read_redis_errors)                                                                        \
    X("rlockd_redis_batches_total", "counter",                                                   \
      "Script calls that carried several acquires or releases of one loop turn.",              \
      read_redis_batches)                                                                       \
    X("rlockd_redis_batched_calls_total", "counter",                                             \
      "Acquires and releases that went to Redis inside a batch.", read_redis_batched)          \
    X("rlockd_redis_nodes", "gauge", "Redis nodes known (cluster: seeds and slot map masters).", \
      read_redis_nodes)                                                                         \
    X("rlockd_redis_redirects_total", "counter",                                                 \
      "Redis Cluster redirections followed, by kind (moved, ask, tryagain).",                   \
      read_redis_redirects)                                                                     \
    X("rlockd_redis_slot_maps_total", "counter", "Redis Cluster slot maps read.",               \
      read_redis_slot_maps)                                                                     \
    X("rlockd_redis_pubsub_connected", "gauge",                                                  \
      "1 while the connection for other daemons' release notices is ready (0 also when "        \
      "[redis] notify is off).", read_pubsub_connected)                                         \
    X("rlockd_redis_subscriptions", "gauge",                                                     \
      "Resources whose release notices this daemon is subscribed to (local waiters sleep).",    \
      read_pubsub_subscriptions)                                                                \
    X("rlockd_redis_notifications_total", "counter",                                             \
      "Release notices received (each wakes the resource's head waiter).",                     \
      read_pubsub_notifications)                                                                \
    X("rlockd_redis_topology", "gauge",                                                          \
      "1, labelled with how Redis is reached: single, sentinel or cluster.", read_topology)     \
    X("rlockd_redis_failovers_total", "counter",                                                 \
      "Master changes followed: Sentinel switches, cluster masters failed over (each "         \
      "re-verifies every held lock).", read_failovers)                                          \
    X("rlockd_redis_sentinel_connected", "gauge",                                                \
      "1 while a sentinel answers (0 also without [redis] sentinels).",                         \
      read_sentinel_connected)                                                                  \
    X("rlockd_replica_ack_failures_total", "counter",                                            \
      "Grants given back because fewer than min_replicas_acked replicas acknowledged them.",    \
      read_replica_ack_failures)                                                                \
    X("rlockd_cleanup_pending", "gauge",                                                         \
      "Deletes by token not yet confirmed by Redis, being retried.", read_cleanup_pending)      \
    X("rlockd_release_queue", "gauge", "Releases queued or in Redis with nobody waiting.",       \
      read_release_queue)                                                                       \
    X("rlockd_uptime_seconds", "gauge", "Time since the daemon started.", read_uptime)           \
    X("rlockd_build_info", "gauge", "1, labelled with the version and the commit built.",        \
      read_build_info)                                                                          \
    X("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.", \
      read_proc_cpu)                                                                            \
    X("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", read_proc_rss)  \
    X("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", read_proc_vsz)    \
    X("process_open_fds", "gauge", "Number of open file descriptors.", read_proc_fds)            \
    X("process_max_fds", "gauge", "Maximum number of open file descriptors.", read_proc_max_fds) \
    X("process_start_time_seconds", "gauge",                                                     \
      "Start time of the process since unix epoch in seconds.", read_proc_start)

static const struct metric_def metric_defs[] = {
#define METRIC_DEF(name, type, help, reader) {name, type, help, reader},
    METRIC_LIST(METRIC_DEF)
#undef METRIC_DEF
};

void metrics_walk(const struct server *srv, void (*head)(void *ctx, const struct metric_def *m),
                  void (*sample)(void *ctx, const struct metric_sample *s), void *ctx)
{
    for (size_t i = 0; i < sizeof metric_defs / sizeof metric_defs[0]; i++) {
        if (head != NULL)
            head(ctx, &metric_defs[i]);
        metric_defs[i].read(srv, &metric_defs[i], sample, ctx);
    }
}

/* --- the text exposition ------------------------------------------------------- */

struct render {
    char *buf;
    size_t len, cap;
    int oom;
};

static void render_printf(struct render *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void render_printf(struct render *r, const char *fmt, ...)
{
    if (r->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(r->buf + r->len, r->cap - r->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            r->oom = 1;
            return;
        }
        if ((size_t)n < r->cap - r->len) {
            r->len += (size_t)n;
            return;
        }
        size_t cap = r->cap * 2 + (size_t)n;
        char *p = realloc(r->buf, cap);
        if (p == NULL) {
            r->oom = 1;
            return;
        }
        r->buf = p;
        r->cap = cap;
    }
}

static void render_head(void *ctx, const struct metric_def *m)
{
    render_printf(ctx, "# HELP %s %s\n# TYPE %s %s\n", m->name, m->help, m->name, m->type);
}

static void render_sample(void *ctx, const struct metric_sample *s)
{
    if (s->labels[0])
        render_printf(ctx, "%s%s{%s} %.17g\n", s->name, s->suffix, s->labels, s->value);
    else
        render_printf(ctx, "%s%s %.17g\n", s->name, s->suffix, s->value);
}

char *metrics_render(const struct server *srv, size_t *len)
{
    struct render r = {.cap = 8192};
    r.buf = malloc(r.cap);
    if (r.buf == NULL)
        return NULL;
    metrics_walk(srv, render_head, render_sample, &r);
    if (r.oom) {
        free(r.buf);
        return NULL;
    }
    *len = r.len;
    return r.buf;
}
