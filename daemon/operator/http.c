/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * http.c — the metrics and health endpoint: libevent's evhttp on its own
 * listener ([metrics] listen: HOST:PORT or unix:/path; empty = off).
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
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "config.h"
#include "listener.h"
#include "log.h"
#include "metrics.h"
#include "pool.h"
#include "server.h"

struct http {
    struct server *srv;
    struct evhttp *h;
    struct config_address addr;
    char *listen; /* the configured text, to tell a change at reload */
};

static void reply_text(struct evhttp_request *req, int code, const char *reason,
                       const char *type, const char *body, size_t len)
{
    struct evbuffer *out = evbuffer_new();
    if (out == NULL) {
        evhttp_send_error(req, 500, "out of memory");
        return;
    }
    evbuffer_add(out, body, len);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", type);
    evhttp_send_reply(req, code, reason, out);
    evbuffer_free(out);
}

static void on_metrics(struct evhttp_request *req, void *arg)
{
    struct http *hp = arg;
    size_t len = 0;
    char *text = metrics_render(hp->srv, &len);
    if (text == NULL) {
        evhttp_send_error(req, 500, "out of memory");
        return;
    }
    reply_text(req, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", text, len);
    free(text);
}

static void on_healthz(struct evhttp_request *req, void *arg)
{
    (void)arg;
    reply_text(req, 200, "OK", "text/plain", "ok\n", 3);
}

static void on_readyz(struct evhttp_request *req, void *arg)
{
    struct http *hp = arg;
    const struct server *srv = hp->srv;
    uint32_t ready = rpool_ready_count(srv->pool), n = rpool_size(srv->pool);
    char body[160];
    if (srv->stopping || srv->handing_over) {
        int m = snprintf(body, sizeof body, "not ready: shutting down%s\n",
                         srv->handing_over ? " (handing sessions over)" : "");
        reply_text(req, 503, "Service Unavailable", "text/plain", body, (size_t)m);
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
        reply_text(req, 503, "Service Unavailable", "text/plain", body, (size_t)m);
    } else {
        reply_text(req, 200, "OK", "text/plain", "ready\n", 6);
    }
}

static void on_other(struct evhttp_request *req, void *arg)
{
    (void)arg;
    evhttp_send_error(req, 404, "not found: try /metrics, /healthz or /readyz");
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
    hp->h = evhttp_new(srv->base);
    if (hp->listen == NULL || hp->h == NULL)
        goto fail;
    struct evconnlistener *l = listener_bind(srv->base, &hp->addr, NULL, NULL);
    if (l == NULL) {
        log_error("metrics.listen: cannot listen on %s: %s", listen, strerror(errno));
        goto fail;
    }
    if (evhttp_bind_listener(hp->h, l) == NULL) {
        evconnlistener_free(l);
        goto fail;
    }
    evhttp_set_allowed_methods(hp->h, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD);
    evhttp_set_timeout(hp->h, 10);
    evhttp_set_cb(hp->h, "/metrics", on_metrics, hp);
    evhttp_set_cb(hp->h, "/healthz", on_healthz, hp);
    evhttp_set_cb(hp->h, "/readyz", on_readyz, hp);
    evhttp_set_gencb(hp->h, on_other, hp);
    log_info("metrics and health on %s (/metrics, /healthz, /readyz)", listen);
    return hp;
fail:
    if (hp->h != NULL)
        evhttp_free(hp->h);
    free(hp->listen);
    free(hp);
    return NULL;
}

static void http_close(struct http *hp)
{
    if (hp == NULL)
        return;
    evhttp_free(hp->h);
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
    if (hp == NULL && srv->http != NULL) {
        /* The new address may be the old one's (the same port, written otherwise). */
        http_stop(srv);
        hp = http_open(srv, listen);
    }
    http_stop(srv);
    srv->http = hp;
    return hp != NULL ? 0 : -1;
}
