/* SPDX-License-Identifier: BSD-3-Clause */
/* relq.c — see relq.h. */
#include "relq.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "cleanup.h"
#include "lock.h"
#include "log.h"
#include "pubsub.h"
#include "pool.h"
#include "resource.h"
#include "server.h"
#include "util.h"

/* How long past a key's longest possible life an unconfirmed release is still retried. */
#define RELQ_CLEANUP_GRACE_MS 600000

struct relq_item {
    struct resource *res; /* counted reference */
    char token[UTIL_UUID_LEN + 1];
    uint8_t shared;
    uint32_t delay_ms;
    int64_t max_expiry_ms;
    TAILQ_ENTRY(relq_item) link;
};
TAILQ_HEAD(relq_list, relq_item);

/* The queue of one Redis connection. */
struct relq {
    struct server *srv;
    struct relq_list waiting;
    uint32_t inflight; /* batches in Redis */
};

/* One release_many.lua call. */
struct relq_batch {
    struct relq *q;
    uint32_t n;
    struct relq_item *items[RELQ_BATCH_MAX];
};

static void relq_pump(struct relq *q);
static void batch_send(struct relq_batch *b);

/* An item is done (its key freed, or handed to the cleanup list). */
static void item_done(struct server *srv, struct relq_item *it)
{
    struct resource *res = it->res;
    free(it);
    srv->relq_pending--;
    lock_kick(res); /* a local waiter may have the lock now */
    resource_unref(res);
    server_background_done(srv);
}

static void batch_reply_cb(const redisReply *reply, const char *err, void *arg)
{
    struct relq_batch *b = arg;
    struct relq *q = b->q;
    struct server *srv = q->srv;
    int ok = reply != NULL && reply->type == REDIS_REPLY_ARRAY && reply->elements == b->n;
    if (!ok)
        log_warn("release of %u lock%s not confirmed: %s", b->n, b->n == 1 ? "" : "s",
                 reply == NULL ? err
                 : reply->type == REDIS_REPLY_ERROR ? reply->str
                                                    : "unexpected reply");
    int64_t now = util_now_ms();
    q->inflight--;
    for (uint32_t i = 0; i < b->n; i++) {
        struct relq_item *it = b->items[i];
        int confirmed = ok && reply->element[i]->type == REDIS_REPLY_INTEGER;
        if (!confirmed) {
            /* It may still hold the token: delete it by token, after the delay if any. */
            struct resource *res = it->res;
            cleanup_add(srv, res, it->token, it->shared, now + it->delay_ms,
                        it->max_expiry_ms + RELQ_CLEANUP_GRACE_MS);
        }
        item_done(srv, it);
    }
    free(b);
    relq_pump(q);
}

/* Send the next batches, as far as the in-flight bound allows. */
static void relq_pump(struct relq *q)
{
    struct server *srv = q->srv;
    if (srv->freeing)
        return; /* at exit: what is left expires by its ttl */
    while (q->inflight < RELQ_INFLIGHT_MAX && !TAILQ_EMPTY(&q->waiting)) {
        struct relq_batch *b = calloc(1, sizeof *b);
        if (b == NULL)
            return; /* the next answer, or the next add, tries again */
        b->q = q;
        struct relq_item *it;
        while (b->n < RELQ_BATCH_MAX && (it = TAILQ_FIRST(&q->waiting)) != NULL) {
            /* One call, one hash slot: a Redis Cluster refuses others (CROSSSLOT). One
             * script: exclusive keys and shared places are released differently. */
            if (b->n > 0 && (rpool_route_slot(srv->pool, it->res->route) !=
                                 rpool_route_slot(srv->pool, b->items[0]->res->route) ||
                             it->shared != b->items[0]->shared))
                break;
            TAILQ_REMOVE(&q->waiting, it, link);
            b->items[b->n++] = it;
        }
        q->inflight++;
        batch_send(b);
    }
}

/*
 * release_many.lua: KEYS one per lock, ARGV (token, delay) pairs and the
 * channel suffix. group_release.lua: KEYS in threes (marker, holders,
 * permits), the same ARGV.
 */
static void batch_send(struct relq_batch *b)
{
    struct server *srv = b->q->srv;
    const uint32_t per = b->items[0]->shared ? 3 : 1; /* keys per item */
    const char *args[RELQ_BATCH_MAX * 5 + 1];
    size_t lens[RELQ_BATCH_MAX * 5 + 1];
    char delays[RELQ_BATCH_MAX][16];
    const uint32_t nkeys = b->n * per;
    /* The holders and permits keys of a shared batch, built in one buffer. */
    size_t room = 0;
    for (uint32_t i = 0; per == 3 && i < b->n; i++)
        room += 2 * (b->items[i]->res->key_len + RESOURCE_SUBKEY_MAX + 1);
    char *subkeys = room > 0 ? malloc(room) : NULL, *at = subkeys;
    if (room > 0 && subkeys == NULL) {
        /* No call: every item goes to the cleanup list, as if Redis had not answered. */
        batch_reply_cb(NULL, "out of memory", b);
        return;
    }
    for (uint32_t i = 0; i < b->n; i++) {
        const struct relq_item *it = b->items[i];
        args[per * i] = it->res->key;
        lens[per * i] = it->res->key_len;
        for (uint32_t k = 1; k < per; k++) {
            size_t cap = it->res->key_len + RESOURCE_SUBKEY_MAX + 1;
            lens[per * i + k] = resource_subkey(
                it->res, k == 1 ? RESOURCE_HOLDERS_SUFFIX : RESOURCE_PERMITS_SUFFIX, at, cap);
            args[per * i + k] = at;
            at += cap;
        }
        args[nkeys + 2 * i] = it->token;
        lens[nkeys + 2 * i] = strlen(it->token);
        lens[nkeys + 2 * i + 1] = (size_t)snprintf(delays[i], sizeof delays[i], "%u", it->delay_ms);
        args[nkeys + 2 * i + 1] = delays[i];
    }
    /* Each key freed (or tombstoned) is announced on its channel: key .. suffix. */
    args[nkeys + 2 * b->n] = pubsub_suffix(srv);
    lens[nkeys + 2 * b->n] = strlen(args[nkeys + 2 * b->n]);
    /* A connection that is down answers at once with an error: the keys go to cleanup. */
    rpool_eval(srv->pool, b->items[0]->res->route,
               per == 3 ? SCRIPT_GROUP_RELEASE : SCRIPT_RELEASE_MANY, (int)nkeys,
               (int)(nkeys + b->n * 2 + 1), args, lens, batch_reply_cb, b);
    free(subkeys);
}

void relq_add(struct server *srv, struct resource *res, const char *token, int shared,
              uint32_t delay_ms, int64_t max_expiry_ms)
{
    struct relq *q = &srv->relqs[res->route % srv->nrelqs];
    struct relq_item *it = calloc(1, sizeof *it);
    if (it == NULL) {
        cleanup_add(srv, res, token, shared, util_now_ms() + delay_ms,
                    max_expiry_ms + RELQ_CLEANUP_GRACE_MS);
        return;
    }
    it->res = res;
    resource_ref(res);
    snprintf(it->token, sizeof it->token, "%s", token);
    it->shared = shared != 0;
    it->delay_ms = delay_ms;
    it->max_expiry_ms = max_expiry_ms;
    TAILQ_INSERT_TAIL(&q->waiting, it, link);
    srv->relq_pending++;
    srv->background++;
    relq_pump(q);
}

int relq_init(struct server *srv)
{
    uint32_t n = rpool_size(srv->pool);
    srv->relqs = calloc(n, sizeof *srv->relqs);
    if (srv->relqs == NULL)
        return -1;
    srv->nrelqs = n;
    for (uint32_t i = 0; i < n; i++) {
        srv->relqs[i].srv = srv;
        TAILQ_INIT(&srv->relqs[i].waiting);
    }
    return 0;
}

void relq_free(struct server *srv)
{
    if (srv->relqs == NULL)
        return;
    for (uint32_t i = 0; i < srv->nrelqs; i++) {
        struct relq_item *it;
        while ((it = TAILQ_FIRST(&srv->relqs[i].waiting)) != NULL) {
            TAILQ_REMOVE(&srv->relqs[i].waiting, it, link);
            resource_unref(it->res);
            free(it);
        }
    }
    free(srv->relqs);
    srv->relqs = NULL;
}

uint64_t relq_pending(const struct server *srv)
{
    return srv->relq_pending;
}
