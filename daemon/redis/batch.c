/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * batch.c — the acquires and releases one connection is given in one loop
 * turn, by any number of sessions, sent to Redis as one script call.
 *
 * Redis spends a fixed price on every script call (reading the command,
 * finding the script, setting up its Lua call) beyond the commands the
 * script runs: about a fifth of an acquire's cost. rlockd sees many
 * sessions' requests at once, so it can pay that price once for all of
 * them; a client alone cannot.
 *
 * How: a batchable call (scripts_batched) joins its connection's batch
 * instead of being written; at the end of the turn (conn_flush), or when a
 * call that is not batchable comes for the same connection (so the wire
 * keeps the order calls were made in), or when the batch is full, the batch
 * goes out. A batch of one is the call itself, written as it always was: a
 * lone request waits for nothing. A batch of several is one call of
 * lua/batch.lua, which runs each call's own script on its own keys and
 * arguments and answers an array, one answer per call in order; a call's
 * error is its answer alone.
 *
 * The calls keep every promise of pool.h: each carried call is answered
 * exactly once, when the BATCH call is (by its answer, by the same error
 * reply when Redis refuses the whole script, or by the same unknown outcome
 * when the BATCH call is lost or late), and freed then. An answer of the
 * wrong shape answers every carried call as an unknown outcome, never as a
 * grant. On a Cluster a batch holds calls of one route (one hash slot)
 * only: Redis refuses a script whose keys span slots (CROSSSLOT).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "pool_int.h"

/* Arguments of one BATCH call at most (every call's own, plus three each to
 * describe it): bounds the stack used to build it and Redis's work in one
 * script. */
#define BATCH_ARGS_MAX 2048

int rpool_batchable(const struct rconn *c, const struct rcall *call)
{
    return !call->plain && call->ask_node == 0 && !call->retried && call->children == NULL &&
           scripts_batched(call->script) && c->pool->cfg->batch_max > 1 &&
           c->link.state == RPOOL_READY;
}

void rpool_batch_add(struct rconn *c, struct rcall *call)
{
    const struct rpool *p = c->pool;
    uint32_t args = (uint32_t)call->nargs + 3;
    const struct rcall *first = TAILQ_FIRST(&c->batch);
    if (first != NULL &&
        ((p->cluster && first->route != call->route) || c->nbatch_args + args > BATCH_ARGS_MAX))
        rpool_batch_send(c);
    call->conn = c;
    call->waiting = 0;
    call->in_batch = 1;
    TAILQ_INSERT_TAIL(&c->batch, call, link);
    c->nbatch++;
    c->nbatch_args += args;
    if (c->nbatch >= p->cfg->batch_max)
        rpool_batch_send(c);
    else
        rpool_conn_dirty(c);
}

/* Answer each carried call with its part of the BATCH call's outcome, once. */
static void batch_reply_cb(const redisReply *reply, const char *err, void *arg)
{
    struct rcall *b = arg;
    int whole = reply != NULL && reply->type == REDIS_REPLY_ARRAY &&
                reply->elements == b->nchildren;
    for (uint32_t i = 0; i < b->nchildren; i++) {
        struct rcall *call = b->children[i];
        if (whole)
            rpool_call_complete(call, reply->element[i], NULL);
        else if (reply != NULL && reply->type == REDIS_REPLY_ERROR)
            rpool_call_complete(call, reply, NULL); /* the whole script refused: BUSY, OOM... */
        else if (reply != NULL)
            rpool_call_complete(call, NULL, "redis: a batch's answer has the wrong shape");
        else
            rpool_call_complete(call, NULL, err);
        free(call);
        b->children[i] = NULL;
    }
}

/* Write call alone, or refuse it (answered next turn: it never ran). */
static void send_alone(struct rconn *c, struct rcall *call)
{
    if (rpool_conn_write_call(c, call) != 0)
        rpool_call_refuse(c->pool, call, "redis unavailable");
}

void rpool_batch_send(struct rconn *c)
{
    struct rpool *p = c->pool;
    uint32_t n = c->nbatch;
    struct rcall *call;
    if (n < 2) {
        if ((call = TAILQ_FIRST(&c->batch)) != NULL) {
            rpool_call_unlink(call);
            send_alone(c, call);
        }
        return;
    }
    /* KEYS: every call's keys; ARGV: n, (script, nkeys, nother) per call,
     * then every call's other arguments (lua/batch.lua). */
    uint32_t nargs = 1 + c->nbatch_args;
    const char *argv[nargs];
    size_t lens[nargs];
    char nums[2 * n + 1][12];
    uint32_t k = 0, nkeys = 0;
    TAILQ_FOREACH(call, &c->batch, link) {
        for (int j = 0; j < call->nkeys; j++, k++) {
            argv[k] = call->args[j];
            lens[k] = call->lens[j];
        }
        nkeys += (uint32_t)call->nkeys;
    }
    uint32_t m = 0;
    lens[k] = (size_t)snprintf(nums[m], sizeof nums[m], "%u", n);
    argv[k++] = nums[m++];
    TAILQ_FOREACH(call, &c->batch, link) {
        argv[k] = scripts_name(call->script);
        lens[k] = strlen(argv[k]);
        k++;
        lens[k] = (size_t)snprintf(nums[m], sizeof nums[m], "%d", call->nkeys);
        argv[k++] = nums[m++];
        lens[k] = (size_t)snprintf(nums[m], sizeof nums[m], "%d", call->nargs - call->nkeys);
        argv[k++] = nums[m++];
    }
    TAILQ_FOREACH(call, &c->batch, link) {
        for (int j = call->nkeys; j < call->nargs; j++, k++) {
            argv[k] = call->args[j];
            lens[k] = call->lens[j];
        }
    }

    void *extra;
    struct rcall *b = rpool_call_new(p, 0, SCRIPT_BATCH, (int)nkeys, (int)nargs, argv, lens,
                                     n * sizeof(struct rcall *), &extra);
    if (b == NULL) {
        /* No memory for the batch: each call goes alone (they are allocated already). */
        while ((call = TAILQ_FIRST(&c->batch)) != NULL) {
            rpool_call_unlink(call);
            send_alone(c, call);
        }
        return;
    }
    b->children = extra;
    b->nchildren = n;
    b->cb = batch_reply_cb;
    b->arg = b;
    b->route = TAILQ_FIRST(&c->batch)->route;
    for (uint32_t i = 0; i < n; i++) {
        call = TAILQ_FIRST(&c->batch);
        rpool_call_unlink(call);
        b->children[i] = call;
    }
    if (rpool_conn_write_call(c, b) != 0) {
        for (uint32_t i = 0; i < n; i++)
            rpool_call_refuse(p, b->children[i], "redis unavailable");
        free(b);
        return;
    }
    p->stats.batches++;
    p->stats.batched += n;
}

void rpool_batch_refuse(struct rconn *c, const char *why)
{
    struct rcall *call;
    while ((call = TAILQ_FIRST(&c->batch)) != NULL) {
        rpool_call_unlink(call);
        rpool_call_refuse(c->pool, call, why);
    }
}
