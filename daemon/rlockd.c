/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rlockd.c — the daemon as a whole: startup and shutdown order, signals and
 * reload; the one place that wires the parts together and installs the hooks
 * through which lower layers reach higher ones (docs/architecture.md).
 *
 * Start: event base -> resource table -> Redis pool and pub/sub connection
 * (both connect in the background) -> watchdog -> listeners -> signals.
 * Clients that arrive before Redis is ready get UNAVAILABLE, not a hang.
 *
 * SIGTERM / SIGINT / SIGQUIT / SIGPWR: stop accepting, tell every session (SessionClosing),
 * release every held lock by token, wait for those releases (at most
 * shutdown_timeout), flush, exit. A second signal exits at once.
 */
#include "rlockd.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "cleanup.h"
#include "config.h"
#include "dispatch.h"
#include "hello.h"
#include "http.h"
#include "sdnotify.h"
#include "listener.h"
#include "lock.h"
#include "log.h"
#include "pubsub.h"
#include "sentinel.h"
#include "pool.h"
#include "replyobj.h"
#include "relq.h"
#include "resource.h"
#include "session.h"
#include "tls.h"
#include "watchdog.h"

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

/* How often a handover looks whether every session has left. */
#define HANDOVER_POLL_MS 50

/* Tell s to go (SessionClosing); resume: to carry its session on elsewhere. */
static void tell_closing(struct session *s, const char *reason, int resume)
{
    Rlock__V1__SessionClosing sc = RLOCK__V1__SESSION_CLOSING__INIT;
    sc.reason = (char *)reason;
    sc.resume = resume;
    Rlock__V1__Event ev = RLOCK__V1__EVENT__INIT;
    ev.body_case = RLOCK__V1__EVENT__BODY_SESSION_CLOSING;
    ev.session_closing = &sc;
    session_push_event(s, &ev);
}

static void rlockd_release_all(struct server *srv, const char *why);

static void handover_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct server *srv = arg;
    int64_t now = util_now_ms();
    if (srv->nsessions > 0 && now < srv->handover_deadline_ms) {
        struct timeval tv = util_tv_ms(HANDOVER_POLL_MS);
        evtimer_add(srv->handover_ev, &tv);
        return;
    }
    srv->handing_over = 0;
    if (srv->nsessions == 0)
        log_info("handover done: every session left (%llu handed over, locks kept)",
                 (unsigned long long)srv->ctr.sessions_handed_over);
    else
        log_warn("handover_timeout passed with %u session%s still here: releasing their locks",
                 srv->nsessions, srv->nsessions == 1 ? "" : "s");
    rlockd_release_all(srv, "handover over");
}

/*
 * SIGTERM with shutdown = handover: stop accepting, tell every session to
 * resume elsewhere, and keep renewing; a session whose client leaves is
 * handed over (session.c: moved), its keys left for the daemon it resumes on.
 * When none is left, or at handover_timeout, the rest is released.
 */
static void rlockd_handover(struct server *srv, const char *why)
{
    srv->handing_over = 1;
    sdnotify_stopping(srv);
    log_info("%s: handing over (%u session%s, %llu lock%s held)", why, srv->nsessions,
             srv->nsessions == 1 ? "" : "s", (unsigned long long)srv->nleases,
             srv->nleases == 1 ? "" : "s");
    listener_close_all(srv);
    struct session *s, *next;
    for (s = TAILQ_FIRST(&srv->sessions); s != NULL; s = next) {
        next = TAILQ_NEXT(s, link);
        if (s->state == SESSION_ACTIVE)
            tell_closing(s, "server restarting: resume the session elsewhere", 1);
        else
            session_close(s, "server shutting down", 1);
    }
    srv->handover_deadline_ms = util_now_ms() + srv->cfg->handover_timeout_ms;
    srv->handover_ev = evtimer_new(srv->base, handover_cb, srv);
    if (srv->handover_ev == NULL) {
        srv->handing_over = 0;
        rlockd_release_all(srv, why);
        return;
    }
    struct timeval tv = {0, 0};
    evtimer_add(srv->handover_ev, &tv);
}

static void rlockd_stop(struct server *srv, const char *why)
{
    if (srv->stopping || srv->handing_over) {
        log_warn("%s again: exiting now", why);
        srv->finishing = 1;
        event_base_loopbreak(srv->base);
        return;
    }
    if (config_handover(srv->cfg) && srv->resume)
        rlockd_handover(srv, why);
    else
        rlockd_release_all(srv, why);
}

/* Shutdown proper: tell and close every session, release their locks, exit once done. */
static void rlockd_release_all(struct server *srv, const char *why)
{
    srv->stopping = 1;
    sdnotify_stopping(srv);
    log_info("%s: shutting down (%u session%s, %llu lock%s held)", why, srv->nsessions,
             srv->nsessions == 1 ? "" : "s", (unsigned long long)srv->nleases,
             srv->nleases == 1 ? "" : "s");
    listener_close_all(srv);
    struct session *s;
    while ((s = TAILQ_FIRST(&srv->sessions)) != NULL) {
        tell_closing(s, "server shutting down", 0);
        session_close(s, "server shutting down", 1);
    }
    lock_end_some(srv, UINT32_MAX); /* sessions that ended before: the rest of their leases */
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
static void rlockd_cluster_failover(void *arg)
{
    watchdog_verify_all(arg);
}

/* Sentinel named the master: the release notices follow it; after a switch, every held
 * lock is checked on it at once. */
static void rlockd_sentinel_master(void *arg, const struct config_address *addr, int switched)
{
    struct server *srv = arg;
    pubsub_set_address(srv, addr);
    if (switched)
        watchdog_verify_all(srv);
}

static void auth_grace_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    hello_auth_grace_end(arg);
}

/*
 * Sessions follow the tokens of a reload (hello.h): when it turned authentication on, those
 * opened without a token end now, or after auth.tokenless_grace.
 */
static void rlockd_auth_reloaded(struct server *srv, const struct auth_tokens *before)
{
    uint32_t grace = srv->cfg->auth_tokenless_grace_ms;
    int turned_on = before == NULL && srv->cfg->auth != NULL;
    int later = turned_on && grace > 0;
    if (later && srv->auth_grace_ev == NULL)
        srv->auth_grace_ev = evtimer_new(srv->base, auth_grace_cb, srv);
    if (later && srv->auth_grace_ev != NULL) {
        struct timeval tv = util_tv_ms(grace);
        evtimer_add(srv->auth_grace_ev, &tv);
        log_warn("reload: authentication is on; sessions opened without a token end in %u ms "
                 "(auth.tokenless_grace)", grace);
    }
    hello_auth_reloaded(srv, before, later && srv->auth_grace_ev != NULL);
}

/* Where the secrets came from, and a warning when the configuration file shows them to others. */
static void rlockd_log_secrets(const struct config *c, const char *path)
{
    if (c->exposed[0] != '\0' && path != NULL)
        log_warn("%s", config_exposed_advice(c, path));
    if (c->tokens_from_credential)
        log_info("auth tokens from the systemd credential tokens ($CREDENTIALS_DIRECTORY)");
    if (c->password_from_credential)
        log_info("redis password from the systemd credential redis-password "
                 "($CREDENTIALS_DIRECTORY)");
}

/*
 * SIGHUP: read the file again through the same table, check all of it, and
 * swap in a new config with the reloadable keys changed (config_reload_merge);
 * keys that cannot change live keep their value and are named. A file with
 * any error changes nothing: every problem is logged with its file and line.
 */
/*
 * Read [tls]'s certificate, key and CA into a new context for the sessions accepted from
 * now on; those open keep theirs. 0, or -1 (logged) with the old context kept.
 */
static int rlockd_tls_load(struct server *srv, const struct config *cfg)
{
    char err[512];
    struct tls_server *t = tls_server_new(cfg, err, sizeof err);
    if (t == NULL) {
        log_error("%s", err);
        return -1;
    }
    tls_server_free(srv->tls);
    srv->tls = t;
    log_info("TLS: certificate %s, client certificates %s, TLS %s and later", cfg->tls_cert_file,
             cfg->tls_client_certs, cfg->tls_min_version);
    return 0;
}

static void rlockd_reload(struct server *srv)
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
            merged->tokens_from_credential = fresh->tokens_from_credential;
            merged->password_from_credential = srv->cfg->password_from_credential;
            rlockd_log_secrets(fresh, srv->config_path);
        }
    }
    free(errs);
    config_free(fresh);
    if (merged != NULL) {
        struct config *old = srv->cfg;
        srv->cfg = merged;
        rpool_set_config(srv->pool, merged);
        log_set_level(merged->log_level);
        if (http_reconfigure(srv, merged->metrics_listen) != 0) {
            const char *at = http_listening(srv);
            log_error("reload: metrics.listen: cannot listen on %s; the endpoint %s%s",
                      merged->metrics_listen, at != NULL ? "stays on " : "is off",
                      at != NULL ? at : "");
        }
        rlockd_auth_reloaded(srv, old->auth);
        if (merged->tls_listen[0] != '\0' && rlockd_tls_load(srv, merged) != 0)
            log_error("reload: the TLS certificate, key and CA stay those read before");
        config_free(old);
        log_info("reloaded %s", srv->config_path);
    }
    sdnotify_reloaded(srv);
}

/* SIGUSR1: one line of state in the log, for an operator at a terminal. */
static void rlockd_log_state(struct server *srv)
{
    log_info("SIGUSR1: %u sessions, %llu locks held, %llu waiters, %u of %u Redis connections "
             "ready, pub/sub %s, %llu releases retried in the background%s",
             srv->nsessions, (unsigned long long)srv->nleases, (unsigned long long)srv->nwaiters,
             rpool_ready_count(srv->pool), rpool_size(srv->pool),
             pubsub_connected(srv) ? "connected" : "not connected",
             (unsigned long long)cleanup_count(srv->cleanups),
             srv->stopping ? ", stopping" : srv->handing_over ? ", handing over" : "");
}

static void signal_cb(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    struct server *srv = arg;
    if (sig == SIGHUP)
        rlockd_reload(srv);
    else if (sig == SIGUSR1)
        rlockd_log_state(srv);
    else
        rlockd_stop(srv, sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT"
                         : sig == SIGQUIT ? "SIGQUIT" : "SIGPWR");
}

/*
 * Every signal whose default action ends the process either stops the daemon as SIGTERM does
 * (SIGTERM, SIGINT, SIGQUIT, SIGPWR: locks released or handed over), reloads (SIGHUP), logs
 * the state (SIGUSR1), or is ignored here: a stray kill -USR2 or an alarm must not end the
 * daemon and leave its keys in Redis until their ttl. Faults (SIGSEGV, SIGBUS, SIGFPE,
 * SIGILL, SIGABRT, SIGSYS, SIGTRAP) keep their default: after one, nothing can be trusted.
 */
static const int handled_signals[RLOCKD_SIGNALS] = {SIGTERM, SIGINT, SIGQUIT, SIGPWR,
                                                   SIGHUP,  SIGUSR1};

static void rlockd_ignore_signals(void)
{
    static const int ignored[] = {SIGPIPE, SIGUSR2,   SIGALRM, SIGVTALRM, SIGPROF,
                                  SIGIO,   SIGSTKFLT, SIGXCPU, SIGXFSZ};
    for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++)
        signal(ignored[i], SIG_IGN);
    for (int sig = SIGRTMIN; sig <= SIGRTMAX; sig++)
        signal(sig, SIG_IGN);
}

/*
 * The resume key: session.resume_key_file, or resume.key in the state
 * directory systemd made (StateDirectory=); none without either. Created when
 * missing, so that a daemon restarted in place keeps it. 0, or -1 (logged).
 */
static int rlockd_load_resume_key(struct server *srv)
{
    char path[4200];
    const char *state = getenv("STATE_DIRECTORY");
    if (srv->cfg->resume_key_file[0] != '\0') {
        snprintf(path, sizeof path, "%s", srv->cfg->resume_key_file);
    } else if (state != NULL && state[0] != '\0') {
        /* systemd lists the unit's state directories separated by colons: the first. */
        int n = (int)strcspn(state, ":");
        snprintf(path, sizeof path, "%.*s/resume.key", n, state);
    } else {
        log_info("no resume key (session.resume_key_file): sessions end with their connection");
        return 0;
    }
    char err[256];
    int created;
    if (seal_key_load(path, 1, &srv->rng, &srv->resume_key, &created, err, sizeof err) != 0) {
        log_error("session.resume_key_file %s: %s", path, err);
        return -1;
    }
    srv->resume = 1;
    log_info("resume key %s%s; on SIGTERM sessions %s", path, created ? " (created)" : "",
             config_handover(srv->cfg) ? "are handed over" : "are released");
    return 0;
}

struct server *rlockd_new(struct config *cfg, const char *config_path)
{
    struct server *srv = calloc(1, sizeof *srv);
    if (srv == NULL) {
        config_free(cfg);
        return NULL;
    }
    srv->cfg = cfg;
    srv->config_path = config_path;
    srv->watchdog_fd = -1;
    srv->start_ms = util_now_ms();
    util_rng_init(&srv->rng);
    util_random(&srv->rng, srv->hash_key, sizeof srv->hash_key);
    rlockd_log_secrets(cfg, config_path);
    if (rlockd_load_resume_key(srv) != 0) {
        config_free(cfg);
        free(srv);
        return NULL;
    }
    /* The hooks by which lower layers reach higher ones. */
    srv->on_frame = dispatch_frame;
    srv->on_session_end = lock_session_closed;
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
    if (session_start(srv) != 0 || lock_start(srv) != 0)
        goto fail;
    srv->resources = restable_new(srv->hash_key);
    srv->cleanups = cleanup_new(srv);
    if (srv->resources == NULL || srv->cleanups == NULL)
        goto fail;
    srv->pool = rpool_new(srv->base, cfg, srv->hash_key);
    if (srv->pool == NULL || relq_init(srv) != 0 || pubsub_start(srv) != 0 ||
        sentinel_start(srv, rlockd_sentinel_master, srv) != 0)
        goto fail;
    if (cfg->tls_listen[0] != '\0' && rlockd_tls_load(srv, cfg) != 0)
        goto fail;
    if (watchdog_start(srv) != 0 || listener_open_all(srv) != 0 || http_start(srv) != 0 ||
        sdnotify_start(srv) != 0)
        goto fail;
    /* A cluster master failed over: keys granted there may be missing on its successor. */
    rpool_on_failover(srv->pool, rlockd_cluster_failover, srv);
    rlockd_ignore_signals();
    for (int i = 0; i < RLOCKD_SIGNALS; i++) {
        srv->signal_evs[i] = evsignal_new(srv->base, handled_signals[i], signal_cb, srv);
        if (srv->signal_evs[i] == NULL || evsignal_add(srv->signal_evs[i], NULL) != 0)
            goto fail;
    }
    return srv;
fail:
    log_error("startup failed");
    rlockd_free(srv);
    return NULL;
}

int rlockd_run(struct server *srv)
{
    log_info("rlockd %s ready", RLOCKD_VERSION);
    event_base_dispatch(srv->base);
    log_info("stopped");
    return 0;
}

void rlockd_free(struct server *srv)
{
    if (srv == NULL)
        return;
    http_stop(srv);
    sdnotify_stop(srv);
    listener_close_all(srv);
    tls_server_free(srv->tls); /* sessions still open hold their own reference */
    srv->tls = NULL;
    /* The lists are empty (zeroed) when startup failed before session_start. */
    struct session *s;
    while ((s = TAILQ_FIRST(&srv->sessions)) != NULL)
        session_close(s, "exiting", 0);
    lock_end_some(srv, UINT32_MAX);
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
    for (int i = 0; i < RLOCKD_SIGNALS; i++)
        if (srv->signal_evs[i] != NULL)
            event_free(srv->signal_evs[i]);
    watchdog_stop(srv);
    if (srv->stop_ev != NULL)
        event_free(srv->stop_ev);
    if (srv->auth_grace_ev != NULL)
        event_free(srv->auth_grace_ev);
    if (srv->handover_ev != NULL)
        event_free(srv->handover_ev);
    session_stop(srv);
    lock_stop(srv);
    cleanup_free(srv->cleanups);
    restable_free(srv->resources);
    if (srv->base != NULL)
        event_base_free(srv->base);
    config_free(srv->cfg);
    free(srv);
    replyobj_drain(); /* every Redis context is gone: nothing is left to answer */
}
