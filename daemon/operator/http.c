/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * http.c — the metrics and health endpoint: its routes, served by httpd.c
 * (a small HTTP/1.x server whose every cost is bounded) on a listener of its
 * own ([metrics] listen: HOST:PORT or unix:/path; empty = off).
 *
 *   /metrics  every metric (metrics.h) in the Prometheus text format 0.0.4
 *   /healthz  200 while the loop runs (it answers, so it does)
 *   /readyz   200 when every Redis connection is ready (connected, scripts
 *             loaded) and the daemon is not stopping; 503 with the reason
 *             otherwise
 *
 * It serves what the loop already knows: nothing here waits on Redis.
 */
#include "http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "config.h"
#include "httpd.h"
#include "log.h"
#include "metrics.h"
#include "pool.h"
#include "server.h"

/* The longest request head (request line and headers) the endpoint reads. */
#define HTTP_HEAD_BYTES 8192

struct http {
    struct server *srv;
    struct httpd *d;
    struct config_address addr;
    char *listen; /* the configured text, to tell a change at reload */
};

static void reply_text(struct httpd_reply *r, struct evbuffer *out, int code, const char *reason,
                       const char *type, const char *body, size_t len)
{
    r->code = code;
    r->reason = reason;
    r->type = type;
    evbuffer_add(out, body, len);
}

#define TEXT "text/plain; charset=utf-8"

static void on_metrics(struct http *hp, struct httpd_reply *r, struct evbuffer *out)
{
    size_t len = 0;
    char *text = metrics_render(hp->srv, &len);
    if (text == NULL) {
        reply_text(r, out, 500, "Internal Server Error", TEXT, "out of memory\n", 14);
        return;
    }
    reply_text(r, out, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", text, len);
    free(text);
}

static void on_readyz(struct http *hp, struct httpd_reply *r, struct evbuffer *out)
{
    const struct server *srv = hp->srv;
    uint32_t ready = rpool_ready_count(srv->pool), n = rpool_size(srv->pool);
    char body[160];
    if (srv->stopping || srv->handing_over) {
        int m = snprintf(body, sizeof body, "not ready: shutting down%s\n",
                         srv->handing_over ? " (handing sessions over)" : "");
        reply_text(r, out, 503, "Service Unavailable", TEXT, body, (size_t)m);
    } else if (ready < n) {
        char where[96];
        enum config_topology t = config_topology(srv->cfg);
        const struct config_address *master = rpool_master(srv->pool);
        if (t == TOPOLOGY_CLUSTER)
            snprintf(where, sizeof where, "cluster, %u nodes known", rpool_node_count(srv->pool));
        else if (t == TOPOLOGY_SENTINEL && master == NULL)
            snprintf(where, sizeof where, "sentinel: no master named yet");
        else if (t == TOPOLOGY_SENTINEL)
            snprintf(where, sizeof where, "sentinel master %s:%u", master->host, master->port);
        else
            snprintf(where, sizeof where, "%s", srv->cfg->redis_address);
        int m = snprintf(body, sizeof body,
                         "not ready: %u of %u Redis connections ready (redis %s)\n", ready, n,
                         where);
        reply_text(r, out, 503, "Service Unavailable", TEXT, body, (size_t)m);
    } else {
        reply_text(r, out, 200, "OK", TEXT, "ready\n", 6);
    }
}

static void route(void *arg, const char *path, struct httpd_reply *r, struct evbuffer *out)
{
    struct http *hp = arg;
    static const char missing[] = "not found: try /metrics, /healthz or /readyz\n";
    if (strcmp(path, "/metrics") == 0)
        on_metrics(hp, r, out);
    else if (strcmp(path, "/healthz") == 0) /* it answers, so the loop runs */
        reply_text(r, out, 200, "OK", TEXT, "ok\n", 3);
    else if (strcmp(path, "/readyz") == 0)
        on_readyz(hp, r, out);
    else
        reply_text(r, out, 404, "Not Found", TEXT, missing, sizeof missing - 1);
}

/* A new endpoint on listen (not empty); NULL after logging why. */
static struct http *http_open(struct server *srv, const char *listen)
{
    char err[256];
    struct http *hp = calloc(1, sizeof *hp);
    if (hp == NULL)
        return NULL;
    hp->srv = srv;
    if (config_parse_address(listen, &hp->addr, err, sizeof err) != 0) {
        log_error("metrics.listen: %s", err);
        goto fail;
    }
    hp->listen = strdup(listen);
    if (hp->listen == NULL)
        goto fail;
    const struct httpd_limits lim = {
        .max_conns = srv->cfg->metrics_max_connections,
        .head_bytes = HTTP_HEAD_BYTES,
        .deadline_ms = srv->cfg->metrics_request_timeout_ms,
        .refused = srv->mx.http_refused,
    };
    hp->d = httpd_new(srv->base, &hp->addr, &lim, route, hp);
    if (hp->d == NULL) {
        log_error("metrics.listen: cannot listen on %s: %s", listen, strerror(errno));
        goto fail;
    }
    log_info("metrics and health on %s (/metrics, /healthz, /readyz)", listen);
    return hp;
fail:
    free(hp->listen);
    free(hp);
    return NULL;
}

static void http_close(struct http *hp)
{
    if (hp == NULL)
        return;
    httpd_free(hp->d);
    if (hp->addr.is_unix)
        unlink(hp->addr.path);
    free(hp->listen);
    free(hp);
}

int http_start(struct server *srv)
{
    if (srv->cfg->metrics_listen[0] == '\0')
        return 0;
    srv->http = http_open(srv, srv->cfg->metrics_listen);
    return srv->http != NULL ? 0 : -1;
}

void http_stop(struct server *srv)
{
    http_close(srv->http);
    srv->http = NULL;
}

int http_reconfigure(struct server *srv, const char *listen)
{
    const char *now = srv->http != NULL ? srv->http->listen : "";
    if (strcmp(now, listen) == 0)
        return 0;
    if (listen[0] == '\0') {
        http_stop(srv);
        return 0;
    }
    struct http *hp = http_open(srv, listen);
    if (hp != NULL) {
        http_stop(srv);
        srv->http = hp;
        return 0;
    }
    if (srv->http == NULL)
        return -1;
    /* The new address may be the old one's (the same port, written otherwise): let it go
     * and try again; when that fails too, go back to where it was. */
    char *old = strdup(srv->http->listen);
    http_stop(srv);
    srv->http = http_open(srv, listen);
    if (srv->http == NULL && old != NULL)
        srv->http = http_open(srv, old);
    free(old);
    return srv->http != NULL && strcmp(srv->http->listen, listen) == 0 ? 0 : -1;
}

const char *http_listening(const struct server *srv)
{
    return srv->http != NULL ? srv->http->listen : NULL;
}

uint32_t http_connections(const struct server *srv)
{
    return srv->http != NULL ? httpd_conns(srv->http->d) : 0;
}
