/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pubsub.c — see pubsub.h. One hiredis connection in subscribed mode.
 *
 * The connection goes DOWN -> CONNECTING -> READY -> DOWN (backoff) ->
 * CONNECTING. CONNECTING covers the connect, AUTH and SELECT when
 * configured, and a SUBSCRIBE of the daemons' channel PREFIXdaemons; READY
 * is its confirmation. That channel carries nothing: hiredis 0.14 cannot
 * PING a subscribed connection, so another SUBSCRIBE of it every
 * PUBSUB_PROBE_MS is the liveness probe (confirmed within command_timeout,
 * else the connection is reset), and PUBSUB NUMSUB on it tells operators how
 * many daemons listen. One timer serves, by state, as the connect deadline
 * (CONNECTING), the probe (READY) and the reconnect delay (DOWN).
 *
 * A resource's channel goes NONE -> SUBSCRIBING -> ACTIVE -> LEAVING -> NONE
 * (ps_state in struct resource). Wanting it (ps_want) and having it are
 * reconciled once per loop turn (flush_ev): every resource whose wish
 * changed is queued, and the queue leaves as one SUBSCRIBE and one
 * UNSUBSCRIBE (in chunks of PUBSUB_BATCH_MAX channels). A resource wanted
 * again while LEAVING is subscribed anew once Redis confirms the
 * UNSUBSCRIBE, so the commands of one channel never overlap.
 *
 * Missed notices: a subscription is live from its confirmation on; a release
 * before it published to nobody here. So the confirmation wakes the head
 * once (lock_wake), as a notice would; after a reconnect every wanted
 * channel is subscribed again and each confirmation wakes its head — the one
 * retry per resource that covers whatever was published while the
 * connection was down. A notice that arrives while the head's try is in
 * Redis makes that try's busy answer retry at once (lock.c), since the two
 * travel on different connections and the notice may be of a release the
 * try did not see.
 *
 * References: the connection holds one on every resource not NONE (the
 * subscribed list) and one on every resource queued for the next flush.
 * Contexts are never freed inside hiredis callbacks: a reset found there
 * goes through the zero-delay timer.
 */
#include "pubsub.h"

#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include <event2/event.h>
#include <hiredis/async.h>

#include "config.h"
#include "election.h"
#include "lock.h"
#include "log.h"
#include "pool.h"
#include "resource.h"
#include "server.h"
#include "util.h"

/* Time between liveness probes of a ready connection. */
#define PUBSUB_PROBE_MS 1000
/* Most channels in one SUBSCRIBE or UNSUBSCRIBE. */
#define PUBSUB_BATCH_MAX 1024
/* The daemons' channel, after the key prefix. */
#define PUBSUB_DAEMONS "daemons"

enum ps_sub_state { PS_SUB_NONE, PS_SUB_SUBSCRIBING, PS_SUB_ACTIVE, PS_SUB_LEAVING };

struct pubsub {
    struct server *srv;
    struct config_address addr;
    int have_addr;          /* 0 until Sentinel names the master */
    uint32_t node_turn;     /* cluster: the pool's node tried next */
    struct rpool_link link; /* the connection's state and backoff */
    redisAsyncContext *ac;
    struct event *timer;
    struct event *flush_ev;
    int login_pending;        /* AUTH / SELECT replies still due */
    const char *reset_why;    /* the timer should reset the connection, for this reason */
    int probe_outstanding;    /* a SUBSCRIBE of the daemons' channel is unanswered */
    int64_t probe_sent_ms;
    TAILQ_HEAD(, resource) subscribed; /* every resource not NONE */
    struct resource **queue;  /* resources whose wish changed, referenced */
    size_t nqueue, capqueue;
    uint32_t nactive;         /* channels confirmed */
    uint64_t notices;         /* messages received */
    char daemons[160];        /* PREFIXdaemons */
};

static void ps_connect(struct pubsub *ps);

static void ps_arm(struct pubsub *ps, int64_t delay_ms)
{
    struct timeval tv = util_tv_ms(delay_ms);
    evtimer_add(ps->timer, &tv);
}

/* --- subscriptions -------------------------------------------------------- */

/* Queue res for the next flush (at most once). */
static void ps_queue(struct pubsub *ps, struct resource *res)
{
    if (res->ps_queued)
        return;
    if (ps->nqueue == ps->capqueue) {
        size_t cap = ps->capqueue ? ps->capqueue * 2 : 64;
        struct resource **q = realloc(ps->queue, cap * sizeof *q);
        if (q == NULL) {
            /* Its waiters still wake at the holder's ttl. */
            log_warn("redis pub/sub: out of memory: %s is not (un)subscribed", res->key);
            return;
        }
        ps->queue = q;
        ps->capqueue = cap;
    }
    resource_ref(res);
    res->ps_queued = 1;
    ps->queue[ps->nqueue++] = res;
    event_active(ps->flush_ev, EV_TIMEOUT, 0);
}

/* The one place a channel's state changes; nactive counts the ACTIVE ones. */
static void channel_set(struct pubsub *ps, struct resource *res, enum ps_sub_state st)
{
    if (res->ps_state == PS_SUB_ACTIVE && st != PS_SUB_ACTIVE)
        ps->nactive--;
    else if (res->ps_state != PS_SUB_ACTIVE && st == PS_SUB_ACTIVE)
        ps->nactive++;
    res->ps_state = (uint8_t)st;
}

/* res leaves the subscribed list (its channel is NONE now); queued again if still wanted. */
static void ps_untrack(struct pubsub *ps, struct resource *res)
{
    channel_set(ps, res, PS_SUB_NONE);
    TAILQ_REMOVE(&ps->subscribed, res, ps_link);
    if (res->ps_want)
        ps_queue(ps, res);
    resource_unref(res);
}

/* The connection is gone: no channel is subscribed any more. */
static void ps_lost(struct pubsub *ps)
{
    struct resource *res;
    while ((res = TAILQ_FIRST(&ps->subscribed)) != NULL)
        ps_untrack(ps, res);
    ps->probe_outstanding = 0;
    ps->login_pending = 0;
}

/* res's wish: who wants its channel (PUBSUB_WANT_* bits); queued when it changed. */
static void ps_want_set(struct server *srv, struct resource *res, uint8_t bit, int on)
{
    struct pubsub *ps = srv->pubsub;
    res->ps_want = (uint8_t)(on ? res->ps_want | bit : res->ps_want & ~bit);
    if (ps == NULL)
        return;
    int have = res->ps_state == PS_SUB_SUBSCRIBING || res->ps_state == PS_SUB_ACTIVE;
    /* LEAVING: the UNSUBSCRIBE's confirmation looks at the wish again. */
    if (res->ps_state != PS_SUB_LEAVING && have != (res->ps_want != 0))
        ps_queue(ps, res);
}

void pubsub_watch(struct server *srv, struct resource *res, int on)
{
    ps_want_set(srv, res, PUBSUB_WANT_WAITER, on);
}

void pubsub_observe(struct server *srv, struct resource *res, int on)
{
    ps_want_set(srv, res, PUBSUB_WANT_OBSERVER, on);
}

/* Whether a message on a resource's channel announces a campaign's grant (acquire.lua
 * publishes the leader key) rather than a release (release.lua: the lock key). */
static int ps_leader_notice(const redisReply *payload)
{
    static const char suffix[] = RESOURCE_LEADER_SUFFIX;
    size_t n = sizeof suffix - 1;
    return payload->type == REDIS_REPLY_STRING && payload->len >= n &&
           memcmp(payload->str + payload->len - n, suffix, n) == 0;
}

/* Send cmd (SUBSCRIBE or UNSUBSCRIBE) for the channels of list[n]; -1 when it could not. */
static int ps_send(struct pubsub *ps, const char *cmd, struct resource *const *list, size_t n);

static void ps_message_cb(redisAsyncContext *ac, void *r, void *privdata);

/* Reconcile what the queued resources want with what is subscribed. */
static void ps_flush(struct pubsub *ps)
{
    if (ps->link.state != RPOOL_READY || ps->reset_why != NULL || ps->nqueue == 0)
        return; /* kept for when the connection is ready */
    struct resource **sub = malloc(ps->nqueue * sizeof *sub);
    struct resource **unsub = malloc(ps->nqueue * sizeof *unsub);
    if (sub == NULL || unsub == NULL) {
        free(sub);
        free(unsub);
        return; /* the next change tries again */
    }
    size_t nsub = 0, nunsub = 0;
    for (size_t i = 0; i < ps->nqueue; i++) {
        struct resource *res = ps->queue[i];
        res->ps_queued = 0;
        if (res->ps_want && res->ps_state == PS_SUB_NONE) {
            resource_ref(res); /* the subscribed list's */
            TAILQ_INSERT_TAIL(&ps->subscribed, res, ps_link);
            channel_set(ps, res, PS_SUB_SUBSCRIBING);
            sub[nsub++] = res;
        } else if (!res->ps_want &&
                   (res->ps_state == PS_SUB_SUBSCRIBING || res->ps_state == PS_SUB_ACTIVE)) {
            channel_set(ps, res, PS_SUB_LEAVING);
            unsub[nunsub++] = res;
        }
    }
    /* Subscribed resources hold the list's reference: the queue's can go. */
    size_t n = ps->nqueue;
    ps->nqueue = 0;
    for (size_t i = 0; i < n; i++)
        resource_unref(ps->queue[i]);
    if (ps_send(ps, "SUBSCRIBE", sub, nsub) != 0 || ps_send(ps, "UNSUBSCRIBE", unsub, nunsub) != 0) {
        /* Everything is subscribed afresh after the reset. */
        ps->reset_why = "out of memory sending subscriptions";
        ps_arm(ps, 0);
    }
    free(sub);
    free(unsub);
}

static int ps_send(struct pubsub *ps, const char *cmd, struct resource *const *list, size_t n)
{
    const size_t slen = strlen(PUBSUB_CHANNEL_SUFFIX);
    for (size_t at = 0; at < n; at += PUBSUB_BATCH_MAX) {
        size_t m = n - at < PUBSUB_BATCH_MAX ? n - at : PUBSUB_BATCH_MAX;
        size_t bytes = 0;
        for (size_t i = 0; i < m; i++)
            bytes += list[at + i]->key_len + slen;
        const char **argv = malloc((m + 1) * sizeof *argv);
        size_t *lens = malloc((m + 1) * sizeof *lens);
        char *buf = malloc(bytes + 1);
        int ok = argv != NULL && lens != NULL && buf != NULL;
        if (ok) {
            argv[0] = cmd;
            lens[0] = strlen(cmd);
            char *p = buf;
            for (size_t i = 0; i < m; i++) {
                const struct resource *res = list[at + i];
                memcpy(p, res->key, res->key_len);
                memcpy(p + res->key_len, PUBSUB_CHANNEL_SUFFIX, slen);
                argv[i + 1] = p;
                lens[i + 1] = res->key_len + slen;
                p += lens[i + 1];
            }
            /* hiredis copies the command; for SUBSCRIBE it keeps the callback per channel. */
            ok = redisAsyncCommandArgv(ps->ac, ps_message_cb, NULL, (int)(m + 1), argv, lens) ==
                 REDIS_OK;
        }
        free(argv);
        free(lens);
        free(buf);
        if (!ok)
            return -1;
    }
    return 0;
}

static void flush_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    ps_flush(arg);
}

/* --- messages ------------------------------------------------------------- */

int pubsub_channel_resource(const char *key_prefix, const char *chan, size_t len,
                            const char **name, size_t *name_len)
{
    size_t plen = strlen(key_prefix);
    const char *tail = "}" PUBSUB_CHANNEL_SUFFIX;
    size_t tlen = strlen(tail);
    if (len < plen + 1 + tlen || memcmp(chan, key_prefix, plen) != 0 || chan[plen] != '{' ||
        memcmp(chan + len - tlen, tail, tlen) != 0)
        return -1;
    *name = chan + plen + 1;
    *name_len = len - plen - 1 - tlen;
    return 0;
}

/* The resource whose channel this is, if it is one of ours now. */
static struct resource *ps_resource(struct pubsub *ps, const char *chan, size_t len)
{
    const char *name;
    size_t nlen;
    if (pubsub_channel_resource(ps->srv->cfg->key_prefix, chan, len, &name, &nlen) != 0)
        return NULL;
    struct resource *res = resource_find(ps->srv, name, nlen);
    return res != NULL && res->ps_state != PS_SUB_NONE ? res : NULL;
}

static void ps_daemons_confirmed(struct pubsub *ps)
{
    ps->probe_outstanding = 0;
    if (ps->link.state == RPOOL_CONNECTING) {
        rpool_link_set(&ps->link, RPOOL_READY);
        ps_flush(ps); /* the channels wanted meanwhile, or again after a reconnect */
    }
    ps_arm(ps, PUBSUB_PROBE_MS);
}

/*
 * Every pub/sub reply: a confirmation of SUBSCRIBE or UNSUBSCRIBE for one
 * channel, or a message. Called with reply NULL as the context is freed
 * (then ac->data is NULL too, or the disconnect callback follows).
 */
static void ps_message_cb(redisAsyncContext *ac, void *r, void *privdata)
{
    (void)privdata;
    struct pubsub *ps = ac->data;
    const redisReply *reply = r;
    if (ps == NULL || reply == NULL)
        return;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 3 ||
        reply->element[0]->type != REDIS_REPLY_STRING ||
        reply->element[1]->type != REDIS_REPLY_STRING) {
        log_warn("redis pub/sub: unexpected reply ignored");
        return;
    }
    const char *kind = reply->element[0]->str;
    const char *chan = reply->element[1]->str;
    size_t clen = reply->element[1]->len;
    if (clen == strlen(ps->daemons) && memcmp(chan, ps->daemons, clen) == 0) {
        if (strcmp(kind, "subscribe") == 0)
            ps_daemons_confirmed(ps);
        return;
    }
    struct resource *res = ps_resource(ps, chan, clen);
    if (strcmp(kind, "message") == 0) {
        ps->notices++;
        if (res != NULL && res->ps_state == PS_SUB_ACTIVE) {
            if (!ps_leader_notice(reply->element[2]))
                lock_wake(res); /* a grant frees nothing: waiters sleep on */
            election_notice(res);
        }
    } else if (strcmp(kind, "subscribe") == 0) {
        if (res != NULL && res->ps_state == PS_SUB_SUBSCRIBING) {
            channel_set(ps, res, PS_SUB_ACTIVE);
            lock_wake(res); /* a release before now reached nobody here */
            election_notice(res);
        }
    } else if (strcmp(kind, "unsubscribe") == 0) {
        if (res != NULL && res->ps_state == PS_SUB_LEAVING)
            ps_untrack(ps, res);
    }
}

/* --- connection ----------------------------------------------------------- */

static void ps_schedule_reconnect(struct pubsub *ps)
{
    rpool_link_set(&ps->link, RPOOL_DOWN);
    ps_arm(ps, rpool_link_backoff(&ps->link, ps->srv->cfg));
}

/* Drop the context now (never from inside a hiredis callback) and reconnect later. */
static void ps_reset(struct pubsub *ps, const char *why)
{
    redisAsyncContext *ac = ps->ac;
    ps->reset_why = NULL;
    if (ac != NULL) {
        if (ps->link.state == RPOOL_CONNECTING)
            rpool_link_failure(&ps->link, "connect", why);
        else
            log_warn("redis pub/sub: resetting connection: %s", why);
        ps->ac = NULL;
        ac->data = NULL; /* its callbacks, run with NULL as it is freed, do nothing */
        redisAsyncFree(ac);
    }
    ps_lost(ps);
    ps_schedule_reconnect(ps);
}

static void ps_request_reset(struct pubsub *ps, const char *why)
{
    ps->reset_why = why;
    ps_arm(ps, 0);
}

static void ps_send_probe(struct pubsub *ps)
{
    if (redisAsyncCommand(ps->ac, ps_message_cb, NULL, "SUBSCRIBE %s", ps->daemons) !=
        REDIS_OK) {
        ps_request_reset(ps, "SUBSCRIBE refused");
        return;
    }
    ps->probe_outstanding = 1;
    ps->probe_sent_ms = util_now_ms();
}

static void ps_probe(struct pubsub *ps)
{
    int64_t timeout = ps->srv->cfg->command_timeout_ms;
    if (ps->probe_outstanding) {
        int64_t late = util_now_ms() - ps->probe_sent_ms;
        if (late >= timeout)
            ps_reset(ps, "no answer within command_timeout");
        else
            ps_arm(ps, timeout - late);
        return;
    }
    ps_send_probe(ps);
    if (ps->reset_why == NULL)
        ps_arm(ps, timeout);
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct pubsub *ps = arg;
    if (ps->reset_why != NULL) {
        ps_reset(ps, ps->reset_why);
        return;
    }
    switch (ps->link.state) {
    case RPOOL_DOWN:
        ps_connect(ps);
        break;
    case RPOOL_CONNECTING:
        ps_reset(ps, "connect timed out");
        break;
    case RPOOL_READY:
        ps_probe(ps);
        break;
    }
}

static void login_reply_cb(redisAsyncContext *ac, void *r, void *privdata)
{
    struct pubsub *ps = ac->data;
    const redisReply *reply = r;
    if (ps == NULL || reply == NULL)
        return; /* the connection is going away; its own path reconnects */
    if (reply->type == REDIS_REPLY_ERROR) {
        char step[64];
        snprintf(step, sizeof step, "%s failed", (const char *)privdata);
        rpool_link_failure(&ps->link, step, reply->str);
        ps_request_reset(ps, "login failed");
        return;
    }
    if (--ps->login_pending == 0)
        ps_send_probe(ps); /* its confirmation makes the connection ready */
}

static void connect_cb(const redisAsyncContext *ac, int status)
{
    struct pubsub *ps = ac->data;
    if (ps == NULL)
        return;
    if (status != REDIS_OK) {
        /* hiredis frees the context after this callback and will not call onDisconnect. */
        rpool_link_failure(&ps->link, "connect failed", ac->errstr);
        ps->ac = NULL;
        ps_schedule_reconnect(ps);
        return;
    }
    ps->login_pending = rpool_login(ps->ac, ps->srv->cfg, login_reply_cb);
    if (ps->login_pending == 0)
        ps_send_probe(ps);
}

static void disconnect_cb(const redisAsyncContext *ac, int status)
{
    struct pubsub *ps = ac->data;
    if (ps == NULL)
        return; /* dropped by ps_reset */
    log_warn("redis pub/sub: connection lost%s%s", status == REDIS_OK ? "" : ": ",
             status == REDIS_OK ? "" : ac->errstr);
    ps->ac = NULL;
    ps_lost(ps);
    ps_schedule_reconnect(ps);
}

static void ps_connect(struct pubsub *ps)
{
    char why[128];
    if (!ps->have_addr)
        return; /* DOWN until pubsub_set_address; that connects */
    /* Cluster: every node hears every PUBLISH (the bus carries it); try them in turn. */
    if (config_topology(ps->srv->cfg) == TOPOLOGY_CLUSTER)
        rpool_node_address(ps->srv->pool, ps->node_turn++, &ps->addr);
    ps->ac = rpool_connect(&ps->addr, ps->srv->base, ps, connect_cb, disconnect_cb, why,
                           sizeof why);
    if (ps->ac == NULL) {
        rpool_link_failure(&ps->link, "connect", why);
        ps_schedule_reconnect(ps);
        return;
    }
    rpool_link_set(&ps->link, RPOOL_CONNECTING);
    ps_arm(ps, ps->srv->cfg->connect_timeout_ms);
}

/* --- lifecycle and queries ------------------------------------------------ */

int pubsub_start(struct server *srv)
{
    const struct config *cfg = srv->cfg;
    srv->pubsub = NULL;
    if (!cfg->redis_notify)
        return 0;
    struct pubsub *ps = calloc(1, sizeof *ps);
    if (ps == NULL)
        return -1;
    ps->srv = srv;
    snprintf(ps->link.name, sizeof ps->link.name, "redis pub/sub");
    ps->link.state = RPOOL_DOWN;
    TAILQ_INIT(&ps->subscribed);
    snprintf(ps->daemons, sizeof ps->daemons, "%s" PUBSUB_DAEMONS, cfg->key_prefix);
    char err[256];
    if (config_topology(cfg) != TOPOLOGY_SINGLE) {
        /* Sentinel: pubsub_set_address gives the master; cluster: ps_connect picks a node. */
        ps->have_addr = config_topology(cfg) == TOPOLOGY_CLUSTER;
    } else if (config_parse_address(cfg->redis_address, &ps->addr, err, sizeof err) != 0) {
        log_error("redis.address: %s", err);
        free(ps);
        return -1;
    } else {
        ps->have_addr = 1;
    }
    ps->timer = evtimer_new(srv->base, timer_cb, ps);
    ps->flush_ev = event_new(srv->base, -1, 0, flush_cb, ps);
    srv->pubsub = ps;
    if (ps->timer == NULL || ps->flush_ev == NULL) {
        pubsub_stop(srv);
        return -1;
    }
    ps_connect(ps);
    return 0;
}

void pubsub_stop(struct server *srv)
{
    struct pubsub *ps = srv->pubsub;
    if (ps == NULL)
        return;
    if (ps->ac != NULL) {
        redisAsyncContext *ac = ps->ac;
        ps->ac = NULL;
        ac->data = NULL;
        redisAsyncFree(ac);
    }
    struct resource *res;
    while ((res = TAILQ_FIRST(&ps->subscribed)) != NULL) {
        channel_set(ps, res, PS_SUB_NONE);
        TAILQ_REMOVE(&ps->subscribed, res, ps_link);
        resource_unref(res);
    }
    for (size_t i = 0; i < ps->nqueue; i++) {
        ps->queue[i]->ps_queued = 0;
        resource_unref(ps->queue[i]);
    }
    free(ps->queue);
    if (ps->timer != NULL)
        event_free(ps->timer);
    if (ps->flush_ev != NULL)
        event_free(ps->flush_ev);
    free(ps);
    srv->pubsub = NULL;
}

size_t pubsub_channel(const struct server *srv, const struct resource *res, char *buf,
                      size_t len)
{
    if (srv->pubsub == NULL || len < res->key_len + sizeof PUBSUB_CHANNEL_SUFFIX) {
        if (len > 0)
            buf[0] = '\0';
        return 0;
    }
    memcpy(buf, res->key, res->key_len);
    memcpy(buf + res->key_len, PUBSUB_CHANNEL_SUFFIX, sizeof PUBSUB_CHANNEL_SUFFIX);
    return res->key_len + sizeof PUBSUB_CHANNEL_SUFFIX - 1;
}

const char *pubsub_suffix(const struct server *srv)
{
    return srv->pubsub != NULL ? PUBSUB_CHANNEL_SUFFIX : "";
}

void pubsub_set_address(struct server *srv, const struct config_address *addr)
{
    struct pubsub *ps = srv->pubsub;
    if (ps == NULL)
        return;
    int moved = !ps->have_addr || ps->addr.is_unix != addr->is_unix ||
                strcmp(ps->addr.host, addr->host) != 0 || ps->addr.port != addr->port ||
                strcmp(ps->addr.path, addr->path) != 0;
    if (!moved)
        return;
    ps->addr = *addr;
    ps->have_addr = 1;
    ps->link.backoff_ms = 0;
    if (ps->ac != NULL)
        ps_request_reset(ps, "the master moved"); /* resubscribes there, waking every head */
    else
        ps_arm(ps, 0);
}

int pubsub_connected(const struct server *srv)
{
    return srv->pubsub != NULL && srv->pubsub->link.state == RPOOL_READY;
}

uint64_t pubsub_notifications(const struct server *srv)
{
    return srv->pubsub != NULL ? srv->pubsub->notices : 0;
}

uint32_t pubsub_subscriptions(const struct server *srv)
{
    return srv->pubsub != NULL ? srv->pubsub->nactive : 0;
}
