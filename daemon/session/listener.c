/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * listener.c — evconnlistener per configured address; accepted sockets
 * become sessions unless max_sessions is reached.
 */
#include "listener.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "config.h"
#include "log.h"
#include "server.h"
#include "peercount.h"
#include "session.h"
#include "tls.h"
#include "util.h"

#define LISTENER_PAUSE_MS 500 /* pause after running out of descriptors */
/*
 * libevent's listener accepts until the backlog is empty, all in one callback: a peer that
 * connects as fast as it can (no token needed) would keep the loop accepting while the
 * sessions' frames wait. After this many, the listener sits out one loop turn.
 */
#define LISTENER_ACCEPTS_PER_TURN 32

struct listener {
    struct server *srv;
    struct evconnlistener *evl;
    struct event *resume_ev; /* re-enables accepting after a pause */
    unsigned burst;          /* accepted since the listener last sat out a turn */
    struct config_address addr;
    int tls; /* from tls.listen: sessions speak TLS (srv->tls) */
    struct listener *next;
};

/* The IP address of a TCP peer, IPv4 mapped into IPv6 (::ffff:a.b.c.d); 0, or -1 for unix. */
static int peer_ip(const struct sockaddr *sa, uint8_t ip[16])
{
    if (sa->sa_family == AF_INET6) {
        memcpy(ip, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
        return 0;
    }
    if (sa->sa_family != AF_INET)
        return -1;
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    memcpy(ip, mapped, sizeof mapped);
    memcpy(ip + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    return 0;
}

static void peer_name(const struct sockaddr *sa, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        snprintf(buf, len, "%s:%u", host, ntohs(in->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        snprintf(buf, len, "[%s]:%u", host, ntohs(in6->sin6_port));
    } else {
        snprintf(buf, len, "unix");
    }
}

int listener_fd_spare(evutil_socket_t fd, unsigned reserve)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return 1;
    /* accept returns the lowest free descriptor: all those below fd are in use. */
    return (rlim_t)fd + reserve < rl.rlim_cur;
}

/* Every LISTENER_ACCEPTS_PER_TURN accepts, let the rest of the loop run before more. */
static void yield_after_burst(struct listener *l)
{
    if (++l->burst < LISTENER_ACCEPTS_PER_TURN || evtimer_pending(l->resume_ev, NULL))
        return;
    l->burst = 0;
    evconnlistener_disable(l->evl);
    struct timeval now = {0, 0};
    evtimer_add(l->resume_ev, &now);
}

static void accept_one(struct listener *l, evutil_socket_t fd, struct sockaddr *sa);

static void accept_cb(struct evconnlistener *evl, evutil_socket_t fd, struct sockaddr *sa,
                      int salen, void *arg)
{
    (void)evl;
    (void)salen;
    struct listener *l = arg;
    accept_one(l, fd, sa);
    yield_after_burst(l);
}

static void accept_one(struct listener *l, evutil_socket_t fd, struct sockaddr *sa)
{
    struct server *srv = l->srv;
    uint8_t ip[16];
    int tcp = peer_ip(sa, ip) == 0;
    /* Connections before their Hello have a budget of their own (max_sessions counts the
     * sessions that said Hello): a peer without a token cannot lock out those with one. */
    int reason = srv->stopping                               ? METRIC_CONN_SHUTTING_DOWN
                 : tcp && peercount_get(srv->peers, ip) >= srv->cfg->max_pending_per_peer
                     ? METRIC_CONN_PEER_PENDING
                 : !listener_fd_spare(fd, LISTENER_FD_RESERVE) ? METRIC_CONN_DESCRIPTORS
                                                              : -1;
    if (reason >= 0) {
        static const char *const why[METRIC_CONN_COUNT] = {
            [METRIC_CONN_SHUTTING_DOWN] = "shutting down",
            [METRIC_CONN_PEER_PENDING] = "max_pending_per_peer connections of this address are "
                                         "before their Hello",
            [METRIC_CONN_DESCRIPTORS] = "descriptors running out (raise LimitNOFILE / ulimit -n)",
        };
        char peer[128];
        peer_name(sa, peer, sizeof peer);
        log_peer_warn("refusing a connection from %s: %s", peer, why[reason]);
        srv->mx.conns_rejected[reason]++;
        evutil_closesocket(fd);
        return;
    }
    session_make_room(srv);
    if (!l->addr.is_unix) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    char peer[128];
    peer_name(sa, peer, sizeof peer);
    struct ssl_st *ssl = NULL;
    if (l->tls && (ssl = tls_accept_new(srv->tls, fd)) == NULL) {
        log_peer_warn("refusing a connection from %s: out of memory for its TLS state", peer);
        evutil_closesocket(fd);
        return;
    }
    session_new(srv, fd, peer, tcp ? ip : NULL, ssl);
}

static void resume_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct listener *l = arg;
    evconnlistener_enable(l->evl);
}

static void error_cb(struct evconnlistener *evl, void *arg)
{
    struct listener *l = arg;
    int err = errno;
    /* Out of descriptors, the pending connection stays in the backlog and
     * libevent would report it again at once: pause instead of spinning. */
    log_error("accept: %s; not accepting for %d ms", strerror(err), LISTENER_PAUSE_MS);
    evconnlistener_disable(evl);
    struct timeval tv = util_tv_ms(LISTENER_PAUSE_MS);
    evtimer_add(l->resume_ev, &tv);
}

struct evconnlistener *listener_bind(struct event_base *base, const struct config_address *addr,
                                     evconnlistener_cb cb, void *arg)
{
    struct sockaddr_storage ss;
    socklen_t sslen;
    memset(&ss, 0, sizeof ss);
    if (addr->is_unix) {
        struct sockaddr_un *un = (struct sockaddr_un *)&ss;
        un->sun_family = AF_UNIX;
        snprintf(un->sun_path, sizeof un->sun_path, "%s", addr->path);
        sslen = sizeof *un;
        struct stat st;
        /*
         * A socket file left by a crashed run would make bind fail: remove
         * it, but only when nobody answers on it (another daemon may be
         * using it, and taking its path would cut it off silently).
         */
        if (lstat(addr->path, &st) == 0 && S_ISSOCK(st.st_mode)) {
            int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
            int live = probe >= 0 && connect(probe, (struct sockaddr *)un, sizeof *un) == 0;
            if (probe >= 0)
                close(probe);
            if (live) {
                errno = EADDRINUSE;
                return NULL;
            }
            unlink(addr->path);
        }
    } else if (strchr(addr->host, ':') != NULL) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(addr->port);
        inet_pton(AF_INET6, addr->host, &in6->sin6_addr);
        sslen = sizeof *in6;
    } else {
        struct sockaddr_in *in = (struct sockaddr_in *)&ss;
        in->sin_family = AF_INET;
        in->sin_port = htons(addr->port);
        inet_pton(AF_INET, addr->host, &in->sin_addr);
        sslen = sizeof *in;
    }
    unsigned flags = LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC | LEV_OPT_REUSEABLE;
    return evconnlistener_new_bind(base, cb, arg, flags, 128, (struct sockaddr *)&ss,
                                   (int)sslen);
}

static int listener_open(struct server *srv, const struct config_address *addr, int tls)
{
    struct listener *l = calloc(1, sizeof *l);
    if (l == NULL)
        return -1;
    l->srv = srv;
    l->addr = *addr;
    l->tls = tls;
    l->evl = listener_bind(srv->base, &l->addr, accept_cb, l);
    if (l->evl == NULL) {
        if (l->addr.is_unix)
            log_error("cannot listen on unix:%s: %s", l->addr.path, strerror(errno));
        else
            log_error("cannot listen on %s:%u: %s", l->addr.host, l->addr.port, strerror(errno));
        free(l);
        return -1;
    }
    evconnlistener_set_error_cb(l->evl, error_cb);
    l->resume_ev = evtimer_new(srv->base, resume_cb, l);
    if (l->resume_ev == NULL) {
        evconnlistener_free(l->evl);
        free(l);
        return -1;
    }
    if (!l->addr.is_unix && l->addr.port == 0) {
        struct sockaddr_storage bound;
        socklen_t blen = sizeof bound;
        getsockname(evconnlistener_get_fd(l->evl), (struct sockaddr *)&bound, &blen);
        l->addr.port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
    }
    if (l->addr.is_unix)
        log_info("listening on unix:%s%s", l->addr.path, tls ? " (TLS)" : "");
    else
        log_info("listening on %s:%u%s", l->addr.host, l->addr.port, tls ? " (TLS)" : "");
    l->next = srv->listeners;
    srv->listeners = l;
    return 0;
}

int listener_open_all(struct server *srv)
{
    struct rlimit rl;
    /* Each session is a descriptor, and so is each metrics connection; leave room for
     * Redis, listeners and logs. Raise the soft limit as far as the hard one allows
     * before complaining. */
    rlim_t need = (rlim_t)srv->cfg->max_sessions + srv->cfg->max_pending +
                  srv->cfg->metrics_max_connections + 64;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < need) {
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need ? need : rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        need > rl.rlim_cur)
        log_warn("server.max_sessions (%u), server.max_pending (%u) and "
                 "metrics.max_connections (%u) exceed the descriptor limit (%llu) minus a "
                 "reserve of 64; raise LimitNOFILE / ulimit -n",
                 srv->cfg->max_sessions, srv->cfg->max_pending,
                 srv->cfg->metrics_max_connections, (unsigned long long)rl.rlim_cur);
    struct config_address addrs[CONFIG_MAX_LISTEN];
    char err[256];
    int n = config_parse_listen(srv->cfg->listen, addrs, CONFIG_MAX_LISTEN, err, sizeof err);
    if (n < 0) {
        log_error("server.listen: %s", err);
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (listener_open(srv, &addrs[i], 0) != 0)
            return -1;
    if (srv->cfg->tls_listen[0] == '\0')
        return 0;
    n = config_parse_listen(srv->cfg->tls_listen, addrs, CONFIG_MAX_LISTEN, err, sizeof err);
    if (n < 0) {
        log_error("tls.listen: %s", err);
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (listener_open(srv, &addrs[i], 1) != 0)
            return -1;
    return 0;
}

void listener_close_all(struct server *srv)
{
    struct listener *l = srv->listeners, *next;
    for (; l != NULL; l = next) {
        next = l->next;
        evconnlistener_free(l->evl);
        event_free(l->resume_ev);
        if (l->addr.is_unix)
            unlink(l->addr.path);
        free(l);
    }
    srv->listeners = NULL;
}
