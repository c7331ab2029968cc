/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sdnotify.c — tell systemd (Type=notify) how the daemon is doing, by the
 * documented datagram protocol of sd_notify(3), written by hand: one
 * datagram of "KEY=value" lines to the unix socket named by NOTIFY_SOCKET
 * ('@' at its start names an abstract socket). Without NOTIFY_SOCKET nothing
 * is sent.
 *
 *   READY=1          once the listeners are open and every Redis connection
 *                    is ready, or SDNOTIFY_READY_WAIT_MS after start anyway
 *                    (the daemon serves UNAVAILABLE until Redis comes, and a
 *                    unit that never became ready would be killed)
 *   STATUS=...       sessions, locks, waiters and Redis, every few seconds
 *   WATCHDOG=1       from the loop, at half of WATCHDOG_USEC (when set for us)
 *   RELOADING=1 + MONOTONIC_USEC=...   at the start of a reload (SIGHUP),
 *                    READY=1 at its end
 *   STOPPING=1       at the start of a shutdown
 */
#include "sdnotify.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "log.h"
#include "pool.h"
#include "server.h"

#define SDNOTIFY_STATUS_MS 2000
#define SDNOTIFY_READY_POLL_MS 100
#define SDNOTIFY_READY_WAIT_MS 10000

struct sdnotify {
    struct server *srv;
    int fd;
    struct sockaddr_un addr;
    socklen_t addrlen;
    int ready_sent;
    int64_t started_ms;
    struct event *status_ev;
    struct event *ready_ev;
    struct event *watchdog_ev;
};

/* Send msg as one datagram; errors are logged once, then dropped (systemd may be gone). */
static void notify(struct sdnotify *n, const char *msg)
{
    if (n == NULL || n->fd < 0)
        return;
    if (sendto(n->fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&n->addr, n->addrlen) <
        0) {
        static int warned;
        if (!warned++)
            log_warn("sd_notify: %s", strerror(errno));
    }
}

static void status_text(const struct server *srv, char *buf, size_t len, const char *prefix)
{
    snprintf(buf, len,
             "%sSTATUS=%u session%s, %llu lock%s held, %llu waiting; Redis %u/%u ready",
             prefix, srv->nsessions, srv->nsessions == 1 ? "" : "s",
             (unsigned long long)srv->nleases, srv->nleases == 1 ? "" : "s",
             (unsigned long long)srv->nwaiters, rpool_ready_count(srv->pool),
             rpool_size(srv->pool));
}

static void status_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct sdnotify *n = arg;
    char msg[256];
    status_text(n->srv, msg, sizeof msg, "");
    notify(n, msg);
}

static void watchdog_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    notify(arg, "WATCHDOG=1");
}

static void ready_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct sdnotify *n = arg;
    const struct server *srv = n->srv;
    int redis = rpool_ready_count(srv->pool) == rpool_size(srv->pool);
    if (!redis && util_now_ms() - n->started_ms < SDNOTIFY_READY_WAIT_MS) {
        struct timeval tv = util_tv_ms(SDNOTIFY_READY_POLL_MS);
        evtimer_add(n->ready_ev, &tv);
        return;
    }
    char msg[300];
    status_text(srv, msg, sizeof msg, "READY=1\n");
    if (!redis)
        log_warn("Redis not ready %d ms after start: telling systemd we are up anyway "
                 "(clients get UNAVAILABLE until it is)",
                 SDNOTIFY_READY_WAIT_MS);
    notify(n, msg);
    n->ready_sent = 1;
}

/* The watchdog interval systemd asked of this process, in µs; 0 = none. */
static uint64_t watchdog_usec(void)
{
    const char *usec = getenv("WATCHDOG_USEC");
    const char *pid = getenv("WATCHDOG_PID");
    if (usec == NULL)
        return 0;
    if (pid != NULL && strtol(pid, NULL, 10) != (long)getpid())
        return 0; /* meant for another process */
    return strtoull(usec, NULL, 10);
}

int sdnotify_start(struct server *srv)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (path == NULL || path[0] == '\0')
        return 0;
    struct sdnotify *n = calloc(1, sizeof *n);
    if (n == NULL)
        return -1;
    n->srv = srv;
    n->started_ms = util_now_ms();
    size_t len = strlen(path);
    if (len >= sizeof n->addr.sun_path || (path[0] != '/' && path[0] != '@')) {
        log_error("NOTIFY_SOCKET=%s: not a unix socket path", path);
        free(n);
        return -1;
    }
    n->addr.sun_family = AF_UNIX;
    memcpy(n->addr.sun_path, path, len);
    if (path[0] == '@')
        n->addr.sun_path[0] = '\0'; /* the abstract namespace */
    n->addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
    n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    n->status_ev = event_new(srv->base, -1, EV_PERSIST, status_cb, n);
    n->ready_ev = evtimer_new(srv->base, ready_cb, n);
    if (n->fd < 0 || n->status_ev == NULL || n->ready_ev == NULL) {
        srv->sdnotify = n;
        sdnotify_stop(srv);
        return -1;
    }
    struct timeval tv = util_tv_ms(SDNOTIFY_STATUS_MS);
    event_add(n->status_ev, &tv);
    uint64_t wd = watchdog_usec();
    if (wd > 0) {
        n->watchdog_ev = event_new(srv->base, -1, EV_PERSIST, watchdog_cb, n);
        struct timeval half = {(time_t)(wd / 2 / 1000000), (suseconds_t)(wd / 2 % 1000000)};
        if (n->watchdog_ev != NULL)
            event_add(n->watchdog_ev, &half);
        log_info("systemd watchdog: pinging every %llu ms", (unsigned long long)(wd / 2000));
    }
    srv->sdnotify = n;
    ready_cb(-1, 0, n);
    return 0;
}

void sdnotify_stop(struct server *srv)
{
    struct sdnotify *n = srv->sdnotify;
    if (n == NULL)
        return;
    if (n->status_ev != NULL)
        event_free(n->status_ev);
    if (n->ready_ev != NULL)
        event_free(n->ready_ev);
    if (n->watchdog_ev != NULL)
        event_free(n->watchdog_ev);
    if (n->fd >= 0)
        close(n->fd);
    free(n);
    srv->sdnotify = NULL;
}

void sdnotify_reloading(struct server *srv)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    char msg[96];
    snprintf(msg, sizeof msg, "RELOADING=1\nMONOTONIC_USEC=%llu",
             (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000);
    notify(srv->sdnotify, msg);
}

void sdnotify_reloaded(struct server *srv)
{
    struct sdnotify *n = srv->sdnotify;
    if (n == NULL)
        return;
    char msg[300];
    status_text(srv, msg, sizeof msg, "READY=1\n");
    notify(n, msg);
}

void sdnotify_stopping(struct server *srv)
{
    notify(srv->sdnotify, "STOPPING=1\nSTATUS=shutting down: releasing every lock");
}
