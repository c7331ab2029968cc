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
 *   /status   the status page (also at /): static HTML, CSS and script
 *             (www/, embedded at build time) that draw /status.json, the
 *             daemon's state (status.h), every second. With [auth] tokens the
 *             document needs an admin token, "Authorization: Bearer TOKEN";
 *             the page itself holds no data and is served to anyone
 *
 * It serves what the loop already knows: nothing here waits on Redis.
 */
#include "http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "auth.h"
#include "config.h"
#include "httpd.h"
#include "log.h"
#include "metrics.h"
#include "pool.h"
#include "server.h"
#include "status.h"
#include "util.h"
#include "www.h"

/* The longest request head (request line and headers) the endpoint reads. */
#define HTTP_HEAD_BYTES 8192
/* /status.json is rendered at most this often: whoever asks in between gets the same bytes. */
#define STATUS_CACHE_MS 250

struct http {
    struct server *srv;
    struct httpd *d;
    struct config_address addr;
    char *listen; /* the configured text, to tell a change at reload */
    struct evbuffer *status; /* the latest /status.json, or NULL */
    int64_t status_at;       /* when it was rendered */
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
        status_redis_where(srv, where, sizeof where);
        int m = snprintf(body, sizeof body,
                         "not ready: %u of %u Redis connections ready (redis %s)\n", ready, n,
                         where);
        reply_text(r, out, 503, "Service Unavailable", TEXT, body, (size_t)m);
    } else {
        reply_text(r, out, 200, "OK", TEXT, "ready\n", 6);
    }
}

/* Every answer of the status page's paths: what the page may load, and from where. */
#define PAGE_HEADERS                                                                           \
    "Content-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self'; "      \
    "connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; "               \
    "frame-ancestors 'none'\r\n"                                                               \
    "X-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\n"

/* The role "Authorization: Bearer TOKEN" gives (OPEN when [auth] has no tokens). */
static enum auth_role request_role(const struct server *srv, const char *authorization)
{
    const struct auth_tokens *tokens = srv->cfg->auth;
    if (tokens == NULL)
        return AUTH_ROLE_OPEN;
    if (authorization == NULL || strncasecmp(authorization, "Bearer ", 7) != 0)
        return AUTH_ROLE_NONE;
    const char *token = authorization + 7;
    while (*token == ' ')
        token++;
    size_t len = strlen(token);
    while (len > 0 && (token[len - 1] == ' ' || token[len - 1] == '\t'))
        len--;
    return auth_check(tokens, token, len, NULL);
}

static void on_status_json(struct http *hp, const struct httpd_request *q, struct httpd_reply *r,
                           struct evbuffer *out)
{
    static const char who[] = "an admin token is needed: Authorization: Bearer TOKEN\n";
    struct server *srv = hp->srv;
    r->headers = PAGE_HEADERS;
    enum auth_role role = request_role(srv, q->authorization);
    if (role != AUTH_ROLE_OPEN && role != AUTH_ROLE_ADMIN) {
        srv->mx.http_refused[METRIC_HTTP_UNAUTHORIZED]++;
        int anonymous = role == AUTH_ROLE_NONE;
        r->headers = anonymous ? PAGE_HEADERS "WWW-Authenticate: Bearer realm=\"rlockd\"\r\n"
                               : PAGE_HEADERS;
        reply_text(r, out, anonymous ? 401 : 403, anonymous ? "Unauthorized" : "Forbidden", TEXT,
                   who, sizeof who - 1);
        return;
    }
    int64_t now = util_now_ms();
    if (hp->status == NULL || now - hp->status_at >= STATUS_CACHE_MS) {
        struct evbuffer *fresh = evbuffer_new();
        if (fresh == NULL || status_render(srv, fresh) != 0) {
            if (fresh != NULL)
                evbuffer_free(fresh);
            reply_text(r, out, 500, "Internal Server Error", TEXT, "out of memory\n", 14);
            return;
        }
        if (hp->status != NULL)
            evbuffer_free(hp->status);
        hp->status = fresh;
        hp->status_at = now;
    }
    size_t len = evbuffer_get_length(hp->status);
    reply_text(r, out, 200, "OK", "application/json",
               (const char *)evbuffer_pullup(hp->status, -1), len);
}

/* One of the page's static files. */
static int on_asset(const char *path, struct httpd_reply *r, struct evbuffer *out)
{
    for (const struct www_file *f = www_files; f->path != NULL; f++)
        if (strcmp(path, f->path) == 0) {
            r->headers = PAGE_HEADERS;
            reply_text(r, out, 200, "OK", f->type, f->data, f->len);
            return 1;
        }
    return 0;
}

static void route(void *arg, const struct httpd_request *q, struct httpd_reply *r,
                  struct evbuffer *out)
{
    struct http *hp = arg;
    static const char missing[] = "not found: try /status, /metrics, /healthz or /readyz\n";
    const char *path = strcmp(q->path, "/") == 0 ? "/status" : q->path;
    if (strcmp(path, "/metrics") == 0)
        on_metrics(hp, r, out);
    else if (strcmp(path, "/healthz") == 0) /* it answers, so the loop runs */
        reply_text(r, out, 200, "OK", TEXT, "ok\n", 3);
    else if (strcmp(path, "/readyz") == 0)
        on_readyz(hp, r, out);
    else if (strcmp(path, "/status.json") == 0)
        on_status_json(hp, q, r, out);
    else if (!on_asset(path, r, out))
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
    log_info("metrics, health and status on %s (/metrics, /healthz, /readyz, /status)", listen);
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
    if (hp->status != NULL)
        evbuffer_free(hp->status);
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
