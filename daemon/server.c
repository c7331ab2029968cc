/*
 * server.c — startup and shutdown order.
 *
 * Start: event base -> resource table -> Redis pool and pub/sub connection
 * (both connect in the background) -> watchdog -> listeners -> signals.
 * Clients that arrive before Redis is ready get UNAVAILABLE, not a hang.
 *
 * SIGTERM / SIGINT: stop accepting, tell every session (SessionClosing),
 * release every held lock by token, wait for those releases (at most
 * shutdown_timeout), flush, exit. A second signal exits at once.
 */
#include "server.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "cleanup.h"
#include "config.h"
#include "http.h"
#include "sdnotify.h"
#include "listener.h"
#include "lock.h"
#include "log.h"
#include "pubsub.h"
#include "sentinel.h"
#include "redis_pool.h"
#include "relq.h"
#include "resource.h"
#include "sessidx.h"
#include "session.h"
#include "watchdog.h"

#define SERVER_FLUSH_MS 100 /* let final replies drain once the releases are done */

static void reap_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct server *srv = arg;
    struct session *s, *next;
    for (s = TAILQ_FIRST(&srv->closed); s != NULL; s = next) {
        next = TAILQ_NEXT(s, link);
        if (s->ending)
            continue; /* end_some reaps it once its leases are gone */
        TAILQ_REMOVE(&srv->closed, s, link);
        session_free(s);
    }
}

#define SERVER_END_BATCH 4096u

/* Let go of up to budget leases of ending sessions, oldest session first. */
static void end_some(struct server *srv, uint32_t budget)
{
    struct session *s;
    while ((s = TAILQ_FIRST(&srv->ending)) != NULL && budget > 0) {
        if (lock_session_end(s, s->end_clean, &budget) > 0)
            break;
        TAILQ_REMOVE(&srv->ending, s, end_link);
        s->ending = 0;
        server_schedule_reap(srv);
    }
    if (!TAILQ_EMPTY(&srv->ending)) {
        /* A timer, not event_active: it runs on the next turn, after the I/O
         * that turn finds, instead of again in this one. */
        struct timeval now = {0, 0};
        evtimer_add(srv->end_ev, &now);
    }
}

static void end_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct server *srv = arg;
    end_some(srv, SERVER_END_BATCH);
    server_check_stopped(srv);
}

void server_end_session(struct server *srv, struct session *s)
{
    uint32_t budget = srv->stopping ? UINT32_MAX : SERVER_END_BATCH;
    if (lock_session_end(s, s->end_clean, &budget) == 0)
        return;
    s->ending = 1;
    TAILQ_INSERT_TAIL(&srv->ending, s, end_link);
    struct timeval now = {0, 0};
    evtimer_add(srv->end_ev, &now);
}

static void flush_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct server *srv = arg;
    struct session *s;
    while ((s = TAILQ_FIRST(&srv->flushq)) != NULL)
        session_flush(s); /* takes s off the queue */
}

void server_schedule_flush(struct server *srv)
{
    event_active(srv->flush_ev, EV_TIMEOUT, 0);
}

void server_schedule_reap(struct server *srv)
{
    event_active(srv->reap_ev, EV_TIMEOUT, 0);
}

static void server_finish(struct server *srv)
{
    struct timeval tv = util_tv_ms(SERVER_FLUSH_MS);
    event_base_loopexit(srv->base, &tv);
}

void server_check_stopped(struct server *srv)
{
    if (!srv->stopping || srv->finishing || srv->background > 0 ||
        cleanup_count(srv->cleanups) > 0 || !TAILQ_EMPTY(&srv->ending))
        return;
    srv->finishing = 1;
    log_info("all locks released");
    server_finish(srv);
}

void server_background_done(struct server *srv)
{
    srv->background--;
    server_check_stopped(srv);
}

static void stop_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct server *srv = arg;
    uint32_t n = srv->background + cleanup_count(srv->cleanups);
    log_warn("shutdown_timeout passed with %u Redis call%s unanswered; their keys expire by ttl",
             n, n == 1 ? "" : "s");
    srv->finishing = 1; /* not "every lock released": the exit path must not say so */
    event_base_loopbreak(srv->base);
}

static void server_stop(struct server *srv, const char *why)
{
    if (srv->stopping) {
        log_warn("%s again: exiting now", why);
        srv->finishing = 1;
        event_base_loopbreak(srv->base);
        return;
    }
    srv->stopping = 1;
    sdnotify_stopping(srv);
    log_info("%s: shutting down (%u session%s, %llu lock%s held)", why, srv->nsessions,
             srv->nsessions == 1 ? "" : "s", (unsigned long long)srv->nleases,
             srv->nleases == 1 ? "" : "s");
    listener_close_all(srv);
    struct session *s;
    while ((s = TAILQ_FIRST(&srv->sessions)) != NULL) {
        Rlock__V1__SessionClosing sc = RLOCK__V1__SESSION_CLOSING__INIT;
        sc.reason = "server shutting down";
        Rlock__V1__Event ev = RLOCK__V1__EVENT__INIT;
        ev.body_case = RLOCK__V1__EVENT__BODY_SESSION_CLOSING;
        ev.session_closing = &sc;
        session_push_event(s, &ev);
        session_close(s, "server shutting down", 1);
    }
    end_some(srv, UINT32_MAX); /* sessions that ended before: the rest of their leases */
    /* Deletes put off until a lost lock's validity ends (its holder was
     * promised that much) still go out if they fall due before we must exit. */
    cleanup_stop(srv->cleanups, util_now_ms() + srv->cfg->shutdown_timeout_ms);
    server_check_stopped(srv);
    if (srv->finishing)
        return;
    srv->stop_ev = evtimer_new(srv->base, stop_timeout_cb, srv);
    struct timeval tv = util_tv_ms(srv->cfg->shutdown_timeout_ms);
    if (srv->stop_ev != NULL)
        evtimer_add(srv->stop_ev, &tv);
}

static void reload_tell(void *arg, const char *line, enum config_change kind)
{
    (void)arg;
    if (kind == CONFIG_CHANGE_REFUSED)
        log_error("%s", line); /* "reload: section.key: problem" */
    else if (kind == CONFIG_CHANGE_RESTART)
        log_warn("reload: %s", line);
    else
        log_info("reload: %s", line);
}

/* The pool saw a cluster failover: check every held lock on the new owners now. */
static void server_redis_failover(void *arg)
{
    watchdog_verify_all(arg);
}

/*
 * SIGHUP: read the file again through the same table, check all of it, and
 * swap in a new config with the reloadable keys changed (config_reload_merge);
 * keys that cannot change live keep their value and are named. A file with
 * any error changes nothing: every problem is logged with its file and line.
 */
static void server_reload(struct server *srv)
{
    if (srv->config_path == NULL) {
        log_warn("SIGHUP: no configuration file was given (built-in defaults): nothing to reload");
        return;
    }
    sdnotify_reloading(srv);
    char *errs = NULL;
    size_t elen = 0;
    FILE *ef = open_memstream(&errs, &elen);
    struct config *fresh = ef != NULL ? config_load(srv->config_path, ef) : NULL;
    if (ef != NULL)
        fclose(ef);
    struct config *merged = NULL;
    if (fresh == NULL) {
        log_error("reload of %s refused; the running configuration stays:", srv->config_path);
        char *save = NULL;
        for (char *line = errs ? strtok_r(errs, "\n", &save) : NULL; line != NULL;
             line = strtok_r(NULL, "\n", &save))
            log_error("  %s", line);
    } else {
        merged = config_reload_merge(srv->cfg, fresh, reload_tell, NULL);
        if (merged == NULL) {
            log_error("reload of %s refused; the running configuration stays",
                      srv->config_path);
        } else {
            /* The tokens as read now (the [auth] keys are reloadable, and the
             * token file may have changed under the same name): the merge
             * rebuilds the keys' values only, not what they load. */
            merged->auth = fresh->auth;
            fresh->auth = NULL;
        }
    }
    free(errs);
    config_free(fresh);
    if (merged != NULL) {
        struct config *old = srv->cfg;
        srv->cfg = merged;
        rpool_set_config(srv->pool, merged);
        log_set_level(merged->log_level);
        if (http_reconfigure(srv, merged->metrics_listen) != 0)
            log_error("reload: the metrics endpoint is off");
        config_free(old);
        log_info("reloaded %s", srv->config_path);
    }
    sdnotify_reloaded(srv);
}

static void signal_cb(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    struct server *srv = arg;
    if (sig == SIGHUP) {
        server_reload(srv);
        return;
    }
    server_stop(srv, sig == SIGTERM ? "SIGTERM" : "SIGINT");
}

struct server *server_new(struct config *cfg, const char *config_path)
{
    struct server *srv = calloc(1, sizeof *srv);
    if (srv == NULL) {
        config_free(cfg);
        return NULL;
    }
    srv->cfg = cfg;
    srv->config_path = config_path;
    srv->watchdog_fd = -1;
    TAILQ_INIT(&srv->sessions);
    TAILQ_INIT(&srv->closed);
    TAILQ_INIT(&srv->draining);
    TAILQ_INIT(&srv->ending);
    TAILQ_INIT(&srv->flushq);
    TAILQ_INIT(&srv->resumeq);
    srv->start_ms = util_now_ms();
    util_rng_init(&srv->rng);
    util_random(&srv->rng, srv->hash_key, sizeof srv->hash_key);
    /*
     * The epoll changelist folds the add and del of one event within a loop
     * turn into nothing: hiredis arms writability for every command, and our
     * own end-of-turn flush writes them before the loop gets to epoll.
     */
    struct event_config *ec = event_config_new();
    if (ec != NULL) {
        event_config_set_flag(ec, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
        srv->base = event_base_new_with_config(ec);
        event_config_free(ec);
    }
    if (srv->base == NULL)
        goto fail;
    srv->reap_ev = event_new(srv->base, -1, 0, reap_cb, srv);
    srv->end_ev = evtimer_new(srv->base, end_cb, srv);
    srv->flush_ev = event_new(srv->base, -1, 0, flush_cb, srv);
    srv->resume_ev = evtimer_new(srv->base, session_resume_cb, srv);
    srv->resources = restable_new(srv->hash_key);
    srv->sessidx = sessidx_new(srv->hash_key);
    srv->cleanups = cleanup_new(srv);
    if (srv->reap_ev == NULL || srv->end_ev == NULL || srv->flush_ev == NULL ||
        srv->resume_ev == NULL ||
        srv->resources == NULL || srv->sessidx == NULL || srv->cleanups == NULL)
        goto fail;
    srv->pool = rpool_new(srv->base, cfg, srv->hash_key);
    if (srv->pool == NULL || relq_init(srv) != 0 || pubsub_start(srv) != 0 ||
        sentinel_start(srv) != 0)
        goto fail;
    if (watchdog_start(srv) != 0 || listener_open_all(srv) != 0 || http_start(srv) != 0 ||
        sdnotify_start(srv) != 0)
        goto fail;
    /* A cluster master failed over: keys granted there may be missing on its successor. */
    rpool_on_failover(srv->pool, server_redis_failover, srv);
    static const int sigs[3] = {SIGTERM, SIGINT, SIGHUP};
    for (int i = 0; i < 3; i++) {
        srv->signal_evs[i] = evsignal_new(srv->base, sigs[i], signal_cb, srv);
        if (srv->signal_evs[i] == NULL || evsignal_add(srv->signal_evs[i], NULL) != 0)
            goto fail;
    }
    return srv;
fail:
    log_error("startup failed");
    server_free(srv);
    return NULL;
}

int server_run(struct server *srv)
{
    log_info("rlockd %s ready", RLOCKD_VERSION);
    event_base_dispatch(srv->base);
    log_info("stopped");
    return 0;
}

void server_free(struct server *srv)
{
    if (srv == NULL)
        return;
    http_stop(srv);
    sdnotify_stop(srv);
    listener_close_all(srv);
    struct session *s;
    while ((s = TAILQ_FIRST(&srv->sessions)) != NULL)
        session_close(s, "exiting", 0);
    end_some(srv, UINT32_MAX);
    /* From here the pool answers its calls with errors: nothing more is worth sending. */
    srv->freeing = 1;
    while ((s = TAILQ_FIRST(&srv->draining)) != NULL)
        session_abandon_flush(s);
    /* Freeing the pool answers every call still in flight, which may touch sessions. */
    rpool_free(srv->pool);
    srv->pool = NULL;
    relq_free(srv);
    sentinel_stop(srv);
    pubsub_stop(srv);
    if (srv->reap_ev != NULL)
        reap_cb(-1, 0, srv);
    for (int i = 0; i < 3; i++)
        if (srv->signal_evs[i] != NULL)
            event_free(srv->signal_evs[i]);
    watchdog_stop(srv);
    if (srv->stop_ev != NULL)
        event_free(srv->stop_ev);
    if (srv->reap_ev != NULL)
        event_free(srv->reap_ev);
    if (srv->end_ev != NULL)
        event_free(srv->end_ev);
    if (srv->flush_ev != NULL)
        event_free(srv->flush_ev);
    if (srv->resume_ev != NULL)
        event_free(srv->resume_ev);
    cleanup_free(srv->cleanups);
    restable_free(srv->resources);
    sessidx_free(srv->sessidx);
    if (srv->base != NULL)
        event_base_free(srv->base);
    config_free(srv->cfg);
    free(srv);
}
