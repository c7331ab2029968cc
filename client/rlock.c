/*
 * rlock.c — the client's life cycle and the small public calls: connect
 * (socket, background thread, Hello), close, ping, stats, error texts.
 * Lock handles live in lock.c; the request/response machinery in call.c;
 * the background thread in session.c. See rlock.h for the contracts.
 */
#include "rlock_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef RLOCK_VERSION
#define RLOCK_VERSION "unknown"
#endif

/* Every result with its text; drives rlock_strerror. */
#define RLK_ERRORS(X)                                                                         \
    X(RLOCK_OK, "success")                                                                    \
    X(RLOCK_ERR_NOT_ACQUIRED, "lock held by someone else")                                    \
    X(RLOCK_ERR_TIMEOUT, "wait timed out")                                                    \
    X(RLOCK_ERR_NOT_HELD, "lock not held")                                                    \
    X(RLOCK_ERR_INVALID, "request refused as invalid")                                        \
    X(RLOCK_ERR_UNAUTHENTICATED, "not authenticated")                                         \
    X(RLOCK_ERR_PERMISSION_DENIED, "permission denied")                                       \
    X(RLOCK_ERR_LIMIT_EXCEEDED, "limit exceeded")                                             \
    X(RLOCK_ERR_UNAVAILABLE, "daemon cannot reach Redis")                                     \
    X(RLOCK_ERR_SHUTTING_DOWN, "daemon shutting down")                                        \
    X(RLOCK_ERR_INTERNAL, "internal daemon error")                                            \
    X(RLOCK_ERR_ARG, "bad argument")                                                          \
    X(RLOCK_ERR_NOMEM, "out of memory")                                                       \
    X(RLOCK_ERR_CONNECT, "could not connect")                                                 \
    X(RLOCK_ERR_CLOSED, "session closed")                                                     \
    X(RLOCK_ERR_DEADLINE, "no answer in time")                                                \
    X(RLOCK_ERR_PROTOCOL, "protocol error")

RLOCK_API const char *rlock_strerror(enum rlock_err e)
{
    switch (e) {
#define RLK_ERR_CASE(name, text)                                                              \
    case name:                                                                                \
        return text;
        RLK_ERRORS(RLK_ERR_CASE)
#undef RLK_ERR_CASE
    }
    return "unknown error";
}

RLOCK_API const char *rlock_lost_reason_str(enum rlock_lost_reason r)
{
    static const char *const names[] = {
        [RLOCK_LOST_UNSPECIFIED] = "unspecified", [RLOCK_LOST_EXPIRED] = "expired",
        [RLOCK_LOST_STOLEN] = "stolen",           [RLOCK_LOST_MISSING] = "missing",
        [RLOCK_LOST_FORCED] = "forced",           [RLOCK_LOST_SESSION] = "session",
    };
    if ((int)r < 0 || (size_t)r >= sizeof names / sizeof names[0])
        return "unknown";
    return names[r];
}

RLOCK_API const char *rlock_version(void)
{
    return RLOCK_VERSION;
}

static struct rlock_client *client_new(const struct rlock_options *opts)
{
    struct rlock_client *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0) {
        free(c);
        return NULL;
    }
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&c->cond, &ca);
    pthread_condattr_destroy(&ca);
    if (rc != 0) {
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->write_mu, NULL);
    c->fd = -1;
    c->timer_fd = -1;
    c->state = RLK_SESSION_OPEN;
    c->on_lost = opts->on_lost;
    c->on_lost_arg = opts->on_lost_arg;
    c->last_tx_ms = c->last_rx_ms = c->last_ping_ms = rlk_alive_ms();
    return c;
}

void rlk_client_free(struct rlock_client *c)
{
    pthread_mutex_lock(&c->mu);
    rlk_lock_free_all(c);
    pthread_mutex_unlock(&c->mu);
    if (c->fd >= 0)
        close(c->fd);
    if (c->timer_fd >= 0)
        close(c->timer_fd);
    free(c->rx);
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->write_mu);
    free(c);
}

RLOCK_API void rlock_close(struct rlock_client *c)
{
    if (c == NULL)
        return;
    /*
     * From on_lost, on the background thread itself: that thread cannot be
     * joined by itself, and its caller still uses the client after the
     * callback returns. End the session and let the thread free the client
     * as it exits (no further callbacks: closing is set).
     */
    int self = c->thread_started && pthread_equal(pthread_self(), c->thread);
    pthread_mutex_lock(&c->mu);
    c->closing = 1;
    c->free_on_exit = self;
    pthread_mutex_unlock(&c->mu);
    if (c->fd >= 0)
        rlk_session_break(c, "closed by the application");
    if (self)
        return;
    if (c->thread_started)
        pthread_join(c->thread, NULL);
    rlk_client_free(c);
}

/* Say Hello; the background thread adopts the granted timeouts from the reply. */
static enum rlock_err client_hello(struct rlock_client *c, const struct rlock_options *opts,
                                   uint32_t timeout_ms)
{
    Rlock__V1__Hello h = RLOCK__V1__HELLO__INIT;
    h.client_name = (char *)(opts->client_name ? opts->client_name : "librlock");
    h.protocol_version = WIRE_PROTOCOL_VERSION;
    h.session_timeout_ms = opts->session_timeout_ms;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.body_case = RLOCK__V1__REQUEST__BODY_HELLO;
    req.hello = &h;
    struct rlk_call call = {.expect = RLOCK__V1__RESPONSE__BODY_HELLO};
    enum rlock_err e = rlk_call(c, &req, &call, 0, timeout_ms);
    rlk_call_done(&call);
    return e;
}

/*
 * The session must still be alive when the Hello reply is in: a reply that
 * took a whole session timeout leaves a session the daemon may have ended
 * already, and handing that out would only fail the first call. 0, or -1
 * with a message in err.
 */
static int client_check_new(struct rlock_client *c, const char *address, int64_t took_ms,
                            char *err, size_t errlen)
{
    pthread_mutex_lock(&c->mu);
    int open = rlk_session_check(c);
    uint32_t timeout_ms = c->session_timeout_ms;
    char reason[RLK_ERRMSG_BYTES];
    snprintf(reason, sizeof reason, "%s", c->end_reason);
    pthread_mutex_unlock(&c->mu);
    if (open)
        return 0;
    snprintf(err, errlen,
             "%s: hello: the session ended as soon as it opened (%s); the reply took %lld ms "
             "and the session timeout is %u ms",
             address, reason[0] ? reason : "closed", (long long)took_ms, timeout_ms);
    return -1;
}

RLOCK_API enum rlock_err rlock_connect(const char *address, const struct rlock_options *opts,
                                       struct rlock_client **out, char *errbuf, size_t errlen)
{
    char err[2 * RLK_ERRMSG_BYTES] = "";
    struct rlock_options none = {0};
    struct rlock_client *c = NULL;
    enum rlock_err e = RLOCK_ERR_ARG;
    if (opts == NULL)
        opts = &none;
    if (out != NULL)
        *out = NULL;
    if (address == NULL || out == NULL) {
        snprintf(err, sizeof err, "address and out must not be NULL");
        goto fail;
    }
    uint32_t budget = opts->connect_timeout_ms ? opts->connect_timeout_ms
                                               : RLOCK_DEFAULT_TIMEOUT_MS;
    int64_t start = rlk_mono_ms();
    e = RLOCK_ERR_NOMEM;
    c = client_new(opts);
    if (c == NULL) {
        snprintf(err, sizeof err, "out of memory");
        goto fail;
    }
    int fd = rlk_conn_open(address, budget, err, sizeof err);
    e = fd == -2 ? RLOCK_ERR_ARG : RLOCK_ERR_CONNECT;
    if (fd < 0)
        goto fail;
    c->fd = fd;
    if (rlk_session_start(c) < 0) {
        snprintf(err, sizeof err, "cannot start the client thread");
        goto fail;
    }
    int64_t left = (int64_t)budget - (rlk_mono_ms() - start);
    int64_t hello_at = rlk_alive_ms();
    e = client_hello(c, opts, left > 0 ? (uint32_t)left : 1);
    if (e != RLOCK_OK) {
        char why[RLK_ERRMSG_BYTES];
        rlock_errmsg(c, why, sizeof why);
        snprintf(err, sizeof err, "%s: hello: %s", address, why);
        /* Transport trouble is a failed connect; a refusal keeps the daemon's status. */
        if (e == RLOCK_ERR_DEADLINE || e == RLOCK_ERR_CLOSED || e == RLOCK_ERR_PROTOCOL)
            e = RLOCK_ERR_CONNECT;
        goto fail;
    }
    if (client_check_new(c, address, rlk_alive_ms() - hello_at, err, sizeof err) < 0) {
        e = RLOCK_ERR_CONNECT;
        goto fail;
    }
    *out = c;
    return RLOCK_OK;
fail:
    if (errbuf != NULL && errlen > 0)
        snprintf(errbuf, errlen, "%s", err);
    rlock_close(c);
    return e;
}

RLOCK_API const char *rlock_session_id(const struct rlock_client *c)
{
    return c != NULL ? c->session_id : "";
}

RLOCK_API uint32_t rlock_session_timeout_ms(const struct rlock_client *c)
{
    if (c == NULL)
        return 0;
    struct rlock_client *m = (struct rlock_client *)c; /* the mutex is not part of the value */
    pthread_mutex_lock(&m->mu);
    uint32_t v = c->session_timeout_ms;
    pthread_mutex_unlock(&m->mu);
    return v;
}

RLOCK_API int rlock_client_alive(struct rlock_client *c)
{
    if (c == NULL)
        return 0;
    pthread_mutex_lock(&c->mu);
    int alive = rlk_session_check(c);
    pthread_mutex_unlock(&c->mu);
    return alive;
}

RLOCK_API enum rlock_err rlock_ping(struct rlock_client *c, uint32_t timeout_ms,
                                    uint64_t *server_time_ms)
{
    if (c == NULL)
        return RLOCK_ERR_ARG;
    Rlock__V1__Ping p = RLOCK__V1__PING__INIT;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.body_case = RLOCK__V1__REQUEST__BODY_PING;
    req.ping = &p;
    struct rlk_call call = {.expect = RLOCK__V1__RESPONSE__BODY_PING};
    enum rlock_err e = rlk_call(c, &req, &call, 0, timeout_ms);
    if (e == RLOCK_OK && server_time_ms != NULL)
        *server_time_ms = rlk_call_response(&call)->ping->server_time_ms;
    rlk_call_done(&call);
    return e;
}

RLOCK_API enum rlock_err rlock_stats(struct rlock_client *c, uint32_t timeout_ms,
                                     struct rlock_stats *out)
{
    if (c == NULL || out == NULL)
        return RLOCK_ERR_ARG;
    Rlock__V1__Stats s = RLOCK__V1__STATS__INIT;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.body_case = RLOCK__V1__REQUEST__BODY_STATS;
    req.stats = &s;
    struct rlk_call call = {.expect = RLOCK__V1__RESPONSE__BODY_STATS};
    enum rlock_err e = rlk_call(c, &req, &call, 0, timeout_ms);
    if (e == RLOCK_OK) {
        const Rlock__V1__StatsReply *r = rlk_call_response(&call)->stats;
        memset(out, 0, sizeof *out);
        out->sessions = r->sessions;
        out->held_locks = r->held_locks;
        out->waiters = r->waiters;
        out->redis_connections = r->redis_connections;
        out->redis_connections_ready = r->redis_connections_ready;
        out->redis_up = r->redis_up != 0;
        out->script_reloads = r->script_reloads;
        out->acquires = r->acquires;
        out->grants = r->grants;
        out->locks_lost = r->locks_lost;
        out->redis_errors = r->redis_errors;
        out->uptime_ms = r->uptime_ms;
        snprintf(out->server_version, sizeof out->server_version, "%s",
                 r->server_version ? r->server_version : "");
    }
    rlk_call_done(&call);
    return e;
}

RLOCK_API void rlock_errmsg(struct rlock_client *c, char *buf, size_t len)
{
    if (buf == NULL || len == 0)
        return;
    if (c == NULL) {
        snprintf(buf, len, "no client");
        return;
    }
    pthread_mutex_lock(&c->mu);
    snprintf(buf, len, "%s", c->errmsg);
    pthread_mutex_unlock(&c->mu);
}
