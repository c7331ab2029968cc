/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pool.h — a fixed set of hiredis async connections on the daemon's
 * event loop, running the embedded Lua scripts.
 *
 * Each connection goes DOWN -> CONNECTING -> READY, and back to DOWN on any
 * failure, where a backoff timer leads to CONNECTING again (the link states
 * below). On connect it sends AUTH and SELECT when configured and SCRIPT
 * LOADs every script; it is READY once all of those succeeded.
 *
 * Contract of rpool_eval():
 *  - the callback runs exactly once, never from inside rpool_eval itself
 *    (except while rpool_free runs, when new calls fail at once);
 *  - it runs with a reply (any type, including Redis errors other than
 *    NOSCRIPT, which is answered by one EVAL retry) or with reply == NULL and
 *    a static error text: connection not ready, deadline passed, connection
 *    lost;
 *  - the reply is owned by hiredis and valid only during the callback;
 *  - a connection sends at most RPOOL_INFLIGHT_MAX calls at a time; later
 *    ones wait unsent, and fail ("redis busy") if no room opens within
 *    command_timeout;
 *  - a sent call whose deadline (command_timeout from sending) passes
 *    completes at once with an error, and its connection is reset (a
 *    connection that misses a deadline is presumed stuck); its real outcome
 *    is unknown, so a caller that may have changed state must reconcile by
 *    token. Callers treat every error as such an unknown outcome.
 * Calls with the same route run on the same connection, in order.
 *
 * Redis Cluster (redis.cluster_nodes): the pool starts from the seeds, reads
 * the slot map (CLUSTER SLOTS) and keeps pool_size connections to every
 * master it names. A route carries its key's slot, and a call runs on a
 * connection of the slot's owner. MOVED updates that slot's owner, asks for
 * the whole map again and re-sends the call there; ASK sends ASKING and the
 * call to the named node, map unchanged; TRYAGAIN re-sends it a little
 * later (later calls of its route may overtake it then: every script
 * checks the token, so none depends on another's order). A call follows a
 * bounded number of these and then fails (reply NULL, as unavailable: it
 * never ran). Calls of one script must hold keys of one slot
 * (rpool_route_slot tells it): Redis refuses others with CROSSSLOT.
 */
#ifndef RLOCKD_REDIS_POOL_H
#define RLOCKD_REDIS_POOL_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "scripts.h"
#include "util.h"

struct event_base;
struct config;
struct config_address;
struct rpool;

typedef void rpool_cb(const redisReply *reply, const char *err, void *arg);

struct rpool_stats {
    uint64_t script_reloads; /* NOSCRIPT answered by EVAL */
    uint64_t errors;         /* calls completed with an error */
    uint64_t connects;       /* connections that became READY */
    uint64_t timeouts;       /* calls that missed command_timeout */
    uint64_t moved;          /* cluster: MOVED redirections followed */
    uint64_t ask;            /* cluster: ASK redirections followed */
    uint64_t tryagain;       /* cluster: TRYAGAIN answered by a later retry */
    uint64_t slot_maps;      /* cluster: slot maps read (CLUSTER SLOTS) */
    uint64_t failovers;      /* cluster: masters whose slots moved while unreachable */
    uint64_t batches;        /* BATCH calls sent (each carrying 2 to batch_max calls) */
    uint64_t batched;        /* calls that went to Redis inside a BATCH call */
};

/*
 * Create the pool and start connecting. cfg must outlive the pool (it is the
 * server's current config). NULL on failure (bad address, out of memory).
 */
struct rpool *rpool_new(struct event_base *base, const struct config *cfg,
                        const uint8_t hash_key[UTIL_HASH_KEY_BYTES]);
/* Use cfg from now on (after a reload); it must outlive the pool like the first. */
void rpool_set_config(struct rpool *p, const struct config *cfg);
/* Close every connection (pending callbacks run with an error) and free. Accepts NULL. */
void rpool_free(struct rpool *p);

/*
 * The oldest Redis rlockd runs on: its scripts call TIME after a write,
 * which needs script effects replication (the default from 5.0 on), and
 * acquire.lua uses SET ... GET (6.2).
 */
#define RPOOL_MIN_REDIS_MAJOR 6
#define RPOOL_MIN_REDIS_MINOR 2
/* 0 when INFO server's text names a Redis version rlockd can use; else -1 and why. */
int rpool_version_check(const char *info, char *why, size_t len);
/* 1 when INFO replication text says role:master (a line of its own), else 0. Pure. */
int rpool_info_is_master(const char *info);

/* Route for a key: calls with equal routes share a connection. */
uint32_t rpool_route(const struct rpool *p, const char *key, size_t len);
/* The hash slot a route's keys live in: keys of one script call must share it.
 * Always 0 on a single Redis, where any keys may go together. */
uint32_t rpool_route_slot(const struct rpool *p, uint32_t route);
/* Connections (cluster: to the masters that own slots, or to the seeds before
 * a slot map is read), and how many of them are ready. */
uint32_t rpool_size(const struct rpool *p);
uint32_t rpool_ready_count(const struct rpool *p);
/* 1 when the connection route runs on (cluster: of the slot's owner) is ready. */
int rpool_route_ready(const struct rpool *p, uint32_t route);
/* Redis nodes known: 1 on a single Redis; cluster: seeds and masters learnt. */
uint32_t rpool_node_count(const struct rpool *p);
/* The address of node i % rpool_node_count (a connection elsewhere picks one in turn). */
void rpool_node_address(const struct rpool *p, uint32_t i, struct config_address *out);
const struct rpool_stats *rpool_stats(const struct rpool *p);

/*
 * What the pool's connections and the pub/sub connection (pubsub.c) share.
 *
 * A link is the life of one connection: DOWN -> CONNECTING -> READY, back
 * to DOWN on any failure. rpool_link_set is the one place its state
 * changes (logged under its name; READY forgets the failures and the
 * backoff); rpool_link_failure logs a failed attempt, loudly only the first
 * of an outage; rpool_link_backoff gives the delay before the next attempt,
 * doubling within [reconnect_min, reconnect_max], with jitter.
 *
 * rpool_connect: start an async connection to addr on base, with data as its
 * ac->data and the two callbacks set; NULL, with the reason in why, when
 * hiredis refuses at once. rpool_login: send AUTH and SELECT as cfg says,
 * each answered to cb with privdata "AUTH" or "SELECT"; returns how many
 * were sent.
 */
enum rpool_link_state { RPOOL_DOWN, RPOOL_CONNECTING, RPOOL_READY };
struct rpool_link {
    char name[24]; /* in log lines: "redis[0]", "redis pub/sub" */
    enum rpool_link_state state;
    uint32_t backoff_ms;
    uint32_t failures; /* connect attempts failed since the last READY */
};
void rpool_link_set(struct rpool_link *l, enum rpool_link_state s);
void rpool_link_failure(struct rpool_link *l, const char *what, const char *why);
uint32_t rpool_link_backoff(struct rpool_link *l, const struct config *cfg);

redisAsyncContext *rpool_connect(const struct config_address *addr, struct event_base *base,
                                 void *data, redisConnectCallback *on_connect,
                                 redisDisconnectCallback *on_disconnect, char *why,
                                 size_t whylen);
int rpool_login(redisAsyncContext *ac, const struct config *cfg, redisCallbackFn *cb);

/*
 * Run script with nkeys keys followed by the other arguments in args/lens
 * (nargs in total). Arguments are copied. See the contract above.
 */
void rpool_eval(struct rpool *p, uint32_t route, enum script_id script, int nkeys, int nargs,
                const char *const *args, const size_t *lens, rpool_cb *cb, void *arg);
/* The same contract for a plain command: argv[0..argc-1] is the whole command (WAIT). */
void rpool_command(struct rpool *p, uint32_t route, int argc, const char *const *argv,
                   const size_t *lens, rpool_cb *cb, void *arg);
/*
 * A call's deadline after it is written: command_timeout, plus
 * replica_ack_timeout when grants WAIT for replicas (a WAIT holds its
 * connection, and the calls behind it, that long).
 */
uint32_t rpool_command_timeout(const struct config *cfg);

/*
 * Sentinel: the master is at addr from now on. Changed: every connection is
 * reset (its calls in flight end as "connection lost") and reconnects there
 * at once, checking that the server says role:master, and loads the scripts
 * afresh; returns 1. Unchanged: 0, nothing done. Until the first call the
 * connections of a Sentinel pool wait DOWN.
 */
int rpool_set_master(struct rpool *p, const struct config_address *addr);
/*
 * Cluster: fn(arg) runs when the slots of a master that had no ready
 * connection go to another node — a failover, after which keys granted
 * on the old master may be missing — once per such master until it is
 * ready again. It runs inside a reply callback; fn may make calls.
 */
void rpool_on_failover(struct rpool *p, void (*fn)(void *arg), void *arg);

/* Where the connections go; NULL while Sentinel has named no master yet. */
const struct config_address *rpool_master(const struct rpool *p);

#endif
