/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pool_cluster.c — the pool on a Redis Cluster: which node and connection
 * a route runs on, MOVED / ASK / TRYAGAIN followed, the slot map read again.
 *
 * Apart from the connections, calls and deadlines (pool.c), which
 * hand a call here to be routed, or redirected after an error reply, and
 * ask for the map again when a node is lost; the pure parts (key slots,
 * parsing CLUSTER SLOTS and redirections) are cluster.c's. On a single
 * Redis, or behind Sentinel, there is one node and a route only picks one
 * of its connections.
 *
 * Redis Cluster: the pool is a set of nodes (cluster.h's map), each with its
 * own n connections. A call redirected by MOVED or ASK leaves its
 * connection's list and is dispatched again, from inside the reply callback,
 * to the named node (it may wait there while that node's connections are set
 * up); a call answered TRYAGAIN waits on the pool's retry list, owned by the
 * pool until retry_ev sends it again. The slot map is asked of one node at a
 * time; its answer replaces the owners, never the node indexes.
 */
#include "pool.h"

#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include <event2/event.h>
#include <hiredis/async.h>

#include "cluster.h"
#include "config.h"
#include "log.h"
#include "pool_int.h"
#include "util.h"

/*
 * Redis Cluster: MOVED and ASK a call follows before it fails as unavailable
 * (a map that changes under it that often is not settling); TRYAGAIN (a
 * multi-key call on a slot being migrated, its keys split between the two
 * nodes) is retried after RPOOL_TRYAGAIN_MS, up to RPOOL_TRYAGAIN_MAX times;
 * the slot map is read again every RPOOL_REFRESH_MS besides after MOVED and
 * lost connections.
 */
#define RPOOL_REDIRECT_MAX 5
#define RPOOL_TRYAGAIN_MS 20
#define RPOOL_TRYAGAIN_MAX 50
#define RPOOL_REFRESH_MS 10000
/* Slot maps asked for at most this often: a reshard answers many calls with MOVED. */
#define RPOOL_REFRESH_MIN_MS 100
/* ... and this often while a master that owns slots has no ready connection: a
 * failed master's calls are refused, not redirected, so only the map tells
 * where its replica took over. */
#define RPOOL_REFRESH_DEGRADED_MS 1000

/* 1 when node owns slots and none of its connections is ready. */
static int node_down(const struct rpool *p, uint32_t node)
{
    if (p->map.nslots[node] == 0)
        return 0;
    for (uint32_t i = 0; p->conns[node] != NULL && i < p->n; i++)
        if (p->conns[node][i].link.state == RPOOL_READY)
            return 0;
    return 1;
}

/* The slots of node went elsewhere while it was down: tell the owner of the pool, once. */
static void node_failed_over(struct rpool *p, uint32_t node)
{
    if (p->failed_over[node])
        return;
    p->failed_over[node] = 1;
    p->stats.failovers++;
    log_warn("redis cluster: the slots of unreachable master %s:%u have a new owner (a "
             "failover): re-verifying every held lock",
             p->map.nodes[node].host, p->map.nodes[node].port);
    if (p->on_failover != NULL)
        p->on_failover(p->failover_arg);
}

void rpool_on_failover(struct rpool *p, void (*fn)(void *arg), void *arg)
{
    p->on_failover = fn;
    p->failover_arg = arg;
}

/*
 * The connection a route runs on: on a single Redis route % n; in cluster
 * mode the route's low 14 bits are the slot, whose owner's connection
 * (route / 16384) % n it is. NULL when no owner of the slot is known (or its
 * connections could not be made).
 */
struct rconn *rpool_conn_for(const struct rpool *p, uint32_t route, int node)
{
    if (!p->cluster)
        return &p->conns[0][route % p->n];
    if (node < 0)
        node = cluster_map_owner(&p->map, (uint16_t)(route % CLUSTER_SLOTS));
    if (node < 0 || p->conns[node] == NULL)
        return NULL;
    return &p->conns[node][(route / CLUSTER_SLOTS) % p->n];
}

/*
 * Cluster: reply is an error; follow it when it is MOVED, ASK or TRYAGAIN
 * and the call has redirections left, else refuse the call (nothing ran:
 * it fails as unavailable). 1 when the call was taken (sent again, queued,
 * or refused: its callback runs later), 0 when the reply stands.
 */
int rpool_call_redirect(struct rconn *c, struct rcall *call, const redisReply *reply)
{
    struct rpool *p = c->pool;
    if (strncmp(reply->str, "TRYAGAIN", 8) == 0) {
        if (call->tryagains >= RPOOL_TRYAGAIN_MAX) {
            /* Still migrating (an importing node answers a script TRYAGAIN until it
             * has all its keys: always, for a free lock). Nothing ran: fail the
             * call as unavailable, not with a reply its caller would read as the
             * script's own error. */
            rpool_call_unlink(call);
            rpool_call_refuse(p, call,
                              "redis cluster: the key's slot is still migrating (TRYAGAIN)");
            return 1;
        }
        call->tryagains++;
        p->stats.tryagain++;
        rpool_call_unlink(call);
        TAILQ_INSERT_TAIL(&p->retry, call, link);
        if (!evtimer_pending(p->retry_ev, NULL)) {
            struct timeval tv = util_tv_ms(RPOOL_TRYAGAIN_MS);
            evtimer_add(p->retry_ev, &tv);
        }
        return 1;
    }
    uint16_t slot;
    struct config_address to;
    int kind = cluster_parse_redirect(reply->str, reply->len, p->map.nodes[c->node].host, &slot,
                                      &to);
    if (kind <= 0)
        return 0;
    if (call->redirects >= RPOOL_REDIRECT_MAX) {
        rpool_call_unlink(call);
        rpool_call_refuse(p, call,
                          "redis cluster: too many redirections (the slot map is not settling)");
        return 1;
    }
    int node = cluster_map_node(&p->map, &to);
    if (node < 0) {
        log_warn("redis cluster: %s names a node past the %d this pool keeps", reply->str,
                 CLUSTER_MAX_NODES);
        return 0;
    }
    if (p->conns[node] == NULL && rpool_add_conns(p, (uint32_t)node) != 0)
        return 0;
    call->redirects++;
    if (kind == CLUSTER_MOVED) {
        /* The slot has a new owner for good: route there from now on, and read
         * the whole map again (a migration rarely moves only one slot). */
        p->stats.moved++;
        int was = cluster_map_owner(&p->map, slot);
        if (was >= 0 && was != node && node_down(p, (uint32_t)was))
            node_failed_over(p, (uint32_t)was);
        cluster_map_set(&p->map, slot, (uint32_t)node);
        call->ask_node = 0;
        rpool_refresh_soon(p);
    } else {
        /* Migrating: the target serves this key once, after ASKING; the map stays. */
        p->stats.ask++;
        call->ask_node = node + 1;
    }
    rpool_call_unlink(call);
    rpool_call_dispatch(p, call, 1);
    return 1;
}

/* TRYAGAIN calls: send them again now (the migration has likely moved on). */
void rpool_retry_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct rpool *p = arg;
    struct rcall_list batch = TAILQ_HEAD_INITIALIZER(batch);
    TAILQ_CONCAT(&batch, &p->retry, link);
    struct rcall *call;
    while ((call = TAILQ_FIRST(&batch)) != NULL) {
        TAILQ_REMOVE(&batch, call, link);
        rpool_call_dispatch(p, call, 0);
    }
}

/* --- cluster slot map ------------------------------------------------------ */

static void slots_reply_cb(redisAsyncContext *ac, void *r, void *privdata)
{
    struct rpool *p = privdata;
    struct rconn *c = ac->data;
    redisReply *reply = r;
    p->refresh_inflight = 0;
    if (p->closing || c == NULL || reply == NULL)
        return; /* the connection went away: its loss asks again */
    if (reply->type == REDIS_REPLY_ERROR) {
        log_warn("redis cluster: CLUSTER SLOTS on %s:%u: %s", p->map.nodes[c->node].host,
                 p->map.nodes[c->node].port, reply->str);
        return;
    }
    char err[128];
    size_t max = reply->type == REDIS_REPLY_ARRAY && reply->elements > 0 ? reply->elements : 1;
    if (max > CLUSTER_MAX_RANGES)
        max = CLUSTER_MAX_RANGES; /* the parse refuses a longer reply */
    struct cluster_range *ranges = calloc(max, sizeof *ranges);
    if (ranges == NULL)
        return;
    int n = cluster_parse_slots(reply, p->map.nodes[c->node].host, ranges, max, err, sizeof err);
    if (n < 0) {
        log_warn("redis cluster: %s:%u: %s", p->map.nodes[c->node].host,
                 p->map.nodes[c->node].port, err);
        free(ranges);
        return;
    }
    uint32_t before = p->map.nnodes;
    /* Which masters are down now, and what they owned: a slot of theirs that the new map
     * gives to another node was failed over. */
    uint8_t down[CLUSTER_MAX_NODES];
    for (uint32_t i = 0; i < p->map.nnodes; i++)
        down[i] = (uint8_t)node_down(p, i);
    uint8_t *was = malloc(sizeof p->map.owner);
    if (was != NULL)
        memcpy(was, p->map.owner, sizeof p->map.owner);
    if (cluster_map_apply(&p->map, ranges, (size_t)n) < 0)
        log_warn("redis cluster: the slot map names more than %d masters: slots of the others "
                 "are not served", CLUSTER_MAX_NODES);
    free(ranges);
    for (uint32_t slot = 0; was != NULL && slot < CLUSTER_SLOTS; slot++)
        if (was[slot] != 0 && was[slot] != p->map.owner[slot] && p->map.owner[slot] != 0 &&
            down[was[slot] - 1])
            node_failed_over(p, was[slot] - 1u);
    free(was);
    if (p->stats.slot_maps++ == 0 || p->map.nnodes != before)
        log_info("redis cluster: slot map of %d range%s over %u node%s", n, n == 1 ? "" : "s",
                 p->map.nnodes, p->map.nnodes == 1 ? "" : "s");
    for (uint32_t i = before; i < p->map.nnodes; i++)
        if (rpool_add_conns(p, i) != 0)
            log_error("redis cluster: out of memory adding node %s:%u", p->map.nodes[i].host,
                      p->map.nodes[i].port);
}

/* 1 when some master that owns slots has no ready connection. */
static int pool_degraded(const struct rpool *p)
{
    for (uint32_t node = 0; node < p->map.nnodes; node++)
        if (node_down(p, node))
            return 1;
    return 0;
}

/* Ask one ready node (each in turn) for the slot map; then every RPOOL_REFRESH_MS
 * (RPOOL_REFRESH_DEGRADED_MS while a master is unreachable). */
void rpool_refresh_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct rpool *p = arg;
    int64_t now = util_now_ms();
    struct timeval tv =
        util_tv_ms(pool_degraded(p) ? RPOOL_REFRESH_DEGRADED_MS : RPOOL_REFRESH_MS);
    /* An answer overdue is one that will come back NULL when its connection is reset. */
    if (p->refresh_inflight && now - p->refresh_sent_ms < p->cfg->command_timeout_ms) {
        evtimer_add(p->refresh_ev, &tv);
        return;
    }
    for (uint32_t k = 0; k < p->map.nnodes; k++) {
        uint32_t node = (p->refresh_next + k) % p->map.nnodes;
        struct rconn *c = p->conns[node];
        if (c == NULL || c->link.state != RPOOL_READY || c->reset_requested || c->ac == NULL)
            continue;
        if (redisAsyncCommand(c->ac, slots_reply_cb, p, "CLUSTER SLOTS") != REDIS_OK)
            continue;
        p->refresh_next = node + 1;
        p->refresh_inflight = 1;
        p->refresh_sent_ms = now;
        evtimer_add(p->refresh_ev, &tv);
        return;
    }
    /* No node ready: look again soon. */
    tv = util_tv_ms(p->cfg->reconnect_min_ms > 0 ? p->cfg->reconnect_min_ms : 100);
    evtimer_add(p->refresh_ev, &tv);
}

void rpool_refresh_soon(struct rpool *p)
{
    if (!p->cluster || p->closing)
        return;
    int64_t wait = p->refresh_sent_ms + RPOOL_REFRESH_MIN_MS - util_now_ms();
    struct timeval tv = util_tv_ms(wait > 0 && p->stats.slot_maps > 0 ? wait : 0);
    evtimer_add(p->refresh_ev, &tv);
}

/*
 * Cluster: the slot in the low 14 bits, the connection of its node above,
 * chosen by the slot too, so that every call on a slot (a batch routed by
 * any of its keys) keeps to one connection, in order.
 */
uint32_t rpool_route(const struct rpool *p, const char *key, size_t len)
{
    if (!p->cluster)
        return (uint32_t)(util_hash(p->hash_key, key, len) % p->n);
    uint32_t slot = cluster_key_slot(key, len);
    return (slot % p->n) * CLUSTER_SLOTS + slot;
}

uint32_t rpool_route_slot(const struct rpool *p, uint32_t route)
{
    return p->cluster ? route % CLUSTER_SLOTS : 0;
}

int rpool_route_ready(const struct rpool *p, uint32_t route)
{
    const struct rconn *c = rpool_conn_for(p, route, -1);
    return c != NULL && c->link.state == RPOOL_READY && !c->reset_requested;
}

uint32_t rpool_node_count(const struct rpool *p)
{
    return p->map.nnodes;
}

void rpool_node_address(const struct rpool *p, uint32_t i, struct config_address *out)
{
    *out = p->map.nodes[i % p->map.nnodes];
}
