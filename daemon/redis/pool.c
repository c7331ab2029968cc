/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pool.c — hiredis async connections with our own timers.
 *
 * hiredis 0.14.1 has no async timeouts, so every connection carries one
 * timer that serves, by state, as the connect deadline (CONNECTING), the
 * deadline of its oldest call (READY) or the reconnect delay (DOWN).
 *
 * Ownership: a struct rcall lives from rpool_eval until hiredis hands its
 * privdata back (with a reply, or NULL when the context is freed) — hiredis
 * always does, exactly once per command sent. The caller's callback runs
 * earlier if the deadline passes; `done` makes sure it runs only once.
 *
 * We never free a context from inside a hiredis callback: a connection that
 * must be dropped from there is reset through the zero-delay timer.
 *
 * This file holds the connections of every node and the calls on them:
 * setup (login, version and role checks, SCRIPT LOAD), sending, queueing,
 * deadlines, the NOSCRIPT retry, reconnecting, and Sentinel's move to a new
 * master; also the link, connect and login helpers pubsub.c and sentinel.c
 * share. The Redis Cluster side (which node a route runs on, MOVED / ASK /
 * TRYAGAIN, the slot map) is pool_cluster.c's; the structs and the few
 * functions the two files share are declared in pool_int.h.
 */
#include "pool.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/queue.h>

#include <event2/event.h>
#include <hiredis/async.h>

#include "cluster.h"
#include "config.h"
#include "evattach.h"
#include "replyobj.h"
#include "log.h"
#include "pool_int.h"
#include "util.h"

/*
 * Calls one connection has sent and not yet had answered: enough to keep
 * Redis busy across a round trip. Later calls wait unsent in the
 * connection's own queue, so that a burst neither grows hiredis' buffers
 * without bound nor lets the tail of it miss a command deadline that started
 * counting before Redis could see the command (and then reset a healthy
 * connection, leaving every call on it with an unknown outcome).
 */
#define RPOOL_INFLIGHT_MAX 1024
/* Calls one connection holds in all (sent and waiting); beyond that new
 * calls are refused (UNAVAILABLE). */
#define RPOOL_MAX_PENDING 65536

static void conn_connect(struct rconn *c);

/* Every connection of every node. */
#define POOL_FOR_EACH_CONN(p, c)                                                              \
    for (uint32_t node_ = 0; node_ < (p)->map.nnodes; node_++)                                \
        if ((p)->conns[node_] != NULL)                                                        \
            for (struct rconn *c = (p)->conns[node_]; c < (p)->conns[node_] + (p)->n; c++)

/*
 * Read what the socket holds and the loop has not read yet: 1 if there was
 * anything. A loop busy past a deadline (a session ending with a hundred
 * thousand locks) may run this timer before the read event that is ready in
 * the same pass; the answers are then on the socket, not late, and calling
 * the connection stuck would turn every call on it into an unknown outcome.
 */
static int conn_read_pending(struct rconn *c)
{
    int n = 0;
    if (c->ac == NULL || ioctl(c->ac->c.fd, FIONREAD, &n) != 0 || n <= 0)
        return 0;
    redisAsyncHandleRead(c->ac);
    return 1;
}

static void conn_timer_cb(evutil_socket_t fd, short what, void *arg);

static const char *link_state_name(enum rpool_link_state s)
{
    static const char *const names[] = {"down", "connecting", "ready"};
    return names[s];
}

void rpool_link_set(struct rpool_link *l, enum rpool_link_state s)
{
    if (l->state == s)
        return;
    log_debug("%s: %s -> %s", l->name, link_state_name(l->state), link_state_name(s));
    if (s == RPOOL_READY) {
        l->backoff_ms = 0;
        if (l->failures > 0)
            log_info("%s: ready after %u failed attempt%s", l->name, l->failures,
                     l->failures == 1 ? "" : "s");
        else
            log_info("%s: ready", l->name);
        l->failures = 0;
    }
    l->state = s;
}

/* While Redis stays down, say so once, not at every retry. */
void rpool_link_failure(struct rpool_link *l, const char *what, const char *why)
{
    if (l->failures++ == 0)
        log_warn("%s: %s: %s (retrying with backoff)", l->name, what, why);
    else
        log_debug("%s: %s: %s (attempt %u)", l->name, what, why, l->failures);
}

uint32_t rpool_link_backoff(struct rpool_link *l, const struct config *cfg)
{
    uint32_t b = l->backoff_ms == 0 ? cfg->reconnect_min_ms : l->backoff_ms * 2;
    if (b > cfg->reconnect_max_ms)
        b = cfg->reconnect_max_ms;
    l->backoff_ms = b;
    /* Full jitter over the upper half keeps many daemons from reconnecting in step. */
    return b / 2 + util_rand(b / 2 + 1);
}

/* The one function that changes a connection's state. */
static void conn_set_state(struct rconn *c, enum rpool_link_state s)
{
    if (s == RPOOL_READY && c->link.state != RPOOL_READY) {
        c->pool->stats.connects++;
        c->pool->failed_over[c->node] = 0;
    }
    rpool_link_set(&c->link, s);
}

static void conn_arm(struct rconn *c, int64_t delay_ms)
{
    struct timeval tv = util_tv_ms(delay_ms);
    evtimer_add(c->timer, &tv);
}

/* --- calls ---------------------------------------------------------------- */

static void call_complete(struct rcall *call, const redisReply *reply, const char *err)
{
    if (call->done)
        return;
    call->done = 1;
    if (reply == NULL && call->children == NULL) /* a BATCH call's are counted per call */
        call->pool->stats.errors++;
    call->cb(reply, err, call->arg);
}

void rpool_call_complete(struct rcall *call, const redisReply *reply, const char *err)
{
    call_complete(call, reply, err);
}

/* One block holds the call, its argument table and the argument bytes. */
static void call_free(struct rcall *call)
{
    free(call);
}

void rpool_call_unlink(struct rcall *call)
{
    struct rconn *c = call->conn;
    if (c == NULL)
        return;
    if (call->waiting) {
        TAILQ_REMOVE(&c->waiting, call, link);
        c->nwaiting--;
        call->waiting = 0;
    } else if (call->in_batch) {
        TAILQ_REMOVE(&c->batch, call, link);
        c->nbatch--;
        c->nbatch_args -= (uint32_t)call->nargs + 3;
        call->in_batch = 0;
    } else {
        if (c->unflushed == call)
            c->unflushed = TAILQ_NEXT(call, link);
        TAILQ_REMOVE(&c->calls, call, link);
        c->npending--;
    }
    call->conn = NULL;
}

/* Answer call with an error on the next loop turn (it was never sent, or its
 * connection has let go of it). */
static void call_refuse(struct rpool *p, struct rcall *call, const char *why)
{
    call->fail_err = why;
    TAILQ_INSERT_TAIL(&p->failed, call, link);
    event_active(p->fail_ev, EV_TIMEOUT, 0);
}

void rpool_call_refuse(struct rpool *p, struct rcall *call, const char *why)
{
    call_refuse(p, call, why);
}

/*
 * A call's deadline is its stamp plus the command timeout in force now (a
 * reload may change it): the lists stay in deadline order, stamps only grow.
 * The connection timer is armed lazily: a deadline set now is never earlier
 * than one set before, so a timer already pending fires no later than any
 * deadline on the connection, and conn_timer_cb re-aims it at the oldest
 * one (rpool_set_config re-aims every timer, as a lower timeout breaks that
 * rule once). Keeping it out of the reply path saves an event_add per reply.
 */
static int64_t call_deadline(const struct rcall *call)
{
    return call->stamp + rpool_command_timeout(call->pool->cfg);
}

static void conn_arm_lazy(struct rconn *c, int64_t delay_ms)
{
    if (!evtimer_pending(c->timer, NULL))
        conn_arm(c, delay_ms);
}

static void call_reply_cb(redisAsyncContext *ac, void *r, void *privdata);
static void conn_pump(struct rconn *c);

/* Send call on c as EVALSHA (or EVAL when the sha is unknown or use_eval). */
static int call_send(struct rconn *c, struct rcall *call, int use_eval)
{
    struct rpool *p = c->pool;
    if (call->plain)
        return redisAsyncCommandArgv(c->ac, call_reply_cb, call, call->nargs,
                                     (const char **)call->args, call->lens) == REDIS_OK
                   ? 0
                   : -1;
    int argc = 3 + call->nargs;
    const char *argv[argc];
    size_t argvlen[argc];
    char nkeys[16];
    int have_sha = p->sha[call->script][0] != '\0';

    if (use_eval || !have_sha) {
        argv[0] = "EVAL";
        argv[1] = scripts_text(call->script);
    } else {
        argv[0] = "EVALSHA";
        argv[1] = p->sha[call->script];
    }
    argvlen[0] = strlen(argv[0]);
    argvlen[1] = strlen(argv[1]);
    argvlen[2] = (size_t)snprintf(nkeys, sizeof nkeys, "%d", call->nkeys);
    argv[2] = nkeys;
    for (int i = 0; i < call->nargs; i++) {
        argv[3 + i] = call->args[i];
        argvlen[3 + i] = call->lens[i];
    }
    /* ASK: the target serves the slot for the next command only after ASKING
     * (its answer is dropped: an error shows in the call's own reply). */
    if (call->ask_node != 0 && redisAsyncCommand(c->ac, NULL, NULL, "ASKING") != REDIS_OK)
        return -1;
    if (redisAsyncCommandArgv(c->ac, call_reply_cb, call, argc, argv, argvlen) != REDIS_OK)
        return -1;
    return 0;
}

static void call_reply_cb(redisAsyncContext *ac, void *r, void *privdata)
{
    (void)ac;
    struct rcall *call = privdata;
    redisReply *reply = r;
    struct rconn *c = call->conn;

    /*
     * A connection marked for reset is being left (Sentinel named another
     * master): an answer still read from it, before the timer drops it, is of
     * a server rlockd no longer trusts — a grant the new master lacks, a renew
     * that re-verified nothing. Treat it as lost, like the calls the reset
     * itself ends: an unknown outcome, reconciled by token.
     */
    if (reply != NULL && c != NULL && c->reset_requested)
        reply = NULL;

    if (reply != NULL && reply->type == REDIS_REPLY_ERROR && c != NULL && c->pool->cluster &&
        rpool_call_redirect(c, call, reply)) {
        if (c->link.state == RPOOL_READY && !c->reset_requested && c->ac != NULL)
            conn_pump(c);
        return;
    }
    if (reply != NULL && reply->type == REDIS_REPLY_ERROR && !call->plain && !call->retried &&
        c != NULL &&
        c->ac != NULL && strncmp(reply->str, "NOSCRIPT", 8) == 0) {
        /* Scripts were flushed (SCRIPT FLUSH, restart, failover): EVAL re-caches. */
        call->retried = 1;
        c->pool->stats.script_reloads++;
        if (call_send(c, call, 1) == 0)
            return; /* hiredis owns the privdata again; our queue position is kept */
    }
    rpool_call_unlink(call);
    if (reply == NULL)
        call_complete(call, NULL, "redis connection lost");
    else
        call_complete(call, reply, NULL);
    call_free(call);
    if (c != NULL && c->link.state == RPOOL_READY && !c->reset_requested && c->ac != NULL)
        conn_pump(c);
}

void rpool_conn_dirty(struct rconn *c)
{
    if (!c->dirty) {
        c->dirty = 1;
        event_active(c->pool->flush_ev, EV_TIMEOUT, 0);
    }
}

/* Write call on c now and track it; -1 (call untouched) when hiredis refuses. */
int rpool_conn_write_call(struct rconn *c, struct rcall *call)
{
    const struct config *cfg = c->pool->cfg;
    if (call_send(c, call, 0) != 0)
        return -1;
    call->conn = c;
    call->waiting = 0;
    call->stamp = util_now_ms();
    TAILQ_INSERT_TAIL(&c->calls, call, link);
    c->npending++;
    if (c->unflushed == NULL)
        c->unflushed = call;
    conn_arm_lazy(c, rpool_command_timeout(cfg));
    rpool_conn_dirty(c);
    return 0;
}

/*
 * Send call on c: as a part of this turn's batch when it may be one
 * (batch.c), else now, after the batch so far (calls of one route keep
 * their order on the wire); -1 (call untouched) when hiredis refuses.
 */
static int conn_send_call(struct rconn *c, struct rcall *call)
{
    if (rpool_batchable(c, call)) {
        rpool_batch_add(c, call);
        return 0;
    }
    if (c->nbatch > 0)
        rpool_batch_send(c);
    return rpool_conn_write_call(c, call);
}

/* Move waiting calls onto the wire while there is room; those that waited
 * past their deadline fail instead (never sent, so nothing happened). */
static void conn_pump(struct rconn *c)
{
    int64_t now = util_now_ms();
    struct rcall *call;
    while (c->npending < RPOOL_INFLIGHT_MAX && (call = TAILQ_FIRST(&c->waiting)) != NULL) {
        rpool_call_unlink(call);
        if (call_deadline(call) <= now)
            call_refuse(c->pool, call, "redis busy: command not sent in time");
        else if (conn_send_call(c, call) != 0)
            call_refuse(c->pool, call, "redis unavailable");
    }
}

/* Fail every waiting call of c (the connection is going away). */
static void conn_refuse_waiting(struct rconn *c, const char *why)
{
    rpool_batch_refuse(c, why);
    struct rcall *call;
    while ((call = TAILQ_FIRST(&c->waiting)) != NULL) {
        rpool_call_unlink(call);
        call_refuse(c->pool, call, why);
    }
}

/* Answer the calls refused so far (not those refused while answering). */
static void fail_drain(struct rpool *p)
{
    struct rcall_list batch = TAILQ_HEAD_INITIALIZER(batch);
    TAILQ_CONCAT(&batch, &p->failed, link);
    struct rcall *call;
    while ((call = TAILQ_FIRST(&batch)) != NULL) {
        TAILQ_REMOVE(&batch, call, link);
        call_complete(call, NULL, call->fail_err);
        call_free(call);
    }
}

/*
 * End of the loop turn's callbacks: write every connection's queued commands
 * now, in one write each, instead of waiting for the loop to report the
 * socket writable (hiredis's way), which costs a turn and two epoll_ctl.
 *
 * A call's deadline counts from this write, not from when it was queued: a
 * turn that ran long (a session ending with a hundred thousand locks) would
 * otherwise spend the command timeout before Redis even saw the command, and
 * the reset that follows would turn every call on the connection into an
 * unknown outcome.
 */
static void conn_flush(struct rconn *c, int64_t now)
{
    if (c->nbatch > 0)
        rpool_batch_send(c);
    c->dirty = 0;
    for (struct rcall *call = c->unflushed; call != NULL; call = TAILQ_NEXT(call, link))
        call->stamp = now;
    c->unflushed = NULL;
    if (c->ac != NULL && c->link.state == RPOOL_READY && !c->reset_requested)
        redisAsyncHandleWrite(c->ac);
}

static void flush_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct rpool *p = arg;
    int64_t now = util_now_ms();
    POOL_FOR_EACH_CONN(p, c) {
        if (c->dirty)
            conn_flush(c, now);
    }
}

static void fail_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    fail_drain(arg);
}

struct rcall *rpool_call_new(struct rpool *p, int plain, enum script_id script, int nkeys,
                             int nargs, const char *const *args, const size_t *lens,
                             size_t extra, void **extra_at)
{
    /*
     * The arguments are kept for a NOSCRIPT retry (hiredis has copied them
     * into its buffer already) and for a batch: one allocation for the call,
     * the owner's extra bytes, its tables and the argument bytes, so a call
     * costs a single malloc.
     */
    size_t bytes = 0;
    for (int i = 0; i < nargs; i++)
        bytes += lens[i] + 1;
    extra = (extra + sizeof(void *) - 1) / sizeof(void *) * sizeof(void *);
    size_t tables = (size_t)nargs * (sizeof(char *) + sizeof(size_t));
    struct rcall *call = calloc(1, sizeof *call + extra + tables + bytes);
    if (call == NULL)
        return NULL;
    if (extra_at != NULL)
        *extra_at = call + 1;
    call->pool = p;
    call->script = script;
    call->plain = plain;
    call->nkeys = nkeys;
    call->args = (char **)((char *)(call + 1) + extra);
    call->lens = (size_t *)(call->args + nargs);
    char *at = (char *)(call->lens + nargs);
    for (int i = 0; i < nargs; i++) {
        call->args[i] = at;
        memcpy(at, args[i], lens[i]);
        at[lens[i]] = '\0';
        at += lens[i] + 1;
        call->lens[i] = lens[i];
    }
    call->nargs = nargs;
    return call;
}

static void pool_call(struct rpool *p, uint32_t route, int plain, enum script_id script,
                      int nkeys, int nargs, const char *const *args, const size_t *lens,
                      rpool_cb *cb, void *arg)
{
    struct rcall *call = rpool_call_new(p, plain, script, nkeys, nargs, args, lens, 0, NULL);
    if (call == NULL)
        goto oom;
    call->cb = cb;
    call->arg = arg;
    if (p->closing) {
        call_free(call);
        p->stats.errors++;
        cb(NULL, "shutting down", arg);
        return;
    }
    call->route = route;
    rpool_call_dispatch(p, call, 0);
    return;
oom:
    /* Out of memory while accepting the call: there is no way to defer, so
     * this is the one place the callback runs inside rpool_eval. */
    log_error("redis: out of memory queueing a call");
    if (call != NULL)
        call_free(call);
    p->stats.errors++;
    cb(NULL, "out of memory", arg);
}

void rpool_eval(struct rpool *p, uint32_t route, enum script_id script, int nkeys, int nargs,
                const char *const *args, const size_t *lens, rpool_cb *cb, void *arg)
{
    pool_call(p, route, 0, script, nkeys, nargs, args, lens, cb, arg);
}

void rpool_command(struct rpool *p, uint32_t route, int argc, const char *const *argv,
                   const size_t *lens, rpool_cb *cb, void *arg)
{
    pool_call(p, route, 1, SCRIPT_ACQUIRE, 0, argc, argv, lens, cb, arg);
}

uint32_t rpool_command_timeout(const struct config *cfg)
{
    /* A WAIT holds its connection up to replica_ack_timeout, and every call behind it. */
    return cfg->command_timeout_ms + (cfg->min_replicas_acked > 0 ? cfg->replica_ack_timeout_ms : 0);
}

/*
 * Send call on the connection its route (or its ASK target) names, or queue
 * it there, or refuse it (answered on the next loop turn, never inside this
 * call). A redirected call may also wait on a connection still being set up
 * (a node just learnt of): the connect deadline bounds that wait.
 */
void rpool_call_dispatch(struct rpool *p, struct rcall *call, int from_redirect)
{
    struct rconn *c = rpool_conn_for(p, call->route, call->ask_node - 1);
    if (c == NULL) {
        rpool_refresh_soon(p);
        call_refuse(p, call, "redis cluster: no known node serves the key's slot");
        return;
    }
    int usable = c->link.state == RPOOL_READY ||
                 (from_redirect && c->link.state == RPOOL_CONNECTING);
    if (!usable || c->reset_requested || c->ac == NULL ||
        c->npending + c->nwaiting + c->nbatch >= RPOOL_MAX_PENDING) {
        call_refuse(p, call, "redis unavailable");
        return;
    }
    if (c->link.state == RPOOL_READY && c->npending < RPOOL_INFLIGHT_MAX &&
        TAILQ_EMPTY(&c->waiting)) {
        if (conn_send_call(c, call) != 0)
            call_refuse(p, call, "redis unavailable");
        return;
    }
    /* Sent calls are at the cap (or the connection is not ready yet): wait
     * unsent, and give up (cleanly: Redis never saw it) if no room opens
     * within the command timeout. */
    call->conn = c;
    call->waiting = 1;
    call->stamp = util_now_ms();
    TAILQ_INSERT_TAIL(&c->waiting, call, link);
    c->nwaiting++;
    conn_arm_lazy(c, rpool_command_timeout(p->cfg));
}

/* --- connection lifecycle ------------------------------------------------- */

static void conn_schedule_reconnect(struct rconn *c)
{
    /* A node lost may be a node failed over: the map may name its successor. */
    if (c->link.state == RPOOL_READY && c->pool->cluster && !c->pool->closing)
        rpool_refresh_soon(c->pool);
    conn_refuse_waiting(c, "redis unavailable");
    conn_set_state(c, RPOOL_DOWN);
    conn_arm(c, rpool_link_backoff(&c->link, c->pool->cfg));
}

/* Drop the context now (never from inside a hiredis callback). Pending
 * calls complete with "connection lost" as hiredis frees them. */
static void conn_reset(struct rconn *c, const char *why)
{
    redisAsyncContext *ac = c->ac;
    c->reset_requested = 0;
    if (ac != NULL) {
        if (c->link.state == RPOOL_CONNECTING)
            rpool_link_failure(&c->link, "connect", why);
        else
            log_warn("%s: resetting connection: %s", c->link.name, why);
        c->ac = NULL;
        ac->data = NULL; /* our disconnect callback ignores contexts we dropped */
        struct rcall *call;
        while ((call = TAILQ_FIRST(&c->calls)) != NULL)
            rpool_call_unlink(call);
        redisAsyncFree(ac);
    }
    conn_schedule_reconnect(c);
}

static void conn_request_reset(struct rconn *c, const char *why)
{
    c->reset_why = why;
    c->reset_requested = 1;
    conn_arm(c, 0);
}

static void conn_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct rconn *c = arg;
    if (c->reset_requested) {
        conn_reset(c, c->reset_why);
        return;
    }
    switch (c->link.state) {
    case RPOOL_DOWN:
        conn_connect(c);
        break;
    case RPOOL_CONNECTING:
        conn_reset(c, "connect timed out");
        break;
    case RPOOL_READY: {
        int64_t now = util_now_ms();
        /* This turn's commands are not written yet (the turn ran long, and
         * flush_cb comes after this timer): they are not late, write them. */
        if (c->dirty)
            conn_flush(c, now);
        struct rcall *head = TAILQ_FIRST(&c->calls);
        if (head == NULL || call_deadline(head) > now) {
            /* Not stuck. Give up waiting calls that are out of time, and
             * re-aim at the oldest deadline left. */
            struct rcall *w;
            while ((w = TAILQ_FIRST(&c->waiting)) != NULL && call_deadline(w) <= now) {
                rpool_call_unlink(w);
                call_refuse(c->pool, w, "redis busy: command not sent in time");
            }
            int64_t next = INT64_MAX;
            if (head != NULL)
                next = call_deadline(head);
            if (w != NULL && call_deadline(w) < next)
                next = call_deadline(w);
            if (next != INT64_MAX)
                conn_arm(c, next - now);
            break;
        }
        /* Answers already here complete the oldest call first (Redis answers
         * in order): look again once they are read. */
        if (conn_read_pending(c)) {
            if (c->link.state == RPOOL_READY && !c->reset_requested)
                conn_arm(c, 0);
            break;
        }
        /* The oldest call is late: the connection is presumed stuck. Fail
         * every call on it now, then drop it. It is marked first, so that
         * calls those callbacks start are refused instead of being queued
         * on a context about to be freed. */
        c->reset_requested = 1;
        struct rcall *call, *next;
        for (call = TAILQ_FIRST(&c->calls); call != NULL; call = next) {
            next = TAILQ_NEXT(call, link);
            c->pool->stats.timeouts++;
            call_complete(call, NULL, "redis command timed out");
        }
        conn_reset(c, "command timed out");
        break;
    }
    }
}

/*
 * Digits only, read with strtoul (which saturates): a sign or a blank is not
 * a version ("-7.5" must not pass as 4294967289.5, as it did through sscanf's
 * %u), and sscanf leaves a number too large for its type undefined.
 */
int rpool_version_check(const char *info, char *why, size_t len)
{
    const char *v = strstr(info, "redis_version:");
    char *end = NULL;
    unsigned long major = 0, minor = 0;
    if (v != NULL) {
        v += strlen("redis_version:");
        if (isdigit((unsigned char)v[0]))
            major = strtoul(v, &end, 10);
    }
    if (end == NULL || end[0] != '.' || !isdigit((unsigned char)end[1])) {
        snprintf(why, len, "INFO server names no redis_version");
        return -1;
    }
    minor = strtoul(end + 1, NULL, 10);
    if (major < RPOOL_MIN_REDIS_MAJOR ||
        (major == RPOOL_MIN_REDIS_MAJOR && minor < RPOOL_MIN_REDIS_MINOR)) {
        snprintf(why, len, "Redis %lu.%lu is too old: rlockd needs %u.%u or later", major, minor,
                 RPOOL_MIN_REDIS_MAJOR, RPOOL_MIN_REDIS_MINOR);
        return -1;
    }
    return 0;
}

int rpool_info_is_master(const char *info)
{
    static const char line[] = "role:master";
    for (const char *p = strstr(info, line); p != NULL; p = strstr(p + 1, line)) {
        const char *end = p + sizeof line - 1;
        if ((p == info || p[-1] == '\n') && (*end == '\r' || *end == '\n' || *end == '\0'))
            return 1;
    }
    return 0;
}

static void setup_reply_cb(redisAsyncContext *ac, void *r, void *privdata)
{
    struct rconn *c = ac->data;
    redisReply *reply = r;
    const char *what = privdata;
    if (c == NULL || reply == NULL)
        return; /* the connection is going away; its own path reconnects */
    if (reply->type == REDIS_REPLY_ERROR) {
        char step[64];
        snprintf(step, sizeof step, "%s failed", what);
        rpool_link_failure(&c->link, step, reply->str);
        conn_request_reset(c, "connection setup failed");
        return;
    }
    if (strcmp(what, "INFO replication") == 0 && reply->type == REDIS_REPLY_STRING &&
        !rpool_info_is_master(reply->str)) {
        /* A demoted master (or a replica) would refuse every write: wait for
         * Sentinel to name the new one. */
        rpool_link_failure(&c->link, "role check", "the server is not a master");
        conn_request_reset(c, "connection setup failed");
        return;
    }
    if (strcmp(what, "INFO server") == 0 && reply->type == REDIS_REPLY_STRING) {
        char why[128];
        if (rpool_version_check(reply->str, why, sizeof why) != 0) {
            rpool_link_failure(&c->link, "version check", why);
            conn_request_reset(c, "connection setup failed");
            return;
        }
    }
    if (strncmp(what, "SCRIPT LOAD ", 12) == 0 && reply->type == REDIS_REPLY_STRING &&
        reply->len == 40) {
        for (int i = 0; i < SCRIPT_COUNT; i++)
            if (strcmp(what + 12, scripts_name((enum script_id)i)) == 0)
                memcpy(c->pool->sha[i], reply->str, 41);
    }
    if (--c->setup_pending == 0 && !c->reset_requested) {
        evtimer_del(c->timer);
        conn_set_state(c, RPOOL_READY);
        /* Redirected calls may have queued while it was set up. */
        conn_pump(c);
        if (c->pool->cluster && !c->pool->refresh_inflight && c->pool->stats.slot_maps == 0)
            rpool_refresh_soon(c->pool);
    }
}

/* Preflight: lock keys carry a TTL, so any eviction policy but noeviction can evict a held lock. */
static void policy_reply_cb(redisAsyncContext *ac, void *r, void *privdata)
{
    (void)privdata;
    struct rconn *c = ac->data;
    redisReply *reply = r;
    if (c == NULL || reply == NULL || c->pool->warned_policy)
        return;
    if (reply->type == REDIS_REPLY_ARRAY && reply->elements == 2 &&
        reply->element[1]->type == REDIS_REPLY_STRING &&
        strcmp(reply->element[1]->str, "noeviction") != 0) {
        log_warn("redis maxmemory-policy is %s: Redis may evict held locks under memory "
                 "pressure; set it to noeviction",
                 reply->element[1]->str);
    }
    c->pool->warned_policy = 1;
}

int rpool_login(redisAsyncContext *ac, const struct config *cfg, redisCallbackFn *cb)
{
    int sent = 0;
    if (cfg->redis_password[0] != '\0') {
        if (cfg->redis_user[0] != '\0')
            redisAsyncCommand(ac, cb, "AUTH", "AUTH %s %s", cfg->redis_user, cfg->redis_password);
        else
            redisAsyncCommand(ac, cb, "AUTH", "AUTH %s", cfg->redis_password);
        sent++;
    }
    if (cfg->redis_database != 0) {
        redisAsyncCommand(ac, cb, "SELECT", "SELECT %u", cfg->redis_database);
        sent++;
    }
    return sent;
}

static void conn_send_setup(struct rconn *c)
{
    c->setup_pending = rpool_login(c->ac, c->pool->cfg, setup_reply_cb);
    redisAsyncCommand(c->ac, setup_reply_cb, "INFO server", "INFO server");
    c->setup_pending++;
    if (c->pool->check_role) {
        redisAsyncCommand(c->ac, setup_reply_cb, "INFO replication", "INFO replication");
        c->setup_pending++;
    }
    static const char *const load_tags[SCRIPT_COUNT] = {
#define SCRIPT_TAG(id, name) "SCRIPT LOAD " #name,
        SCRIPT_LIST(SCRIPT_TAG)
#undef SCRIPT_TAG
    };
    for (int i = 0; i < SCRIPT_COUNT; i++) {
        redisAsyncCommand(c->ac, setup_reply_cb, (void *)load_tags[i], "SCRIPT LOAD %s",
                          scripts_text((enum script_id)i));
        c->setup_pending++;
    }
    if (!c->pool->warned_policy)
        redisAsyncCommand(c->ac, policy_reply_cb, NULL, "CONFIG GET maxmemory-policy");
}

static void connect_cb(const redisAsyncContext *ac, int status)
{
    struct rconn *c = ac->data;
    if (c == NULL)
        return;
    if (status != REDIS_OK) {
        /* hiredis frees the context after this callback and will not call onDisconnect. */
        rpool_link_failure(&c->link, "connect failed", ac->errstr);
        c->ac = NULL;
        conn_schedule_reconnect(c);
        return;
    }
    conn_send_setup(c);
}

static void disconnect_cb(const redisAsyncContext *ac, int status)
{
    struct rconn *c = ac->data;
    if (c == NULL)
        return; /* dropped by conn_reset */
    log_warn("%s: connection lost%s%s", c->link.name, status == REDIS_OK ? "" : ": ",
             status == REDIS_OK ? "" : ac->errstr);
    c->ac = NULL;
    /* hiredis has already answered every pending callback with NULL. */
    conn_schedule_reconnect(c);
}

redisAsyncContext *rpool_connect(const struct config_address *addr, struct event_base *base,
                                 void *data, redisConnectCallback *on_connect,
                                 redisDisconnectCallback *on_disconnect, char *why,
                                 size_t whylen)
{
    redisAsyncContext *ac;
    if (addr->is_unix)
        ac = redisAsyncConnectUnix(addr->path);
    else
        ac = redisAsyncConnect(addr->host, addr->port);
    if (ac == NULL || ac->err) {
        snprintf(why, whylen, "%s", ac != NULL ? ac->errstr : "out of memory");
        if (ac != NULL)
            redisAsyncFree(ac);
        return NULL;
    }
    ac->data = data;
    replyobj_use(ac);
    if (evattach(ac, base) != 0) {
        snprintf(why, whylen, "out of memory");
        redisAsyncFree(ac);
        return NULL;
    }
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    return ac;
}

static void conn_connect(struct rconn *c)
{
    struct rpool *p = c->pool;
    char why[128];
    if (!p->have_addr)
        return; /* DOWN until rpool_set_master; that connects */
    c->ac = rpool_connect(&p->map.nodes[c->node], p->base, c, connect_cb, disconnect_cb, why,
                          sizeof why);
    if (c->ac == NULL) {
        rpool_link_failure(&c->link, "connect", why);
        conn_schedule_reconnect(c);
        return;
    }
    conn_set_state(c, RPOOL_CONNECTING);
    conn_arm(c, p->cfg->connect_timeout_ms);
}

/* Make node's connections and start them connecting. */
int rpool_add_conns(struct rpool *p, uint32_t node)
{
    struct rconn *conns = calloc(p->n, sizeof *conns);
    if (conns == NULL)
        return -1;
    for (uint32_t i = 0; i < p->n; i++) {
        struct rconn *c = &conns[i];
        c->pool = p;
        c->node = node;
        if (p->cluster)
            snprintf(c->link.name, sizeof c->link.name, "redis[n%u.%u]", node, i);
        else
            snprintf(c->link.name, sizeof c->link.name, "redis[%u]", i);
        c->link.state = RPOOL_DOWN;
        TAILQ_INIT(&c->calls);
        TAILQ_INIT(&c->waiting);
        TAILQ_INIT(&c->batch);
        c->timer = evtimer_new(p->base, conn_timer_cb, c);
        if (c->timer == NULL) {
            for (uint32_t j = 0; j < i; j++)
                event_free(conns[j].timer);
            free(conns);
            return -1;
        }
    }
    p->conns[node] = conns;
    if (p->cluster)
        log_info("redis cluster: node %u is %s:%u", node, p->map.nodes[node].host,
                 p->map.nodes[node].port);
    for (uint32_t i = 0; i < p->n; i++)
        conn_connect(&conns[i]);
    return 0;
}

/* --- pool ----------------------------------------------------------------- */

/* The nodes to start with: redis.address, or the cluster's seeds. */
static int pool_seed(struct rpool *p, const struct config *cfg)
{
    char err[256];
    struct config_address seeds[CONFIG_MAX_REDIS_NODES];
    int n;
    if (p->cluster) {
        n = config_parse_listen(cfg->redis_cluster_nodes, seeds, CONFIG_MAX_REDIS_NODES, err,
                                sizeof err);
        if (n < 0) {
            log_error("redis.cluster_nodes: %s", err);
            return -1;
        }
    } else if (config_topology(cfg) == TOPOLOGY_SENTINEL) {
        /* Node 0 is the master; its address comes from rpool_set_master. */
        memset(&seeds[0], 0, sizeof seeds[0]);
        p->check_role = 1;
        n = 1;
    } else {
        if (config_parse_address(cfg->redis_address, &seeds[0], err, sizeof err) != 0) {
            log_error("redis.address: %s", err);
            return -1;
        }
        n = 1;
    }
    p->have_addr = !p->check_role;
    for (int i = 0; i < n; i++)
        if (cluster_map_node(&p->map, &seeds[i]) < 0)
            return -1;
    return 0;
}

struct rpool *rpool_new(struct event_base *base, const struct config *cfg,
                        const uint8_t hash_key[UTIL_HASH_KEY_BYTES])
{
    struct rpool *p = calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    p->base = base;
    p->cfg = cfg;
    p->cluster = config_topology(cfg) == TOPOLOGY_CLUSTER;
    p->n = cfg->pool_size;
    memcpy(p->hash_key, hash_key, UTIL_HASH_KEY_BYTES);
    TAILQ_INIT(&p->failed);
    TAILQ_INIT(&p->retry);
    p->fail_ev = event_new(base, -1, 0, fail_cb, p);
    p->flush_ev = event_new(base, -1, 0, flush_cb, p);
    p->refresh_ev = evtimer_new(base, rpool_refresh_cb, p);
    p->retry_ev = evtimer_new(base, rpool_retry_cb, p);
    if (p->fail_ev == NULL || p->flush_ev == NULL || p->refresh_ev == NULL ||
        p->retry_ev == NULL)
        goto fail;
    if (pool_seed(p, cfg) != 0)
        goto fail;
    for (uint32_t i = 0; i < p->map.nnodes; i++)
        if (rpool_add_conns(p, i) != 0)
            goto fail;
    return p;
fail:
    rpool_free(p);
    return NULL;
}

void rpool_free(struct rpool *p)
{
    if (p == NULL)
        return;
    p->closing = 1;
    POOL_FOR_EACH_CONN(p, c)
        conn_refuse_waiting(c, "shutting down");
    struct rcall *call;
    while ((call = TAILQ_FIRST(&p->retry)) != NULL) {
        TAILQ_REMOVE(&p->retry, call, link);
        call_refuse(p, call, "shutting down");
    }
    fail_drain(p);
    POOL_FOR_EACH_CONN(p, c) {
        if (c->ac != NULL) {
            redisAsyncContext *ac = c->ac;
            c->ac = NULL;
            ac->data = NULL;
            while ((call = TAILQ_FIRST(&c->calls)) != NULL)
                rpool_call_unlink(call);
            redisAsyncFree(ac);
        }
        if (c->timer != NULL)
            event_free(c->timer);
    }
    for (uint32_t i = 0; i < p->map.nnodes; i++)
        free(p->conns[i]);
    if (p->fail_ev != NULL)
        event_free(p->fail_ev);
    if (p->flush_ev != NULL)
        event_free(p->flush_ev);
    if (p->refresh_ev != NULL)
        event_free(p->refresh_ev);
    if (p->retry_ev != NULL)
        event_free(p->retry_ev);
    free(p);
}

void rpool_set_config(struct rpool *p, const struct config *cfg)
{
    p->cfg = cfg; /* the addresses and pool size stay: changing them needs a restart */
    /* command_timeout may have shrunk: the lazily armed timers may now be late. */
    POOL_FOR_EACH_CONN(p, c) {
        if (c->link.state == RPOOL_READY && !c->reset_requested && evtimer_pending(c->timer, NULL))
            conn_arm(c, 0);
    }
}

/*
 * The connections the daemon needs: on a cluster those of the masters that
 * own slots (the seeds until a map is read). A master failed over owns none
 * any more and leaves the count, though its connections keep trying in the
 * background (it may come back as a replica, or as a master again).
 */
static int conn_needed(const struct rpool *p, const struct rconn *c)
{
    return !p->cluster || p->stats.slot_maps == 0 || p->map.nslots[c->node] > 0;
}

uint32_t rpool_size(const struct rpool *p)
{
    uint32_t n = 0;
    POOL_FOR_EACH_CONN(p, c)
        n += conn_needed(p, c);
    return n;
}

uint32_t rpool_ready_count(const struct rpool *p)
{
    uint32_t n = 0;
    POOL_FOR_EACH_CONN(p, c)
        n += conn_needed(p, c) && c->link.state == RPOOL_READY && !c->reset_requested;
    return n;
}

const struct rpool_stats *rpool_stats(const struct rpool *p)
{
    return &p->stats;
}

static int same_address(const struct config_address *a, const struct config_address *b)
{
    return a->is_unix == b->is_unix &&
           (a->is_unix ? strcmp(a->path, b->path) == 0
                       : strcmp(a->host, b->host) == 0 && a->port == b->port);
}

int rpool_set_master(struct rpool *p, const struct config_address *addr)
{
    if (p->cluster || (p->have_addr && same_address(&p->map.nodes[0], addr)))
        return 0;
    p->map.nodes[0] = *addr;
    p->have_addr = 1;
    POOL_FOR_EACH_CONN(p, c) {
        c->link.backoff_ms = 0;
        if (c->ac != NULL) {
            /* Calls in flight there complete as "connection lost": unknown outcomes. */
            conn_refuse_waiting(c, "redis master changed");
            conn_request_reset(c, "the master moved");
        } else {
            conn_arm(c, 0);
        }
    }
    return 1;
}

const struct config_address *rpool_master(const struct rpool *p)
{
    return p->have_addr && !p->cluster ? &p->map.nodes[0] : NULL;
}
