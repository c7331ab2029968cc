/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pool_int.h — private to the pool: what pool.c (connections,
 * calls, deadlines, setup) and pool_cluster.c (routing by slot,
 * redirections, the slot map) share. The rest of the daemon sees only
 * pool.h.
 */
#ifndef RLOCKD_REDIS_POOL_INT_H
#define RLOCKD_REDIS_POOL_INT_H

#include <stdint.h>
#include <sys/queue.h>

#include <event2/event.h>
#include <hiredis/async.h>

#include "cluster.h"
#include "pool.h"
#include "scripts.h"
#include "util.h"

struct rcall {
    struct rpool *pool;
    struct rconn *conn; /* NULL once the connection dropped it */
    rpool_cb *cb;
    void *arg;
    enum script_id script;
    int plain;  /* a plain command (args is its whole argv), not a script */
    int nkeys;
    int nargs;
    char **args;
    size_t *lens;
    int64_t stamp;    /* sent: when written; waiting: when queued (deadline: + command_timeout) */
    const char *fail_err; /* why a refused call fails (answered by fail_ev) */
    int waiting; /* on conn->waiting (unsent), not conn->calls */
    int done;    /* the caller's callback has run */
    int retried; /* NOSCRIPT already answered with EVAL */
    uint32_t route;     /* as given: the slot in cluster mode */
    int redirects;      /* MOVED and ASK followed */
    int tryagains;      /* TRYAGAIN answered by a later retry */
    int ask_node;       /* ASK: the node (index + 1) to send it to, preceded by ASKING */
    int in_batch;       /* on conn->batch: joins a BATCH call at the end of the loop turn */
    /* A BATCH call: the calls it carries, answered (and freed) when it is */
    uint32_t nchildren;
    struct rcall **children;
    TAILQ_ENTRY(rcall) link;
};
TAILQ_HEAD(rcall_list, rcall);

struct rconn {
    struct rpool *pool;
    uint32_t node;          /* index in the pool's node map */
    struct rpool_link link; /* state, backoff */
    redisAsyncContext *ac;
    struct event *timer;
    int setup_pending;      /* replies still due before READY */
    int reset_requested;    /* the timer should reset the connection */
    const char *reset_why;  /* and why */
    struct rcall_list calls; /* sent and not yet answered, oldest first */
    uint32_t npending;       /* length of calls */
    struct rcall_list waiting; /* accepted, not sent yet (calls is full), oldest first */
    uint32_t nwaiting;         /* length of waiting */
    int dirty;               /* commands queued this loop turn, not written yet */
    struct rcall_list batch; /* calls to send as one BATCH call, in order (batch.c) */
    uint32_t nbatch;         /* length of batch */
    uint32_t nbatch_args;    /* arguments the BATCH call of batch will have */
    struct rcall *unflushed; /* the first of them (calls from it on are stamped at the write) */
};

struct rpool {
    struct event_base *base;
    const struct config *cfg;
    /*
     * The nodes: one (redis.address) on a single Redis; in cluster mode the
     * seeds first, then every master a slot map or a redirection names. Each
     * node has n connections, conns[node][0..n-1], made when it is first
     * seen and kept for the pool's life.
     */
    struct cluster_map map;
    int cluster;
    int have_addr;  /* 0 until Sentinel names the master (node 0; its connections wait DOWN) */
    int check_role; /* the server must say role:master (Sentinel: a demoted master refuses) */
    uint32_t n;
    struct rconn *conns[CLUSTER_MAX_NODES];
    struct event *refresh_ev;  /* cluster: asks for the slot map (soon, or periodically) */
    int refresh_inflight;      /* a CLUSTER SLOTS is out, sent at refresh_sent_ms */
    int64_t refresh_sent_ms;
    uint32_t refresh_next;     /* the node asked next: spreads the asking */
    struct rcall_list retry;   /* cluster: TRYAGAIN calls waiting for retry_ev */
    struct event *retry_ev;
    /* cluster: a node whose slots went to another while it was unreachable (a
     * failover), told once through on_failover until it is ready again */
    uint8_t failed_over[CLUSTER_MAX_NODES];
    void (*on_failover)(void *arg);
    void *failover_arg;
    char sha[SCRIPT_COUNT][41]; /* learnt from SCRIPT LOAD; empty until then */
    struct rpool_stats stats;
    int warned_policy;
    int closing; /* rpool_free is running: new calls fail at once */
    struct rcall_list failed; /* refused calls, answered by fail_ev on the next loop turn */
    struct event *fail_ev;
    struct event *flush_ev;   /* writes the commands of this loop turn, one write per connection */
    uint8_t hash_key[UTIL_HASH_KEY_BYTES]; /* routes keys (secret: chosen names cannot pile up) */
};

/* pool.c: a new call holding a copy of its arguments, and extra bytes for
 * its owner (at *extra; NULL on failure); a call answered; one written on c
 * now (-1, untouched, when hiredis refuses); the end of this turn asked for. */
struct rcall *rpool_call_new(struct rpool *p, int plain, enum script_id script, int nkeys,
                             int nargs, const char *const *args, const size_t *lens,
                             size_t extra, void **extra_at);
void rpool_call_complete(struct rcall *call, const redisReply *reply, const char *err);
int rpool_conn_write_call(struct rconn *c, struct rcall *call);
void rpool_conn_dirty(struct rconn *c);

/* batch.c: whether call may join c's batch, its joining (it is c's now), and
 * the batch sent (or refused with why, when c can no longer send). */
int rpool_batchable(const struct rconn *c, const struct rcall *call);
void rpool_batch_add(struct rconn *c, struct rcall *call);
void rpool_batch_send(struct rconn *c);
void rpool_batch_refuse(struct rconn *c, const char *why);

/* pool.c: a call taken off its connection, a call refused, a call sent
 * (or queued, or refused) where its route names, a node's connections made. */
void rpool_call_unlink(struct rcall *call);
/* Answer a call no connection holds with an error, on the next loop turn. */
void rpool_call_refuse(struct rpool *p, struct rcall *call, const char *why);
void rpool_call_dispatch(struct rpool *p, struct rcall *call, int from_redirect);
int rpool_add_conns(struct rpool *p, uint32_t node) __attribute__((warn_unused_result));

/* pool_cluster.c: the connection of a route, an error reply followed, the
 * slot map asked for, the TRYAGAIN calls sent again. */
struct rconn *rpool_conn_for(const struct rpool *p, uint32_t route, int node);
int rpool_call_redirect(struct rconn *c, struct rcall *call, const redisReply *reply);
void rpool_refresh_soon(struct rpool *p);
void rpool_refresh_cb(evutil_socket_t fd, short what, void *arg);
void rpool_retry_cb(evutil_socket_t fd, short what, void *arg);

#endif
