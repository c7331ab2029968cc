/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sentinel.c — see sentinel.h.
 *
 * The pair of connections shares one link (DOWN -> CONNECTING -> READY):
 * CONNECTING until the first answer naming the master, READY from then on.
 * One timer serves, by state, as the reconnect delay (DOWN), the connect
 * deadline (CONNECTING) and the poll (READY). Contexts are never freed
 * inside hiredis callbacks: a failure found there sets reset_why and lets
 * the zero-delay timer drop both.
 */
#include "sentinel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <hiredis/async.h>

#include "config.h"
#include "log.h"
#include "pool.h"
#include "server.h"
#include "util.h"

#define SWITCH_CHANNEL "+switch-master"

struct sentinel {
    struct server *srv;
    struct config_address nodes[CONFIG_MAX_REDIS_NODES];
    int n;
    int cur; /* the sentinel asked now */
    struct rpool_link link;
    redisAsyncContext *cmd; /* AUTH, SENTINEL get-master-addr-by-name */
    redisAsyncContext *sub; /* AUTH, SUBSCRIBE +switch-master */
    struct event *timer;
    const char *reset_why; /* the timer should drop both connections, for this reason */
    int asking;            /* a get-master-addr-by-name is unanswered */
    int64_t asked_ms;
    uint64_t switches; /* failovers followed */
    sentinel_master_fn *on_master;
    void *on_master_arg;
};

static void sn_arm(struct sentinel *sn, int64_t delay_ms)
{
    struct timeval tv = util_tv_ms(delay_ms);
    evtimer_add(sn->timer, &tv);
}

static void sn_request_reset(struct sentinel *sn, const char *why)
{
    if (sn->reset_why == NULL)
        sn->reset_why = why;
    sn_arm(sn, 0);
}

static void free_context(redisAsyncContext **acp)
{
    redisAsyncContext *ac = *acp;
    if (ac == NULL)
        return;
    *acp = NULL;
    ac->data = NULL; /* our callbacks ignore contexts we dropped */
    redisAsyncFree(ac);
}

/* Drop both connections; the next attempt goes to the next sentinel, after the backoff. */
static void sn_reset(struct sentinel *sn, const char *why)
{
    sn->reset_why = NULL;
    const struct config_address *a = &sn->nodes[sn->cur];
    char what[160];
    snprintf(what, sizeof what, "sentinel %s:%u", a->is_unix ? a->path : a->host,
             a->is_unix ? 0u : a->port);
    if (sn->link.state == RPOOL_READY)
        log_warn("%s: %s; trying the next sentinel", what, why);
    else
        rpool_link_failure(&sn->link, what, why);
    free_context(&sn->cmd);
    free_context(&sn->sub);
    sn->asking = 0;
    sn->cur = (sn->cur + 1) % sn->n;
    rpool_link_set(&sn->link, RPOOL_DOWN);
    sn_arm(sn, rpool_link_backoff(&sn->link, sn->srv->cfg));
}

/*
 * The master is at text ("IP:PORT"): move the pool and the pub/sub connection
 * there. announced: named by +switch-master (else by the poll, which finds a
 * switch only when that notice was missed: the log says which).
 */
static void sn_found(struct sentinel *sn, const char *text, int announced)
{
    struct server *srv = sn->srv;
    struct config_address addr;
    char why[192];
    if (config_parse_address(text, &addr, why, sizeof why) != 0 || addr.port == 0) {
        sn_request_reset(sn, "named a master address rlockd cannot use");
        return;
    }
    const struct config_address *old = rpool_master(srv->pool);
    char before[96] = "";
    if (old != NULL)
        snprintf(before, sizeof before, "%s:%u", old->host, old->port);
    if (!rpool_set_master(srv->pool, &addr))
        return;
    if (old == NULL) {
        log_info("redis master %s is at %s (from Sentinel)", srv->cfg->redis_master_name, text);
    } else {
        sn->switches++;
        log_warn("redis master %s moved from %s to %s (Sentinel: %s): re-verifying every held "
                 "lock",
                 srv->cfg->redis_master_name, before, text,
                 announced ? "+switch-master" : "found by the poll, the +switch-master notice missed");
    }
    sn->on_master(sn->on_master_arg, &addr, old != NULL);
}

int sentinel_parse_switch(const char *text, const char *master_name, char *addr, size_t len)
{
    char name[257], oldip[64], newip[64];
    unsigned oldport, newport;
    char extra;
    if (sscanf(text, "%256s %63s %u %63s %u %c", name, oldip, &oldport, newip, &newport,
               &extra) != 5)
        return -1;
    if (strcmp(name, master_name) != 0 || newport == 0 || newport > 65535)
        return -1;
    int n = strchr(newip, ':') != NULL ? snprintf(addr, len, "[%s]:%u", newip, newport)
                                       : snprintf(addr, len, "%s:%u", newip, newport);
    return n > 0 && (size_t)n < len ? 0 : -1;
}

enum sentinel_master sentinel_parse_master(const redisReply *reply, char *addr, size_t len)
{
    if (reply->type == REDIS_REPLY_NIL)
        return SENTINEL_MASTER_UNKNOWN;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
        reply->element[0]->type != REDIS_REPLY_STRING ||
        reply->element[1]->type != REDIS_REPLY_STRING || reply->element[0]->len == 0 ||
        reply->element[0]->len > 63 || reply->element[1]->len == 0 ||
        reply->element[1]->len > 5)
        return SENTINEL_MASTER_BAD;
    const char *ip = reply->element[0]->str;
    int n = snprintf(addr, len, strchr(ip, ':') != NULL ? "[%s]:%s" : "%s:%s", ip,
                     reply->element[1]->str);
    return n > 0 && (size_t)n < len ? SENTINEL_MASTER_OK : SENTINEL_MASTER_BAD;
}

/* --- the command connection ------------------------------------------------ */

static void login_reply_cb(redisAsyncContext *ac, void *r, void *privdata)
{
    (void)privdata;
    struct sentinel *sn = ac->data;
    const redisReply *reply = r;
    if (sn == NULL || reply == NULL)
        return;
    if (reply->type == REDIS_REPLY_ERROR)
        sn_request_reset(sn, "AUTH failed");
}

static void sn_login(struct sentinel *sn, redisAsyncContext *ac)
{
    const struct config *cfg = sn->srv->cfg;
    if (cfg->sentinel_password[0] == '\0')
        return;
    /* Pipelined: a refused AUTH fails the commands behind it too, and resets. */
    if (cfg->sentinel_user[0] != '\0')
        redisAsyncCommand(ac, login_reply_cb, NULL, "AUTH %s %s", cfg->sentinel_user,
                          cfg->sentinel_password);
    else
        redisAsyncCommand(ac, login_reply_cb, NULL, "AUTH %s", cfg->sentinel_password);
}

static void ask_reply_cb(redisAsyncContext *ac, void *r, void *privdata)
{
    (void)privdata;
    struct sentinel *sn = ac->data;
    const redisReply *reply = r;
    if (sn == NULL || reply == NULL)
        return;
    sn->asking = 0;
    char text[80];
    switch (sentinel_parse_master(reply, text, sizeof text)) {
    case SENTINEL_MASTER_UNKNOWN:
        sn_request_reset(sn, "does not know the master (check redis.master_name)");
        return;
    case SENTINEL_MASTER_BAD:
        sn_request_reset(sn, reply->type == REDIS_REPLY_ERROR
                                 ? reply->str
                                 : "unexpected reply to get-master-addr-by-name");
        return;
    case SENTINEL_MASTER_OK:
        break;
    }
    if (sn->link.state == RPOOL_CONNECTING) {
        rpool_link_set(&sn->link, RPOOL_READY);
        sn_arm(sn, SENTINEL_POLL_MS);
    }
    sn_found(sn, text, 0);
}

static void sn_ask(struct sentinel *sn)
{
    if (redisAsyncCommand(sn->cmd, ask_reply_cb, NULL, "SENTINEL get-master-addr-by-name %s",
                          sn->srv->cfg->redis_master_name) != REDIS_OK) {
        sn_request_reset(sn, "cannot send a command");
        return;
    }
    sn->asking = 1;
    sn->asked_ms = util_now_ms();
}

/* --- the subscribed connection --------------------------------------------- */

static void switch_message_cb(redisAsyncContext *ac, void *r, void *privdata)
{
    (void)privdata;
    struct sentinel *sn = ac->data;
    const redisReply *reply = r;
    if (sn == NULL || reply == NULL)
        return;
    if (reply->type == REDIS_REPLY_ERROR) {
        sn_request_reset(sn, reply->str);
        return;
    }
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 3 ||
        reply->element[0]->type != REDIS_REPLY_STRING ||
        strcmp(reply->element[0]->str, "message") != 0 ||
        reply->element[2]->type != REDIS_REPLY_STRING)
        return; /* the subscription's confirmation */
    char addr[96];
    if (sentinel_parse_switch(reply->element[2]->str, sn->srv->cfg->redis_master_name, addr,
                              sizeof addr) == 0)
        sn_found(sn, addr, 1);
}

/* --- connections ------------------------------------------------------------ */

static void connect_cb(const redisAsyncContext *ac, int status)
{
    struct sentinel *sn = ac->data;
    if (sn == NULL)
        return;
    if (status != REDIS_OK) {
        /* hiredis frees the context after this callback and will not call onDisconnect. */
        if (ac == sn->cmd)
            sn->cmd = NULL;
        else
            sn->sub = NULL;
        log_debug("redis sentinel: connect failed: %s", ac->errstr);
        sn_request_reset(sn, "connect failed");
        return;
    }
    redisAsyncContext *mine = ac == sn->cmd ? sn->cmd : sn->sub;
    sn_login(sn, mine);
    if (mine == sn->cmd)
        sn_ask(sn);
    else if (redisAsyncCommand(mine, switch_message_cb, NULL, "SUBSCRIBE " SWITCH_CHANNEL) !=
             REDIS_OK)
        sn_request_reset(sn, "cannot subscribe to " SWITCH_CHANNEL);
}

static void disconnect_cb(const redisAsyncContext *ac, int status)
{
    (void)status;
    struct sentinel *sn = ac->data;
    if (sn == NULL)
        return; /* dropped by sn_reset */
    if (ac == sn->cmd)
        sn->cmd = NULL;
    else
        sn->sub = NULL;
    sn_request_reset(sn, "connection lost");
}

static void sn_connect(struct sentinel *sn)
{
    char why[128];
    const struct config_address *a = &sn->nodes[sn->cur];
    sn->cmd = rpool_connect(a, sn->srv->base, sn, connect_cb, disconnect_cb, why, sizeof why);
    if (sn->cmd != NULL)
        sn->sub = rpool_connect(a, sn->srv->base, sn, connect_cb, disconnect_cb, why, sizeof why);
    rpool_link_set(&sn->link, RPOOL_CONNECTING);
    if (sn->cmd == NULL || sn->sub == NULL) {
        sn_reset(sn, why);
        return;
    }
    sn_arm(sn, sn->srv->cfg->connect_timeout_ms);
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct sentinel *sn = arg;
    if (sn->reset_why != NULL) {
        sn_reset(sn, sn->reset_why);
        return;
    }
    switch (sn->link.state) {
    case RPOOL_DOWN:
        sn_connect(sn);
        break;
    case RPOOL_CONNECTING:
        sn_reset(sn, "no answer naming the master in time");
        break;
    case RPOOL_READY:
        if (sn->asking && util_now_ms() - sn->asked_ms >= sn->srv->cfg->command_timeout_ms) {
            sn_reset(sn, "not answering");
            return;
        }
        if (!sn->asking)
            sn_ask(sn);
        sn_arm(sn, SENTINEL_POLL_MS);
        break;
    }
}

/* --- lifecycle -------------------------------------------------------------- */

int sentinel_start(struct server *srv, sentinel_master_fn *on_master, void *arg)
{
    const struct config *cfg = srv->cfg;
    srv->sentinel = NULL;
    if (config_topology(cfg) != TOPOLOGY_SENTINEL)
        return 0;
    struct sentinel *sn = calloc(1, sizeof *sn);
    if (sn == NULL)
        return -1;
    sn->srv = srv;
    sn->on_master = on_master;
    sn->on_master_arg = arg;
    char err[320];
    sn->n = config_parse_listen(cfg->redis_sentinels, sn->nodes, CONFIG_MAX_REDIS_NODES, err,
                                sizeof err);
    if (sn->n <= 0) {
        log_error("redis.sentinels: %s", sn->n < 0 ? err : "empty");
        free(sn);
        return -1;
    }
    snprintf(sn->link.name, sizeof sn->link.name, "redis sentinel");
    sn->link.state = RPOOL_DOWN;
    sn->cur = (int)util_rand((uint32_t)sn->n); /* many daemons spread over the sentinels */
    sn->timer = evtimer_new(srv->base, timer_cb, sn);
    srv->sentinel = sn;
    if (sn->timer == NULL) {
        sentinel_stop(srv);
        return -1;
    }
    sn_connect(sn);
    return 0;
}

void sentinel_stop(struct server *srv)
{
    struct sentinel *sn = srv->sentinel;
    if (sn == NULL)
        return;
    free_context(&sn->cmd);
    free_context(&sn->sub);
    if (sn->timer != NULL)
        event_free(sn->timer);
    free(sn);
    srv->sentinel = NULL;
}

int sentinel_connected(const struct server *srv)
{
    return srv->sentinel != NULL && srv->sentinel->link.state == RPOOL_READY;
}

uint64_t sentinel_switches(const struct server *srv)
{
    return srv->sentinel != NULL ? srv->sentinel->switches : 0;
}
